"""The translator on any-llm's own chunk models (what its providers yield), the request builder's
replay of signatures, model facts, model listing and closing."""

from __future__ import annotations

from typing import Any

import pytest
from anyllm_wire import MODEL, OPENAI_TEXT, make_adapter, options, run

from harness_core.abort import AbortSignal
from harness_core.errors import LlmError
from harness_core.testing.server import Reply, ScriptedServer
from harness_core.types import (
    BlockEnd,
    BlockStart,
    ContentBlock,
    Finish,
    FinishReason,
    Message,
    ModelInfo,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from harness_llm_anyllm.config import ModelConfig
from harness_llm_anyllm.translate import LibraryChunkTranslator, usage_from_library

pytestmark = pytest.mark.anyio

THOUGHT = "c2lnbmF0dXJlLW9mLWdlbWluaQ=="


def library_chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> Any:
    """An any-llm ``ChatCompletionChunk`` (the library's own pydantic model)."""
    from any_llm.types.completion import ChatCompletionChunk

    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return ChatCompletionChunk.model_validate(
        {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": MODEL, "choices": choices, **extra}
    )


def gemini_call(**fields: Any) -> dict[str, Any]:
    return {"index": 0, "type": "function", **fields}


def test_gemini_thought_signatures_on_tool_calls_become_replay_state() -> None:
    translator = LibraryChunkTranslator(model=MODEL)
    out = translator.feed_library(
        library_chunk(
            {
                "tool_calls": [
                    gemini_call(
                        id="call_1",
                        function={"name": "get_weather", "arguments": '{"city":'},
                        extra_content={"google": {"thought_signature": THOUGHT}},
                    )
                ]
            }
        )
    )
    out += translator.feed_library(
        library_chunk(
            {"tool_calls": [gemini_call(function={"arguments": ' "Paris"}'}, extra_content={"google": {"part": 1}})]}
        )
    )
    out += translator.feed_library(library_chunk({}, finish="tool_calls"))
    out += translator.end_of_input()
    assert out[0] == BlockStart(0, "tool-call", id="call_1", name="get_weather")
    assert out[-2] == BlockEnd(0, ToolCallBlock("call_1", "get_weather", '{"city": "Paris"}'))
    assert out[-1] == Finish(
        FinishReason("tool-calls", raw="tool_calls"),
        replay_state={"model": MODEL, "tool_calls": {"call_1": {"google": {"thought_signature": THOUGHT, "part": 1}}}},
    )


def test_message_level_extra_content_keeps_only_what_replays() -> None:
    translator = LibraryChunkTranslator(model=MODEL, signed_reasoning=True)
    translator.feed_library(library_chunk({"reasoning": "hm"}))
    translator.feed_library(library_chunk({"extra_content": {"anthropic": {"signature": "s1"}, "vendor": "v"}}))
    translator.feed_library(library_chunk({"extra_content": {"anthropic": {"stop_details": {"x": 1}}}}))
    assert translator.replay_state() == {
        "model": MODEL,
        "extra_content": {"anthropic": {"signature": "s1"}, "vendor": "v"},
    }


def test_no_extra_content_means_no_replay_state() -> None:
    translator = LibraryChunkTranslator(model=MODEL)
    translator.feed_library(library_chunk({"content": "hi"}, finish="stop"))
    assert translator.end_of_input()[-1] == Finish(FinishReason("stop", raw="stop"))


def test_abort_closes_a_signed_reasoning_block_signed() -> None:
    translator = LibraryChunkTranslator(model=MODEL, signed_reasoning=True)
    out = translator.feed_library(library_chunk({"reasoning": {"content": "thinking"}}))
    assert out == [BlockStart(0, "reasoning", signed=True), ReasoningDelta(0, "thinking")]
    aborted = translator.abort("stop")
    assert aborted[0] == BlockEnd(0, ReasoningBlock("thinking", signed=True))
    assert isinstance(aborted[-1], Finish)
    assert aborted[-1].reason.kind == "aborted"


def test_usage_without_counts_is_no_usage() -> None:
    from any_llm.types.completion import CompletionUsage

    assert usage_from_library(None) is None
    assert usage_from_library(CompletionUsage.model_construct(prompt_tokens=None, completion_tokens=None)) is None


async def test_replay_puts_signatures_back_on_tool_calls(server: ScriptedServer) -> None:
    reply = Message(
        role="assistant",
        content=[
            TextBlock("Checking."),
            ToolCallBlock("call_1", "get_weather", '{"city": "Paris"}'),
            ToolCallBlock("call_2", "get_time", "{}"),
        ],
        replay_state={
            "model": MODEL,
            "extra_content": {"google": {"thought_signature": THOUGHT}},
            "tool_calls": {"call_1": {"google": {"thought_signature": THOUGHT}}},
        },
    )
    results: list[ContentBlock] = [ToolResultBlock("call_1", "18 C"), ToolResultBlock("call_2", "noon")]
    history = [Message.user("weather?"), reply, Message(role="tool", content=results)]
    server.add(Reply(reads=[OPENAI_TEXT]), Reply(reads=[OPENAI_TEXT]), Reply(reads=[OPENAI_TEXT]))
    adapter = make_adapter("openai", server)
    try:
        await run(adapter, options(messages=history))
        await run(adapter, options(model="other", messages=history))
        odd = Message(role="assistant", content=[TextBlock("x")], replay_state=["not", "a", "dict"])
        bare = Message(role="assistant", content=[TextBlock("y")], replay_state={"model": MODEL})
        await run(adapter, options(messages=[Message.user("a"), odd, Message.user("b"), bare, Message.user("c")]))
    finally:
        await adapter.aclose()
    sent = server.requests[0].json()["messages"][1]
    assert sent["extra_content"] == {"google": {"thought_signature": THOUGHT}}
    assert "reasoning" not in sent  # no reasoning block to replay
    call, second = sent["tool_calls"]
    assert call["extra_content"] == {"google": {"thought_signature": THOUGHT}}
    assert call["function"]["arguments"] == '{"city": "Paris"}'
    assert "extra_content" not in second
    other = server.requests[1].json()["messages"][1]
    assert all("extra_content" not in call for call in other["tool_calls"])
    third = server.requests[2].json()["messages"]
    assert (third[1], third[3]) == ({"role": "assistant", "content": "x"}, {"role": "assistant", "content": "y"})


async def test_config_options_provider_options_usage_and_effort(server: ScriptedServer) -> None:
    server.add(Reply(reads=[OPENAI_TEXT]))
    adapter = make_adapter(
        "openai",
        server,
        options={"user": "u-1", "temperature": 0.1},
        include_usage=False,
        models={MODEL: ModelConfig(reasoning_efforts=["off", "low"], context_window=128000)},
    )
    try:
        await run(
            adapter,
            options(
                temperature=0.5,
                reasoning_effort="off",
                tool_choice="auto",
                provider_options={"anyllm": {"metadata": {"k": "v"}}},
            ),
        )
        with pytest.raises(LlmError) as raised:
            [chunk async for chunk in adapter.stream(options(reasoning_effort="high"))]
    finally:
        await adapter.aclose()
    sent = server.requests[0].json()
    assert (sent["user"], sent["temperature"], sent["metadata"]) == ("u-1", 0.5, {"k": "v"})
    assert sent["reasoning_effort"] == "none"
    assert "stream_options" not in sent
    assert raised.value.code == "UNSUPPORTED"
    assert adapter.resolve_model(MODEL) == ModelInfo(
        model=MODEL, context_window=128000, reasoning_efforts=["off", "low"]
    )


def test_model_facts_without_config(server: ScriptedServer) -> None:
    reasoning = make_adapter("mistral", server).resolve_model("m")
    assert reasoning.reasoning_efforts == ["off", "minimal", "low", "medium", "high", "xhigh", "max"]
    assert make_adapter("openai", server).resolve_model("m").reasoning_efforts is None


async def test_a_request_without_a_model_is_refused(server: ScriptedServer) -> None:
    adapter = make_adapter("openai", server)
    with pytest.raises(LlmError) as raised:
        [chunk async for chunk in adapter.stream(options(model=None))]
    assert raised.value.code == "BAD_REQUEST"


async def test_list_models(server: ScriptedServer) -> None:
    body = {"object": "list", "data": [{"id": "m-a", "object": "model", "created": 0, "owned_by": "x"}]}
    server.add(Reply.json(200, body), Reply.json(500, {"error": {"message": "down", "type": "server_error"}}))
    adapter = make_adapter("openai", server, max_retries=0)
    try:
        assert await adapter.list_models() == [ModelInfo(model="m-a")]
        with pytest.raises(LlmError) as raised:
            await adapter.list_models()
    finally:
        await adapter.aclose()
    assert server.requests[0].path == "/v1/models"
    assert (raised.value.code, raised.value.status) == ("SERVER", 500)


async def test_close_before_any_request_and_a_synchronous_client_close(server: ScriptedServer) -> None:
    adapter = make_adapter("openai", server)
    await adapter.aclose()  # nothing was created

    class SyncClient:  # boto3-style clients (bedrock, sagemaker) close synchronously
        closed = False

        def close(self) -> None:
            self.closed = True

    class Library:
        client = SyncClient()

    adapter._library = Library()
    await adapter.aclose()
    assert Library.client.closed


def test_lazy_package_attribute() -> None:
    import harness_llm_anyllm
    from harness_llm_anyllm.adapter import AnyLLMAdapter

    assert harness_llm_anyllm.AnyLLMAdapter is AnyLLMAdapter
    with pytest.raises(AttributeError):
        _ = harness_llm_anyllm.Missing  # type: ignore[attr-defined]


async def test_abort_fired_between_chunks(server: ScriptedServer) -> None:
    """An abort fired while a chunk is being handled takes effect at the next read."""
    server.add(Reply(reads=[OPENAI_TEXT]))
    adapter = make_adapter("openai", server)
    signal = AbortSignal()
    seen = []
    try:
        async for chunk in adapter.stream(options(abort=signal)):
            seen.append(chunk)
            signal.fire()
    finally:
        await adapter.aclose()
    assert isinstance(seen[-1], Finish)
    assert seen[-1].reason.kind == "aborted"
