"""An incremental Server-Sent Events decoder: bytes in, events out.

Follows the WHATWG event-stream interpretation rules exactly (HTML Living Standard §9.2.5-9.2.6,
https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):

- the stream is always UTF-8, decoded incrementally with replacement (a character split across
  reads is never mangled; invalid bytes become U+FFFD), one leading BOM is stripped even when it
  is split across reads;
- lines end with CRLF, LF or CR, and a CRLF split across two reads is one line end;
- an empty line dispatches; ``:`` starts a comment; ``field: value`` loses exactly one space;
- ``data`` lines accumulate (joined with LF), ``event`` sets the type, ``id`` sets the sticky
  last event id unless it contains U+0000, ``retry`` is accepted only as ASCII digits;
- a block that saw no ``data`` line dispatches nothing (no phantom events).

Extensions that adapters need (PROTOCOLS §4.5), none of which changes a spec-conforming event:

- **unknown fields** are surfaced in :attr:`SSEEvent.extra` (llama.cpp's legacy ``error: {...}``
  line). A block holding an unknown field but no ``data`` line is dispatched with ``data == ""``
  and a non-empty ``extra`` so the adapter can see it; blocks with ``event``/``id``/``retry``
  only still dispatch nothing;
- **comments** can be observed through ``on_comment`` (keep-alives, e.g. to reset a watchdog);
- **EOF**: :meth:`SSEDecoder.close` reports an event cut by the end of the stream (its last line
  may lack a line end) as an event with ``incomplete=True`` instead of dropping it silently;
- **size cap**: an event larger than ``max_event_size`` characters raises
  ``LlmError("PROTOCOL")`` instead of growing without bound.

Buffering is linear in the event size (fragments are joined once) and the per-read work uses
``str.split`` rather than per-character Python loops.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from typing import Final

import msgspec

from harness_core.errors import LlmError

__all__ = ["DEFAULT_MAX_EVENT_SIZE", "SSEDecoder", "SSEEvent"]

DEFAULT_MAX_EVENT_SIZE: Final = 32 * 1024 * 1024
"""Default cap on one event (decoded characters of its data, unknown fields and pending line)."""


class SSEEvent(msgspec.Struct, frozen=True, omit_defaults=True):
    """One dispatched server-sent event.

    Fields:
        data: the ``data`` lines joined with ``"\\n"`` (``""`` for ``data:`` alone, or for a
            block that carried only unknown fields).
        event: the event type; ``"message"`` when the block set none (or set ``event:`` empty).
        id: the last event id seen so far on this stream (sticky across events, as the spec's
            "last event ID buffer"); ``None`` before any valid ``id`` line.
        retry: the reconnection time in milliseconds given by a ``retry`` line of this block.
        extra: unknown fields of this block, name → value (repeated names joined with
            ``"\\n"``). Field names are case-sensitive: ``Data: x`` lands here as ``"Data"``.
        incomplete: true only for the event :meth:`SSEDecoder.close` reports: the stream ended
            before its terminating blank line. The adapter decides what that means.
    """

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None
    extra: dict[str, str] = msgspec.field(default_factory=dict)
    incomplete: bool = False


class SSEDecoder:
    """Incremental ``text/event-stream`` decoder.

    Feed raw response bytes (e.g. each piece of ``httpx.Response.aiter_bytes()``) to
    :meth:`feed`, which returns the events completed by them; call :meth:`close` once at EOF.

    Args:
        max_event_size: the largest event accepted, in decoded characters (data, unknown field
            values and the line being received). A larger one raises ``LlmError("PROTOCOL")``.
        on_comment: called with the text after ``:`` of every comment line (keep-alives such as
            ``: keep-alive`` or ``: OPENROUTER PROCESSING``), in stream order, during
            :meth:`feed`.

    Attributes:
        last_event_id: the spec's last-event-ID buffer (``None`` until an ``id`` line is seen).
        retry: the last valid ``retry`` value in milliseconds, or ``None``.
    """

    __slots__ = (
        "_bom_checked",
        "_closed",
        "_data",
        "_decoder",
        "_event_type",
        "_extra",
        "_max",
        "_on_comment",
        "_pending_cr",
        "_ready",
        "_retry",
        "_size",
        "_tail",
        "_tail_size",
        "last_event_id",
        "retry",
    )

    def __init__(
        self,
        *,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
        on_comment: Callable[[str], object] | None = None,
    ) -> None:
        if max_event_size <= 0:
            raise ValueError(f"max_event_size must be positive, got {max_event_size}")
        self._max = max_event_size
        self._on_comment = on_comment
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._bom_checked = False
        self._pending_cr = False
        self._ready = True  # between events, nothing pending: the next read may take the fast path
        self._closed = False
        self._tail: list[str] = []  # fragments of the line being received (no line end yet)
        self._tail_size = 0
        self._data: list[str] = []  # data lines of the current event
        self._event_type = ""
        self._retry: int | None = None  # retry given in the current block
        self._extra: dict[str, str] = {}
        self._size = 0  # characters held for the current event (data + extra values)
        self.last_event_id: str | None = None
        self.retry: int | None = None

    def feed(self, data: bytes) -> list[SSEEvent]:
        """Decode ``data`` and return the events it completes (possibly none).

        Raises ``LlmError("PROTOCOL")`` when the current event exceeds ``max_event_size`` and
        ``RuntimeError`` after :meth:`close`.
        """
        if self._closed:
            raise RuntimeError("SSEDecoder.feed() called after close()")
        if self._ready:
            events = self._feed_whole(data)
            if events is not None:
                return events
        return self._feed_general(data, [])

    def _feed_general(self, data: bytes, events: list[SSEEvent]) -> list[SSEEvent]:
        """The general path: ``events`` followed by those ``data`` completes."""
        text = self._decoder.decode(data)
        if text:
            events += self._feed_text(text)
        # a read that ended a line leaves no partial character in the UTF-8 decoder
        self._ready = (
            data[-1:] == b"\n"
            and not self._tail
            and not self._data
            and not self._extra
            and not self._event_type
            and self._retry is None
            and self._bom_checked
        )
        return events

    def _feed_whole(self, data: bytes) -> list[SSEEvent] | None:
        """The fast path for the reads nearly every provider sends, arriving between events with
        nothing pending: whole events of ``event:`` / ``data:`` lines, each with its blank line
        (LF or CRLF line ends), or (LF only) whole one-line ``data:`` events followed by the
        start of the next, which goes through the general path. ``None`` (nothing consumed) for
        anything else, and for a first read that may begin with a byte order mark."""
        if not self._bom_checked:  # the first read
            if data[:1] in (b"\xef", b""):
                return None  # the general path strips a byte order mark, even one split across reads
            self._bom_checked = True  # (whatever path decodes it, the text cannot start with one)
        if data[-2:] != b"\n\n":
            if data[-4:] == b"\r\n\r\n" and data.count(b"\r") == data.count(b"\r\n"):
                return self._whole_events(data.replace(b"\r\n", b"\n"))
            if b"\r" in data:
                return None
            cut = data.rfind(b"\n\n") + 2  # the events before the last blank line are whole
            if cut < 2 or len(data) > self._max:
                return None
            whole = data[:cut].decode("utf-8", "replace")  # (a cut after a line end splits no character)
            events = self._whole_data_events(whole[:-2])
            return None if events is None else self._feed_general(data[cut:], events)
        if b"\r" in data:
            return None
        return self._whole_events(data)

    def _whole_events(self, data: bytes) -> list[SSEEvent] | None:
        """:meth:`_feed_whole` of a read of whole events (LF line ends, ending with a blank line)."""
        if len(data) > self._max:  # the slow path raises the size error
            return None
        text = data.decode("utf-8", "replace")
        end = len(text) - 2
        if text.find("\n\n") != end:  # more than one event, or an empty line first
            return self._whole_data_events(text[:end])
        if text.startswith("data: ") and text.find("\n") == end:  # one data line: the usual event
            return [SSEEvent(text[6:end], "message", self.last_event_id)]
        data_lines: list[str] = []
        event_type = ""
        for line in text[:end].split("\n"):
            if line.startswith("data: "):
                data_lines.append(line[6:])
            elif line.startswith("event: "):
                event_type = line[7:]
            else:  # comments, ids, retry, unknown fields: the general path
                return None
        if not data_lines:
            return []
        return [SSEEvent("\n".join(data_lines), event_type or "message", self.last_event_id)]

    def _whole_data_events(self, body: str) -> list[SSEEvent] | None:
        """The fast path of a read of several whole events (a burst that arrived together):
        ``body`` (the read without its final blank line) when every event is one ``data: …``
        line, else ``None`` (nothing consumed: the general path decides, empty lines included)."""
        events: list[SSEEvent] = []
        last_id = self.last_event_id
        for block in body.split("\n\n"):
            if not block.startswith("data: ") or "\n" in block:
                return None
            events.append(SSEEvent(block[6:], "message", last_id))
        return events

    def close(self) -> SSEEvent | None:
        """Finish the stream at EOF and return the event it cut short, if any.

        A final line without a line end is processed as a complete line first. If the pending
        block then holds data (or unknown fields) it is returned with ``incomplete=True``;
        otherwise ``None``. The spec would discard it; reporting it lets the adapter decide
        (e.g. llama.cpp's ``data: [DONE]`` without a blank line). Idempotent.
        """
        if self._closed:
            return None
        rest = self._decoder.decode(b"", final=True)
        if rest:  # a truncated UTF-8 sequence: U+FFFD, never a line end, so no event completes
            self._feed_text(rest)
        self._closed = True
        if self._tail:
            line = "".join(self._tail)
            self._tail = []
            self._tail_size = 0
            self._process_line(line, [])  # a final line is never empty, so it dispatches nothing
        if not self._data and not self._extra:
            return None
        event = self._build(incomplete=True)
        self._reset_event()
        return event

    # ------------------------------------------------------------------ internals

    def _feed_text(self, text: str) -> list[SSEEvent]:
        if not self._bom_checked:  # text is never empty here
            self._bom_checked = True
            if text[0] == "\ufeff":
                text = text[1:]
                if not text:
                    return []
        if self._pending_cr:
            self._pending_cr = False
            if text[0] == "\n":
                text = text[1:]
                if not text:
                    return []
        if "\r" in text:
            self._pending_cr = text[-1] == "\r"
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        events: list[SSEEvent] = []
        last = lines.pop()
        if lines:
            if self._tail:
                self._tail.append(lines[0])
                lines[0] = "".join(self._tail)
                self._tail = []
                self._tail_size = 0
            data = self._data
            for line in lines:
                # Fast paths for the lines nearly every event consists of (``event: …``,
                # ``data: …``, then a blank line); anything else goes through _process_line.
                if line.startswith("data: "):
                    value = line[6:]
                    data.append(value)
                    self._size += len(value) + 1
                    if self._size > self._max:
                        self._oversize()
                elif not line and data and not self._extra:
                    events.append(self._build(incomplete=False))
                    self._reset_event()
                    data = self._data
                elif line.startswith("event: "):
                    self._event_type = line[7:]
                else:
                    self._process_line(line, events)
                    data = self._data
        if last:
            self._tail.append(last)
            self._tail_size += len(last)
            if self._tail_size + self._size > self._max:
                self._oversize()
        return events

    def _process_line(self, line: str, events: list[SSEEvent]) -> None:
        if not line:
            if self._data or self._extra:
                events.append(self._build(incomplete=False))
            self._reset_event()
            return
        colon = line.find(":")
        if colon == 0:
            if self._on_comment is not None:
                self._on_comment(line[1:])
            return
        if colon < 0:
            field, value = line, ""
        else:
            field = line[:colon]
            value = line[colon + 2 :] if line.startswith(" ", colon + 1) else line[colon + 1 :]
        if field == "data":
            self._data.append(value)
            self._size += len(value) + 1
            if self._size > self._max:
                self._oversize()
        elif field == "event":
            self._event_type = value
        elif field == "id":
            if "\0" not in value:
                self.last_event_id = value
        elif field == "retry":
            if value.isascii() and value.isdigit():
                self._retry = self.retry = int(value)
        else:
            previous = self._extra.get(field)
            self._extra[field] = value if previous is None else previous + "\n" + value
            self._size += len(value) + 1
            if self._size > self._max:
                self._oversize()

    def _build(self, *, incomplete: bool) -> SSEEvent:
        return SSEEvent(
            data="\n".join(self._data),
            event=self._event_type or "message",
            id=self.last_event_id,
            retry=self._retry,
            extra=self._extra,
            incomplete=incomplete,
        )

    def _reset_event(self) -> None:
        self._data = []
        self._event_type = ""
        self._retry = None
        self._extra = {}
        self._size = 0

    def _oversize(self) -> None:
        size = self._size + self._tail_size
        self._reset_event()
        self._tail = []
        self._tail_size = 0
        raise LlmError(
            "PROTOCOL",
            f"server-sent event larger than max_event_size ({size} > {self._max} characters)",
        )
