"""The per-request path of the gateway (issue 25): generations dispatched without Starlette's
layers, the request-id layer's 500, and the one usage recorder per process."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from gw_helpers import gateway_yaml, ledger_rows, openai_sse

from harness_core.testing import Reply, ScriptedServer
from harness_gateway.app import GatewayApp, build_app
from harness_gateway.recorder import UsageRecorder
from harness_gateway.request_id import RequestIdMiddleware
from harness_gateway.server import GatewayServer

BODY = {"model": "mock/echo", "messages": [{"role": "user", "content": "hello there"}]}


def _collector() -> tuple[list[dict[str, Any]], Any]:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    return sent, send


async def _receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


def _scope(path: str = "/x") -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": path, "headers": [(b"x-request-id", b"abc-1")]}


def test_an_exception_before_the_response_is_a_500_with_the_request_id(caplog: pytest.LogCaptureFixture) -> None:
    async def failing(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("a bug")

    sent, send = _collector()
    with caplog.at_level(logging.INFO, "harness_gateway"), pytest.raises(RuntimeError, match="a bug"):
        anyio.run(RequestIdMiddleware(failing), _scope(), _receive, send)
    assert sent[0]["status"] == 500
    assert (b"x-request-id", b"abc-1") in sent[0]["headers"]
    assert sent[1]["body"] == b"Internal Server Error"
    assert "request abc-1 POST /x -> 500" in caplog.text


def test_the_access_line_says_when_the_client_left_before_the_headers(caplog: pytest.LogCaptureFixture) -> None:
    async def gone() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def silent(scope: Any, receive: Any, send: Any) -> None:
        await receive()  # the client left; nothing is answered

    async def late(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})  # the server drops it

    async def answered(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await receive()  # the client left after the headers: their status stands

    with caplog.at_level(logging.INFO, "harness_gateway"):
        for app in (silent, late, answered):
            anyio.run(RequestIdMiddleware(app), _scope(), gone, _collector()[1])
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("request abc-1 ")]
    assert [line.split(" -> ")[1].rsplit(" in ", 1)[0] for line in lines] == [
        "aborted before the response",
        "aborted before the response (200 not sent)",
        "200",
    ]


def test_an_exception_after_the_response_started_is_raised_on_alone() -> None:
    async def failing(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        raise RuntimeError("late")

    sent, send = _collector()
    with pytest.raises(RuntimeError, match="late"):
        anyio.run(RequestIdMiddleware(failing), _scope(), _receive, send)
    assert [m["type"] for m in sent] == ["http.response.start"]
    assert sent[0]["status"] == 200


async def _started(tmp_path: Path, gateway: str = "") -> GatewayServer:
    config = tmp_path / "plugins.yaml"
    config.write_text(gateway_yaml(gateway, db=tmp_path / "gw.sqlite"), encoding="utf-8")
    server = GatewayServer(str(config), "127.0.0.1", announce_at_start=False)
    await server.start()
    return server


def test_generations_are_served_directly_and_under_a_root_path_through_the_router(tmp_path: Path) -> None:
    async def main() -> None:
        server = await _started(tmp_path)
        try:
            inner = server.app.app
            assert isinstance(inner, GatewayApp)
            routed: list[str] = []
            router = inner.fallback

            async def counting(scope: Any, receive: Any, send: Any) -> None:
                routed.append(scope["path"])
                await router(scope, receive, send)

            inner.fallback = counting
            direct = httpx.AsyncClient(transport=httpx.ASGITransport(app=server.app), base_url="http://gw")
            mounted = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=server.app, root_path="/gw"), base_url="http://gw"
            )
            async with direct, mounted:
                plain = await direct.post("/v1/chat/completions", json=BODY)
                below = await mounted.post("/gw/v1/chat/completions", json=BODY)
                wrong = await direct.get("/v1/chat/completions")
            for reply in (plain, below):
                assert reply.status_code == 200, reply.text
                assert reply.json()["choices"][0]["message"]["content"] == "hello there"
                assert reply.headers["x-request-id"]
            assert routed == ["/gw/v1/chat/completions", "/v1/chat/completions"]  # the direct POST skipped it
            assert wrong.status_code == 405
            assert wrong.json()["error"]["code"] == "method_not_allowed"
        finally:
            await server.stop()

    anyio.run(main)


def test_build_app_runs_the_usage_recorder_and_the_writers_in_its_lifespan(tmp_path: Path) -> None:
    async def main() -> None:
        server = await _started(tmp_path, "    master_key: mk-request-path-0123456789\n")  # the console: a writer
        assert server.gateway is not None
        recorder = server.gateway.recorder
        app = build_app(server.gateway)
        writers = server.gateway.writers
        assert len(writers) == 2  # the console of server.app and of this app
        sent: list[dict[str, Any]] = []
        answered = anyio.Event()

        async def send(message: Any) -> None:
            sent.append(message)
            answered.set()

        shutdown = anyio.Event()
        incoming = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])

        async def receive() -> Any:
            message = next(incoming)
            if message["type"] == "lifespan.shutdown":
                await shutdown.wait()
            return message

        try:
            async with anyio.create_task_group() as group:
                scope: dict[str, Any] = {"type": "lifespan", "state": {}}
                group.start_soon(app, scope, receive, send)
                with anyio.fail_after(10):
                    await answered.wait()  # the startup message
                assert sent[0]["type"] == "lifespan.startup.complete"
                assert recorder.running
                assert all(writer.running for writer in writers)
                shutdown.set()
            assert sent[-1]["type"] == "lifespan.shutdown.complete"
            assert not recorder.running
            assert not any(writer.running for writer in writers)
        finally:
            await server.stop()

    anyio.run(main)


class _Run:
    """A generation as the recorder sees it; its records are counted (``fail``: the next raises)."""

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.records = 0
        self.recorded = anyio.Event()
        self.release: anyio.Event | None = None
        self.entered = anyio.Event()
        self.fail = False
        self.concurrent = 0
        self.most_concurrent = 0

    async def record_so_far(self) -> None:
        self.concurrent += 1
        self.most_concurrent = max(self.most_concurrent, self.concurrent)
        self.entered.set()
        try:
            if self.release is not None:
                await self.release.wait()
            self.records += 1
            self.recorded.set()
            self.recorded = anyio.Event()
            if self.fail:
                self.fail = False
                raise RuntimeError("the store broke")
        finally:
            self.concurrent -= 1


def test_the_recorder_records_each_running_generation_until_discarded(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        recorder = UsageRecorder()
        first, second = _Run("r-1"), _Run("r-2")
        async with anyio.create_task_group() as group:
            await group.start(recorder.run)
            assert recorder.running
            with anyio.fail_after(10):
                recorder.add(first, 0.01)  # wakes the idle recorder
                await first.recorded.wait()
                first.fail = True  # a record that raises is logged; the recorder goes on
                await first.recorded.wait()
                await first.recorded.wait()
                second.release = anyio.Event()  # a slow record: no second one starts meanwhile
                recorder.add(second, 0.01)
                await second.entered.wait()
                marker = _Run("r-3")  # recorded twice: the recorder went past second's due time
                recorder.add(marker, 0.01)
                await marker.recorded.wait()
                await marker.recorded.wait()
                assert second.most_concurrent == 1
                second.release.set()
                await second.recorded.wait()
                recorder.discard(first)
                recorder.discard(second)
                recorder.discard(second)  # twice is harmless
                await marker.recorded.wait()  # records started before the discards have ended
                counted = first.records
                await marker.recorded.wait()
                await marker.recorded.wait()
                assert first.records == counted
            group.cancel_scope.cancel()
        assert not recorder.running

    with caplog.at_level(logging.ERROR, "harness_gateway"):
        anyio.run(main)
    assert "request r-1: recording its usage so far failed" in caplog.text
    assert "the store broke" in caplog.text


def test_each_generation_keeps_its_own_interval() -> None:
    """A generation added with a long interval does not slow the records of one added before it
    with a short one (the interval is each generation's, not the last one added)."""

    async def main() -> None:
        recorder = UsageRecorder()
        quick, slow = _Run("quick"), _Run("slow")
        async with anyio.create_task_group() as group:
            await group.start(recorder.run)
            with anyio.fail_after(10):
                recorder.add(quick, 0.01)
                recorder.add(slow, 3600)
                for _ in range(3):
                    await quick.recorded.wait()
            assert slow.records == 0
            group.cancel_scope.cancel()

    anyio.run(main)


def _generation(body: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    """The ASGI scope and body of a ``POST /v1/chat/completions``."""
    raw = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions", "query_string": b"", "root_path": "",
        "headers": headers, "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2),
    }  # fmt: skip
    return scope, raw


async def _serve_once(tmp_path: Path, upstream: str, receive: Any, send: Any) -> None:
    """Run one streamed generation to route ``up`` (an OpenAI wire at ``upstream``) through a
    started gateway's ASGI app with ``receive`` and ``send``; the body is the first message."""
    extra = f"  openai:up: {{base_url: '{upstream}/v1', api_key: dummy-key, routes: [up]}}"
    config = tmp_path / "plugins.yaml"
    config.write_text(gateway_yaml("", extra, db=tmp_path / "gw.sqlite"), encoding="utf-8")
    server = GatewayServer(str(config), "127.0.0.1", announce_at_start=False)
    await server.start()
    scope, raw = _generation({"model": "up/m", "messages": BODY["messages"], "stream": True})
    body = iter([{"type": "http.request", "body": raw, "more_body": False}])

    async def receiving() -> Any:
        message = next(body, None)
        return message if message is not None else await receive()

    try:
        with anyio.fail_after(30):
            await server.app(scope, receiving, send)
    finally:
        await server.stop()


def _serve_past_first_piece(tmp_path: Path, upstream: str, after: Any) -> list[dict[str, Any]]:
    """:func:`_serve_once` with an upstream that stalls after the piece ``one``: the client's
    ``receive`` waits until that piece was sent, then returns (or raises) what ``after()`` does.
    The ASGI messages the gateway sent."""
    sent: list[dict[str, Any]] = []

    async def main() -> None:
        first = anyio.Event()

        async def receive() -> dict[str, Any]:
            await first.wait()  # the stream has begun
            return await after()  # type: ignore[no-any-return]

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)
            if b"one" in message.get("body", b""):
                first.set()

        await _serve_once(tmp_path, upstream, receive, send)

    anyio.run(main)
    assert any(b"one" in message.get("body", b"") for message in sent)
    return sent


def test_a_failing_receive_is_logged_and_cancels_the_request_it_can_no_longer_watch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The upstream stalls after one piece: only the watch's cancel can end this request.
    provider = ScriptedServer(Reply(reads=openai_sse("one "), end="stall"))

    async def broken() -> dict[str, Any]:
        raise RuntimeError("the server's receive broke")

    with provider, caplog.at_level(logging.INFO, "harness_gateway"):
        _serve_past_first_piece(tmp_path, provider.url, broken)
    assert "watching the client failed; the request is cancelled" in caplog.text
    assert "the server's receive broke" in caplog.text  # the traceback is logged
    assert [row["status"] for row in ledger_rows(tmp_path / "gw.sqlite")] == ["error"]  # settled, not stranded


def test_a_failing_send_is_logged_and_stops_the_stream(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    provider = ScriptedServer(Reply(reads=openai_sse("one ", "two "), end="stall"))

    async def main() -> None:
        gone = anyio.Event()

        async def receive() -> dict[str, Any]:
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                raise OSError("the server's send broke")

        try:
            await _serve_once(tmp_path, provider.url, receive, send)  # returns: the upstream's stall does not hold it
        finally:
            gone.set()

    with provider, caplog.at_level(logging.INFO, "harness_gateway"):
        anyio.run(main)
    assert "sending the stream failed; the stream is stopped" in caplog.text
    assert "the server's send broke" in caplog.text
    assert [row["status"] for row in ledger_rows(tmp_path / "gw.sqlite")] == ["error"]


def test_a_stream_still_running_after_the_abort_grace_is_cancelled_and_settled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The client leaves; the watch fires the abort and waits ``ABORT_GRACE`` (0 here: a stream
    that has not ended by then lingers) before cancelling the request; its row is settled."""
    import harness_gateway.relay as relay_module

    monkeypatch.setattr(relay_module, "ABORT_GRACE", 0)
    provider = ScriptedServer(Reply(reads=openai_sse("one "), end="stall"))

    async def leaves() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    with provider, caplog.at_level(logging.INFO, "harness_gateway"):
        _serve_past_first_piece(tmp_path, provider.url, leaves)
    assert "client disconnected, aborting the upstream stream" in caplog.text
    assert [row["status"] for row in ledger_rows(tmp_path / "gw.sqlite")] == ["aborted"]  # settled, not stranded
