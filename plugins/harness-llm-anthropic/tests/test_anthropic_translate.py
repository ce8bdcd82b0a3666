"""The pure event translator: SSE events in, chunks out (no HTTP)."""

from __future__ import annotations

import json

import pytest
from anthropic_wire_fixtures import (
    INBAND_ERROR_BODY,
    MESSAGE_STOP,
    MODEL,
    PARALLEL_TOOLS_BODY,
    PING,
    PROGRAMMATIC_TOOL_BODY,
    REDACTED,
    REDACTED_BODY,
    SERVER_TOOL_BODY,
    SIGNATURE,
    SUCCESS_BODIES,
    TEXT_BODY,
    THINKING_TOOL_BODY,
    UNICODE_TEXT,
    block_start,
    block_stop,
    delta,
    message_delta,
    message_start,
    sse,
    text_body,
    text_delta,
    translate,
)

from harness_core.errors import LlmError
from harness_core.testing.splits import every_split
from harness_core.types import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    ReasoningBlock,
    ReasoningDelta,
    ReasoningSignature,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)
from harness_llm_anthropic.translate import STOP_REASONS, Translator
from harness_llm_anthropic.wire import WireEvent


def kinds(chunks: list[StreamChunk]) -> list[str]:
    return [type(c).__name__ for c in chunks]


def finish_of(chunks: list[StreamChunk]) -> Finish:
    last = chunks[-1]
    assert isinstance(last, Finish)
    return last


def signed(value: str, *, redacted: bool = False) -> ReasoningSignature:
    """The signature the translator puts on a block (tagged with the requested model)."""
    return ReasoningSignature("anthropic", MODEL, value, redacted=redacted)


def test_text_stream() -> None:
    chunks, translator = translate([TEXT_BODY])
    assert chunks[0] == BlockStart(0, "text")
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == list(UNICODE_TEXT)
    assert chunks[-3] == BlockEnd(0, TextBlock("".join(UNICODE_TEXT)))
    assert chunks[-2] == Usage(TokenUsage(10, 5))
    assert chunks[-1] == Finish(FinishReason("stop", "end_turn"))
    assert translator.done
    assert translator.response_id == "msg_01"
    assert translator.response_model == MODEL


def test_thinking_signature_and_tool_call() -> None:
    chunks, _ = translate([THINKING_TOOL_BODY])
    assert chunks == [
        BlockStart(0, "reasoning", signed=True),
        ReasoningDelta(0, "Let me think \u00e9"),
        ReasoningDelta(0, " about it."),
        BlockEnd(0, ReasoningBlock("Let me think \u00e9 about it.", signed=True, signature=signed(SIGNATURE))),
        BlockStart(1, "text"),
        TextDelta(1, "I'll check."),
        BlockEnd(1, TextBlock("I'll check.")),
        BlockStart(2, "tool-call", id="toolu_01", name="get_weather"),
        ToolCallDelta(2, "toolu_01", '{"city": "Par'),
        ToolCallDelta(2, "toolu_01", 'is", "unit":  "c"}'),
        BlockEnd(2, ToolCallBlock("toolu_01", "get_weather", '{"city": "Paris", "unit":  "c"}')),
        # input 12 + cache read 100 + cache write 20; output from the last message_delta
        Usage(TokenUsage(132, 61, cache_read_tokens=100, cache_write_tokens=20)),
        Finish(
            FinishReason("tool-calls", "tool_use"),
            replay_state={"v": 1, "provider": "anthropic", "model": MODEL, "blocks": {"0": {"signature": SIGNATURE}}},
        ),
    ]
    state = finish_of(chunks).replay_state
    assert json.loads(json.dumps(state)) == state


def test_redacted_thinking_is_an_empty_signed_reasoning_block() -> None:
    chunks, _ = translate([REDACTED_BODY])
    redacted = signed(REDACTED, redacted=True)
    assert chunks[:2] == [
        BlockStart(0, "reasoning", signed=True),
        BlockEnd(0, ReasoningBlock("", signed=True, signature=redacted)),
    ]
    assert finish_of(chunks).replay_state == {
        "v": 1,
        "provider": "anthropic",
        "model": MODEL,
        "blocks": {"0": {"redacted": REDACTED}},
    }


def test_thinking_with_only_a_signature() -> None:
    body = sse(
        [
            message_start(),
            block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
            delta(0, {"type": "signature_delta", "signature": "abc"}),
            delta(0, {"type": "signature_delta", "signature": "def"}),
            block_stop(0),
            message_delta("end_turn"),
            MESSAGE_STOP,
        ]
    )
    chunks, _ = translate([body])
    assert chunks[1] == BlockEnd(0, ReasoningBlock("", signed=True, signature=signed("abcdef")))
    assert finish_of(chunks).replay_state["blocks"] == {"0": {"signature": "abcdef"}}


def test_thinking_text_and_signature_on_block_start() -> None:
    body = sse(
        [
            message_start(),
            block_start(0, {"type": "thinking", "thinking": "pre", "signature": "sig0"}),
            block_stop(0),
            block_start(1, {"type": "text", "text": "hello"}),
            block_stop(1),
            message_delta("end_turn"),
            MESSAGE_STOP,
        ]
    )
    chunks, _ = translate([body])
    assert chunks[:6] == [
        BlockStart(0, "reasoning", signed=True),
        ReasoningDelta(0, "pre"),
        BlockEnd(0, ReasoningBlock("pre", signed=True, signature=signed("sig0"))),
        BlockStart(1, "text"),
        TextDelta(1, "hello"),
        BlockEnd(1, TextBlock("hello")),
    ]
    assert finish_of(chunks).replay_state["blocks"] == {"0": {"signature": "sig0"}}


def test_thinking_without_signature_has_no_replay_state() -> None:
    body = sse(
        [
            message_start(),
            block_start(0, {"type": "thinking", "thinking": ""}),
            delta(0, {"type": "thinking_delta", "thinking": "hm"}),
            block_stop(0),
            message_delta("end_turn"),
            MESSAGE_STOP,
        ]
    )
    chunks, _ = translate([body])
    assert finish_of(chunks).replay_state is None


def test_parallel_tool_calls_and_empty_input() -> None:
    chunks, _ = translate([PARALLEL_TOOLS_BODY])
    assert chunks == [
        BlockStart(0, "tool-call", id="toolu_a", name="now"),
        ToolCallDelta(0, "toolu_a", "{}"),
        BlockEnd(0, ToolCallBlock("toolu_a", "now", "{}")),
        BlockStart(1, "tool-call", id="toolu_b", name="add"),
        ToolCallDelta(1, "toolu_b", '{"a": 1,'),
        ToolCallDelta(1, "toolu_b", ' "b": 2}'),
        BlockEnd(1, ToolCallBlock("toolu_b", "add", '{"a": 1, "b": 2}')),
        Usage(TokenUsage(10, 30)),
        Finish(FinishReason("tool-calls", "tool_use")),
    ]


def test_tool_input_sent_whole_on_block_start() -> None:
    body = sse(
        [
            message_start(),
            block_start(0, {"type": "tool_use", "name": "f", "input": {"x": [1, 2]}}),
            block_stop(0),
            message_delta("tool_use"),
            MESSAGE_STOP,
        ]
    )
    chunks, _ = translate([body])
    # a missing id is synthesized; the start input is kept as given
    assert chunks[:3] == [
        BlockStart(0, "tool-call", id="toolu_harness_0", name="f"),
        ToolCallDelta(0, "toolu_harness_0", '{"x": [1, 2]}'),
        BlockEnd(0, ToolCallBlock("toolu_harness_0", "f", '{"x": [1, 2]}')),
    ]


def test_tool_use_without_a_name_is_protocol() -> None:
    translator = Translator()
    with pytest.raises(LlmError) as info:
        translator.feed_data("content_block_start", json.dumps(block_start(0, {"type": "tool_use", "id": "t1"})))
    assert info.value.code == "PROTOCOL"
    assert "without a name" in info.value.message


def test_empty_text_blocks_never_open_and_take_no_index() -> None:
    body = sse(
        [
            message_start(),
            block_start(0, {"type": "text", "text": ""}),
            text_delta(0, ""),
            block_stop(0),
            block_start(1, {"type": "tool_use", "id": "t", "name": "f", "input": {}}),
            block_stop(1),
            block_start(2, {"type": "text", "text": ""}),
            MESSAGE_STOP,
        ]
    )
    chunks, _ = translate([body])
    assert chunks[:3] == [
        BlockStart(0, "tool-call", id="t", name="f"),
        ToolCallDelta(0, "t", "{}"),
        BlockEnd(0, ToolCallBlock("t", "f", "{}")),
    ]
    assert kinds(chunks[3:]) == ["Usage", "Finish"]


def test_unknown_block_types_consume_no_index_and_pause_turn() -> None:
    chunks, _ = translate([SERVER_TOOL_BODY])
    assert chunks == [
        BlockStart(0, "text"),
        TextDelta(0, "Found."),
        BlockEnd(0, TextBlock("Found.")),
        Usage(TokenUsage(10, 5)),
        Finish(FinishReason("stop", "pause_turn")),
    ]


def test_block_start_without_content_block_is_ignored() -> None:
    body = sse(
        [
            message_start(),
            {"type": "content_block_start", "index": 0},
            delta(0, {"type": "text_delta", "text": "x"}),
            block_stop(0),
            message_delta("end_turn"),
            MESSAGE_STOP,
        ]
    )
    chunks, _ = translate([body])
    assert kinds(chunks) == ["Usage", "Finish"]


@pytest.mark.parametrize(("raw", "kind"), sorted(STOP_REASONS.items()))
def test_stop_reasons(raw: str, kind: str) -> None:
    chunks, _ = translate([text_body("x", stop_reason=raw)])
    reason = finish_of(chunks).reason
    # tool_use without any tool call block is not a tool-calls finish (docs/stream-obligations.md#4-tool-call-finishes)
    assert reason == FinishReason("stop" if kind == "tool-calls" else kind, raw)  # type: ignore[arg-type]


def test_unknown_stop_reason_is_other_with_raw() -> None:
    chunks, _ = translate([text_body("x", stop_reason="new_reason")])
    assert finish_of(chunks).reason == FinishReason("other", "new_reason")


def test_tool_calls_with_end_turn_become_tool_calls_but_length_stays() -> None:
    def body(reason: str) -> bytes:
        return sse(
            [
                message_start(),
                block_start(0, {"type": "tool_use", "id": "t", "name": "f", "input": {}}),
                block_stop(0),
                message_delta(reason),
                MESSAGE_STOP,
            ]
        )

    assert finish_of(translate([body("end_turn")])[0]).reason == FinishReason("tool-calls", "end_turn")
    assert finish_of(translate([body("max_tokens")])[0]).reason == FinishReason("length", "max_tokens")


def test_no_message_delta_and_no_usage() -> None:
    body = sse(
        [
            {"type": "message_start", "message": {"id": "m", "model": MODEL}},
            block_start(0, {"type": "text", "text": ""}),
            text_delta(0, "hi"),
            block_stop(0),
            MESSAGE_STOP,
        ]
    )
    chunks, translator = translate([body])
    assert kinds(chunks) == ["BlockStart", "TextDelta", "BlockEnd", "Finish"]
    assert finish_of(chunks).reason == FinishReason("other", None)
    assert translator.usage is None


def test_message_start_without_message() -> None:
    chunks, translator = translate([sse([{"type": "message_start"}, MESSAGE_STOP])])
    assert kinds(chunks) == ["Finish"]
    assert translator.response_id is None


def test_usage_replaces_never_adds_and_keeps_unreported_fields() -> None:
    body = sse(
        [
            message_start(7, 1, cache_read_input_tokens=3),
            message_delta(None, 4),
            message_delta("end_turn", 9, input_tokens=8, cache_creation_input_tokens=2),
            {"type": "message_delta", "delta": {"stop_reason": None}},
            MESSAGE_STOP,
        ]
    )
    chunks, _ = translate([body])
    assert chunks[-2] == Usage(TokenUsage(13, 9, cache_read_tokens=3, cache_write_tokens=2))
    assert finish_of(chunks).reason == FinishReason("stop", "end_turn")


def test_cache_writes_by_ttl_report_the_one_hour_part() -> None:
    """``usage.cache_creation`` splits the writes by TTL; the one-hour part is priced on its own."""
    creation = {"ephemeral_5m_input_tokens": 30, "ephemeral_1h_input_tokens": 70}
    start = message_start(5, 1, cache_creation_input_tokens=100)
    start["message"]["usage"]["cache_creation"] = creation
    delta = message_delta("end_turn", 4)
    delta["usage"]["cache_creation"] = {"ephemeral_5m_input_tokens": 30}  # a missing count keeps the last
    chunks, _ = translate([sse([start, delta, MESSAGE_STOP])])
    assert chunks[-2] == Usage(TokenUsage(105, 4, cache_write_tokens=100, cache_write_1h_tokens=70))


def test_usage_without_input_tokens_reports_none() -> None:
    body = sse([message_delta("end_turn", 3, cache_read_input_tokens=5), MESSAGE_STOP])
    chunks, _ = translate([body])
    assert chunks[0] == Usage(TokenUsage(None, 3, cache_read_tokens=5))


def test_inband_error_closes_blocks_and_finishes_with_error() -> None:
    chunks, translator = translate([INBAND_ERROR_BODY])
    assert kinds(chunks) == ["BlockStart", "TextDelta", "BlockEnd", "Usage", "Finish"]
    assert chunks[2] == BlockEnd(0, TextBlock("partial \u20ac"))
    assert chunks[3] == Usage(TokenUsage(20, 1))
    reason = finish_of(chunks).reason
    assert reason.kind == "error"
    assert reason.raw == "overloaded_error"
    failure = reason.failure
    assert failure is not None
    assert failure.code == "OVERLOADED"
    assert failure.retryable
    assert failure.status is None
    assert failure.provider_type == "overloaded_error"
    assert "Overloaded" in failure.message
    assert translator.done


def test_inband_error_without_body_and_with_request_id() -> None:
    translator = Translator(model=MODEL)
    translator.request_id = "req_9"
    chunks = translator.feed_data("error", "{}")  # type taken from the SSE event name
    reason = finish_of(list(chunks)).reason
    assert reason.raw is None
    assert reason.failure is not None
    assert reason.failure.code == "SERVER"
    assert reason.failure.request_id == "req_9"
    assert kinds(list(chunks)) == ["Finish"]


def test_inband_error_request_id_from_event() -> None:
    translator = Translator()
    data = json.dumps({"type": "error", "error": {"type": "api_error", "message": "boom"}, "request_id": "req_e"})
    reason = finish_of(list(translator.feed_data("error", data))).reason
    assert reason.failure is not None
    assert (reason.failure.code, reason.failure.request_id) == ("SERVER", "req_e")


def test_type_falls_back_to_event_name_and_json_type_wins() -> None:
    translator = Translator()
    assert translator.feed_data("message_start", '{"message": {"id": "m1"}}') == ()
    assert translator.response_id == "m1"
    assert translator.feed_data("content_block_start", '{"index": 0, "content_block": {"type": "text"}}') == ()
    assert translator.feed_data(
        "content_block_delta", '{"index": 0, "delta": {"type": "text_delta", "text": "z"}}'
    ) == (
        BlockStart(0, "text"),
        TextDelta(0, "z"),
    )
    # the JSON type wins over a wrong SSE name (proxies rename events)
    assert translator.feed_data("message", json.dumps(text_delta(0, "a"))) == (TextDelta(0, "a"),)
    assert translator.feed_data("ping", "{}") == ()
    assert translator.feed_data("something_new", '{"x": 1}') == ()


def test_events_after_done_are_ignored() -> None:
    _, translator = translate([TEXT_BODY])
    assert translator.feed_data("message_stop", '{"type":"message_stop"}') == ()
    assert translator.abort() == ()
    assert translator.handle(WireEvent(type="message_stop")) == ()


def test_empty_deltas_are_dropped_and_unknown_deltas_ignored() -> None:
    body = sse(
        [
            message_start(),
            block_start(0, {"type": "text", "text": ""}),
            text_delta(0, ""),
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta"}},
            {"type": "content_block_delta", "index": 0},
            delta(0, {"type": "future_delta", "x": 1}),
            text_delta(0, "a"),
            block_stop(0),
            block_start(1, {"type": "thinking", "thinking": ""}),
            delta(1, {"type": "signature_delta", "signature": ""}),
            delta(1, {"type": "thinking_delta", "thinking": ""}),
            block_stop(1),
            message_delta("end_turn"),
            MESSAGE_STOP,
        ]
    )
    chunks, _ = translate([body])
    assert chunks[:5] == [
        BlockStart(0, "text"),
        TextDelta(0, "a"),
        BlockEnd(0, TextBlock("a")),
        BlockStart(1, "reasoning", signed=True),
        BlockEnd(1, ReasoningBlock("", signed=True)),
    ]
    assert finish_of(chunks).replay_state is None


def test_message_stop_closes_blocks_left_open() -> None:
    body = sse([message_start(), block_start(0, {"type": "text", "text": ""}), text_delta(0, "x"), MESSAGE_STOP])
    chunks, _ = translate([body])
    assert kinds(chunks) == ["BlockStart", "TextDelta", "BlockEnd", "Usage", "Finish"]


def test_abort_closes_open_blocks() -> None:
    translator = Translator(model=MODEL)
    for event in (message_start(4, 2), block_start(0, {"type": "thinking", "thinking": ""})):
        translator.feed_data(event["type"], json.dumps(event))
    translator.feed_data("content_block_delta", json.dumps(delta(0, {"type": "thinking_delta", "thinking": "hmm"})))
    chunks = list(translator.abort("user pressed stop"))
    assert chunks[:2] == [BlockEnd(0, ReasoningBlock("hmm", signed=True)), Usage(TokenUsage(4, 2))]
    reason = finish_of(chunks).reason
    assert reason.kind == "aborted"
    assert reason.failure is not None
    assert (reason.failure.code, reason.failure.message) == ("ABORTED", "user pressed stop")
    assert translator.done


def test_abort_before_any_event() -> None:
    assert kinds(list(Translator().abort())) == ["Finish"]


def test_end_of_input_before_message_stop_is_network() -> None:
    translator = Translator()
    translator.request_id = "req_1"
    with pytest.raises(LlmError) as caught:
        translator.end_of_input()
    error = caught.value
    assert (error.code, error.request_id, error.retryable) == ("NETWORK", "req_1", True)


@pytest.mark.parametrize(
    "data",
    [
        b"{not json",
        "[1, 2]",
        '{"type": "content_block_delta", "index": "zero"}',
    ],
)
def test_malformed_payload_is_protocol(data: str | bytes) -> None:
    with pytest.raises(LlmError) as info:
        Translator().feed_data("content_block_delta", data)
    assert info.value.code == "PROTOCOL"
    assert "malformed" in info.value.message


@pytest.mark.parametrize(
    ("events", "message"),
    [
        ([text_delta(3, "x")], "not open"),
        ([block_stop(3)], "not open"),
        ([{"type": "content_block_stop"}], "without an index"),
        ([block_start(0, {"type": "text"}), block_start(0, {"type": "text"})], "already open"),
        ([block_start(0, {"type": "text"}), delta(0, {"type": "thinking_delta", "thinking": "x"})], "inside a text"),
        ([block_start(0, {"type": "text"}), delta(0, {"type": "signature_delta", "signature": "x"})], "inside a text"),
        ([block_start(0, {"type": "thinking"}), text_delta(0, "x")], "inside a thinking"),
        ([block_start(0, {"type": "text"}), delta(0, {"type": "input_json_delta", "partial_json": "{"})], "inside"),
    ],
)
def test_impossible_sequences_are_protocol(events: list[dict[str, object]], message: str) -> None:
    translator = Translator()
    *before, last = events
    for event in before:
        translator.feed_data(str(event["type"]), json.dumps(event))
    with pytest.raises(LlmError) as info:
        translator.feed_data(str(last["type"]), json.dumps(last))
    assert info.value.code == "PROTOCOL"
    assert message in info.value.message


def test_ignored_block_deltas_and_stop_are_silent() -> None:
    translator = Translator()
    translator.feed_data("content_block_start", json.dumps(block_start(5, {"type": "server_tool_use"})))
    assert translator.feed_data("content_block_delta", json.dumps(text_delta(5, "x"))) == ()
    assert translator.feed_data("content_block_stop", json.dumps(block_stop(5))) == ()


def test_ping_anywhere_changes_nothing() -> None:
    with_pings = sse(
        [
            PING,
            message_start(),
            PING,
            block_start(0, {"type": "text", "text": ""}),
            PING,
            text_delta(0, "a"),
            PING,
            block_stop(0),
            message_delta("end_turn"),
            PING,
            MESSAGE_STOP,
        ]
    )
    assert translate([with_pings])[0] == translate([text_body("a")])[0]


def test_crlf_framing_gives_the_same_chunks() -> None:
    events = [message_start(), block_start(0, {"type": "text"}), text_delta(0, "\u20ac"), block_stop(0), MESSAGE_STOP]
    assert translate([sse(events, crlf=True)])[0] == translate([sse(events)])[0]


@pytest.mark.parametrize("name", sorted(SUCCESS_BODIES))
def test_every_split_gives_identical_chunks(name: str) -> None:
    body = SUCCESS_BODIES[name]
    expected, _ = translate([body])
    for reads in every_split(body):
        chunks, _ = translate(reads)
        assert chunks == expected, f"split {[len(r) for r in reads]}"


def test_every_split_of_the_inband_error() -> None:
    expected, _ = translate([INBAND_ERROR_BODY])
    for reads in every_split(INBAND_ERROR_BODY):
        assert translate(reads)[0] == expected


def test_message_start_usage_without_output_tokens() -> None:
    body = sse([{"type": "message_start", "message": {"usage": {"input_tokens": 3}}}, MESSAGE_STOP])
    assert translate([body])[0][0] == Usage(TokenUsage(3, None))


def test_redacted_thinking_without_data_has_no_replay_entry() -> None:
    body = sse([message_start(), block_start(0, {"type": "redacted_thinking"}), block_stop(0), MESSAGE_STOP])
    chunks, _ = translate([body])
    assert chunks[1] == BlockEnd(0, ReasoningBlock("", signed=True))
    assert finish_of(chunks).replay_state is None


def test_terminal_event_with_an_ignored_block_open() -> None:
    body = sse([message_start(), block_start(0, {"type": "server_tool_use"}), MESSAGE_STOP])
    assert kinds(translate([body])[0]) == ["Usage", "Finish"]


@pytest.mark.parametrize(
    ("error_type", "message", "code"),
    [
        ("overloaded_error", "Overloaded", "OVERLOADED"),
        ("api_error", "Internal server error", "SERVER"),
        ("rate_limit_error", "slow down", "RATE_LIMITED"),
        ("invalid_request_error", "bad", "BAD_REQUEST"),
        ("invalid_request_error", "prompt is too long: 205351 tokens > 200000 maximum", "CONTEXT_LENGTH"),
        ("timeout_error", "took too long", "TIMEOUT"),
        ("some_future_error", "?", "SERVER"),
    ],
)
def test_inband_error_types(error_type: str, message: str, code: str) -> None:
    body = sse(
        [
            message_start(),
            block_start(0, {"type": "tool_use", "id": "t", "name": "f", "input": {}}),
            delta(0, {"type": "input_json_delta", "partial_json": '{"a": '}),
            {"type": "error", "error": {"type": error_type, "message": message}},
        ]
    )
    chunks, _ = translate([body])  # check_stream passes: the cut tool call is closed with what it holds
    assert chunks[2] == BlockEnd(0, ToolCallBlock("t", "f", '{"a": '))
    reason = finish_of(chunks).reason
    assert reason.kind == "error"
    assert reason.failure is not None
    assert (reason.failure.code, reason.failure.provider_type) == (code, error_type)
    assert message in reason.failure.message


def test_inband_error_before_message_start() -> None:
    chunks, _ = translate([sse([{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}])])
    assert kinds(chunks) == ["Finish"]


def test_complete_blocks_inside_message_start_are_emitted_with_its_stop_reason() -> None:
    chunks, translator = translate([PROGRAMMATIC_TOOL_BODY])
    sql = '{"sql": "SELECT name FROM caf\u00e9 WHERE p > 5 \u20ac", "limit": 10}'
    assert chunks == [
        BlockStart(0, "text"),
        TextDelta(0, "Querying the caf\u00e9 table \u2026"),
        BlockEnd(0, TextBlock("Querying the caf\u00e9 table \u2026")),
        BlockStart(1, "tool-call", id="toolu_01", name="query_database"),
        ToolCallDelta(1, "toolu_01", sql),
        BlockEnd(1, ToolCallBlock("toolu_01", "query_database", sql)),
        BlockStart(2, "tool-call", id="toolu_02", name="now"),
        ToolCallDelta(2, "toolu_02", "{}"),
        BlockEnd(2, ToolCallBlock("toolu_02", "now", "{}")),
        Usage(TokenUsage(40, 25)),
        Finish(FinishReason("tool-calls", "tool_use")),
    ]
    assert translator.response_id == "msg_02"


def test_message_start_blocks_then_streamed_blocks_take_the_next_indices() -> None:
    body = sse(
        [
            {
                "type": "message_start",
                "message": {
                    "content": [
                        {"type": "thinking", "thinking": "hm", "signature": SIGNATURE},
                        {"type": "text", "text": ""},
                    ],
                    "stop_reason": "end_turn",
                },
            },
            block_start(2, {"type": "text", "text": ""}),
            text_delta(2, "ok"),
            block_stop(2),
            MESSAGE_STOP,
        ]
    )
    chunks, translator = translate([body])
    assert chunks == [
        BlockStart(0, "reasoning", signed=True),
        ReasoningDelta(0, "hm"),
        BlockEnd(0, ReasoningBlock("hm", signed=True, signature=signed(SIGNATURE))),
        BlockStart(1, "text"),
        TextDelta(1, "ok"),
        BlockEnd(1, TextBlock("ok")),
        Finish(FinishReason("stop", "end_turn"), translator.replay_state),
    ]
    assert translator.replay_state["blocks"] == {"0": {"signature": SIGNATURE}}  # type: ignore[index]


def test_a_later_message_delta_stop_reason_wins() -> None:
    body = sse(
        [
            {
                "type": "message_start",
                "message": {"content": [{"type": "text", "text": "x"}], "stop_reason": "tool_use"},
            },
            message_delta("max_tokens"),
            MESSAGE_STOP,
        ]
    )
    assert finish_of(translate([body])[0]).reason == FinishReason("length", "max_tokens")
