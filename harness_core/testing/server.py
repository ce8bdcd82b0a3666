"""``ScriptedServer``: a scripted HTTP/1.1 provider on 127.0.0.1 for adapter tests.

Mock the provider, never the harness (docs/testing.md): the adapter under test talks real HTTP to this
server, which replays wire bytes exactly as scripted. Each scripted read goes out as its own
``Transfer-Encoding: chunked`` chunk (RFC 9112 §7.1) and is flushed at once (``TCP_NODELAY``),
so ``httpx.Response.aiter_raw()`` / ``aiter_bytes()`` yields exactly those pieces; plain TCP
writes would be merged by the kernel.

The server runs plain threads (one listener, one per connection), so it is usable from asyncio,
trio, synchronous code and subprocesses. Use it as a context manager: on exit every connection
is closed and every thread joined.

Example::

    with ScriptedServer(Reply(reads=[b"data: a\\n\\n", b"data: [DONE]\\n\\n"])) as server:
        ... # point the adapter's base_url at server.url
        assert server.requests[0].json()["stream"] is True
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Literal

__all__ = ["RecordedRequest", "Reply", "Responder", "ScriptedServer"]

End = Literal["eof", "stall", "abrupt", "reset"]

_MAX_HEAD = 64 * 1024


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP response.

    Fields:
        status: the HTTP status code.
        headers: response headers, as a mapping or a sequence of pairs (repeats allowed).
            ``content-type`` defaults to ``text/event-stream``; framing headers
            (``transfer-encoding`` / ``content-length``) are added by the server; with
            ``chunked=False`` a given ``content-length`` is kept (declare more than is sent to
            script a body cut short).
        reads: the body, as the pieces the client should receive one per read. A ``float``
            item is a pause of that many seconds before the next piece.
        delay: seconds to wait before each piece (a uniform pause between reads).
        head_delay: seconds to wait before sending the status line (a slow first byte).
        end: how the response ends: ``"eof"`` (terminating zero chunk; the connection stays
            usable), ``"stall"`` (stop sending and hold the connection open until the client
            disconnects or the server stops), ``"abrupt"`` (close the socket mid-body without the
            terminating chunk: the client sees an incomplete chunked body / EOF) or ``"reset"``
            (abort the connection with a TCP RST).
        chunked: send the body with ``Transfer-Encoding: chunked`` (default). ``False`` sends a
            ``Content-Length`` of the whole body, still written piece by piece.
        raw: bytes written verbatim instead of a generated response (status line, headers and
            body included, e.g. a ``response.http`` fixture); the connection is closed after it.
            Every other field is then ignored.
    """

    status: int = 200
    headers: Mapping[str, str] | Sequence[tuple[str, str]] = ()
    reads: Sequence[bytes | float] = ()
    delay: float = 0.0
    head_delay: float = 0.0
    end: End = "eof"
    chunked: bool = True
    raw: bytes | None = None

    def __post_init__(self) -> None:
        if self.end not in ("eof", "stall", "abrupt", "reset"):
            raise ValueError(f"unknown end {self.end!r}; expected eof, stall, abrupt or reset")
        for piece in self.reads:
            if isinstance(piece, bytes) and not piece:
                raise ValueError("an empty read cannot be sent (a zero-length chunk ends the body)")

    @classmethod
    def json(cls, status: int, body: Any, *, headers: Mapping[str, str] | None = None) -> Reply:
        """A complete JSON response (``Content-Length`` framing), e.g. an error body."""
        merged = {"content-type": "application/json", **(headers or {})}
        return cls(status=status, headers=merged, reads=[json.dumps(body).encode()], chunked=False)

    def header_pairs(self) -> list[tuple[str, str]]:
        """The headers as ``(name, value)`` pairs, ``content-type`` defaulted."""
        pairs = list(self.headers.items()) if isinstance(self.headers, Mapping) else list(self.headers)
        if not any(name.lower() == "content-type" for name, _ in pairs):
            pairs.insert(0, ("content-type", "text/event-stream"))
        return pairs


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received: ``headers`` has lower-case names (repeats joined by ``", "``)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


Responder = Callable[[RecordedRequest], Reply]
"""A reply computed from the request it answers."""


class _Closed(Exception):
    """The peer closed the connection or the server is stopping."""


@dataclass
class _Conn:
    sock: socket.socket
    thread: threading.Thread | None = None
    closed: bool = False
    buffer: bytearray = field(default_factory=bytearray)


class ScriptedServer:
    """An HTTP/1.1 server on ``127.0.0.1`` (ephemeral port) answering from a script.

    Args:
        replies: responses served in order, one per request (a queue; add more with
            :meth:`add`). When the queue is empty the server answers ``500`` with a plain-text
            explanation and records the request.
        routes: fixed responses by ``(method, path)`` (e.g. ``("GET", "/models")``), served for
            every matching request and never consumed; they take precedence over the queue.
            The path is matched without its query string.

    A reply may also be a :data:`Responder`, a function building the reply from the request
    (a hostile server echoing the request's ``Authorization`` header).

    Attributes:
        url: ``http://127.0.0.1:<port>`` (available after :meth:`start`).
        requests: every :class:`RecordedRequest` received, in order.
        connections_opened: how many connections were accepted.
        open_connections: how many are open right now (drops when a client disconnects).

    Thread-safe; :meth:`start` / :meth:`stop` or the context manager control its life.
    """

    def __init__(
        self, *replies: Reply | Responder, routes: Mapping[tuple[str, str], Reply | Responder] | None = None
    ) -> None:
        self._queue: deque[Reply | Responder] = deque(replies)
        self._routes = dict(routes or {})
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._conns: list[_Conn] = []
        self._open = 0
        self._idle = threading.Condition(self._lock)
        self.requests: list[RecordedRequest] = []
        self.connections_opened = 0
        self.url = ""

    # ------------------------------------------------------------------ public API

    def add(self, *replies: Reply | Responder) -> None:
        """Append responses to the queue."""
        with self._lock:
            self._queue.extend(replies)

    def route(self, method: str, path: str, reply: Reply | Responder) -> None:
        """Serve ``reply`` for every ``method path`` request (not consumed)."""
        with self._lock:
            self._routes[(method.upper(), path)] = reply

    @property
    def pending(self) -> int:
        """How many queued responses have not been served yet."""
        with self._lock:
            return len(self._queue)

    @property
    def open_connections(self) -> int:
        """How many client connections are open right now."""
        with self._lock:
            return self._open

    def wait_idle(self, timeout: float = 5.0, *, most: int = 0) -> bool:
        """Block until at most ``most`` client connections are open (default: none); ``False``
        if ``timeout`` seconds passed.

        Use it to prove a client closed its connection (no leak); it is a wait, not a timing
        assertion.
        """
        with self._idle:
            return self._idle.wait_for(lambda: self._open <= most, timeout=timeout)

    def start(self) -> ScriptedServer:
        """Bind to ``127.0.0.1`` on an ephemeral port and start serving. Returns ``self``."""
        if self._listener is not None:
            raise RuntimeError("ScriptedServer already started")
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        listener.setblocking(False)
        self._listener = listener
        self._wake_r, self._wake_w = socket.socketpair()
        self.url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        self._accept_thread = threading.Thread(target=self._accept_loop, name="ScriptedServer-accept", daemon=True)
        self._accept_thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: close every connection and join every thread. Idempotent."""
        if self._listener is None or self._stopping.is_set():
            return
        self._stopping.set()
        assert self._wake_w is not None
        self._wake_w.send(b"x")  # wakes every select() on the shared wake socket
        assert self._accept_thread is not None
        self._accept_thread.join()
        with self._lock:
            conns = list(self._conns)
            for conn in conns:
                if not conn.closed:  # unblock a sendall() to a client that stopped reading
                    with contextlib.suppress(OSError):  # the peer may have disconnected already
                        conn.sock.shutdown(socket.SHUT_RDWR)
        for conn in conns:
            assert conn.thread is not None
            conn.thread.join()
        self._listener.close()
        self._wake_w.close()
        assert self._wake_r is not None
        self._wake_r.close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ScriptedServer(url={self.url!r}, pending={self.pending}, requests={len(self.requests)})"

    # ------------------------------------------------------------------ threads

    def _accept_loop(self) -> None:
        assert self._listener is not None
        assert self._wake_r is not None
        while True:
            select.select([self._listener, self._wake_r], [], [])
            if self._stopping.is_set():
                return
            try:
                sock, _ = self._listener.accept()
            except BlockingIOError:  # pragma: no cover - the client gave up between select and accept
                continue
            sock.setblocking(True)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(sock)
            conn.thread = threading.Thread(target=self._serve, args=(conn,), name="ScriptedServer-conn", daemon=True)
            with self._lock:
                self._conns.append(conn)
                self._open += 1
                self.connections_opened += 1
            conn.thread.start()

    def _serve(self, conn: _Conn) -> None:
        try:
            while True:
                request = self._read_request(conn)
                self.requests.append(request)
                reply = self._pick(request)
                if not self._respond(conn, reply):
                    break
        except (_Closed, OSError):
            pass  # the client went away or the server is stopping: nothing left to serve
        finally:
            with self._idle:
                conn.closed = True
                conn.sock.close()
                self._open -= 1
                self._idle.notify_all()

    def _pick(self, request: RecordedRequest) -> Reply:
        with self._lock:
            scripted = self._routes.get((request.method, request.path.split("?", 1)[0]))
            if scripted is None and self._queue:
                scripted = self._queue.popleft()
        if scripted is not None:
            return scripted if isinstance(scripted, Reply) else scripted(request)
        message = f"ScriptedServer: no scripted response left for {request.method} {request.path}"
        return Reply(status=500, headers={"content-type": "text/plain"}, reads=[message.encode()], chunked=False)

    # ------------------------------------------------------------------ reading

    def _wait_readable(self, sock: socket.socket, timeout: float | None = None) -> bool:
        """Wait until ``sock`` is readable. False on timeout; raises ``_Closed`` when stopping."""
        assert self._wake_r is not None
        ready, _, _ = select.select([sock, self._wake_r], [], [], timeout)
        if self._stopping.is_set():
            raise _Closed
        return bool(ready)

    def _recv(self, conn: _Conn) -> None:
        self._wait_readable(conn.sock)
        data = conn.sock.recv(65536)
        if not data:
            raise _Closed
        conn.buffer += data

    def _read_until(self, conn: _Conn, marker: bytes) -> bytes:
        while (end := conn.buffer.find(marker)) < 0:
            if len(conn.buffer) > _MAX_HEAD:
                raise _Closed
            self._recv(conn)
        line = bytes(conn.buffer[:end])
        del conn.buffer[: end + len(marker)]
        return line

    def _read_exact(self, conn: _Conn, size: int) -> bytes:
        while len(conn.buffer) < size:
            self._recv(conn)
        data = bytes(conn.buffer[:size])
        del conn.buffer[:size]
        return data

    def _read_request(self, conn: _Conn) -> RecordedRequest:
        head = self._read_until(conn, b"\r\n\r\n").decode("latin-1")
        request_line, *header_lines = head.split("\r\n")
        method, target, _version = request_line.split(" ", 2)
        headers: dict[str, str] = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        if "chunked" in headers.get("transfer-encoding", "").lower():
            parts: list[bytes] = []
            while size := int(self._read_until(conn, b"\r\n").split(b";", 1)[0], 16):
                parts.append(self._read_exact(conn, size))
                self._read_exact(conn, 2)
            while self._read_until(conn, b"\r\n"):  # trailers, up to the blank line
                pass
            body = b"".join(parts)
        else:
            body = self._read_exact(conn, int(headers.get("content-length", "0")))
        return RecordedRequest(method=method.upper(), path=target, headers=headers, body=body)

    # ------------------------------------------------------------------ writing

    def _pause(self, seconds: float) -> None:
        if seconds > 0 and self._stopping.wait(seconds):
            raise _Closed

    def _respond(self, conn: _Conn, reply: Reply) -> bool:
        """Send ``reply``; return whether the connection can serve another request."""
        sock = conn.sock
        self._pause(reply.head_delay)
        if reply.raw is not None:
            sock.sendall(reply.raw)
            return False
        pieces = [p for p in reply.reads if isinstance(p, bytes)]
        pairs = reply.header_pairs()
        declared = any(n.lower() == "content-length" for n, _ in pairs)
        if reply.chunked:
            pairs = [(n, v) for n, v in pairs if n.lower() not in ("content-length", "transfer-encoding")]
            pairs.append(("transfer-encoding", "chunked"))
        elif not declared:
            pairs.append(("content-length", str(sum(map(len, pieces)))))
        try:
            reason = HTTPStatus(reply.status).phrase
        except ValueError:
            reason = "Unknown"
        head = f"HTTP/1.1 {reply.status} {reason}\r\n" + "".join(f"{n}: {v}\r\n" for n, v in pairs) + "\r\n"
        sock.sendall(head.encode("latin-1"))
        for piece in reply.reads:
            if not isinstance(piece, bytes):
                self._pause(piece)
                continue
            self._pause(reply.delay)
            sock.sendall(b"%x\r\n%b\r\n" % (len(piece), piece) if reply.chunked else piece)
        if reply.end == "eof":
            if reply.chunked:
                sock.sendall(b"0\r\n\r\n")
            return True
        if reply.end == "stall":
            self._hold(conn)
        elif reply.end == "reset":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        return False

    def _hold(self, conn: _Conn) -> None:
        """Keep the connection open, sending nothing, until the client closes it or we stop."""
        while True:
            self._wait_readable(conn.sock)
            if not conn.sock.recv(65536):
                return
