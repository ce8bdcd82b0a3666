"""Streaming hygiene: disconnects abort upstream, keep-alives, in-stream errors, headers, limits, metrics."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from gw_helpers import Clients, GatedUpstream, Process, gateway_yaml, ledger_rows, serve_gateway, wait_until

from harness_core.testing import RecordedRequest, Reply, ScriptedServer
from harness_gateway.errors import DRAINED

HI = [{"role": "user", "content": "hi there"}]


def openai_sse(*pieces: str) -> list[bytes]:
    chunks = [{"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [
        {"index": 0, "delta": {"role": "assistant", "content": piece}, "finish_reason": None}
    ]} for piece in pieces]  # fmt: skip
    return [f"data: {json.dumps(c)}\n\n".encode() for c in chunks]


def mock_yaml(tmp_path: Path, mock: str, gateway: str = "") -> str:
    return gateway_yaml(gateway, db=tmp_path / "gw.sqlite").replace("mock: {}", f"mock: {mock}")


def ledger(tmp_path: Path) -> list[dict[str, Any]]:
    return ledger_rows(tmp_path / "gw.sqlite")


def test_client_disconnect_aborts_the_upstream_stream(tmp_path: Path) -> None:
    provider = ScriptedServer(Reply(reads=openai_sse("one ", "two "), end="stall"))
    with provider:
        extra = f"  openai:up: {{base_url: '{provider.url}/v1', api_key: dummy-key, routes: [up]}}"
        with serve_gateway(tmp_path, gateway_yaml("", extra, db=tmp_path / "gw.sqlite")) as running:
            body = {"model": "up/m", "messages": HI, "stream": True}
            url = running.url + "/v1/chat/completions"
            with httpx.Client(timeout=30) as client, client.stream("POST", url, json=body) as response:
                assert response.headers["x-accel-buffering"] == "no"
                assert next(line for line in response.iter_lines() if "one" in line)
            # the client is gone: the gateway must close its provider connection at once
            assert provider.wait_idle(10), "the upstream connection leaked"
        rows = ledger(tmp_path)
    assert [row["status"] for row in rows] == ["aborted"]


def _access_lines(caplog: pytest.LogCaptureFixture, request_id: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"request {request_id} POST ")]


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_gone_before_the_headers_is_logged_aborted_not_200(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, stream: bool
) -> None:
    provider = ScriptedServer(Reply(end="stall"))  # the upstream's headers, then silence: no output yet
    body = json.dumps({"model": "up/m", "messages": HI, "stream": stream}).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n"
        f"x-request-id: gone-{stream}\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode()
    with provider, caplog.at_level(logging.INFO, "harness_gateway"):
        extra = f"  openai:up: {{base_url: '{provider.url}/v1', api_key: dummy-key, routes: [up]}}"
        settings = "    keepalive: 600"  # no keep-alive comment sends the stream's headers meanwhile
        with serve_gateway(tmp_path, gateway_yaml(settings, extra, db=tmp_path / "gw.sqlite")) as running:
            port = int(running.url.rsplit(":", 1)[1])
            with socket.create_connection(("127.0.0.1", port)) as client:
                client.sendall(head + body)
                wait_until(lambda: len(provider.requests) == 1)  # the gateway is waiting on the upstream
            wait_until(lambda: bool(_access_lines(caplog, f"gone-{stream}")))
            assert provider.wait_idle(10), "the upstream connection leaked"
        rows = ledger(tmp_path)
    [line] = _access_lines(caplog, f"gone-{stream}")
    # not "-> 200", nor the 499 (ABORTED) error response the gone client never received
    assert " -> aborted before the response (499 not sent) in " in line, line
    assert [row["status"] for row in rows] == ["aborted"]  # as the ledger (and the console) say


def test_a_stalled_upstream_ends_the_stream_at_the_gateway_read_timeout(tmp_path: Path) -> None:
    provider = ScriptedServer(Reply(reads=openai_sse("one "), end="stall"))
    with provider:
        extra = f"  openai:up: {{base_url: '{provider.url}/v1', api_key: dummy-key, routes: [up]}}"
        settings = "    upstream_read_timeout: 0.3\n    keepalive: 0.05"  # keep-alives flow meanwhile
        with serve_gateway(tmp_path, gateway_yaml(settings, extra, db=tmp_path / "gw.sqlite")) as running:
            body = {"model": "up/m", "messages": HI, "stream": True}
            deadline = time.monotonic() + 60  # the provider's own read timeout would be 600 s
            lines: list[str] = []
            url = running.url + "/v1/chat/completions"
            with httpx.Client(timeout=30) as client, client.stream("POST", url, json=body) as response:
                for line in response.iter_lines():
                    assert time.monotonic() < deadline, "the stalled upstream held the client"
                    lines.append(line)
        rows = ledger(tmp_path)
    text = "\n".join(lines)
    assert "one" in text
    assert ": keep-alive" in text
    error = json.loads(next(line for line in lines if '"error"' in line).removeprefix("data: "))
    assert error["error"]["code"] == "TIMEOUT"
    assert [row["status"] for row in rows] == ["error"]


def test_keepalive_comments_during_silence(tmp_path: Path) -> None:
    with serve_gateway(tmp_path, mock_yaml(tmp_path, "{delay: 0.2}", "    keepalive: 0.01")) as running:
        body = {"model": "mock/echo", "messages": [{"role": "user", "content": "a b"}], "stream": True}
        url = running.url + "/v1/chat/completions"
        with httpx.Client(timeout=30) as client, client.stream("POST", url, json=body) as response:
            raw = response.read().decode()
    assert ": keep-alive" in raw
    assert raw.rstrip().endswith("data: [DONE]")


def test_in_stream_errors_in_both_dialects(tmp_path: Path) -> None:
    with serve_gateway(tmp_path, mock_yaml(tmp_path, "{error: OVERLOADED, error_after: 1}")) as running:
        clients = Clients(running.url)
        try:
            stream = clients.openai().chat.completions.create(model="mock/echo", messages=HI, stream=True)  # type: ignore[arg-type]
            with pytest.raises(openai.APIError) as caught:
                for _ in stream:
                    pass
            assert "scripted mock error" in caught.value.message
            events = clients.anthropic().messages.stream(model="mock/echo", max_tokens=10, messages=HI)  # type: ignore[arg-type]
            with pytest.raises(anthropic.APIStatusError) as anth, events as opened:
                for _ in opened:
                    pass
            assert "overloaded_error" in str(anth.value.body)
        finally:
            clients.close()
    assert {row["status"] for row in ledger(tmp_path)} == {"error"}


def test_failure_before_output_is_an_http_status(tmp_path: Path) -> None:
    with serve_gateway(tmp_path, mock_yaml(tmp_path, "{error: RATE_LIMITED}")) as running:
        clients = Clients(running.url)
        try:
            with pytest.raises(openai.RateLimitError):
                clients.openai().chat.completions.create(model="mock/echo", messages=HI, stream=True)  # type: ignore[arg-type]
            with pytest.raises(anthropic.RateLimitError):
                clients.anthropic().messages.create(model="mock/echo", max_tokens=5, messages=HI)  # type: ignore[arg-type]
        finally:
            clients.close()


def test_request_id_body_limit_and_metrics(tmp_path: Path) -> None:
    yaml_text = gateway_yaml("    max_body_bytes: 2048", db=tmp_path / "gw.sqlite")
    with serve_gateway(tmp_path, yaml_text) as running, httpx.Client(base_url=running.url, timeout=30) as client:
        body = {"model": "mock/echo", "messages": HI}
        ok = client.post("/v1/chat/completions", json=body, headers={"x-request-id": "abc-1"})
        assert ok.headers["x-request-id"] == "abc-1"
        answer_id = ok.json()["id"]  # the ledger row's id, never the client's request id (it may repeat it)
        assert answer_id.startswith("chatcmpl-")
        again = client.post("/v1/chat/completions", json=body, headers={"x-request-id": "abc-1"})
        assert again.headers["x-request-id"] == "abc-1"
        assert again.json()["id"] != answer_id
        ledger = {row["id"] for row in ledger_rows(tmp_path / "gw.sqlite")}
        assert {answer_id.removeprefix("chatcmpl-"), again.json()["id"].removeprefix("chatcmpl-")} <= ledger
        odd = client.post("/v1/chat/completions", json={}, headers={"x-request-id": "bad id"})
        assert odd.status_code == 400
        assert odd.headers["x-request-id"] != "bad id"
        huge = [{"role": "user", "content": "x" * 4096}]
        big = client.post("/v1/messages", json={"model": "mock/echo", "max_tokens": 5, "messages": huge})
        assert big.status_code == 413
        assert big.json()["error"]["type"] == "request_too_large"
        metrics = client.get("/metrics").text
        labels = 'api="openai",model="echo",route="mock",status="complete"'
        assert f"harness_gateway_requests_total{{{labels}}} 2.0" in metrics  # the two with x-request-id abc-1
        assert "harness_gateway_time_to_first_token_seconds_bucket" in metrics
        assert 'harness_gateway_tokens_total{direction="output",model="echo",route="mock"} 4.0' in metrics
        assert client.get("/healthz").json()["status"] == "ok"


def sse(*events: dict[str, Any]) -> list[bytes]:
    return [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]


def test_scripted_provider_corners(tmp_path: Path) -> None:
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": "[1]"}}
    tool_stream = sse(
        {
            "id": "x",
            "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}, "finish_reason": None}],
        },
        {"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    )
    limited = Reply.json(429, {"error": {"message": "slow down", "type": "rate_limit_error"}})
    kept_alive = threading.Event()

    def slow_limited(request: RecordedRequest) -> Reply:  # answers once the client has seen a keep-alive
        assert kept_alive.wait(60), "no keep-alive reached the client"
        return Reply(status=429, headers={"content-type": "application/json"}, reads=[b"{}"])

    provider = ScriptedServer(
        routes={("GET", "/v1/models"): Reply.json(500, {"error": {"message": "boom"}})},
    )
    provider.add(Reply(reads=tool_stream), slow_limited, limited)
    with provider:
        extra = f"  openai:up: {{base_url: '{provider.url}/v1', api_key: dummy-key, routes: [up]}}"
        yaml_text = gateway_yaml("    keepalive: 0.01\n    max_body_bytes: 2048", extra, db=tmp_path / "gw.sqlite")
        with serve_gateway(tmp_path, yaml_text) as running, httpx.Client(base_url=running.url, timeout=30) as client:
            body = {"model": "up/m", "max_tokens": 10, "messages": HI}
            bad_tool = client.post("/v1/messages", json=body)
            assert bad_tool.status_code == 502
            assert "not a JSON object" in bad_tool.json()["error"]["message"]
            late_body = {"model": "up/m", "messages": HI, "stream": True}
            with client.stream("POST", "/v1/chat/completions", json=late_body) as late:
                assert late.status_code == 200  # headers went out with the first keep-alive
                text = ""
                for piece in late.iter_text():
                    text += piece
                    if ": keep-alive" in text:
                        kept_alive.set()
            assert kept_alive.is_set()
            last = text.rstrip().rsplit("\n\n", 1)[-1]
            assert json.loads(last.removeprefix("data: "))["error"]["code"] == "RATE_LIMITED"
            assert "[DONE]" not in text  # the error event ends the body: no [DONE] after it
            models = client.get("/v1/models").json()["data"]
            assert [m["id"] for m in models] == ["mock/echo", "mock/hash"]  # the failing route is left out, logged

            def chunks() -> Iterator[bytes]:  # no content-length: the limit is enforced while reading
                for _ in range(4):
                    yield b"x" * 1024

            too_big = client.post("/v1/chat/completions", content=chunks())
            assert too_big.status_code == 413


def test_a_burst_larger_than_the_send_buffer_arrives_whole_and_in_order(tmp_path: Path) -> None:
    """One upstream read holding far more events than the gateway's 64-item send buffer: the
    producer waits for room, the sender joins what is queued, and every delta arrives in order."""
    words = [f"w{i} " for i in range(300)]
    provider = ScriptedServer(Reply(reads=[b"".join(openai_sse(*words)) + b"data: [DONE]\n\n"]))
    with provider:
        extra = f"  openai:up: {{base_url: '{provider.url}/v1', api_key: dummy-key, routes: [up]}}"
        with serve_gateway(tmp_path, gateway_yaml("", extra, db=tmp_path / "gw.sqlite")) as running:
            body = {"model": "up/m", "messages": HI, "stream": True}
            with httpx.Client(timeout=30) as client:
                lines = client.post(running.url + "/v1/chat/completions", json=body).text.splitlines()
    pieces = [
        choice["delta"].get("content") or ""
        for line in lines
        if line.startswith("data: {")
        for choice in json.loads(line[6:])["choices"]
    ]
    assert "".join(pieces) == "".join(words)
    assert lines[-1] == "data: [DONE]" or lines[-2] == "data: [DONE]"


@pytest.mark.parametrize("endpoint", ["/v1/chat/completions", "/v1/messages", "/v1/responses"])
def test_each_upstream_event_reaches_the_client_before_the_next_is_sent(tmp_path: Path, endpoint: str) -> None:
    """A slow upstream sends one event at a time and the next only once the client has the one
    before (the gate): the gateway must pass every event on at once, not hold it for a later one,
    a batch or a keep-alive (15 s here, longer than the gate's bound). A regression relayed the
    first token at once and then every 64 events or 15 s."""
    pieces = [f"p{number} " for number in range(6)]
    with GatedUpstream(pieces) as upstream:
        extra = f"  openai:up: {{base_url: '{upstream.url}/v1', api_key: dummy-key, routes: [up]}}"
        with serve_gateway(tmp_path, gateway_yaml("", extra, db=tmp_path / "gw.sqlite")) as running:
            body: dict[str, Any] = {"model": "up/m", "stream": True}
            if endpoint == "/v1/responses":
                body["input"] = "hi there"
            else:
                body["messages"] = HI
            if endpoint == "/v1/messages":
                body["max_tokens"] = 100
            seen: list[str] = []
            with httpx.Client(timeout=30) as client, client.stream("POST", running.url + endpoint, json=body) as reply:
                assert reply.status_code == 200
                for line in reply.iter_lines():
                    for number, piece in enumerate(pieces):
                        if piece.strip() in line and piece not in seen:
                            seen.append(piece)
                            if number + 1 < len(pieces):
                                upstream.release(number + 1)  # the client has it: the next may go
    assert seen == pieces
    assert upstream.held == []  # no event had to wait for the client to see one sent earlier


def test_a_stream_past_the_drain_timeout_is_aborted_and_charged_what_it_streamed(tmp_path: Path) -> None:
    """SIGTERM while a stream runs past ``drain_timeout``: the gateway aborts it (the client gets
    its dialect's in-stream error saying so, code ``ABORTED``, as the last event: no finish, no
    ``[DONE]``, not a cut body: the end of a partial answer must not look like a complete one;
    the SDKs' view is in test_gw_aborted_end.py), and its ledger row is charged the
    usage it streamed (estimated: an aborted upstream stream reports none), never nothing (it was
    cut, charged 0 and recorded without tokens)."""
    pieces = ["x" * 400, "never sent"]
    with GatedUpstream(pieces) as upstream:  # the first event goes, the second is held to the end
        config = tmp_path / "plugins.yaml"
        extra = f"  openai:up: {{base_url: '{upstream.url}/v1', api_key: dummy-key, routes: [up]}}"
        gateway = "    drain_timeout: 0.5\n    prices: {up/m: {input: 1000000, output: 1000000}}"  # 1 USD a token
        config.write_text(gateway_yaml(gateway, extra, db=tmp_path / "gw.sqlite"))
        process = Process(config)
        body = {"model": "up/m", "messages": HI, "stream": True}
        url = process.url + "/v1/chat/completions"
        with httpx.Client(timeout=60) as client, client.stream("POST", url, json=body) as reply:
            lines = reply.iter_lines()
            assert any("x" * 300 in line for line in lines)  # streaming (the masker may hold a tail back)
            process.stop()  # SIGTERM: the stream outlives the drain timeout
            rest = [line for line in lines if line]
    error = {"message": DRAINED, "type": "server_error", "param": None, "code": "ABORTED"}
    assert json.loads(rest[-1].removeprefix("data: ")) == {"error": error}
    assert not any('"finish_reason":"' in line or "[DONE]" in line for line in rest)
    assert process.logged(r"aborting 1 generation\(s\) still running after the drain timeout")
    (row,) = ledger(tmp_path)
    assert row["status"] == "aborted"
    assert row["output_tokens"] == 100  # the 400 characters streamed, at 4 per token
    assert row["input_tokens"] is not None
    assert row["input_tokens"] > 0
    assert row["cost"] == pytest.approx(row["input_tokens"] + 100)
