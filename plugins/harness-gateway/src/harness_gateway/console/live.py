"""Streams in flight (the Live page) and the recording of every finished request.

:class:`ConsoleObserver` is the console's :class:`~harness_gateway.observe.Observer`: it keeps
every generation in flight in this process (route, model, key name, start, deltas and tokens so
far, and its abort signal, so an operator can abort it), wakes the Live page's event streams on
every change, and stores each finished request as a record with its chunk timeline
(:class:`~harness_gateway.console.records.RecordStore`).

Live streams are per process: with several workers each worker's console shows its own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from harness_core import ReasoningDelta, StreamChunk, TextDelta, ToolCallDelta, Usage, mask_strings
from harness_gateway.console.records import RecordStore
from harness_gateway.console.timeline import Timeline, mask_text, usage_counts
from harness_gateway.observe import RunEnd, RunInfo

__all__ = ["ConsoleObserver", "LiveStream"]

logger = logging.getLogger(__name__)


@dataclass
class LiveStream:
    """One stream in flight: its :class:`RunInfo`, deltas seen, the latest usage, its timeline."""

    info: RunInfo
    timeline: Timeline = field(default_factory=Timeline)
    deltas: int = 0
    output_tokens: int | None = None
    aborted_by: str | None = None

    def snapshot(self, now: float) -> dict[str, Any]:
        """JSON-able state for the Live page (``elapsed_s`` from ``now``, unix seconds)."""
        info = self.info
        return {
            "id": info.ticket,
            "request_id": info.request_id,
            "route": info.route,
            "model": info.model,
            "key": info.key_name or "(master key or anonymous)",
            "started_at": info.started_at,
            "elapsed_s": round(max(0.0, now - info.started_at), 1),
            "deltas": self.deltas,
            "output_tokens": self.output_tokens,
            "aborting": self.aborted_by is not None,
        }


class _Watch:
    def __init__(self, observer: ConsoleObserver, live: LiveStream) -> None:
        self.observer = observer
        self.live = live

    def chunk(self, chunk: StreamChunk) -> None:
        live = self.live
        kind = type(chunk)
        if kind is TextDelta:  # the common chunk: exact types first (Timeline.delta)
            live.timeline.delta("text", len(chunk.text))  # type: ignore[union-attr]
        elif kind is ReasoningDelta:
            live.timeline.delta("reasoning", len(chunk.text))  # type: ignore[union-attr]
        else:
            live.timeline.feed(chunk)
        if kind is TextDelta or kind is ReasoningDelta or isinstance(chunk, (TextDelta, ReasoningDelta, ToolCallDelta)):
            live.deltas += 1
            if self.observer._waiting:  # (what :meth:`ConsoleObserver.changed` checks, without the call)
                self.observer.changed()
        elif isinstance(chunk, Usage):
            live.output_tokens = chunk.usage.output_tokens
            self.observer.changed()

    async def ended(self, end: RunEnd) -> None:
        await self.observer.finish(self.live, end)


class ConsoleObserver:
    """Tracks streams in flight and records finished requests.

    Args:
        records: where finished requests are stored.
        redact: masks the configuration's secrets in stored text (called at record time, so a
            reloaded configuration's secrets are masked too).
    """

    def __init__(self, records: RecordStore, redact: Callable[[], Callable[[str], str]]) -> None:
        self.records = records
        self.redact = redact
        self.streams: dict[str, LiveStream] = {}
        self._changed = anyio.Event()
        self._waiting = 0

    def started(self, info: RunInfo) -> _Watch:
        """Track the generation ``info`` until it ends."""
        live = LiveStream(info)
        self.streams[info.ticket] = live
        self.changed()
        return _Watch(self, live)

    def changed(self) -> None:
        """Wake every waiter of :meth:`wait_change` (called for every delta relayed: without a
        waiter, that is, with no Live page open, it does nothing)."""
        if self._waiting:
            self._changed.set()
            self._changed = anyio.Event()

    async def wait_change(self) -> None:
        """Return at the next change of the streams in flight."""
        self._waiting += 1
        try:
            await self._changed.wait()
        finally:
            self._waiting -= 1

    def snapshot(self) -> list[dict[str, Any]]:
        """The streams in flight, oldest first (see :meth:`LiveStream.snapshot`); the model id (the
        client's text) masked like the stored records."""
        now = time.time()
        redact = self.redact()
        streams = sorted(self.streams.values(), key=lambda s: s.info.started_at)
        return [{**(shown := live.snapshot(now)), "model": redact(shown["model"])} for live in streams]

    def abort(self, ticket: str, operator: str) -> bool:
        """Abort stream ``ticket`` (the client gets the ``finish{aborted}`` its format uses);
        ``False`` when it is no longer in flight."""
        live = self.streams.get(ticket)
        if live is None:
            return False
        live.aborted_by = operator
        logger.info("request %s: aborted by %s from the console", live.info.request_id, operator)
        live.info.abort.fire(f"aborted by {operator} from the console")
        self.changed()
        return True

    async def finish(self, live: LiveStream, end: RunEnd) -> None:
        """Forget ``live`` and store its record (queued for the records' writer task while it runs:
        :meth:`RecordStore.insert`)."""
        info = self.streams.pop(live.info.ticket).info
        self.changed()
        failure = end.failure
        redact = self.redact()
        row: dict[str, Any] = {
            "id": info.ticket,
            "request_id": info.request_id,
            "dialect": info.dialect,
            "key_id": info.key_id,
            "key_name": info.key_name,
            "route": info.route,
            "model": redact(info.model),  # the client's text: a key pasted as a model id stays out too
            "served_route": end.served_route,
            "served_model": mask_strings(end.served_model, redact),
            "started_at": info.started_at,
            "status": end.status,
            "first_token_ms": end.first_token_s * 1000 if end.first_token_s is not None else None,
            "latency_ms": end.latency_s * 1000,
            **usage_counts(end.usage),
            "cost": end.cost,
            "error_code": failure.code if failure is not None else None,
            "error_message": mask_text(failure.message, redact) if failure is not None else None,
            "attempts": list(end.attempts),
        }
        if live.aborted_by is not None:
            row["error_message"] = f"aborted by {live.aborted_by} from the console"
        detail = live.timeline.detail(info.options, redact)
        await self.records.insert(row, detail)
