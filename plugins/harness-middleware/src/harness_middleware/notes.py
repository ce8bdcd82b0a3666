"""Per-stream notes that inner middleware leave for outer middleware (what happened inside).

Chunks say what the model produced; they cannot say that a ``cache`` hit replayed them or that
``fallback`` served the request from its second target. An outer layer that needs to know
(``usage``, the prompt log) opens a :class:`StreamNotes` for the stream with :func:`open_notes`;
it travels to the inner layers in ``options.metadata`` under :data:`NOTES_KEY` (metadata is not
part of the cache key and not sent to providers), and inner layers write into it with
:func:`notes_of`. The caller's own ``metadata`` dict is never modified: a copy carries the notes.

An embedding call (``llm_embed``) has no ``metadata``: its notes travel in a context variable
instead, opened by :func:`open_embed_notes` around ``await call_next(options)`` and read by inner
layers with :func:`embed_notes_of` (the inner layers run in the same task, so they see it; the
variable is reset when the outer layer's call returns).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import msgspec

from harness_core.middleware import Failure, GenerateOptions

__all__ = ["NOTES_KEY", "Attempt", "StreamNotes", "embed_notes_of", "notes_of", "open_embed_notes", "open_notes"]

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


_EMBED_NOTES: ContextVar[StreamNotes | None] = ContextVar("harness_middleware.embed_notes", default=None)


@contextmanager
def open_embed_notes() -> Iterator[StreamNotes]:
    """The notes of the embedding call in progress, for the ``with`` block around ``call_next``.

    Reuses notes an outer layer opened; otherwise opens new ones, visible to the inner layers
    through :func:`embed_notes_of` until the block ends.
    """
    existing = _EMBED_NOTES.get()
    if existing is not None:
        yield existing
        return
    notes = StreamNotes()
    token = _EMBED_NOTES.set(notes)
    try:
        yield notes
    finally:
        _EMBED_NOTES.reset(token)


def embed_notes_of() -> StreamNotes | None:
    """The notes an outer layer opened for the embedding call in progress, or ``None``."""
    return _EMBED_NOTES.get()
