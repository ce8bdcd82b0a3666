"""DeepSeek adapter tests against a scripted local HTTP server."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from harness_core.abort import AbortSignal
from harness_core.assembler import BlockAssembler
from harness_core.errors import LlmError
from harness_core.loader import load_config
from harness_core.secret import Secret
from harness_core.sse import SSEDecoder
from harness_core.testing.check import check_stream
from harness_core.testing.server import Reply, ScriptedServer
from harness_core.testing.splits import every_split, split_at
from harness_core.types import (
    BlockEnd,
    FileBlock,
    Finish,
    GenerateOptions,
    JsonObjectFormat,
    JsonSchemaFormat,
    Message,
    ModelInfo,
    ReasoningBlock,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
)
from harness_llm_deepseek import DeepSeekAdapter, DeepSeekConfig, DeepSeekModelConfig, DeepSeekPlugin
from harness_llm_deepseek.translate import DeepSeekTranslator

pytestmark = pytest.mark.anyio

CASES = Path(__file__).resolve().parents[4] / "shared" / "cases"
CASE_15 = CASES / "15-deepseek-reasoning-content"


def data(delta: dict[str, Any] | None = None, *, finish: str | None = None, **extra: Any) -> str:
    body: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "model": "deepseek-chat"}
    body["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    body.update(extra)
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


def body(*events: str, done: bool = True) -> bytes:
    return ("".join(events) + ("data: [DONE]\n\n" if done else "")).encode()


TOOL_TURN = body(
    ": keep-alive\n\n",
    data({"role": "assistant", "content": None, "reasoning_content": ""}),
    data({"reasoning_content": "Need the wéather 😀; "}),
    data({"reasoning_content": "call the tool."}),
    data({"tool_calls": [{"index": 0, "id": "call_0", "type": "function", "function": {"name": "get_weather"}}]}),
    data({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
    data({"tool_calls": [{"index": 0, "function": {"arguments": '"東京"}'}}]}),
    data(
        {},
        finish="tool_calls",
        usage={
            "prompt_tokens": 30,
            "completion_tokens": 12,
            "prompt_cache_hit_tokens": 20,
            "prompt_cache_miss_tokens": 10,
            "completion_tokens_details": {"reasoning_tokens": 8},
        },
    ),
)
ANSWER = body(data({"content": "Sunny, 25°C."}), data({}, finish="stop"))


def adapter_for(server: ScriptedServer, **config: Any) -> DeepSeekAdapter:
    return DeepSeekAdapter(DeepSeekConfig(base_url=server.url, **config))


def options(**kwargs: Any) -> GenerateOptions:
    kwargs.setdefault("model", "deepseek-chat")
    kwargs.setdefault("messages", [Message.user("weather in Tokyo?")])
    return GenerateOptions(**kwargs)


async def run(adapter: DeepSeekAdapter, opts: GenerateOptions | None = None) -> list[StreamChunk]:
    return check_stream([c async for c in adapter.stream(opts or options())])


def translate(raw: bytes, reads: list[bytes] | None = None) -> list[StreamChunk]:
    decoder = SSEDecoder()
    translator = DeepSeekTranslator()
    out: list[StreamChunk] = []
    for piece in reads if reads is not None else [raw]:
        for event in decoder.feed(piece):
            out.extend(translator.feed(event))
    final = decoder.close()
    if final is not None:
        out.extend(translator.feed(final))
    out.extend(translator.end_of_input())
    return out


# ---------------------------------------------------------------------- the shared case


async def test_case_15_reasoning_content() -> None:
    meta = json.loads((CASE_15 / "meta.json").read_text())
    expect = meta["expect"]
    raw = (CASE_15 / meta["body_file"]).read_bytes()
    with ScriptedServer(Reply(reads=[raw], headers=meta["headers"])) as server:
        adapter = adapter_for(server)
        try:
            out = await run(adapter, options(model="deepseek-reasoner"))
        finally:
            await adapter.aclose()
    kinds = [type(c).__name__ for c in out]
    assert kinds[0] == "BlockStart"
    assert kinds[-2:] == ["Usage", "Finish"]
    blocks = [c.block for c in out if isinstance(c, BlockEnd)]
    assert blocks == [ReasoningBlock(expect["reasoning"]), TextBlock(expect["text"])]
    usage = out[-2]
    assert isinstance(usage, Usage)
    for key, value in expect["usage"].items():
        assert getattr(usage.usage, key) == value
    assert usage.usage.cache_read_tokens == 0
    finish = out[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.kind == expect["finish_reason"]


# ---------------------------------------------------------------------- two-turn tool conversation


async def test_two_turn_tool_call_sends_reasoning_back() -> None:
    with ScriptedServer(Reply(reads=[TOOL_TURN]), Reply(reads=[ANSWER])) as server:
        adapter = adapter_for(server, api_key=Secret("sk-ds"))
        try:
            first = await run(adapter)
            assembler = BlockAssembler()
            for chunk in first:
                assembler.feed(chunk)
            assistant = assembler.message(route="deepseek", source="deepseek")
            call = assistant.tool_calls[0]
            assert call == ToolCallBlock("call_0", "get_weather", '{"city": "東京"}')
            assert first[-2] == Usage(TokenUsage(30, 12, cache_read_tokens=20, reasoning_tokens=8))
            history = [
                Message.user("weather in Tokyo?"),
                assistant,
                Message(role="tool", content=[ToolResultBlock(call.id, "sunny")]),
            ]
            second = await run(adapter, options(messages=history))
        finally:
            await adapter.aclose()
        requests = server.requests
    assert [c.block for c in second if isinstance(c, BlockEnd)] == [TextBlock("Sunny, 25°C.")]
    assert requests[0].headers["authorization"] == "Bearer sk-ds"
    assert requests[1].path == "/chat/completions"
    sent = requests[1].json()["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": None,
        "reasoning_content": "Need the wéather 😀; call the tool.",
        "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "東京"}'}}
        ],
    }
    assert sent[2] == {"role": "tool", "tool_call_id": "call_0", "content": "sunny"}
    assert '"arguments":"{\\"city\\": \\"東京\\"}"'.encode() in requests[1].body


async def test_reasoning_not_sent_back_when_policy_says_no() -> None:
    assistant = Message(
        role="assistant",
        content=[ReasoningBlock("think"), ToolCallBlock("c", "f", "{}")],
    )
    plain = Message(role="assistant", content=[ReasoningBlock("think"), TextBlock("hi")])
    history = [Message.user("q"), plain, assistant, Message(role="tool", content=[ToolResultBlock("c", "r")])]
    models = {"deepseek-reasoner": DeepSeekModelConfig(replay_reasoning=False)}
    replies = [Reply(reads=[ANSWER]) for _ in range(3)]
    with ScriptedServer(*replies) as server:
        adapter = adapter_for(server, models=models)
        off = adapter_for(server, replay_reasoning=False, models={"m": DeepSeekModelConfig(replay_reasoning=True)})
        try:
            await run(adapter, options(model="deepseek-reasoner", messages=history))
            await run(adapter, options(model="deepseek-chat", messages=history))
            await run(off, options(model="m", messages=history))
        finally:
            await adapter.aclose()
            await off.aclose()
        bodies = [r.json()["messages"] for r in server.requests]
    assert "reasoning_content" not in bodies[0][2]
    assert bodies[1][2]["reasoning_content"] == "think"
    assert "reasoning_content" not in bodies[1][1]  # no tool calls on that turn: not needed
    assert bodies[2][2]["reasoning_content"] == "think"


# ---------------------------------------------------------------------- thinking mode


@pytest.mark.parametrize(
    ("config", "model", "effort", "expected"),
    [
        ({}, "deepseek-chat", None, None),
        ({"thinking": "on"}, "deepseek-chat", None, {"type": "enabled"}),
        ({"thinking": "on", "models": {"x": DeepSeekModelConfig(thinking="off")}}, "x", None, {"type": "disabled"}),
        ({"models": {"x": DeepSeekModelConfig(reasoning_efforts=["off", "on"])}}, "x", "on", {"type": "enabled"}),
        ({"models": {"x": DeepSeekModelConfig(reasoning_efforts=["off", "on"])}}, "x", "off", {"type": "disabled"}),
    ],
)
async def test_thinking_field(config: dict[str, Any], model: str, effort: str | None, expected: object) -> None:
    with ScriptedServer(Reply(reads=[ANSWER])) as server:
        adapter = adapter_for(server, **config)
        try:
            await run(adapter, options(model=model, reasoning_effort=effort))
        finally:
            await adapter.aclose()
        sent = server.requests[0].json()
    assert sent.get("thinking") == expected
    assert "reasoning_effort" not in sent


async def test_unlisted_effort_is_unsupported_and_resolve_model() -> None:
    models = {"deepseek-chat": DeepSeekModelConfig(reasoning_efforts=["off", "on"], context_window=128000)}
    with ScriptedServer() as server:
        adapter = adapter_for(server, models=models)
        try:
            assert adapter.resolve_model("deepseek-chat") == ModelInfo(
                model="deepseek-chat", context_window=128000, reasoning_efforts=["off", "on"]
            )
            assert adapter.resolve_model("deepseek-reasoner") == ModelInfo(model="deepseek-reasoner")
            with pytest.raises(LlmError) as info:
                await run(adapter, options(reasoning_effort="high"))
        finally:
            await adapter.aclose()
        assert server.requests == []
    assert info.value.code == "UNSUPPORTED"
    assert info.value.provider == "deepseek"


async def test_max_tokens_and_provider_options_keyed_by_deepseek() -> None:
    with ScriptedServer(Reply(reads=[ANSWER])) as server:
        adapter = adapter_for(server, include_usage=False)
        try:
            await run(adapter, options(max_tokens=9, provider_options={"deepseek": {"frequency_penalty": 0.5}}))
        finally:
            await adapter.aclose()
        sent = server.requests[0].json()
    assert sent["max_tokens"] == 9
    assert sent["frequency_penalty"] == 0.5
    assert "stream_options" not in sent


async def test_files_and_schemas_are_unsupported_json_mode_is_sent() -> None:
    photo = FileBlock("image/png", data=b"\x89PNG", filename="a.png")
    schema = JsonSchemaFormat("person", {"type": "object"})
    with ScriptedServer(Reply(reads=[ANSWER])) as server:
        adapter = adapter_for(server)
        try:
            with pytest.raises(
                LlmError, match=r"cannot take the file image/png 'a.png' \(4 bytes\): .*text only"
            ) as file:
                await run(adapter, options(messages=[Message.user("look", photo)]))
            with pytest.raises(LlmError, match=r"JSON schema \('person'\) is not supported by DeepSeek") as fmt:
                await run(adapter, options(response_format=schema))
            assert fmt.value.field == "response_format"
            assert server.requests == []  # rejected before any I/O
            await run(adapter, options(response_format=JsonObjectFormat()))
        finally:
            await adapter.aclose()
        sent = server.requests[0].json()
    assert (file.value.code, fmt.value.code) == ("UNSUPPORTED", "UNSUPPORTED")
    assert sent["response_format"] == {"type": "json_object"}


# ---------------------------------------------------------------------- errors


async def test_insufficient_system_resource_is_inband_overloaded() -> None:
    raw = body(data({"content": "par"}), data({}, finish="insufficient_system_resource"))
    with ScriptedServer(Reply(reads=[raw])) as server:
        adapter = adapter_for(server)
        try:
            out = await run(adapter)
        finally:
            await adapter.aclose()
    assert out[-2] == BlockEnd(0, TextBlock("par"))
    finish = out[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.kind == "error"
    assert finish.reason.raw == "insufficient_system_resource"
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == "OVERLOADED"
    assert finish.reason.failure.retryable
    assert finish.reason.failure.provider == "deepseek"


@pytest.mark.parametrize(
    ("status", "code"), [(402, "QUOTA"), (400, "BAD_REQUEST"), (422, "BAD_REQUEST"), (503, "OVERLOADED")]
)
async def test_http_errors(status: int, code: str) -> None:
    error_body = {
        "error": {"message": "Insufficient Balance", "type": "unknown_error", "code": "invalid_request_error"}
    }
    with ScriptedServer(Reply.json(status, error_body)) as server:
        adapter = adapter_for(server)
        try:
            with pytest.raises(LlmError) as info:
                await run(adapter)
        finally:
            await adapter.aclose()
    assert info.value.code == code
    assert info.value.provider == "deepseek"


async def test_only_keepalives_then_close_is_network() -> None:
    with ScriptedServer(Reply(reads=[b": keep-alive\n\n", b": keep-alive\n\n"])) as server:
        adapter = adapter_for(server)
        try:
            with pytest.raises(LlmError) as info:
                await run(adapter)
        finally:
            await adapter.aclose()
    assert info.value.code == "NETWORK"


# ---------------------------------------------------------------------- framing, abort


def test_every_byte_split() -> None:
    expected = check_stream(translate(TOOL_TURN))
    for reads in every_split(TOOL_TURN):
        assert translate(TOOL_TURN, list(reads)) == expected


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_byte_splits_through_server() -> None:
    expected = check_stream(translate(TOOL_TURN))
    offsets = [i for i in range(1, len(TOOL_TURN)) if TOOL_TURN[i] & 0xC0 == 0x80]
    with ScriptedServer(*[Reply(reads=split_at(TOOL_TURN, [o])) for o in offsets]) as server:
        adapter = adapter_for(server)
        try:
            for _ in offsets:
                assert await run(adapter) == expected
        finally:
            await adapter.aclose()


async def test_abort_while_stalled() -> None:
    abort = AbortSignal()
    stalled = body(data({"reasoning_content": "thinking"}), done=False)
    with ScriptedServer(Reply(reads=[stalled], end="stall")) as server:
        adapter = adapter_for(server)
        got: list[StreamChunk] = []
        try:
            with anyio.fail_after(10):
                async for chunk in adapter.stream(options(abort=abort)):
                    got.append(chunk)
                    if len(got) == 2:
                        abort.fire("stop")
        finally:
            await adapter.aclose()
        assert server.wait_idle()
    check_stream(got)
    assert got[-2] == BlockEnd(0, ReasoningBlock("thinking"))
    finish = got[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.kind == "aborted"


# ---------------------------------------------------------------------- plugin and config


def test_env_fallback_only_for_deepseek_host(tmp_path: Path) -> None:
    path = tmp_path / "plugins.yaml"
    path.write_text(
        "plugins:\n  deepseek: {}\n  deepseek:local:\n    base_url: http://127.0.0.1:9\n    routes: [local]\n"
    )
    loaded = load_config(path, environ={"DEEPSEEK_API_KEY": "sk-env"})
    assert not loaded.failures
    default, local = (p.instance for p in loaded.plugins)
    assert isinstance(default, DeepSeekPlugin)
    assert isinstance(local, DeepSeekPlugin)
    assert default.config.api_key == Secret("sk-env")
    assert local.config.api_key is None
    assert default.config.routes == ["deepseek"]


async def test_plugin_registers_adapter_and_lazy_names() -> None:
    import harness_llm_deepseek

    registered: list[tuple[list[str], object]] = []

    def register(routes: Sequence[str], adapter: object) -> Callable[[], None]:
        registered.append((list(routes), adapter))
        return lambda: None

    plugin = DeepSeekPlugin()
    plugin.register_adapter(register)  # type: ignore[arg-type]
    routes, adapter = registered[0]
    assert routes == ["deepseek"]
    assert isinstance(adapter, harness_llm_deepseek.DeepSeekAdapter)
    assert adapter.serializer.max_tokens_field == "max_tokens"
    await adapter.aclose()
    assert "api.deepseek.com" in repr(plugin)
    with pytest.raises(AttributeError):
        _ = harness_llm_deepseek.Nope  # type: ignore[attr-defined]


def test_translator_without_cache_counters() -> None:
    raw = body(data({"content": "x"}, finish="stop", usage={"prompt_tokens": 3, "completion_tokens": 1}))
    assert translate(raw)[-2] == Usage(TokenUsage(3, 1))


def test_case_text_delta_unicode() -> None:
    raw = body(data({"content": "é€😀你"}), data({}, finish="stop"))
    assert TextDelta(0, "é€😀你") in translate(raw)


async def test_a_deepseek_route_does_not_embed() -> None:
    """DeepSeek has no embeddings endpoint: the route answers UNSUPPORTED naming it, and nothing is sent."""
    from harness_core.embedding import EmbedOptions
    from harness_core.runtime import Harness

    with ScriptedServer() as server:
        plugin = DeepSeekPlugin(DeepSeekConfig(base_url=server.url, api_key=Secret("sk-" + "d" * 20)))
        async with Harness([("deepseek", plugin)]) as harness:
            assert harness.embed_routes() == {}
            with pytest.raises(LlmError) as caught:
                await harness.embed(["x"], route="deepseek")
        assert server.requests == []
    assert caught.value.code == "UNSUPPORTED"
    assert "route 'deepseek' does not serve embeddings" in caught.value.message
    adapter = DeepSeekAdapter(DeepSeekConfig(api_key=None))
    with pytest.raises(LlmError) as direct:
        await adapter.embed(EmbedOptions(inputs=["x"]))
    assert (direct.value.code, direct.value.provider) == ("UNSUPPORTED", "deepseek")
    assert await adapter.list_embedding_models() == []


@pytest.mark.parametrize("field", [{"embedding_model": "e5"}, {"embed_batch": 4}])
def test_the_embedding_fields_are_refused_by_name(field: dict[str, Any]) -> None:
    import msgspec

    with pytest.raises(msgspec.ValidationError, match=f"field {next(iter(field))!r}: DeepSeek has no embeddings"):
        msgspec.convert({"api_key": None, **field}, DeepSeekConfig)


def test_the_gen_ai_provider_is_deepseek_unless_the_config_says_another() -> None:
    from harness_llm_deepseek.adapter import DeepSeekAdapter
    from harness_llm_deepseek.config import DeepSeekConfig

    assert DeepSeekAdapter(DeepSeekConfig()).gen_ai_provider("deepseek") == "deepseek"
    proxied = DeepSeekConfig(base_url="http://127.0.0.1:8000/v1")  # DeepSeek's API through a proxy
    assert DeepSeekAdapter(proxied).gen_ai_provider("deepseek") == "deepseek"
    hosted = DeepSeekConfig(base_url="http://127.0.0.1:8000/v1", gen_ai_provider="azure.ai.inference")
    assert DeepSeekAdapter(hosted).gen_ai_provider("deepseek") == "azure.ai.inference"
