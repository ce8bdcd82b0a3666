"""Per-stream notes that inner middleware leave for outer middleware (what happened inside).

Chunks say what the model produced; they cannot say that a ``cache`` hit replayed them or that
``fallback`` served the request from its second target. An outer layer that needs to know
(``usage``, the prompt log) opens a :class:`StreamNotes` for the stream with :func:`open_notes`;
it travels to the inner layers in ``options.metadata`` under :data:`NOTES_KEY` (metadata is not
part of the cache key and not sent to providers), and inner layers write into it with
:func:`notes_of`. The caller's own ``metadata`` dict is never modified: a copy carries the notes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from harness_core.types import Failure, GenerateOptions

__all__ = ["NOTES_KEY", "Attempt", "StreamNotes", "notes_of", "open_notes"]

NOTES_KEY = "harness.notes"
"""The ``options.metadata`` key holding the stream's :class:`StreamNotes`."""


class Attempt(msgspec.Struct, frozen=True, omit_defaults=True):
    """One target ``fallback`` tried: ``route``/``model``, and why it was left (``None`` = served).

    ``skipped`` is true for a target that was not called because it was cooling down;
    ``after_content`` for a ``failure`` that came after the target had sent content (the stream
    then ended with it: nothing is replayed from another target).
    """

    route: str | None
    model: str | None
    failure: Failure | None = None
    skipped: bool = False
    after_content: bool = False


@dataclass
class StreamNotes:
    """What inner middleware report about one stream (mutable; one per stream).

    Fields:
        cached: a ``cache`` hit replayed the stream (no provider was called).
        attempts: the targets ``fallback`` tried, in order (empty without ``fallback``).
        served_route / served_model: the route and model that produced the stream, when a
            middleware changed them (``None`` = the requested ones).
    """

    cached: bool = False
    attempts: list[Attempt] = field(default_factory=list)
    served_route: str | None = None
    served_model: str | None = None

    def served(self, options: GenerateOptions) -> tuple[str | None, str | None]:
        """``(route, model)`` that served the stream: the noted ones, else those of ``options``."""
        return self.served_route or options.provider, self.served_model or options.model


def open_notes(options: GenerateOptions) -> tuple[GenerateOptions, StreamNotes]:
    """The stream's notes, and the options to pass on (carrying them).

    Reuses notes an outer layer opened (``options`` is then returned unchanged); otherwise opens
    new ones in a copy of ``options.metadata``.
    """
    existing = notes_of(options)
    if existing is not None:
        return options, existing
    notes = StreamNotes()
    return msgspec.structs.replace(options, metadata={**options.metadata, NOTES_KEY: notes}), notes


def notes_of(options: GenerateOptions) -> StreamNotes | None:
    """The notes an outer layer opened for this stream, or ``None`` (nobody listens)."""
    notes = options.metadata.get(NOTES_KEY)
    return notes if isinstance(notes, StreamNotes) else None
