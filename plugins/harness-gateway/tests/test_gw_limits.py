"""Connection limits before authentication: idle, slow-header and slow-body connections are closed,
a flood beyond ``max_connections`` is refused (raw sockets against a real uvicorn server)."""

from __future__ import annotations

import http.client
import itertools
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import msgspec
import pytest
import uvicorn
from gw_helpers import Process, error_records, gateway_yaml, serve_gateway, wait_until

from harness_gateway.config import ConnectionLimits, GatewayConfig
from harness_gateway.limits import protocol_options

LONG = 120.0  # a deadline that never runs out within a test
BOUND = 30.0  # how long a test waits for the server to close a connection (generous under load)
CHAT_HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\ncontent-type: application/json\r\n"


def _limits(**changes: Any) -> ConnectionLimits:
    return msgspec.structs.replace(ConnectionLimits(header=LONG, body=LONG, idle=LONG), **changes)


def _connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    return socket.create_connection((parts.hostname, parts.port), timeout=BOUND)


def closed_within(sock: socket.socket, seconds: float = BOUND) -> bytes:
    """Everything the server sent until it closed the connection; fails when it is still open
    after ``seconds``."""
    deadline = time.monotonic() + seconds
    received = bytearray()
    while True:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            data = sock.recv(65536)
        except TimeoutError:
            pytest.fail(f"the server kept the connection open for {seconds} s")
        except ConnectionResetError:  # closed with our bytes unread: a reset instead of an EOF
            return bytes(received)
        if not data:
            return bytes(received)
        received += data


def trickled_until_closed(sock: socket.socket, pieces: Iterator[bytes], seconds: float = BOUND) -> None:
    """Send ``pieces`` one by one, each after the last one's wait for the server (50 ms at most),
    until the server closes the connection; fails when it is still open after ``seconds``."""
    deadline = time.monotonic() + seconds
    sock.settimeout(0.05)  # the trickle's pace: every wait is also the check whether it closed
    for piece in pieces:
        assert time.monotonic() < deadline, f"the server kept a trickling connection open for {seconds} s"
        try:
            sock.sendall(piece)
            if not sock.recv(65536):
                return
        except TimeoutError:
            continue
        except (BrokenPipeError, ConnectionResetError):
            return
        closed_within(sock, deadline - time.monotonic())  # the 408 arrived: the close follows
        return


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "gw.sqlite"


def test_an_idle_connection_is_closed_fresh_and_after_a_response(tmp_path: Path, db: Path) -> None:
    with serve_gateway(tmp_path, gateway_yaml(db=db), limits=_limits(idle=0.5)) as running:
        with _connect(running.url) as fresh:
            assert closed_within(fresh) == b""  # never sent a byte: closed without an answer
        with _connect(running.url) as kept:
            kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
            answer = closed_within(kept)  # the answer, then the keep-alive connection closes
        assert answer.startswith(b"HTTP/1.1 200 ")


def test_a_slow_or_trickled_head_gets_408_and_is_closed(tmp_path: Path, db: Path) -> None:
    with serve_gateway(tmp_path, gateway_yaml(db=db), limits=_limits(header=0.3)) as running:
        with _connect(running.url) as partial:
            partial.sendall(CHAT_HEAD)  # the head never ends
            answer = closed_within(partial)
        assert answer.startswith(b"HTTP/1.1 408 ")
        assert b"connection: close" in answer
        assert b'"timeout"' in answer
        with _connect(running.url) as trickling:  # a byte at a time does not keep it open
            trickled_until_closed(trickling, itertools.chain([CHAT_HEAD, b"x-slow: "], itertools.repeat(b"a")))
        with httpx.Client(base_url=running.url, timeout=BOUND) as client:  # a normal request is served
            assert client.get("/healthz").status_code == 200


def test_a_slow_or_trickled_body_gets_408_and_is_closed(tmp_path: Path, db: Path) -> None:
    head = CHAT_HEAD + b"content-length: 1000\r\n\r\n"
    with (
        error_records() as errors,
        serve_gateway(tmp_path, gateway_yaml(db=db), limits=_limits(body=0.3)) as running,
    ):
        with _connect(running.url) as partial:
            partial.sendall(head + b'{"model": "mock/echo", ')  # the body never ends
            answer = closed_within(partial)
        assert answer.startswith(b"HTTP/1.1 408 ")
        assert b"request body did not arrive in time" in answer
        with _connect(running.url) as trickling:
            trickled_until_closed(trickling, itertools.chain([head, b"{"], itertools.repeat(b" ")))
        # the app saw the disconnect as a 400 (counted), not as an exception
        wait_until(lambda: 'status="400"' in running.gateway.metrics.render().decode())
    assert not errors, [r.getMessage() for r in errors]  # the app saw a disconnect: no traceback


def test_a_flood_beyond_max_connections_is_refused_and_a_request_gets_through_after(
    tmp_path: Path, db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with serve_gateway(tmp_path, gateway_yaml(db=db), limits=_limits(max_connections=3)) as running:
        parts = urlsplit(running.url)
        holders = [http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=BOUND) for _ in range(3)]
        for holder in holders:  # three kept-alive connections: the cap is reached
            holder.request("GET", "/healthz")
            response = holder.getresponse()
            response.read()
            assert response.status == 200
        with caplog.at_level(logging.WARNING, "harness_gateway"):
            for _ in range(10):
                with _connect(running.url) as flood:
                    refused = closed_within(flood)  # answered at once, before it sent anything
                assert refused.startswith(b"HTTP/1.1 503 ")
                assert b"retry-after: 1" in refused
                assert b'"too_many_connections"' in refused
        assert "refused 1 connection(s)" in caplog.text  # logged once per interval, not per connection
        for holder in holders:
            holder.close()
        with httpx.Client(base_url=running.url, timeout=BOUND) as client:

            def served() -> bool:  # the closed holders leave the count as the server sees them go
                return client.get("/healthz", headers={"connection": "close"}).status_code == 200

            wait_until(served, BOUND)


def test_a_body_deadline_after_the_answer_started_closes_without_a_408() -> None:
    """An application that answers before reading the body (a stream) is not sent a 408 in the
    middle of its answer: the connection is closed."""
    started = threading.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"streaming", "more_body": True})
        started.set()
        while (await receive())["type"] != "http.disconnect":
            pass

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    server = uvicorn.Server(
        uvicorn.Config(app, lifespan="off", log_level="warning", **protocol_options(_limits(body=0.3), "auto"))
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        with socket.create_connection(sock.getsockname(), timeout=BOUND) as client:
            client.sendall(b"POST /x HTTP/1.1\r\nHost: gw\r\ncontent-length: 100\r\n\r\nab")
            answer = closed_within(client)
        assert started.is_set()
        assert answer.startswith(b"HTTP/1.1 200 ")
        assert b"408" not in answer
    finally:
        server.should_exit = True
        thread.join(BOUND)
        sock.close()


def test_the_limits_come_from_the_gateway_entry_of_harness_serve(tmp_path: Path, db: Path) -> None:
    config = tmp_path / "plugins.yaml"
    config.write_text(gateway_yaml("    idle_timeout: 1\n    header_timeout: 0.3", db=db), encoding="utf-8")
    settings = GatewayConfig(header_timeout=1, body_timeout=2, idle_timeout=3, max_connections=4)
    assert settings.connection_limits() == ConnectionLimits(header=1, body=2, idle=3, max_connections=4)
    served = Process(config)
    try:
        with _connect(served.url) as idle:
            assert closed_within(idle) == b""
        with _connect(served.url) as partial:
            partial.sendall(CHAT_HEAD)
            assert closed_within(partial).startswith(b"HTTP/1.1 408 ")
    finally:
        served.stop()
