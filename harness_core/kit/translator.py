"""The translator stage of an adapter: provider events in, :data:`StreamChunk` lists out.

A translator is pure and synchronous (no I/O): the kit's stream loop
(:func:`harness_core.kit.stream_sse`) feeds it the decoded server-sent events of one response and
yields what it returns, so a translator is tested on its own, byte by byte, without a server.
The contract every translator keeps is in ``docs/writing-an-adapter.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_core.sse import SSEEvent
    from harness_core.types import StreamChunk

__all__ = ["StreamTranslator"]


@runtime_checkable
class StreamTranslator(Protocol):
    """One response's translation state machine (create one per request).

    Obligations (``docs/stream-obligations.md``): the chunks returned over the life of the
    translator form one valid stream: ``block-start`` → deltas → ``block-end`` per block with
    indices 0, 1, 2 … in order, at most one ``usage`` after every block ended, exactly one
    ``finish`` last. After the terminal chunk every method returns an empty sequence.
    """

    @property
    def done(self) -> bool:
        """True once ``finish`` was returned (by a terminal event, :meth:`abort` or
        :meth:`end_of_input`); the loop stops reading then."""
        ...

    def feed(self, event: SSEEvent) -> Sequence[StreamChunk]:
        """Translate one server-sent event (``event.incomplete`` marks one cut by EOF).

        Returns the chunks it produces (often none). In-band provider errors end the stream
        with ``finish{error}``.

        Raises:
            LlmError: ``PROTOCOL`` for a payload that is not what the wire promises (malformed
                JSON, an impossible sequence); ``NETWORK`` for a payload cut by EOF.
        """
        ...

    def abort(self, reason: str) -> Sequence[StreamChunk]:
        """The caller aborted: close the open blocks with what they hold, ``usage`` when known,
        then ``finish{aborted}`` whose failure carries ``reason`` (the loop passes
        :func:`harness_core.abort.abort_reason`)."""
        ...

    def end_of_input(self) -> Sequence[StreamChunk]:
        """The body ended. Returns the closing chunks when the wire allows a stream to end here
        (e.g. OpenAI's EOF after a ``finish_reason``).

        Raises:
            LlmError: ``NETWORK`` (retryable) when the body ended before the terminal signal.
        """
        ...
