"""The translator on its own: Gemini events in, chunks out
(https://ai.google.dev/api/generate-content), every stream checked against the stream
obligations by ``gemini_fixtures.translate``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from gemini_fixtures import SIGNATURE, SIGNATURE_2, THINKING_TOOL_BODY, chunk, sse, translate, usage

from harness_core.errors import LlmError
from harness_core.kit import DEFAULT_ABORT_REASON
from harness_core.sse import SSEEvent
from harness_core.testing.cases import sequence_tokens
from harness_core.testing.splits import every_split
from harness_core.types import (
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningBlock,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)
from harness_llm_gemini.translate import Translator


def ends(chunks: list[StreamChunk]) -> list[Any]:
    return [c.block for c in chunks if isinstance(c, BlockEnd)]


def finish_of(chunks: list[StreamChunk]) -> Finish:
    last = chunks[-1]
    assert isinstance(last, Finish)
    return last


def run(*responses: dict[str, Any] | str) -> list[StreamChunk]:
    chunks, error = translate(sse(*responses))
    assert error is None
    return chunks


def test_thoughts_parallel_calls_and_signatures() -> None:
    chunks, error = translate(THINKING_TOOL_BODY)
    assert error is None
    assert sequence_tokens(chunks) == [
        "block-start:reasoning", "reasoning-delta", "block-end",
        "block-start:tool-call#call_resp1_1", "tool-call-delta", "block-end",
        "block-start:tool-call#call_resp1_2", "tool-call-delta", "block-end",
        "usage", "finish:tool-calls",
    ]  # fmt: skip
    assert ends(chunks) == [
        ReasoningBlock("Let me think \u00e9."),
        ToolCallBlock("call_resp1_1", "get_weather", '{"city":"Paris"}'),
        ToolCallBlock("call_resp1_2", "get_time", "{}"),
    ]
    assert chunks[-2] == Usage(TokenUsage(20, 38, reasoning_tokens=30))
    assert finish_of(chunks).replay_state == {
        "v": 1,
        "provider": "gemini",
        "model": "gemini-2.5-flash",
        "blocks": {"1": {"signature": SIGNATURE}},
        "parts": [{"after": 2, "part": {"text": "", "thoughtSignature": SIGNATURE_2}}],
    }


def test_a_change_of_kind_opens_a_new_block() -> None:
    chunks = run(
        chunk({"text": "a", "thought": True}, {"text": "b"}),
        chunk({"text": "c", "thought": True}, {"text": ""}, {"text": "d", "thought": True}, finish="STOP"),
    )
    assert ends(chunks) == [ReasoningBlock("a"), TextBlock("b"), ReasoningBlock("cd")]
    assert finish_of(chunks).replay_state is None
    assert not any(isinstance(c, Usage) for c in chunks)  # none reported: none invented


def test_a_second_signature_starts_a_new_block_and_standalone_parts_end_the_open_one() -> None:
    chunks = run(
        chunk({"text": "one", "thoughtSignature": SIGNATURE}, {"text": " two"}),
        chunk({"text": "three", "thoughtSignature": SIGNATURE_2}),
        chunk({"text": "", "thought": True, "thoughtSignature": "S3"}, {"text": "four"}),
        chunk({"executableCode": {"language": "PYTHON", "code": "print(1)"}}, {"inlineData": {"mimeType": "x"}}),
        chunk({"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1\n"}, "thoughtSignature": "S4"}),
        chunk({"text": "five"}, finish="STOP"),
    )
    assert ends(chunks) == [TextBlock("one two"), TextBlock("three"), TextBlock("four"), TextBlock("five")]
    assert finish_of(chunks).replay_state == {
        "v": 1,
        "provider": "gemini",
        "model": "gemini-2.5-flash",
        "blocks": {"0": {"signature": SIGNATURE}, "1": {"signature": SIGNATURE_2}},
        "parts": [
            {"after": 1, "part": {"text": "", "thought": True, "thoughtSignature": "S3"}},
            {"after": 2, "part": {"executableCode": {"language": "PYTHON", "code": "print(1)"}}},
            {
                "after": 2,
                "part": {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1\n"}, "thoughtSignature": "S4"},
            },
        ],
    }


def test_function_call_ids_and_argument_forms() -> None:
    chunks = run(
        chunk(
            {"functionCall": {"name": "a", "args": {"q": "\u00e9t\u00e9", "n": [1, 2.5]}, "id": "fc-1"}},
            {"functionCall": {"name": "b", "args": '{"raw": true}'}},
            {"functionCall": {"name": "c", "args": ""}},
            {"functionCall": {"name": "d"}},
            {"functionCall": {"args": {"orphan": 1}}},
        ),
        chunk({"text": "done"}, finish="STOP"),
    )
    assert ends(chunks) == [
        ToolCallBlock("fc-1", "a", '{"q":"\u00e9t\u00e9","n":[1,2.5]}'),
        ToolCallBlock("call_resp1_1", "b", '{"raw": true}'),
        ToolCallBlock("call_resp1_2", "c", "{}"),
        ToolCallBlock("call_resp1_3", "d", "{}"),
        TextBlock("done"),
    ]
    assert finish_of(chunks).reason.kind == "tool-calls"
    assert finish_of(chunks).replay_state["blocks"] == {"0": {"native_id": True}}


def test_without_a_response_id_generated_ids_are_unique_per_translator() -> None:
    calls = [{"functionCall": {"name": "f"}}, {"functionCall": {"name": "g"}}]
    body = sse({"candidates": [{"content": {"parts": calls}, "finishReason": "STOP"}]})
    first, other = (call.id for call in ends(translate(body)[0]))
    second = ends(translate(body)[0])[0].id
    assert first != second
    assert other.removesuffix("_1") == first.removesuffix("_0")
    assert first.startswith("call_")
    assert first.endswith("_0")


def streamed(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [chunk({"functionCall": part}) for part in parts]


def arg(path: str, **value: Any) -> dict[str, Any]:
    return {"jsonPath": path, **value}


def test_streamed_arguments_build_the_json_text_piece_by_piece() -> None:
    chunks = run(
        *streamed(
            {"name": "plan", "willContinue": True, "id": "v1"},
            {"partialArgs": [arg("$.title", stringValue='Tr\u00e8s "', willContinue=True)], "willContinue": True},
            {"partialArgs": [arg("$.title", stringValue="long")], "willContinue": True},
            {
                "partialArgs": [arg("$.stops[0].city", stringValue="Oslo"), arg("$.stops[0].days", numberValue=2)],
                "willContinue": True,
            },
            {"partialArgs": [arg("$.stops[1].city", stringValue="Rome", willContinue=True)], "willContinue": True},
            {
                "partialArgs": [arg("$.meta.ok", boolValue=True), arg("$.meta.none", nullValue="NULL_VALUE")],
                "willContinue": True,
            },
            {"partialArgs": [arg("$", stringValue="ignored"), arg("$.empty")], "willContinue": True},
            {"partialArgs": [arg("$.off", boolValue=False), arg("$.ratio", numberValue=0.5)], "willContinue": True},
            {},
        ),
        chunk({"text": ""}, finish="STOP", usage=usage()),
    )
    [call] = ends(chunks)
    assert call.id == "v1"
    expected = {
        "title": 'Tr\u00e8s "long',
        "stops": [{"city": "Oslo", "days": 2}, {"city": "Rome"}],
        "meta": {"ok": True, "none": None},
        "off": False,
        "ratio": 0.5,
    }
    assert json.loads(call.arguments) == expected
    assert call.arguments == json.dumps(expected, ensure_ascii=False, separators=(",", ":"))
    deltas = [c.arguments_delta for c in chunks if isinstance(c, ToolCallDelta)]
    assert "".join(deltas) == call.arguments
    assert all(deltas)


def test_a_streamed_call_ends_at_a_piece_that_does_not_continue_or_at_the_next_call() -> None:
    chunks = run(
        *streamed(
            {"name": "a", "partialArgs": [arg("$.x", numberValue=1)]},
            {"partialArgs": [arg("$.y", numberValue=2)]},  # no open call: dropped
            {"name": "b", "willContinue": True},
            {"name": "c", "willContinue": True, "partialArgs": [arg("$.z", stringValue="q", willContinue=True)]},
        ),
        chunk({"text": "after"}, finish="STOP"),
    )
    assert ends(chunks) == [
        ToolCallBlock("call_resp1_0", "a", '{"x":1}'),
        ToolCallBlock("call_resp1_1", "b", "{}"),
        ToolCallBlock("call_resp1_2", "c", '{"z":"q"}'),
        TextBlock("after"),
    ]


def test_an_open_streamed_call_is_closed_at_the_end_and_on_abort() -> None:
    chunks = run(*streamed({"name": "a", "willContinue": True}), chunk(finish="STOP"))
    assert ends(chunks) == [ToolCallBlock("call_resp1_0", "a", "{}")]
    translator = Translator()
    translator.feed(
        SSEEvent(
            data=json.dumps(
                chunk(
                    {"functionCall": {"name": "a", "willContinue": True}},
                    {"functionCall": {"partialArgs": [arg("$.k", stringValue="v", willContinue=True)]}},
                )
            )
        )
    )
    aborted = list(translator.abort("user pressed stop"))
    assert ends(aborted) == [ToolCallBlock("call_resp1_0", "a", '{"k":"v"}')]
    assert finish_of(aborted).reason.kind == "aborted"
    assert finish_of(aborted).reason.failure.message == "user pressed stop"  # type: ignore[union-attr]
    assert translator.abort() == ()
    assert translator.end_of_input() == ()
    assert translator.feed(SSEEvent(data="{}")) == ()
    assert translator.handle(translator_response()) == ()


def translator_response() -> Any:
    from harness_llm_gemini.wire import RESPONSE_DECODER

    return RESPONSE_DECODER.decode(b"{}")


@pytest.mark.parametrize(
    ("raw", "kind", "with_call"),
    [
        ("STOP", "stop", False),
        ("STOP", "tool-calls", True),
        ("MAX_TOKENS", "length", True),
        ("SAFETY", "content-filter", False),
        ("IMAGE_SAFETY", "content-filter", False),
        ("RECITATION", "content-filter", True),
        ("OTHER", "other", False),
        ("LANGUAGE", "other", False),
        ("SOMETHING_NEW", "other", False),
    ],
)
def test_finish_reasons(raw: str, kind: str, with_call: bool) -> None:
    parts = [{"functionCall": {"name": "f", "args": {}}}] if with_call else [{"text": "x"}]
    reason = finish_of(run(chunk(*parts, finish=raw))).reason
    assert (reason.kind, reason.raw, reason.failure) == (kind, raw, None)


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("MALFORMED_FUNCTION_CALL", "SERVER"),
        ("UNEXPECTED_TOOL_CALL", "BAD_REQUEST"),
        ("TOO_MANY_TOOL_CALLS", "BAD_REQUEST"),
    ],
)
def test_function_call_failures_end_in_an_error(raw: str, code: str) -> None:
    reason = finish_of(run(chunk(finish=raw, usage=usage()))).reason
    assert reason.kind == "error"
    assert reason.raw == raw
    assert reason.failure is not None
    assert (reason.failure.code, reason.failure.provider_type) == (code, raw)
    assert raw in reason.failure.message


def test_usage_is_cumulative_the_last_report_wins() -> None:
    chunks = run(
        chunk({"text": "a"}, usage=usage(5, 1, 3)),
        chunk({"text": "b"}, usage={"trafficType": "ON_DEMAND"}),
        chunk({"text": "c"}, finish="STOP", usage=usage(7, None, 9, cachedContentTokenCount=4)),
    )
    assert chunks[-2] == Usage(TokenUsage(7, 9, cache_read_tokens=4, reasoning_tokens=9))
    translator = Translator()
    assert translator.usage is None
    translator.feed(SSEEvent(data=json.dumps({"usageMetadata": usage(1, 2)})))
    assert translator.usage == TokenUsage(1, 2)
    only_prompt = run(chunk({"text": "a"}, finish="STOP", usage=usage(3, None)))
    assert only_prompt[-2] == Usage(TokenUsage(3, None))


def test_a_blocked_prompt_is_a_content_filter_finish_without_blocks() -> None:
    blocked = {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": usage(12, None)}
    chunks = run(blocked, chunk({"text": "never"}))
    assert chunks == [
        Usage(TokenUsage(12, None)),
        Finish(finish_of(chunks).reason),
    ]
    assert (finish_of(chunks).reason.kind, finish_of(chunks).reason.raw) == ("content-filter", "PROHIBITED_CONTENT")
    unspecified = run(
        {"promptFeedback": {"blockReason": "BLOCK_REASON_UNSPECIFIED"}}, chunk({"text": "ok"}, finish="STOP")
    )
    assert ends(unspecified) == [TextBlock("ok")]


def test_only_the_first_candidate_counts() -> None:
    response = chunk({"text": "first"}, finish="STOP")
    response["candidates"].append({"content": {"parts": [{"text": "second"}]}, "index": 1, "finishReason": "SAFETY"})
    chunks = run(response)
    assert ends(chunks) == [TextBlock("first")]
    assert finish_of(chunks).reason.kind == "stop"


def test_an_inband_error_ends_the_stream_classified() -> None:
    error = {
        "error": {
            "code": 429,
            "message": "Resource has been exhausted (e.g. check quota).",
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}],
        }
    }
    translator = Translator(request_id="req-9")
    chunks = [
        *translator.feed(SSEEvent(data=json.dumps(chunk({"text": "partial"}, usage=usage())))),
        *translator.feed(SSEEvent(data=json.dumps(error))),
    ]
    assert ends(chunks) == [TextBlock("partial")]
    reason = finish_of(chunks).reason
    assert (reason.kind, reason.raw) == ("error", "RESOURCE_EXHAUSTED")
    assert reason.failure is not None
    assert (reason.failure.code, reason.failure.retry_after, reason.failure.request_id) == (
        "RATE_LIMITED",
        7.0,
        "req-9",
    )
    assert translator.done
    unavailable = run({"error": {"code": 503, "message": "The model is overloaded."}})
    assert finish_of(unavailable).reason.failure.code == "OVERLOADED"  # type: ignore[union-attr]


def test_faults_are_raised() -> None:
    chunks, error = translate(sse(chunk({"text": "cut"})))
    assert error is not None
    assert error.code == "NETWORK"
    assert ends(chunks) == []  # a raise closes nothing: the runtime does that
    _, empty = translate(b"")
    assert empty is not None
    assert empty.code == "NETWORK"
    _, malformed = translate(b"data: {not json\r\n\r\n")
    assert malformed is not None
    assert malformed.code == "PROTOCOL"
    assert "{not json" in malformed.message
    _, cut = translate(b'data: {"candidates": [')
    assert cut is not None
    assert cut.code == "NETWORK"
    with pytest.raises(LlmError) as info:
        Translator().feed(SSEEvent(data="[1, 2]"))
    assert info.value.code == "PROTOCOL"


def test_an_event_without_data_and_a_complete_last_event_without_its_blank_line() -> None:
    chunks, error = translate(
        b"retry: 5\r\n\r\n" + b"data: " + json.dumps(chunk({"text": "x"}, finish="STOP")).encode()
    )
    assert error is None
    assert ends(chunks) == [TextBlock("x")]


def test_utf8_split_anywhere_gives_the_same_text() -> None:
    body = sse(chunk({"text": "\u00e9\u20ac\U0001f600\u4e2d"}), chunk({"text": "!"}, finish="STOP"))
    expected = translate(body)
    for reads in every_split(body):
        assert translate(body, list(reads)) == expected
    assert [c.text for c in expected[0] if isinstance(c, TextDelta)] == ["\u00e9\u20ac\U0001f600\u4e2d", "!"]


def test_lf_framing_decodes_like_crlf() -> None:
    assert translate(sse(chunk({"text": "x"}, finish="STOP"), crlf=False)) == translate(
        sse(chunk({"text": "x"}, finish="STOP"))
    )


def test_block_starts_carry_the_call() -> None:
    chunks = run(chunk({"functionCall": {"name": "f", "args": {}, "id": "i"}}, finish="STOP"))
    assert chunks[0] == BlockStart(0, "tool-call", id="i", name="f")


def test_streamed_call_separators_a_missing_terminal_part_and_a_late_signature() -> None:
    chunks = run(
        *streamed(
            {"name": "write", "willContinue": True},
            {"partialArgs": [arg("$.ops[0].name", stringValue="a", willContinue=True)], "willContinue": True},
            {"partialArgs": [arg("$.ops[0].name", stringValue="")], "willContinue": True},
            {"willContinue": True},  # between two array items: nothing to write
            {"partialArgs": [arg("$.ops[1].name", stringValue="b")], "willContinue": True},
        ),
        chunk({"functionCall": {"partialArgs": [arg("$.ops[1].n", numberValue=3)]}, "thoughtSignature": "LATE"}),
        chunk({"text": ""}, finish="STOP"),
    )
    [call] = ends(chunks)
    assert json.loads(call.arguments) == {"ops": [{"name": "a"}, {"name": "b", "n": 3}]}
    assert finish_of(chunks).replay_state["blocks"] == {"0": {"signature": "LATE"}}
    assert finish_of(chunks).reason.kind == "tool-calls"


def test_a_generated_image_is_kept_for_replay_only_with_its_signature() -> None:
    image = {"mimeType": "image/png", "data": "iVBORw0KGgo="}
    chunks = run(
        chunk({"inlineData": image}),
        chunk({"inlineData": image, "thoughtSignature": "IMG"}, {"text": "Here it is."}, finish="STOP"),
    )
    assert ends(chunks) == [TextBlock("Here it is.")]
    assert finish_of(chunks).replay_state["parts"] == [
        {"after": -1, "part": {"inlineData": image, "thoughtSignature": "IMG"}}
    ]


def test_abort_without_a_reason_uses_the_kits_default() -> None:
    """Regression (issue 22): Gemini once hard-coded an abort reason of its own."""
    translator = Translator()
    translator.feed(SSEEvent(data=json.dumps(chunk({"text": "partial"}))))
    finish = finish_of(list(translator.abort()))
    assert finish.reason.kind == "aborted"
    assert finish.reason.failure is not None
    assert finish.reason.failure.message == DEFAULT_ABORT_REASON
