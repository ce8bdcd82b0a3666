"""The Responses API translator: recorded streams at every byte split, and each wire rule on its own."""

from __future__ import annotations

import pytest
from responses_fixtures import completed, event, recorded, sse, translate

from harness_core.errors import LlmError
from harness_core.sse import SSEEvent
from harness_core.testing.check import check_stream
from harness_core.testing.splits import every_split
from harness_core.types import (
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)
from harness_llm_openai.responses_translate import ResponsesTranslator
from harness_llm_openai.responses_wire import ResponseEvent

USAGE = {
    "input_tokens": 50,
    "input_tokens_details": {"cached_tokens": 20},
    "output_tokens": 30,
    "output_tokens_details": {"reasoning_tokens": 10},
}
ENCRYPTED = "gAAAAABenc=="


def finish(chunks: list[StreamChunk]) -> Finish:
    last = check_stream(chunks)[-1]
    assert isinstance(last, Finish)
    return last


def ends(chunks: list[StreamChunk]) -> list[object]:
    return [c.block for c in chunks if isinstance(c, BlockEnd)]


def added(index: int, item_type: str, item_id: str | None = None, **item: object) -> dict[str, object]:
    body: dict[str, object] = {"type": item_type, **item}
    if item_id is not None:
        body["id"] = item_id
    return event("response.output_item.added", output_index=index, item=body)


def done(index: int, item_type: str, item_id: str | None = None, **item: object) -> dict[str, object]:
    body: dict[str, object] = {"type": item_type, **item}
    if item_id is not None:
        body["id"] = item_id
    return event("response.output_item.done", output_index=index, item=body)


def text(delta: str, item_id: str | None = "msg_1", index: int = 0, part: int = 0) -> dict[str, object]:
    return event("response.output_text.delta", item_id=item_id, output_index=index, content_index=part, delta=delta)


def summary(delta: str, part: int = 0, item_id: str = "rs_1", index: int = 0) -> dict[str, object]:
    kind = "response.reasoning_summary_text.delta"
    return event(kind, item_id=item_id, output_index=index, summary_index=part, delta=delta)


def arguments(delta: str, item_id: str | None = "fc_1", index: int = 0) -> dict[str, object]:
    return event("response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=delta)


# --------------------------------------------------------------------------- recordings


@pytest.mark.parametrize(
    "name", ["text", "reasoning", "tool-call", "parallel-tool-calls", "usage", "in-band-error", "replay", "truncated"]
)
def test_recordings_give_the_same_chunks_at_every_byte_split(name: str) -> None:
    body = recorded(name)

    def run(reads: list[bytes]) -> tuple[list[StreamChunk], str | None]:
        try:
            return translate(body, reads), None
        except LlmError as exc:
            return [], exc.code

    reference = run([body])
    for reads in every_split(body):  # cuts inside UTF-8 characters, field names and line ends
        assert run(list(reads)) == reference, [len(piece) for piece in reads]


def test_reasoning_recording_keeps_summary_parts_and_encrypted_content() -> None:
    chunks = translate(recorded("reasoning"))
    reasoning, answer = ends(chunks)
    assert reasoning == ReasoningBlock("**Greeting**\n\nThe user greets; \n\nanswer **briefly**.", signed=True)
    assert answer == TextBlock("Hi — how can I help?")
    assert isinstance(chunks[0], BlockStart)
    assert chunks[0].signed
    state = finish(chunks).replay_state
    assert state["v"] == 1
    assert state["api"] == "responses"
    assert state["model"] == "o4-mini"
    assert state["provider"] == "openai"
    entry = state["reasoning"]["0"]
    assert entry["id"] == "rs_68af1c2f00"
    assert entry["encrypted_content"].startswith("gAAAAABo")
    assert entry["summary"] == [len("**Greeting**\n\nThe user greets; "), len("answer **briefly**.")]


def test_replay_recording_has_an_empty_signed_block_for_summary_less_reasoning() -> None:
    chunks = translate(recorded("replay"))
    assert ends(chunks)[0] == ReasoningBlock("", signed=True)
    assert [c for c in chunks if isinstance(c, ReasoningDelta)] == []
    entry = finish(chunks).replay_state["reasoning"]["0"]
    assert entry["id"] == "rs_68af1c2f10"
    assert "summary" not in entry


def test_tool_call_is_keyed_by_item_id_but_carries_call_id() -> None:
    chunks = translate(recorded("tool-call"))
    starts = [c for c in chunks if isinstance(c, BlockStart) and c.block_type == "tool-call"]
    assert [(s.id, s.name) for s in starts] == [("call_Qx7fJ2", "get_weather")]
    assert ends(chunks)[1] == ToolCallBlock("call_Qx7fJ2", "get_weather", '{"city":"Zürich"}')
    assert all(c.id == "call_Qx7fJ2" for c in chunks if isinstance(c, ToolCallDelta))
    assert finish(chunks).reason.kind == "tool-calls"


def test_parallel_calls_and_usage_from_completed() -> None:
    chunks = translate(recorded("parallel-tool-calls"))
    assert [b.id for b in ends(chunks) if isinstance(b, ToolCallBlock)] == ["call_A1", "call_B2"]
    usage = [c for c in chunks if isinstance(c, Usage)]
    assert usage == [Usage(TokenUsage(1200, 230, cache_read_tokens=1024, reasoning_tokens=192))]


def test_server_tool_items_pass_by() -> None:
    chunks = translate(recorded("usage"))
    assert ends(chunks) == [TextBlock("Sunny, 21 °C.")]
    assert finish(chunks).reason.kind == "stop"


def test_failed_response_is_an_error_finish() -> None:
    chunks = translate(recorded("in-band-error"), request_id="req_1")
    assert ends(chunks) == [TextBlock("Partial")]
    reason = finish(chunks).reason
    assert reason.kind == "error"
    assert reason.raw == "failed"
    assert reason.failure is not None
    assert (reason.failure.code, reason.failure.provider_code) == ("SERVER", "server_error")
    assert reason.failure.request_id == "req_1"


def test_truncated_stream_raises_network() -> None:
    with pytest.raises(LlmError) as caught:
        translate(recorded("truncated"))
    assert caught.value.code == "NETWORK"
    assert caught.value.retryable


# --------------------------------------------------------------------------- framing


def test_type_from_data_or_from_the_event_line() -> None:
    body = (
        sse(text("a"), event_lines=False)
        + b'event: response.output_text.delta\ndata: {"item_id":"msg_1","delta":"b"}\n\n'
    )
    chunks = translate(body + sse(completed()))
    assert ends(chunks) == [TextBlock("ab")]


def test_done_marker_empty_data_and_unknown_events_are_ignored() -> None:
    body = sse(event("response.created", response={"id": "r"}), "[DONE]", event("response.audio.delta", delta="x"))
    body += b"event: ping\ndata:\n\n" + sse(text("hi"), completed())
    assert ends(translate(body)) == [TextBlock("hi")]


def test_terminal_event_cut_by_eof_still_counts() -> None:
    body = sse(text("hi")) + sse(completed(USAGE)).rstrip(b"\n")
    chunks = translate(body)
    assert finish(chunks).reason.kind == "stop"


def test_payload_cut_by_eof_raises_network() -> None:
    body = sse(text("hi")) + b'data: {"type":"response.comp'
    with pytest.raises(LlmError) as caught:
        translate(body)
    assert caught.value.code == "NETWORK"


def test_malformed_json_raises_protocol_quoting_it() -> None:
    with pytest.raises(LlmError) as caught:
        translate(sse("{not json"))
    assert caught.value.code == "PROTOCOL"
    assert "{not json" in str(caught.value)


def test_empty_stream_raises_network() -> None:
    with pytest.raises(LlmError) as caught:
        translate(b"")
    assert caught.value.code == "NETWORK"


# --------------------------------------------------------------------------- text


def test_empty_deltas_never_open_a_block() -> None:
    chunks = translate(sse(added(0, "message", "msg_1"), text(""), completed()))
    assert check_stream(chunks) == [Finish(finish(chunks).reason)]


def test_text_sent_only_whole_is_emitted_once() -> None:
    done_text = event("response.output_text.done", item_id="msg_1", output_index=0, content_index=0, text="whole")
    chunks = translate(sse(added(0, "message", "msg_1"), done_text, done(0, "message", "msg_1"), completed()))
    assert [c for c in chunks if isinstance(c, TextDelta)] == [TextDelta(0, "whole")]
    streamed = translate(sse(text("whole"), done_text, text("late"), completed()))
    assert ends(streamed) == [TextBlock("whole")]  # deltas after .done are dropped


def test_refusal_and_second_content_part_are_their_own_blocks() -> None:
    refusal = event("response.refusal.delta", item_id="msg_1", output_index=0, content_index=1, delta="I can't")
    refusal_done = event("response.refusal.done", item_id="msg_1", output_index=0, content_index=1)
    chunks = translate(sse(text("Sure"), refusal, refusal_done, text("more", part=2), completed()))
    assert ends(chunks) == [TextBlock("I can't"), TextBlock("Sure"), TextBlock("more")]
    assert [c.index for c in chunks if isinstance(c, BlockStart)] == [0, 1, 2]


def test_items_without_ids_are_keyed_by_output_index() -> None:
    body = sse(
        added(0, "message"), text("a", item_id=None), text("b", item_id="msg_late"), text("c", item_id="msg_late")
    )
    chunks = translate(body + sse(done(0, "message", "msg_late"), completed()))
    assert ends(chunks) == [TextBlock("abc")]


def test_delta_before_its_item_was_added() -> None:
    chunks = translate(sse(text("early"), added(0, "message", "msg_1"), text(" on"), completed()))
    assert ends(chunks) == [TextBlock("early on")]


# --------------------------------------------------------------------------- reasoning


def test_raw_reasoning_text_and_no_duplicate_with_a_summary() -> None:
    raw = event("response.reasoning_text.delta", item_id="rs_1", output_index=0, content_index=0, delta="raw")
    body = sse(
        added(0, "reasoning", "rs_1"), raw, summary("sum"), done(0, "reasoning", "rs_1", encrypted_content=ENCRYPTED)
    )
    chunks = translate(body + sse(completed()))
    assert ends(chunks) == [ReasoningBlock("raw", signed=True)]
    assert finish(chunks).replay_state["reasoning"] == {
        "0": {"id": "rs_1", "encrypted_content": ENCRYPTED, "text": True}
    }
    other_order = translate(sse(summary("sum"), raw, done(0, "reasoning", "rs_1"), completed()), stored=True)
    assert ends(other_order) == [ReasoningBlock("sum", signed=True)]
    assert finish(other_order).replay_state["reasoning"] == {"0": {"id": "rs_1", "summary": [3]}}


def test_reasoning_without_summary_is_an_empty_block_only_when_replayable() -> None:
    body = sse(
        added(0, "reasoning", "rs_1"), done(0, "reasoning", "rs_1", encrypted_content=ENCRYPTED), text("hi", index=1)
    )
    chunks = translate(body + sse(completed()))
    assert ends(chunks) == [ReasoningBlock("", signed=True), TextBlock("hi")]
    assert [c for c in chunks if isinstance(c, ReasoningDelta)] == []
    bare = translate(sse(added(0, "reasoning", "rs_1"), done(0, "reasoning", "rs_1"), completed()))
    assert ends(bare) == []
    assert finish(bare).replay_state is None
    stored = translate(sse(done(0, "reasoning", "rs_1"), completed()), stored=True)
    assert finish(stored).replay_state["reasoning"] == {"0": {"id": "rs_1"}}


def test_reasoning_text_without_state_is_not_replayed_and_signing_is_optional() -> None:
    chunks = translate(sse(summary("thinking"), done(0, "reasoning", "rs_1"), completed()), signed_reasoning=False)
    assert ends(chunks) == [ReasoningBlock("thinking")]
    assert isinstance(chunks[0], BlockStart)
    assert not chunks[0].signed
    assert finish(chunks).replay_state is None


def test_summary_delta_after_the_item_ended_is_dropped() -> None:
    body = sse(summary("a"), done(0, "reasoning", "rs_1", encrypted_content=ENCRYPTED), summary("b", part=1))
    assert ends(translate(body + sse(completed()))) == [ReasoningBlock("a", signed=True)]


# --------------------------------------------------------------------------- function calls


def call_added(index: int = 0, item_id: str | None = "fc_1", call_id: str | None = "call_1") -> dict[str, object]:
    extra: dict[str, object] = {"name": "lookup", "arguments": ""}
    if call_id is not None:
        extra["call_id"] = call_id
    return added(index, "function_call", item_id, **extra)


def test_argument_deltas_before_the_item_wait_for_its_call_id() -> None:
    chunks = translate(
        sse(arguments('{"q":'), call_added(), arguments('"x"}'), done(0, "function_call", "fc_1"), completed())
    )
    assert ends(chunks) == [ToolCallBlock("call_1", "lookup", '{"q":"x"}')]
    assert [c.arguments_delta for c in chunks if isinstance(c, ToolCallDelta)] == ['{"q":', '"x"}']


def test_arguments_sent_only_whole() -> None:
    args_done = event("response.function_call_arguments.done", item_id="fc_1", output_index=0, arguments='{"a":1}')
    via_args_done = translate(sse(call_added(), args_done, done(0, "function_call", "fc_1"), completed()))
    assert ends(via_args_done) == [ToolCallBlock("call_1", "lookup", '{"a":1}')]
    early_args_done = translate(sse(args_done, call_added(), completed()))
    assert ends(early_args_done) == [ToolCallBlock("call_1", "lookup", '{"a":1}')]
    via_item_done = translate(sse(call_added(), done(0, "function_call", "fc_1", arguments='{"b":2}'), completed()))
    assert ends(via_item_done) == [ToolCallBlock("call_1", "lookup", '{"b":2}')]
    streamed = translate(
        sse(call_added(), arguments('{"c":3}'), args_done, done(0, "function_call", "fc_1"), completed())
    )
    assert ends(streamed) == [ToolCallBlock("call_1", "lookup", '{"c":3}')]  # .done never duplicates


def test_call_without_arguments_or_ids() -> None:
    chunks = translate(
        sse(call_added(item_id=None, call_id=None), done(0, "function_call", call_id="call_9"), completed())
    )
    assert ends(chunks) == [ToolCallBlock("call_9", "lookup", "{}")]
    generated = translate(sse(arguments("{}", item_id="fc_7"), done(0, "function_call", "fc_7", name="f"), completed()))
    assert ends(generated) == [ToolCallBlock("call_0", "f", "{}")]
    assert finish(generated).reason.kind == "tool-calls"


def test_call_that_never_gets_a_name_is_a_protocol_error() -> None:
    with pytest.raises(LlmError) as caught:
        translate(sse(arguments("{}", item_id="fc_7"), completed()))
    assert caught.value.code == "PROTOCOL"
    assert "fc_7" in str(caught.value)
    aborted = ResponsesTranslator(model="m")
    aborted.feed(SSEEvent(data=sse(arguments("{}"), event_lines=False).decode()[6:].strip()))
    assert ends(aborted.abort("stop")) == []  # a call that never started is dropped on abort


def test_call_left_open_is_closed_by_the_terminal_event_and_late_deltas_are_dropped() -> None:
    chunks = translate(sse(call_added(), arguments("{"), completed()))
    assert ends(chunks) == [ToolCallBlock("call_1", "lookup", "{")]
    late = translate(
        sse(
            call_added(),
            done(0, "function_call", "fc_1"),
            arguments("x"),
            done(0, "function_call", "fc_1"),
            completed(),
        )
    )
    assert ends(late) == [ToolCallBlock("call_1", "lookup", "{}")]


# --------------------------------------------------------------------------- terminals


@pytest.mark.parametrize(
    ("details", "kind", "raw"),
    [
        ({"reason": "max_output_tokens"}, "length", "max_output_tokens"),
        ({"reason": "content_filter"}, "content-filter", "content_filter"),
        ({"reason": "something_new"}, "other", "something_new"),
        (None, "other", "incomplete"),
    ],
)
def test_incomplete(details: dict[str, str] | None, kind: str, raw: str) -> None:
    chunks = translate(sse(text("cut"), completed(USAGE, status="incomplete", incomplete_details=details)))
    reason = finish(chunks).reason
    assert (reason.kind, reason.raw) == (kind, raw)
    assert any(isinstance(c, Usage) for c in chunks)


def test_failed_codes_and_usage_before_the_error_finish() -> None:
    error = {"code": "rate_limit_exceeded", "message": "Rate limit reached"}
    chunks = translate(sse(completed(USAGE, status="failed", error=error)))
    assert isinstance(chunks[-2], Usage)
    failure = finish(chunks).reason.failure
    assert failure is not None
    assert (failure.code, failure.message) == ("RATE_LIMITED", "Rate limit reached")
    flagged = {"code": "invalid_prompt", "message": "Invalid prompt: flagged as potentially violating our usage policy"}
    failure = finish(translate(sse(completed(status="failed", error=flagged)))).reason.failure
    assert failure is not None
    assert failure.code == "CONTENT_FILTER"
    bare = translate(sse(event("response.failed")))
    failure = finish(bare).reason.failure
    assert failure is not None
    assert (failure.code, failure.message) == ("SERVER", "the response failed")


def test_error_events_flat_and_nested() -> None:
    flat = event("error", code="context_length_exceeded", message="Your input exceeds the context window", param=None)
    failure = finish(translate(sse(text("x"), flat))).reason.failure
    assert failure is not None
    assert failure.code == "CONTEXT_LENGTH"
    nested = event("error", error={"type": "invalid_request_error", "code": "bad", "message": "no"})
    failure = finish(translate(sse(nested))).reason.failure
    assert failure is not None
    assert (failure.code, failure.provider_type) == ("BAD_REQUEST", "invalid_request_error")
    bare = finish(translate(sse(event("error")))).reason.failure
    assert bare is not None
    assert bare.message == "the provider reported an error in the stream"


def test_abort_closes_open_blocks_and_everything_after_done_is_empty() -> None:
    translator = ResponsesTranslator(model="m", request_id="req_9")
    decoded = [
        SSEEvent(data=payload)
        for payload in sse(call_added(), arguments("{"), text("hi", index=1), event_lines=False)
        .decode()
        .split("data: ")[1:]
    ]
    out: list[StreamChunk] = []
    for item in decoded:
        out.extend(translator.feed(SSEEvent(data=item.data.strip())))
    out.extend(translator.abort("user pressed stop"))
    reason = finish(out).reason
    assert reason.kind == "aborted"
    assert reason.failure is not None
    assert (reason.failure.message, reason.failure.request_id) == ("user pressed stop", "req_9")
    assert ends(out) == [ToolCallBlock("call_1", "lookup", "{"), TextBlock("hi")]
    assert translator.done
    assert translator.abort("again") == []
    assert translator.end_of_input() == []
    assert translator.feed(SSEEvent(data='{"type":"response.completed"}')) == []


def test_item_added_twice_and_done_twice_are_idempotent() -> None:
    body = sse(added(0, "message", "msg_1"), added(0, "message", "msg_1"), text("a"), done(0, "message", "msg_1"))
    chunks = translate(body + sse(done(0, "message", "msg_1"), event("response.output_item.added"), completed()))
    assert ends(chunks) == [TextBlock("a")]


def test_edge_events_that_produce_nothing() -> None:
    text_done = event("response.output_text.done", item_id="msg_1", output_index=0, content_index=0)
    body = sse(
        added(0, "message"), text_done, summary("", index=1), arguments("", index=2), done(0, "message", "msg_1")
    )
    assert ends(translate(body + sse(completed()))) == []
    args_done = event("response.function_call_arguments.done", item_id="fc_1", output_index=0, arguments='{"a":1}')
    late = translate(sse(call_added(), done(0, "function_call", "fc_1"), args_done, completed()))
    assert ends(late) == [ToolCallBlock("call_1", "lookup", "{}")]  # after the call ended: dropped
    translator = ResponsesTranslator()
    translator.feed(SSEEvent(data='{"type":"error"}'))
    assert translator.feed_event(ResponseEvent(type="error")) == []


def test_item_id_learnt_from_output_item_done() -> None:
    body = sse(added(0, "message"), text("a", item_id=None), done(0, "message", "msg_1"), text("late", item_id="msg_1"))
    assert ends(translate(body + sse(completed()))) == [TextBlock("a")]


def test_complete_items_that_were_never_streamed() -> None:
    content = [
        {"type": "output_text", "text": "whole"},
        {"type": "refusal", "refusal": "no"},
        {"type": "output_text", "text": ""},
    ]
    summary_parts = [{"type": "summary_text", "text": "one"}, {"type": "summary_text", "text": ""}]
    summary_parts.append({"type": "summary_text", "text": "two"})
    body = sse(
        done(0, "reasoning", "rs_1", summary=summary_parts, encrypted_content=ENCRYPTED),
        done(
            1,
            "reasoning",
            "rs_2",
            content=[{"type": "reasoning_text", "text": ""}, {"type": "reasoning_text", "text": "raw"}],
            encrypted_content=ENCRYPTED,
        ),
        text("streamed", item_id="msg_1", index=2),
        done(2, "message", "msg_1", content=[{"type": "output_text", "text": "streamed"}, *content]),
    )
    chunks = translate(body + sse(completed()))
    assert ends(chunks) == [
        ReasoningBlock("one\n\ntwo", signed=True),
        ReasoningBlock("raw", signed=True),
        TextBlock("streamed"),
        TextBlock("whole"),
        TextBlock("no"),
    ]
    replay = finish(chunks).replay_state["reasoning"]
    assert replay["0"]["summary"] == [3, 3]
    assert replay["1"]["text"] is True
