"""Adapter tests against a scripted local HTTP server (never a mocked httpx or harness)."""

from __future__ import annotations

import json

import anyio
import pytest
from openai_fixtures import chunk, sse, tool, translate
from openai_harness import adapter_for, check, options, run, run_checked, run_error

from harness_core.abort import AbortSignal
from harness_core.errors import LlmError
from harness_core.secret import Secret
from harness_core.testing.server import Reply, ScriptedServer
from harness_core.testing.splits import every_split, split_at
from harness_core.types import (
    BlockEnd,
    Finish,
    Message,
    ModelInfo,
    ReasoningBlock,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    Usage,
)
from harness_llm_openai import Config, ModelConfig, OpenAIAdapter, OpenAIPlugin
from harness_llm_openai.config import Timeout

pytestmark = pytest.mark.anyio

UNICODE_TEXT = sse(
    chunk({"role": "assistant", "content": ""}),
    chunk({"reasoning_content": "pensé €5 "}),
    chunk({"reasoning_content": "😀"}),
    chunk({"content": "Café: 5€ 😀 "}),
    chunk({"content": "你好世界"}),
    chunk({}, finish="stop"),
    chunk(choices=[], usage={"prompt_tokens": 9, "completion_tokens": 7}),
)
TOOL_FRAGMENTS = sse(
    chunk({"content": None, "tool_calls": [tool(0, id="call_1", name="read_file", args="")]}),
    chunk({"tool_calls": [tool(0, args='{"path":')]}),
    chunk({"tool_calls": [tool(0, args='"Ré😀.md"}')]}),
    chunk({"tool_calls": [tool(1, id="call_2", name="ls", args="{}")]}),
    chunk({}, finish="tool_calls"),
)
TOOL_WHOLE_NO_INDEX = sse(
    chunk({"tool_calls": [tool(None, id="a", name="w", args='{"c":"東京"}')]}),
    chunk({"tool_calls": [tool(None, id="b", name="t", args='{"tz":"€"}')]}),
    chunk({}, finish="stop", usage={"prompt_tokens": 4, "completion_tokens": 2}),
)
FIXTURES = {"unicode": UNICODE_TEXT, "fragments": TOOL_FRAGMENTS, "whole": TOOL_WHOLE_NO_INDEX}


# ---------------------------------------------------------------------- happy paths


async def test_text_and_reasoning_with_unicode() -> None:
    with ScriptedServer(Reply(reads=[UNICODE_TEXT])) as server:
        adapter = adapter_for(server, api_key=Secret("sk-test"), organization="org-1", headers={"x-extra": "1"})
        try:
            out = await run_checked(adapter)
        finally:
            await adapter.aclose()
        request = server.requests[0]
    assert [c.block for c in out if isinstance(c, BlockEnd)] == [
        ReasoningBlock("pensé €5 😀"),
        TextBlock("Café: 5€ 😀 你好世界"),
    ]
    assert out[-2] == Usage(TokenUsage(9, 7))
    assert isinstance(out[-1], Finish)
    assert out[-1] == Finish(out[-1].reason)
    assert out[-1].reason.kind == "stop"
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["openai-organization"] == "org-1"
    assert request.headers["x-extra"] == "1"
    assert request.headers["content-type"] == "application/json"
    assert request.json()["stream"] is True


@pytest.mark.parametrize("name", sorted(FIXTURES))
async def test_tool_fixtures_through_server(name: str) -> None:
    with ScriptedServer(Reply(reads=[FIXTURES[name]])) as server:
        adapter = adapter_for(server)
        try:
            out = await run_checked(adapter)
        finally:
            await adapter.aclose()
    assert out == check(translate(FIXTURES[name], id_factory=lambda: "unused"))


async def test_tool_calls_round_trip_byte_exact() -> None:
    """Arguments streamed by the server reappear byte-exact in the next request body."""
    with ScriptedServer(
        Reply(reads=[TOOL_FRAGMENTS]), Reply(reads=[sse(chunk({"content": "ok"}), chunk({}, finish="stop"))])
    ) as server:
        adapter = adapter_for(server)
        try:
            out = await run_checked(adapter)
            calls = [c.block for c in out if isinstance(c, BlockEnd) and isinstance(c.block, ToolCallBlock)]
            assert calls == [
                ToolCallBlock("call_1", "read_file", '{"path":"Ré😀.md"}'),
                ToolCallBlock("call_2", "ls", "{}"),
            ]
            history = [
                Message.user("read it"),
                Message(role="assistant", content=list(calls)),
                Message(role="tool", content=[]),
            ]
            await run_checked(adapter, options(messages=history))
        finally:
            await adapter.aclose()
        sent = server.requests[1]
    raw_calls = sent.json()["messages"][1]["tool_calls"]
    assert [c["function"]["arguments"] for c in raw_calls] == ['{"path":"Ré😀.md"}', "{}"]
    assert '"arguments":"{\\"path\\":\\"Ré😀.md\\"}"'.encode() in sent.body


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_every_split_of_each_fixture_translates_identically(name: str) -> None:
    body = FIXTURES[name]
    expected = check(translate(body))
    for reads in every_split(body):
        assert translate(body, list(reads)) == expected


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_byte_splits_through_the_server_inside_utf8() -> None:
    """Cuts through HTTP chunked reads at every offset of the multi-byte characters."""
    body = UNICODE_TEXT
    expected = check(translate(body))
    offsets = [i for i in range(1, len(body)) if body[i] & 0xC0 == 0x80 or body[i - 1] in b"\n:"]
    replies = [Reply(reads=split_at(body, [offset])) for offset in offsets] + [
        Reply(reads=split_at(body, range(len(body))))
    ]
    with ScriptedServer(*replies) as server:
        adapter = adapter_for(server)
        try:
            for _ in replies:
                assert await run(adapter) == expected
        finally:
            await adapter.aclose()


# ---------------------------------------------------------------------- HTTP errors

STATUS_CODES = {
    400: "BAD_REQUEST",
    401: "AUTH",
    402: "QUOTA",
    403: "PERMISSION",
    404: "NOT_FOUND",
    408: "TIMEOUT",
    409: "SERVER",
    413: "CONTEXT_LENGTH",
    422: "BAD_REQUEST",
    429: "RATE_LIMITED",
    500: "SERVER",
    502: "SERVER",
    503: "OVERLOADED",
    504: "SERVER",
    529: "OVERLOADED",
}


def _error_reply(status: int, kind: str) -> Reply:
    if kind == "json":
        body = {"error": {"message": f"failure {status}", "type": "some_type", "code": None}}
        return Reply.json(status, body, headers={"x-request-id": "req-42", "retry-after": "3"})
    if kind == "html":
        page = f"<html><head><title>{status} Bad Gateway é</title></head><body>nginx</body></html>"
        return Reply(status=status, headers={"content-type": "text/html"}, reads=[page.encode()], chunked=False)
    return Reply(status=status, headers={"content-type": "application/json"}, reads=[], chunked=False)


@pytest.mark.parametrize("kind", ["json", "html", "empty"])
async def test_every_error_status(kind: str) -> None:
    replies = [_error_reply(status, kind) for status in STATUS_CODES]
    with ScriptedServer(*replies) as server:
        adapter = adapter_for(server)
        try:
            for status, code in STATUS_CODES.items():
                got, error = await run_error(adapter)
                assert got == []
                assert (error.code, error.status) == (code, status)
                assert error.provider == "openai"
                if kind == "json":
                    assert error.message == f"failure {status}"
                    assert error.retry_after == 3
                    assert error.request_id == "req-42"
                    assert error.provider_type == "some_type"
                elif kind == "html":
                    assert "Bad Gateway" in error.message
                    assert "<" not in error.message
        finally:
            await adapter.aclose()


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (429, {"error": {"message": "quota", "type": "insufficient_quota", "code": "insufficient_quota"}}, "QUOTA"),
        (
            400,
            {"error": {"message": "too long", "type": "invalid_request_error", "code": "context_length_exceeded"}},
            "CONTEXT_LENGTH",
        ),
        (
            400,
            {"error": {"code": 400, "message": "the request exceeds the available context size", "type": "x"}},
            "CONTEXT_LENGTH",
        ),
        (429, [{"error": {"message": "slow down", "type": "rate_limit_exceeded"}}], "RATE_LIMITED"),
    ],
)
async def test_error_body_classification(status: int, body: object, code: str) -> None:
    with ScriptedServer(Reply.json(status, body, headers={"retry-after-ms": "1500"})) as server:
        adapter = adapter_for(server)
        try:
            _, error = await run_error(adapter)
        finally:
            await adapter.aclose()
    assert error.code == code
    assert error.retry_after == 1.5


async def test_non_sse_success_is_protocol() -> None:
    with ScriptedServer(Reply.json(200, {"choices": [{"message": {"content": "hi"}}]})) as server:
        adapter = adapter_for(server)
        try:
            _, error = await run_error(adapter)
        finally:
            await adapter.aclose()
    assert error.code == "PROTOCOL"
    assert "application/json" in error.message


# ---------------------------------------------------------------------- broken streams


async def test_malformed_json_line_is_protocol_and_closes() -> None:
    body = sse(chunk({"content": "x"}), "{oops", chunk({}, finish="stop"))
    with ScriptedServer(Reply(reads=[body])) as server:
        adapter = adapter_for(server)
        try:
            got, error = await run_error(adapter)
        finally:
            await adapter.aclose()
        assert server.wait_idle()
    assert error.code == "PROTOCOL"
    assert "{oops" in error.message
    assert [type(c).__name__ for c in got] == ["BlockStart", "TextDelta"]


@pytest.mark.parametrize("end", ["abrupt", "reset", "eof"])
async def test_early_close_is_network(end: str) -> None:
    body = sse(chunk({"content": "partial"}), done=False)
    with ScriptedServer(Reply(reads=[body], end=end)) as server:  # type: ignore[arg-type]
        adapter = adapter_for(server)
        try:
            got, error = await run_error(adapter)
        finally:
            await adapter.aclose()
    assert error.code == "NETWORK"
    assert error.retryable
    assert TextDelta(0, "partial") in got


async def test_empty_stream_is_network() -> None:
    with ScriptedServer(Reply(reads=[b": keep-alive\n\n"])) as server:
        adapter = adapter_for(server)
        try:
            _, error = await run_error(adapter)
        finally:
            await adapter.aclose()
    assert error.code == "NETWORK"


async def test_inband_error_finishes_with_error() -> None:
    body = sse(chunk({"content": "a"}), {"error": {"message": "overloaded", "type": "server_error"}}, done=False)
    with ScriptedServer(Reply(reads=[body], headers={"x-request-id": "rq"})) as server:
        adapter = adapter_for(server)
        try:
            out = await run_checked(adapter)
        finally:
            await adapter.aclose()
    assert isinstance(out[-1], Finish)
    reason = out[-1].reason
    assert reason.kind == "error"
    assert reason.failure is not None
    assert reason.failure.code == "SERVER"
    assert reason.failure.request_id == "rq"


async def test_read_timeout_is_timeout() -> None:
    with ScriptedServer(Reply(reads=[sse(chunk({"content": "a"}), done=False)], end="stall")) as server:
        adapter = adapter_for(server, timeout=Timeout(connect=5, read=0.2))
        try:
            _, error = await run_error(adapter)
        finally:
            await adapter.aclose()
    assert error.code == "TIMEOUT"


async def test_connect_failure_is_network() -> None:
    with ScriptedServer() as server:
        url = server.url
    adapter = OpenAIAdapter(Config(base_url=url + "/v1"))
    try:
        _, error = await run_error(adapter)
    finally:
        await adapter.aclose()
    assert error.code == "NETWORK"


# ---------------------------------------------------------------------- abort and cancellation


async def test_abort_while_stalled() -> None:
    abort = AbortSignal()
    with ScriptedServer(Reply(reads=[sse(chunk({"content": "part"}), done=False)], end="stall")) as server:
        adapter = adapter_for(server)
        got: list[StreamChunk] = []
        try:
            async for item in adapter.stream(options(abort=abort)):
                got.append(item)
                if isinstance(item, TextDelta):
                    abort.fire("user pressed stop")
            assert _pool_busy(adapter) == 0
        finally:
            await adapter.aclose()
        assert server.wait_idle()
    check(got)
    assert got[-2] == BlockEnd(0, TextBlock("part"))
    assert isinstance(got[-1], Finish)
    reason = got[-1].reason
    assert reason.failure is not None
    assert (reason.kind, reason.failure.code, reason.failure.message) == ("aborted", "ABORTED", "user pressed stop")


async def test_abort_before_request_sends_nothing() -> None:
    abort = AbortSignal()
    abort.fire()
    with ScriptedServer() as server:
        adapter = adapter_for(server)
        try:
            out = await run_checked(adapter, options(abort=abort))
        finally:
            await adapter.aclose()
        assert server.requests == []
    assert len(out) == 1
    assert out[0].reason.kind == "aborted"  # type: ignore[union-attr]


async def test_abort_while_waiting_for_headers() -> None:
    abort = AbortSignal()
    # the head never comes (the server's stop ends the wait): only the abort can end the stream
    with ScriptedServer(Reply(head_delay=300, reads=[b"data: [DONE]\n\n"])) as server:
        adapter = adapter_for(server)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_fire_later, abort)
                out = await run_checked(adapter, options(abort=abort))
        finally:
            await adapter.aclose()
    assert out[-1].reason.kind == "aborted"  # type: ignore[union-attr]


async def _fire_later(abort: AbortSignal) -> None:
    await anyio.sleep(0.05)
    abort.fire()


async def test_cancellation_closes_response_and_returns_connection() -> None:
    with ScriptedServer(Reply(reads=[sse(chunk({"content": "part"}), done=False)], end="stall")) as server:
        adapter = adapter_for(server)
        try:
            with anyio.move_on_after(0.3):
                async for _ in adapter.stream(options()):
                    pass
            assert _pool_busy(adapter) == 0
        finally:
            await adapter.aclose()
        assert server.wait_idle()


async def test_consumer_break_closes_response() -> None:
    body = sse(chunk({"content": "a"}), chunk({"content": "b"}), chunk({}, finish="stop"))
    with ScriptedServer(Reply(reads=[body]), Reply(reads=[body])) as server:
        adapter = adapter_for(server)
        try:
            stream = adapter.stream(options())
            async for _ in stream:
                break
            await stream.aclose()  # type: ignore[attr-defined]
            assert _pool_busy(adapter) == 0
            assert len(await run_checked(adapter)) == 5
        finally:
            await adapter.aclose()


def _pool_busy(adapter: OpenAIAdapter) -> int:
    """Requests still holding a connection of the adapter's pool."""
    assert adapter._client is not None
    pool = adapter._client._transport._pool  # type: ignore[attr-defined]
    return len(pool._requests)


# ---------------------------------------------------------------------- options, models, plugin


async def test_unsupported_option_raises_before_io() -> None:
    with ScriptedServer() as server:
        adapter = adapter_for(server)
        try:
            _, error = await run_error(adapter, options(provider_options={"openai": {"logprobs": True}}))
            _, missing = await run_error(adapter, options(model=None))
        finally:
            await adapter.aclose()
        assert server.requests == []
    assert error.code == "UNSUPPORTED"
    assert missing.code == "BAD_REQUEST"


async def test_max_tokens_field_by_host() -> None:
    with ScriptedServer(Reply(reads=[sse(chunk({}, finish="stop"))])) as server:
        adapter = adapter_for(server, include_usage=False)
        try:
            await run_checked(adapter, options(max_tokens=3))
        finally:
            await adapter.aclose()
        body = server.requests[0].json()
    assert body["max_tokens"] == 3
    assert "stream_options" not in body
    default = OpenAIAdapter(Config())
    explicit = OpenAIAdapter(Config(base_url="http://x/v1", max_tokens_field="max_completion_tokens"))
    try:
        assert default.serializer.max_tokens_field == "max_completion_tokens"
        assert explicit.serializer.max_tokens_field == "max_completion_tokens"
    finally:
        await default.aclose()
        await explicit.aclose()


async def test_resolve_and_list_models() -> None:
    models = {"data": [{"id": "gpt-a", "object": "model"}, {"id": "gpt-b"}]}
    routes = {("GET", "/v1/models"): Reply.json(200, models)}
    with ScriptedServer(routes=routes) as server:
        config = {
            "models": {
                "gpt-a": ModelConfig(
                    context_window=1000, max_output_tokens=100, reasoning_efforts=["low"], default_effort="low"
                )
            }
        }
        adapter = adapter_for(server, **config)
        try:
            listed = await adapter.list_models()
        finally:
            await adapter.aclose()
    assert listed == [
        ModelInfo(
            model="gpt-a", context_window=1000, max_output_tokens=100, reasoning_efforts=["low"], default_effort="low"
        ),
        ModelInfo(model="gpt-b"),
    ]


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (Reply.json(401, {"error": {"message": "bad key"}}), "AUTH"),
        (Reply.json(200, {"object": "list"}), "PROTOCOL"),
        (Reply(status=200, headers={"content-type": "application/json"}, reads=[b"<html>"], chunked=False), "PROTOCOL"),
    ],
)
async def test_list_models_errors(reply: Reply, code: str) -> None:
    with ScriptedServer(routes={("GET", "/v1/models"): reply}) as server:
        adapter = adapter_for(server)
        try:
            with pytest.raises(LlmError) as info:
                await adapter.list_models()
        finally:
            await adapter.aclose()
    assert info.value.code == code


async def test_list_models_network_error() -> None:
    with ScriptedServer() as server:
        url = server.url
    adapter = OpenAIAdapter(Config(base_url=url))
    try:
        with pytest.raises(LlmError) as info:
            await adapter.list_models()
    finally:
        await adapter.aclose()
    assert info.value.code == "NETWORK"


async def test_plugin_registers_adapter() -> None:
    plugin = OpenAIPlugin(Config(routes=["a", "b"]))
    registered: list[tuple[list[str], object]] = []

    def register(routes: list[str], adapter: object) -> object:
        registered.append((list(routes), adapter))
        return lambda: None

    plugin.register_adapter(register)  # type: ignore[arg-type]
    assert registered[0][0] == ["a", "b"]
    adapter = registered[0][1]
    assert isinstance(adapter, OpenAIAdapter)
    await adapter.aclose()
    assert "routes=['a', 'b']" in repr(plugin)
    assert OpenAIPlugin().config == Config()
    assert "sk-" not in repr(Config(api_key=Secret("sk-secret")))


def test_request_body_is_compact_json() -> None:
    body = json.loads(json.dumps({"ok": True}))
    assert body == {"ok": True}
