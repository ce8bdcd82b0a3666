"""Connection limits of ``harness serve``: deadlines for a request's head, its body and an idle
connection, and a cap on open connections, enforced before any request reaches the application.

uvicorn offers a keep-alive timeout (``timeout_keep_alive``: the idle time after a response) and
``limit_concurrency`` (a 503 once a request head arrives beyond the limit). Neither bounds a
connection that never sends a byte, trickles its head or its body, and ``limit_concurrency`` lets
an idle flood keep every socket open. :func:`guarded_protocol` builds uvicorn's own HTTP/1.1
protocol (h11 or httptools) with one timer per connection on top, re-armed at each change of
what the connection waits for (:meth:`_Guard.waiting`):

* ``idle``: nothing of a request arrived since the connection opened or the last response ended:
  closed after ``idle`` seconds (uvicorn's keep-alive timeout is set to the same value);
* ``head``: bytes of a request head arrived but not the whole head: 408 and closed ``header``
  seconds after the first byte;
* ``body``: the head arrived, the body did not end: 408 (when no response started) and closed
  ``body`` seconds after the head;
* while the application answers nothing is timed here (the gateway's streams have their own
  deadlines: the provider's read timeout, ``keepalive`` comments).

A connection opened while ``max_connections`` are open in this process (this worker) gets a 503
with ``retry-after: 1`` and is closed at once, before it can send anything; refusals are logged as
one warning per 10 s with their count. Raw responses follow RFC 9112 (HTTP/1.1 message syntax);
their JSON body is the OpenAI error shape (:mod:`harness_gateway.errors`): the path is not known
before the head arrives.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from typing import Any, Final, Literal, cast

import msgspec
from uvicorn.config import HTTP_PROTOCOLS
from uvicorn.importer import import_from_string

from harness_gateway.config import ConnectionLimits

__all__ = ["guarded_protocol", "protocol_options"]

logger = logging.getLogger("harness_gateway")

Waiting = Literal["idle", "head", "body", "app"]
"""What a connection waits for: a request to start, the rest of its head, the rest of its body,
or the application's answer (untimed here)."""

_REFUSAL_LOG_INTERVAL: Final = 10.0  # seconds between two warnings about refused connections
_NOTHING: Final = object()  # no byte arrived after any cycle yet


def _raw_response(status: str, message: str, code: str, extra: str = "") -> bytes:
    """A complete HTTP/1.1 response closing the connection, with an OpenAI-shaped JSON error body
    (``type``: ``server_error`` for a 5xx, else ``invalid_request_error``)."""
    kind = "server_error" if status.startswith("5") else "invalid_request_error"
    body = msgspec.json.encode({"error": {"message": message, "type": kind, "param": None, "code": code}})
    head = (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        f"{extra}connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


_REFUSED: Final = _raw_response(
    "503 Service Unavailable", "too many open connections: try again shortly", "too_many_connections",
    "retry-after: 1\r\n",
)  # fmt: skip
_HEAD_TIMEOUT: Final = _raw_response("408 Request Timeout", "the request head did not arrive in time", "timeout")
_BODY_TIMEOUT: Final = _raw_response("408 Request Timeout", "the request body did not arrive in time", "timeout")


class _Refusals:
    """Counts refused connections and logs them at most once per :data:`_REFUSAL_LOG_INTERVAL`."""

    def __init__(self) -> None:
        self.count = 0
        self.logged_at = -math.inf

    def note(self, limit: int) -> None:
        self.count += 1
        now = time.monotonic()
        if now - self.logged_at >= _REFUSAL_LOG_INTERVAL:
            logger.warning("refused %d connection(s): %d connections are open (max_connections)", self.count, limit)
            self.count = 0
            self.logged_at = now


_refusals = _Refusals()


class _Guard(asyncio.Protocol):
    """The deadlines and the cap, mixed in before one of uvicorn's HTTP/1.1 protocols (which keep
    ``connections``, ``cycle``, ``transport`` and ``loop``; a cycle has ``more_body``,
    ``response_started`` and ``response_complete``)."""

    def __init__(self, *args: Any, limits: ConnectionLimits, **kwargs: Any) -> None:
        cast(Any, super()).__init__(*args, **kwargs)
        self.limits = limits
        self._timer: asyncio.TimerHandle | None = None
        self._armed: tuple[Waiting, object] | None = None
        self._bytes_after: object = _NOTHING
        """The finished cycle (``None``: none yet) after which bytes of a new request arrived."""

    def waiting(self) -> tuple[Waiting, object]:
        """What the connection waits for, with the request cycle it is about."""
        cycle = cast(Any, self).cycle
        if cycle is None or cycle.response_complete:
            return ("head" if self._bytes_after is cycle else "idle"), cycle
        return ("body" if cycle.more_body else "app"), cycle

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if len(cast(Any, self).connections) > self.limits.max_connections:
            _refusals.note(self.limits.max_connections)
            cast(asyncio.Transport, transport).write(_REFUSED)
            transport.close()
            return
        self._rearm()

    def data_received(self, data: bytes) -> None:
        cycle = cast(Any, self).cycle
        if cycle is None or cycle.response_complete:
            self._bytes_after = cycle
        super().data_received(data)
        self._rearm()

    def on_response_complete(self) -> None:
        cast(Any, super()).on_response_complete()
        self._rearm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _rearm(self) -> None:
        """Start the deadline of what the connection waits for now, unless it already runs."""
        state = self.waiting()
        if state == self._armed:
            return
        self._cancel()
        self._armed = state
        limits = self.limits
        seconds = {"idle": limits.idle, "head": limits.header, "body": limits.body}.get(state[0])
        if seconds is not None:
            self._timer = cast(Any, self).loop.call_later(seconds, self._expire, state)

    def _expire(self, state: tuple[Waiting, object]) -> None:
        """The deadline of ``state`` passed: close the connection (with a 408 when a request is
        partly there and unanswered)."""
        self._timer = None
        transport: asyncio.Transport = cast(Any, self).transport
        if transport.is_closing():
            return
        kind, cycle = state
        if kind == "head":
            transport.write(_HEAD_TIMEOUT)
        elif kind == "body" and not cast(Any, cycle).response_started:
            transport.write(_BODY_TIMEOUT)
        if kind != "idle":
            logger.info("closing a connection whose request %s did not arrive in time", kind)
        transport.close()


_GUARDED: dict[str, type[asyncio.Protocol]] = {}


def guarded_protocol(*args: Any, limits: ConnectionLimits, http: str, **kwargs: Any) -> asyncio.Protocol:
    """A new connection's protocol: uvicorn's ``http`` protocol (``auto``: httptools when
    installed, else h11) under ``limits``; the other arguments are uvicorn's for the protocol.
    A module function, so uvicorn's worker processes can unpickle it (a class made here could
    not be)."""
    protocol = _GUARDED.get(http)
    if protocol is None:
        base = import_from_string(HTTP_PROTOCOLS[http])
        protocol = _GUARDED[http] = type(f"Guarded{base.__name__}", (_Guard, base), {"__module__": __name__})
    made: asyncio.Protocol = cast(Any, protocol)(*args, limits=limits, **kwargs)
    return made


def protocol_options(limits: ConnectionLimits, http: Literal["auto", "h11", "httptools"]) -> dict[str, Any]:
    """``uvicorn.Config`` keyword arguments enforcing ``limits`` with the ``http`` parser: the
    protocol factory :func:`guarded_protocol` bound to both (picklable: uvicorn's worker processes
    get it) and uvicorn's keep-alive timeout (``limits.idle``)."""
    return {"http": functools.partial(guarded_protocol, limits=limits, http=http), "timeout_keep_alive": limits.idle}
