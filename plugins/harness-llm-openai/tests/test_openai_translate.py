"""Unit tests of the chunk translation state machine (no I/O)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from openai_fixtures import chunk, ids, sse, tool, translate

from harness_core.errors import LlmError
from harness_core.kit import DEFAULT_ABORT_REASON
from harness_core.sse import SSEEvent
from harness_core.types import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)
from harness_llm_openai.translate import ChunkTranslator, map_finish_reason
from harness_llm_openai.wire import decode_chunk


def finish_of(chunks: Sequence[object]) -> FinishReason:
    last = chunks[-1]
    assert isinstance(last, Finish)
    return last.reason


def ends(chunks: Sequence[object]) -> list[object]:
    return [c.block for c in chunks if isinstance(c, BlockEnd)]


# ---------------------------------------------------------------------- text and reasoning


def test_text_stream_exact_chunks() -> None:
    body = sse(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hé"}),
        chunk({"content": "llo"}),
        chunk({}, finish="stop"),
    )
    assert translate(body) == [
        BlockStart(0, "text"),
        TextDelta(0, "Hé"),
        TextDelta(0, "llo"),
        BlockEnd(0, TextBlock("Hé" + "llo")),
        Finish(FinishReason("stop", raw="stop")),
    ]


def test_reasoning_text_reasoning_are_three_blocks() -> None:
    body = sse(
        chunk({"reasoning_content": "think", "content": None}),
        chunk({"content": "answer", "reasoning_content": None}),
        chunk({"reasoning": "again"}),
        chunk({}, finish="stop"),
    )
    out = translate(body)
    assert out[:3] == [BlockStart(0, "reasoning"), ReasoningDelta(0, "think"), BlockEnd(0, ReasoningBlock("think"))]
    assert ends(out) == [ReasoningBlock("think"), TextBlock("answer"), ReasoningBlock("again")]
    assert [c.index for c in out if isinstance(c, BlockStart)] == [0, 1, 2]


def test_reasoning_content_preferred_over_reasoning_and_empty_ignored() -> None:
    body = sse(chunk({"reasoning_content": "", "reasoning": "r"}), chunk({"content": ""}), chunk({}, finish="stop"))
    assert ends(translate(body)) == [ReasoningBlock("r")]


def test_refusal_is_its_own_text_block() -> None:
    body = sse(chunk({"content": "I"}), chunk({"refusal": "I can't"}), chunk({}, finish="stop"))
    out = translate(body)
    assert ends(out) == [TextBlock("I"), TextBlock("I can't")]
    assert finish_of(out) == FinishReason("stop", raw="stop")


def test_mistral_content_parts() -> None:
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "hmm"}, {"type": "text", "text": ""}]}
    body = sse(
        chunk({"content": [thinking, {"type": "text", "text": "ok"}, {"type": "text", "text": ""}]}),
        chunk({"content": [{"type": "thinking"}]}),
        chunk({}, finish="model_length"),
    )
    out = translate(body)
    assert ends(out) == [ReasoningBlock("hmm"), TextBlock("ok")]
    assert finish_of(out) == FinishReason("length", raw="model_length")


# ---------------------------------------------------------------------- tool calls


def test_tool_call_fragments() -> None:
    body = sse(
        chunk({"content": None, "tool_calls": [tool(0, id="call_1", name="read", args="")]}),
        chunk({"tool_calls": [tool(0, args='{"a"')]}),
        chunk({"tool_calls": [tool(0, args=":1}")]}),
        chunk({"tool_calls": [tool(0, args=' , "b": 2}')]}),
        chunk({}, finish="tool_calls"),
    )
    out = translate(body)
    assert out[0] == BlockStart(0, "tool-call", id="call_1", name="read")
    deltas = [c for c in out if isinstance(c, ToolCallDelta)]
    assert [d.arguments_delta for d in deltas] == ['{"a"', ":1}", ' , "b": 2}']
    assert ends(out) == [ToolCallBlock("call_1", "read", '{"a":1} , "b": 2}')]
    assert finish_of(out) == FinishReason("tool-calls", raw="tool_calls")


def test_parallel_interleaved_calls_by_index() -> None:
    body = sse(
        chunk({"content": "Let me check.", "tool_calls": [tool(0, id="a", name="f", args='{"x":')]}),
        chunk({"tool_calls": [tool(1, id="b", name="g", args='{"y":')]}),
        chunk({"tool_calls": [tool(0, args="1}"), tool(1, args="2}")]}),
        chunk({}, finish="tool_calls"),
    )
    out = translate(body)
    assert ends(out) == [
        TextBlock("Let me check."),
        ToolCallBlock("a", "f", '{"x":1}'),
        ToolCallBlock("b", "g", '{"y":2}'),
    ]
    assert out[-2] == BlockEnd(2, ToolCallBlock("b", "g", '{"y":2}'))


def test_missing_index_whole_calls_are_separate_and_sequential() -> None:
    body = sse(
        chunk({"tool_calls": [tool(None, id="call_a", name="w", args='{"c":"P"}')]}),
        chunk({"tool_calls": [tool(None, id="call_b", name="t", args="{}")]}),
        chunk({}, finish="tool_calls", usage={"prompt_tokens": 4, "completion_tokens": 2}),
    )
    out = translate(body)
    kinds = [c.type if hasattr(c, "type") else type(c).__name__ for c in out]
    assert kinds == [
        "BlockStart",
        "ToolCallDelta",
        "BlockEnd",
        "BlockStart",
        "ToolCallDelta",
        "BlockEnd",
        "Usage",
        "Finish",
    ]
    assert ends(out) == [ToolCallBlock("call_a", "w", '{"c":"P"}'), ToolCallBlock("call_b", "t", "{}")]
    assert out[-2] == Usage(TokenUsage(4, 2))


def test_same_index_new_id_is_new_call() -> None:
    body = sse(
        chunk({"tool_calls": [tool(0, id="a", name="f", args="{}")]}),
        chunk({"tool_calls": [tool(0, id="b", name="g", args='{"k"')]}),
        chunk({"tool_calls": [tool(0, args=":1}")]}),
        chunk({}, finish="stop"),
    )
    out = translate(body)
    assert ends(out) == [ToolCallBlock("a", "f", "{}"), ToolCallBlock("b", "g", '{"k":1}')]
    assert finish_of(out) == FinishReason("tool-calls", raw="stop")


def test_repeated_id_continues_the_call() -> None:
    body = sse(
        chunk({"tool_calls": [tool(None, id="a", name="f", args='{"k"')]}),
        chunk({"tool_calls": [tool(None, id="a", args=":1}")]}),
        chunk({}, finish="tool_calls"),
    )
    assert ends(translate(body)) == [ToolCallBlock("a", "f", '{"k":1}')]


def test_fragment_for_an_ended_call_is_a_protocol_error() -> None:
    body = sse(
        chunk({"tool_calls": [tool(None, id="a", name="f", args="{")]}),
        chunk({"tool_calls": [tool(None, id="b", name="g", args="{}")]}),
        chunk({"tool_calls": [tool(None, id="a", args="}")]}),
    )
    with pytest.raises(LlmError) as info:
        translate(body)
    assert info.value.code == "PROTOCOL"


def test_missing_id_is_synthesized_and_unique() -> None:
    body = sse(
        chunk({"tool_calls": [tool(0, name="f", args="")]}),
        chunk({"tool_calls": [tool(1, name="g")]}),
        chunk({}, finish="tool_calls"),
    )
    out = translate(body)
    assert ends(out) == [ToolCallBlock("gen_0", "f", "{}"), ToolCallBlock("gen_1", "g", "{}")]


def test_default_synthesized_ids_are_unique() -> None:
    translator = ChunkTranslator()
    out = translator.feed_chunk(
        decode_chunk(sse(chunk({"tool_calls": [tool(0, name="f"), tool(1, name="g")]}), done=False)[6:])
    )
    starts = [c for c in out if isinstance(c, BlockStart)]
    assert len({s.id for s in starts}) == 2
    assert all(s.id and s.id.startswith("call_") for s in starts)


def test_no_id_no_index_continues_last_call_and_late_name() -> None:
    body = sse(
        chunk({"tool_calls": [tool(None, id="a", args="")]}),
        chunk({"tool_calls": [tool(None, name="late")]}),
        chunk({"tool_calls": [tool(None, args="{}")]}),
        chunk({"tool_calls": [tool(None)]}),
        chunk({}, finish="tool_calls"),
    )
    out = translate(body)
    assert out[0] == BlockStart(0, "tool-call", id="a")
    assert out[1] == ToolCallDelta(0, "a", "", name="late")
    assert out[2] == ToolCallDelta(0, "a", "{}")
    assert ends(out) == [ToolCallBlock("a", "late", "{}")]


def test_second_named_call_without_id_or_index_is_new() -> None:
    body = sse(
        chunk({"tool_calls": [tool(None, name="f", args="{}")]}),
        chunk({"tool_calls": [tool(None, name="g", args="{}")]}),
        chunk({}, finish="tool_calls"),
    )
    assert ends(translate(body)) == [ToolCallBlock("gen_0", "f", "{}"), ToolCallBlock("gen_1", "g", "{}")]


def test_index_arriving_after_index_less_start_is_adopted() -> None:
    body = sse(
        chunk({"tool_calls": [tool(None, id="a", name="f", args='{"q"')]}),
        chunk({"tool_calls": [tool(0, args=":1")]}),
        chunk({"tool_calls": [tool(0, args="}")]}),
        chunk({}, finish="tool_calls"),
    )
    assert ends(translate(body)) == [ToolCallBlock("a", "f", '{"q":1}')]


def test_unnamed_fragment_with_new_index_after_indexed_call_is_new_call() -> None:
    body = sse(
        chunk({"tool_calls": [tool(0, id="a", name="f", args="{}")]}),
        chunk({"tool_calls": [tool(None, args="")]}),
        chunk({}, finish="tool_calls"),
    )
    assert ends(translate(body)) == [ToolCallBlock("a", "f", "{}"), ToolCallBlock("gen_0", "", "{}")]


def test_deprecated_function_call() -> None:
    body = sse(
        chunk({"function_call": {"name": "f", "arguments": '{"a"'}}),
        chunk({"function_call": {"arguments": ":1}"}}),
        chunk({}, finish="function_call"),
    )
    out = translate(body)
    assert ends(out) == [ToolCallBlock("gen_0", "f", '{"a":1}')]
    assert finish_of(out) == FinishReason("tool-calls", raw="function_call")


def test_parsable_prefix_does_not_end_call() -> None:
    body = sse(
        chunk({"tool_calls": [tool(0, id="a", name="f", args='{"a":1}')]}),
        chunk({"tool_calls": [tool(0, args=" ")]}),
        chunk({}, finish="tool_calls"),
    )
    assert ends(translate(body)) == [ToolCallBlock("a", "f", '{"a":1} ')]


def test_text_after_tool_call_opens_new_block() -> None:
    body = sse(
        chunk({"content": "a"}),
        chunk({"tool_calls": [tool(0, id="c", name="f", args="{}")]}),
        chunk({"content": "b"}),
        chunk({}, finish="stop"),
    )
    out = translate(body)
    assert [c.index for c in out if isinstance(c, BlockEnd)] == [0, 1, 2]
    assert ends(out) == [TextBlock("a"), ToolCallBlock("c", "f", "{}"), TextBlock("b")]


# ---------------------------------------------------------------------- finish reasons


@pytest.mark.parametrize(
    ("raw", "calls", "kind"),
    [
        (None, False, "stop"),
        (None, True, "tool-calls"),
        ("stop", True, "tool-calls"),
        ("stop", False, "stop"),
        ("tool_calls", False, "stop"),
        ("length", True, "length"),
        ("model_length", False, "length"),
        ("content_filter", False, "content-filter"),
        ("abort", False, "other"),
    ],
)
def test_map_finish_reason(raw: str | None, calls: bool, kind: str) -> None:
    assert map_finish_reason(raw, has_tool_calls=calls) == kind


def test_unknown_finish_kept_raw() -> None:
    out = translate(sse(chunk({"content": "x"}), chunk({}, finish="abort")))
    assert finish_of(out) == FinishReason("other", raw="abort")


def test_length_never_upgraded() -> None:
    body = sse(chunk({"tool_calls": [tool(0, id="a", name="f", args='{"x')]}), chunk({}, finish="length"))
    assert finish_of(translate(body)) == FinishReason("length", raw="length")


def test_done_without_finish_reason() -> None:
    assert finish_of(translate(sse(chunk({"content": "x"})))) == FinishReason("stop")
    body = sse(chunk({"tool_calls": [tool(0, id="a", name="f")]}))
    assert finish_of(translate(body)) == FinishReason("tool-calls")


def test_finish_then_eof_without_done() -> None:
    out = translate(sse(chunk({"content": "x"}), chunk({}, finish="stop"), done=False))
    assert finish_of(out) == FinishReason("stop", raw="stop")


def test_done_without_blank_line_counts() -> None:
    body = sse(chunk({"content": "x"}), done=False) + b"data: [DONE]"
    assert finish_of(translate(body)) == FinishReason("stop")


def test_complete_json_without_blank_line_at_eof() -> None:
    body = (
        sse(chunk({"content": "x"}), done=False) + b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'
    )
    assert finish_of(translate(body)) == FinishReason("stop", raw="stop")


def test_cut_json_at_eof_is_network() -> None:
    body = sse(chunk({"content": "x"}), done=False) + b'data: {"choices":[{"ind'
    with pytest.raises(LlmError) as info:
        translate(body)
    assert info.value.code == "NETWORK"
    assert info.value.retryable


def test_eof_without_terminal_is_network() -> None:
    with pytest.raises(LlmError) as info:
        translate(sse(chunk({"content": "x"}), done=False))
    assert info.value.code == "NETWORK"


def test_empty_stream_is_network() -> None:
    with pytest.raises(LlmError) as info:
        translate(b": keep-alive\n\n")
    assert info.value.code == "NETWORK"


def test_malformed_json_is_protocol_with_snippet() -> None:
    body = sse(chunk({"content": "x"}), "{not json" + "x" * 500)
    with pytest.raises(LlmError) as info:
        translate(body)
    assert info.value.code == "PROTOCOL"
    assert "{not json" in info.value.message
    assert len(info.value.message) < 300


def test_empty_data_event_ignored_and_other_choices_skipped() -> None:
    other = {"index": 1, "delta": {"content": "no"}, "finish_reason": None}
    mine = {"index": 0, "delta": {"content": "yes"}, "finish_reason": None}
    no_delta = {"index": 0, "finish_reason": None}
    body = b"data:\n\n" + sse(
        chunk(choices=[]), chunk(choices=[other, mine]), chunk(choices=[no_delta]), chunk({}, finish="stop")
    )
    assert ends(translate(body)) == [TextBlock("yes")]


# ---------------------------------------------------------------------- usage


def test_usage_trailing_chunk_after_finish() -> None:
    usage = {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 3},
        "completion_tokens_details": {"reasoning_tokens": 2},
    }
    out = translate(sse(chunk({"content": "x"}), chunk({}, finish="stop"), chunk(choices=[], usage=usage)))
    assert out[-2] == Usage(TokenUsage(10, 5, cache_read_tokens=3, reasoning_tokens=2))
    assert isinstance(out[-3], BlockEnd)


def test_usage_last_wins_and_groq_and_empty_usage_ignored() -> None:
    out = translate(
        sse(
            chunk({"content": "x"}, usage={"prompt_tokens": 1, "completion_tokens": 1}),
            chunk({}, finish="stop", x_groq={"usage": {"prompt_tokens": 7, "completion_tokens": 8}}),
            chunk(choices=[], usage={}),
            chunk(choices=[], x_groq={"id": "g"}),
        )
    )
    assert [c for c in out if isinstance(c, Usage)] == [Usage(TokenUsage(7, 8))]


def test_no_usage_reported_means_no_usage_chunk() -> None:
    out = translate(sse(chunk({"content": "x"}), chunk({}, finish="stop")))
    assert not [c for c in out if isinstance(c, Usage)]


# ---------------------------------------------------------------------- in-band errors


def test_inband_error_object_after_content() -> None:
    err = {"error": {"message": "The server had an error", "type": "server_error"}}
    out = translate(sse(chunk({"content": "partial"}), err, chunk({"content": "never"})), request_id="req-1")
    assert ends(out) == [TextBlock("partial")]
    reason = finish_of(out)
    assert reason.kind == "error"
    assert reason.failure is not None
    assert reason.failure.code == "SERVER"
    assert reason.failure.retryable
    assert reason.failure.provider_type == "server_error"
    assert reason.failure.request_id == "req-1"
    assert reason.failure.provider == "openai"


def test_inband_error_string_and_top_level_object_error() -> None:
    out = translate(sse(chunk({"content": "a"}), {"error": "boom"}))
    assert finish_of(out).failure.message == "boom"  # type: ignore[union-attr]
    top = {"object": "error", "message": "Tool call id was bad", "type": "invalid_function_call", "code": None}
    failure = finish_of(translate(sse(top))).failure
    assert failure is not None
    assert (failure.code, failure.provider_type) == ("BAD_REQUEST", "invalid_function_call")


def test_openrouter_error_with_finish_error_and_numeric_code_keeps_usage() -> None:
    body = sse(
        chunk({"content": "a"}, usage={"prompt_tokens": 3, "completion_tokens": 1}),
        chunk({"content": ""}, finish="error", error={"code": 502, "message": "Provider disconnected"}),
    )
    out = translate(body)
    assert out[-2] == Usage(TokenUsage(3, 1))
    reason = finish_of(out)
    assert reason.failure is not None
    assert (reason.kind, reason.failure.code, reason.failure.provider_code) == ("error", "SERVER", "502")


def test_choice_error_object() -> None:
    choice = {
        "index": 0,
        "delta": {"content": "hi"},
        "finish_reason": "error",
        "error": {"code": 429, "message": "Rate limit", "metadata": {"error_type": "rate"}},
    }
    reason = finish_of(translate(sse(chunk(choices=[choice]))))
    assert reason.raw == "error"
    assert reason.failure is not None
    assert reason.failure.code == "RATE_LIMITED"


def test_finish_reason_error_without_object_uses_default_code() -> None:
    reason = finish_of(translate(sse(chunk({"content": "hi"}), chunk({}, finish="error"))))
    assert reason.failure is not None
    assert reason.failure.code == "SERVER"
    assert "error" in reason.failure.message
    custom = translate(
        sse(chunk({}, finish="insufficient_system_resource")),
        error_finish_reasons={"insufficient_system_resource": "OVERLOADED"},
    )
    assert finish_of(custom).failure.code == "OVERLOADED"  # type: ignore[union-attr]


def test_llama_cpp_legacy_error_field() -> None:
    body = b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'
    body += b'error: {"code":400,"message":"the request exceeds the available context size",'
    body += b'"type":"invalid_request_error"}\n\n'
    body += b"data: [DONE]\n\n"
    reason = finish_of(translate(body))
    assert reason.failure is not None
    assert reason.failure.code == "CONTEXT_LENGTH"
    plain = finish_of(translate(b"error: something broke\n\n"))
    assert plain.failure is not None
    assert (plain.failure.code, plain.failure.message) == ("SERVER", "something broke")


# ---------------------------------------------------------------------- abort and idempotence


def test_abort_closes_open_blocks_and_is_final() -> None:
    translator = ChunkTranslator(id_factory=ids())
    translator.feed_chunk(decode_chunk(b'{"choices":[{"delta":{"content":"part"}}],"usage":{"prompt_tokens":2}}'))
    out = translator.abort("user stop")
    assert out[0] == BlockEnd(0, TextBlock("part"))
    assert out[1] == Usage(TokenUsage(2, None))
    reason = finish_of(out)
    assert reason.kind == "aborted"
    assert reason.failure is not None
    assert (reason.failure.code, reason.failure.message) == ("ABORTED", "user stop")
    assert translator.done
    assert translator.abort("again") == []
    assert translator.feed_done() == []
    assert translator.end_of_input() == []
    assert translator.feed_chunk(decode_chunk(b"{}")) == []
    assert translator.feed(SSEEvent(data="[DONE]")) == []


def test_package_lazy_names() -> None:
    import harness_llm_openai

    assert harness_llm_openai.OpenAIAdapter.__name__ == "OpenAIAdapter"
    with pytest.raises(AttributeError):
        _ = harness_llm_openai.Nope  # type: ignore[attr-defined]


def test_abort_carries_the_replay_state_of_a_subclass() -> None:
    """Regression (issue 22): the hand-written abort once dropped ``replay_state``; the kit's
    block writer asks for it on every finish, aborted included."""

    class WithState(ChunkTranslator):
        def replay_state(self) -> dict[str, object] | None:
            return {"response_id": "r1"}

    translator = WithState(id_factory=ids())
    translator.feed_chunk(decode_chunk(b'{"choices":[{"delta":{"content":"part"}}]}'))
    out = translator.abort()
    last = out[-1]
    assert isinstance(last, Finish)
    assert last.replay_state == {"response_id": "r1"}
    assert last.reason.failure is not None
    assert last.reason.failure.message == DEFAULT_ABORT_REASON
