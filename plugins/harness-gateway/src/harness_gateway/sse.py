"""Server-Sent Events framing of the gateway's responses (the ``text/event-stream`` format of
https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation).

Payloads are single-line JSON (msgspec never emits a raw newline), so one ``data:`` line each.
"""

from __future__ import annotations

from typing import Final

__all__ = ["KEEPALIVE", "sse_data", "sse_event"]

KEEPALIVE: Final = b": keep-alive\n\n"
"""A comment line: ignored by every SSE client, it keeps proxies from closing a silent stream."""


def sse_data(payload: bytes) -> bytes:
    """One event with only a ``data:`` field (OpenAI's framing)."""
    return b"data: " + payload + b"\n\n"


def sse_event(name: str, payload: bytes) -> bytes:
    """One named event, ``event: name`` then ``data: payload`` (Anthropic's framing)."""
    return b"event: " + name.encode() + b"\ndata: " + payload + b"\n\n"
