"""``POST /v1/responses``: the official ``openai`` SDK's Responses calls against a real gateway over
the mock provider, the event order against the reference (PROTOCOLS.md §9), and the dialect's
translator without a server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import openai
import pytest
from gw_helpers import Clients, gateway_yaml, openai_sse, serve_gateway

from harness_core.errors import Failure
from harness_core.testing import Reply, ScriptedServer
from harness_core.types import (
    BlockEnd,
    BlockStart,
    FileBlock,
    Finish,
    FinishKind,
    FinishReason,
    JsonObjectFormat,
    JsonSchemaFormat,
    Message,
    NamedToolChoice,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    Usage,
)
from harness_gateway.errors import GatewayError
from harness_gateway.openai_chat import parse_chat_request
from harness_gateway.openai_responses import (
    OPENAI_RESPONSES,
    STATE_PREFIX,
    ResponsesStreamEncoder,
    pack_state,
    parse_responses_request,
    responses_response,
)

ECHO_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}
TOOLS: list[Any] = [{"type": "function", "name": "echo", "parameters": ECHO_SCHEMA}]


@pytest.fixture
def gateway(tmp_path: Path):  # type: ignore[no-untyped-def]
    settings = "    aliases: {fast: mock/echo}\n    prices: {mock/echo: {input: 1.0, output: 2.0}}"
    with serve_gateway(tmp_path, gateway_yaml(settings, db=tmp_path / "gw.sqlite")) as running:
        yield running


@pytest.fixture
def clients(gateway):  # type: ignore[no-untyped-def]
    opened = Clients(gateway.url)
    yield opened
    opened.close()


def test_create_returns_a_completed_response_with_usage(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    reply = clients.openai().responses.create(model="mock/echo", instructions="be brief", input="hello there")
    assert reply.id.startswith("resp_")
    assert reply.status == "completed"
    assert reply.output_text == "hello there"
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (4, 2)
    assert reply.usage.input_tokens_details.cached_tokens == 0
    assert reply.usage.output_tokens_details.reasoning_tokens == 0
    assert reply.model == "mock/echo"
    assert reply.instructions == "be brief"


def test_stream_follows_the_reference_event_order(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    with clients.openai().responses.stream(model="fast", input="one two three") as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[2:4] == ["response.output_item.added", "response.content_part.added"]
    assert set(kinds[4:-4]) == {"response.output_text.delta"}
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert final.output_text == "one two three"
    assert final.usage is not None
    assert final.usage.output_tokens == 3


def test_tool_round_trip(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    client = clients.openai()
    with client.responses.stream(model="mock/echo", input="please echo this", tools=TOOLS) as stream:
        kinds = [e.type for e in stream]
        first = stream.get_final_response()
    assert "response.function_call_arguments.delta" in kinds
    assert "response.function_call_arguments.done" in kinds
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1
    assert calls[0].name == "echo"
    assert json.loads(calls[0].arguments) == {"text": "please echo this"}
    history: list[Any] = [{"role": "user", "content": "please echo this"}]
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history.append({"type": "function_call_output", "call_id": calls[0].call_id, "output": "ECHOED"})
    reply = client.responses.create(model="mock/echo", input=history, tools=TOOLS)
    assert reply.output_text == "The echo tool returned: ECHOED"


def test_errors_are_openai_shaped(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    client = clients.openai()
    with pytest.raises(openai.NotFoundError) as not_found:
        client.responses.create(model="nope/x", input="hi")
    assert "nope/x" in not_found.value.message
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model="mock/echo", input="hi", tools=[{"type": "web_search"}])
    assert "web_search" in bad.value.message
    assert bad.value.param == "tools[0].type"
    with pytest.raises(openai.NotFoundError) as unknown:
        client.responses.create(model="mock/echo", input="hi", previous_response_id="resp_unknown")
    assert unknown.value.code == "previous_response_not_found"
    assert unknown.value.param == "previous_response_id"
    assert unknown.value.type == "invalid_request_error"
    answer = httpx.get(gateway.url + "/v1/responses/resp_x")
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "response_not_found"
    assert httpx.get(gateway.url + "/v1/responses/resp_x/nothing").json()["error"]["code"] == "unknown_endpoint"


@pytest.mark.parametrize("stream", [False, True])
def test_an_effort_the_route_refuses_names_the_client_s_field(gateway, clients, stream: bool) -> None:  # type: ignore[no-untyped-def]
    """The route's UNSUPPORTED names the vocabulary field (``reasoning_effort``); each dialect
    answers it as its own spelling: ``reasoning.effort`` on Responses, ``reasoning_effort`` on Chat."""
    client = clients.openai()
    with pytest.raises(openai.BadRequestError) as responses:
        client.responses.create(model="mock/echo", input="hi", reasoning={"effort": "max"}, stream=stream)  # type: ignore[call-overload]
    assert responses.value.param == "reasoning.effort"
    assert "reasoning.effort 'max' is not one of" in responses.value.message  # the client's spelling
    with pytest.raises(openai.BadRequestError) as chat:
        client.chat.completions.create(  # type: ignore[call-overload]
            model="mock/echo", messages=[{"role": "user", "content": "hi"}], reasoning_effort="max", stream=stream
        )
    assert chat.value.param == "reasoning_effort"
    assert "reasoning_effort 'max' is not one of" in chat.value.message


def test_openai_s_effort_none_is_the_vocabulary_s_off(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    """OpenAI's ``"none"`` (reasoning off) reaches a route as ``"off"`` from both OpenAI dialects:
    the mock, whose efforts are ``off`` … ``high``, serves it (it was a 400 naming ``'none'``)."""
    client = clients.openai()
    reply = client.responses.create(model="mock/echo", input="hi", reasoning={"effort": "none"})
    assert reply.status == "completed"
    chat = client.chat.completions.create(
        model="mock/echo", messages=[{"role": "user", "content": "hi"}], reasoning_effort="none"
    )
    assert chat.choices[0].finish_reason == "stop"
    assert (
        parse_chat_request(
            {"model": "r/m", "messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "none"}
        ).options.reasoning_effort
        == "off"
    )


# ---------------------------------------------------------------------- the translator


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "r/m", "input": "hi", **fields}


def test_every_input_item_kind_is_read() -> None:
    image = {"type": "input_image", "image_url": "data:image/png;base64,aGk="}
    pdf = {"type": "input_file", "file_data": "data:application/pdf;base64,aGk=", "filename": "a.pdf"}
    linked = {"type": "input_file", "file_url": "https://example.test/a.pdf"}
    state = pack_state("anthropic", {"v": 1, "blocks": {"0": {"signature": "sig"}}})
    parsed = parse_responses_request(
        body(
            instructions="rules",
            input=[
                {"role": "developer", "content": [{"type": "input_text", "text": "dev"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "look"}, image, pdf]},
                {"role": "user", "content": [linked]},
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}],
                 "encrypted_content": state},
                {"role": "assistant",
                 "content": [{"type": "output_text", "text": "ok"}, {"type": "refusal", "refusal": "!"}]},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": ""},
                {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "done"}]},
                {"type": "reasoning", "summary": []},
                {"role": "user", "content": "again"},
            ],
            max_output_tokens=10, temperature=0.5, top_p=1, reasoning={"effort": "low"},
            tool_choice={"type": "function", "name": "echo"}, tools=TOOLS, truncation="disabled",
            text={"format": {"type": "json_schema", "name": "s", "schema": ECHO_SCHEMA, "strict": True}},
            include=["reasoning.encrypted_content"], metadata={"a": "b"}, stream=True,
        ),
        "anthropic",
    )  # fmt: skip
    options = parsed.options
    assert options.system == "rules\n\ndev"
    assert (options.max_tokens, options.temperature, options.reasoning_effort) == (10, 0.5, "low")
    assert options.tool_choice == NamedToolChoice("echo")
    assert options.response_format == JsonSchemaFormat(name="s", schema=ECHO_SCHEMA, strict=True)
    user, linked_user, assistant, tool, reasoning_only, last = options.messages
    assert isinstance(user.content[1], FileBlock)
    assert user.content[2].filename == "a.pdf"
    assert isinstance(linked_user.content[0], FileBlock)
    assert assistant.content == [ReasoningBlock("think", signed=True), TextBlock("ok!"), ToolCallBlock("c1", "f", "{}")]
    assert assistant.replay_state == {"v": 1, "blocks": {"0": {"signature": "sig"}}}
    assert assistant.source == "anthropic"
    assert tool.content == [ToolResultBlock(tool_call_id="c1", content="done")]
    assert reasoning_only.content == [ReasoningBlock("")]
    assert last.content == [TextBlock("again")]
    assert parsed.stream
    assert parsed.extras.include_state
    assert parsed.extras.echo["metadata"] == {"a": "b"}
    assert parse_responses_request(body(text={"format": {"type": "json_object"}})).options.response_format == (
        JsonObjectFormat()
    )
    plain = parse_responses_request(body(text={"format": {"type": "text"}}, tool_choice="required", tools=TOOLS))
    assert plain.options.response_format is None
    assert plain.options.tool_choice == "required"
    assert parse_responses_request(body(text={})).options.response_format is None


def user_part(part: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": [part]}


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"input": ""}, "input"),  # OpenAI refuses an empty input too
        ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0].type"),
        ({"input": [{"type": "computer_call"}]}, "input[0].type"),
        ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role"),
        ({"input": [{"role": "user", "content": [{"type": "input_audio"}]}]}, "input[0].content[0].type"),
        ({"input": [user_part({"type": "input_image", "file_id": "f"})]}, "input[0].content[0].file_id"),
        ({"input": [user_part({"type": "input_file", "file_id": "f"})]}, "input[0].content[0].file_id"),
        ({"input": [user_part({"type": "input_file", "file_data": "aGk="})]}, "input[0].content[0].file_data"),
        ({"input": [{"role": "system", "content": [{"type": "input_image"}]}]}, "input[0].content[0].type"),
        ({"input": [{"type": "reasoning", "encrypted_content": "gAAAA"}]}, "input[0].encrypted_content"),
        ({"input": [{"type": "reasoning", "encrypted_content": STATE_PREFIX + "!!"}]}, "input[0].encrypted_content"),
        ({"input": [{"type": "reasoning", "encrypted_content": STATE_PREFIX + "WzFd"}]}, "input[0].encrypted_content"),
        ({"truncation": "sometimes"}, "truncation"),
        ({"tool_choice": "always"}, "tool_choice"),
        ({"tool_choice": {"type": "file_search"}}, "tool_choice.type"),
        ({"text": {"format": {"type": "xml"}}}, "text.format.type"),
        ({"text": {"format": {"type": "json_schema", "name": "bad name!"}}}, "text.format.name"),
        ({"include": [1]}, "include[0]"),
        ({"temperature": "hot"}, "temperature"),
        ({"max_output_tokens": -1}, "max_output_tokens"),
    ],
)  # fmt: skip
def test_bad_requests_name_the_field(fields: dict[str, Any], where: str) -> None:
    with pytest.raises(GatewayError) as caught:
        parse_responses_request(body(**fields))
    assert caught.value.status == 400
    assert caught.value.param == (where or None)


def test_non_streaming_output_items_and_replay_state() -> None:
    parsed = OPENAI_RESPONSES.parse(body(include=["reasoning.encrypted_content"]), "anthropic", "m")
    message = Message(
        role="assistant", content=[ReasoningBlock("hmm", signed=True), TextBlock("hi"), ToolCallBlock("c", "f", "{}")]
    )
    state = {"v": 1, "blocks": {"0": {"signature": "s"}}}
    usage = TokenUsage(input_tokens=5, output_tokens=3, cache_read_tokens=2, reasoning_tokens=1)
    reply = OPENAI_RESPONSES.response("resp_1", parsed, message, usage, Finish(FinishReason(kind="tool-calls"), state))
    assert [item["type"] for item in reply["output"]] == ["reasoning", "message", "function_call"]
    assert reply["usage"] == {
        "input_tokens": 5, "input_tokens_details": {"cached_tokens": 2},
        "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 1}, "total_tokens": 8,
    }  # fmt: skip
    back = parse_responses_request(body(input=reply["output"]))  # the client sends the items back
    assert back.options.messages[0].replay_state == state
    assert back.options.messages[0].source == "anthropic"
    assert back.options.messages[0].content == message.content
    plain = responses_response("resp_2", parsed, Message(role="assistant", content=[TextBlock("x")]), None,
                               Finish(FinishReason(kind="length"), state))  # fmt: skip
    assert plain["status"] == "incomplete"
    assert plain["incomplete_details"] == {"reason": "max_output_tokens"}
    assert [item["type"] for item in plain["output"]] == ["reasoning", "message"]  # a carrier item holds the state
    assert plain["output"][1]["status"] == "incomplete"  # the item the limit cut
    assert [item.get("status") for item in reply["output"]] == [None, "completed", "completed"]
    again = parse_responses_request(body(input=plain["output"])).options.messages
    assert again[0].content == [TextBlock("x")]
    assert again[0].replay_state == state
    unasked = responses_response("r", parse_responses_request(body()), Message(role="assistant", content=[]), None,
                                 Finish(FinishReason(kind="content-filter"), state))  # fmt: skip
    assert unasked["output"] == []
    assert unasked["incomplete_details"] == {"reason": "content_filter"}


def events(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in data.decode().splitlines() if line.startswith("data: ")]


def test_stream_encoder_events_for_every_block_kind() -> None:
    parsed = parse_responses_request(body(include=["reasoning.encrypted_content"]), "anthropic")
    encoder = OPENAI_RESPONSES.encoder("resp_1", "r/m", parsed)
    assert isinstance(encoder, ResponsesStreamEncoder)
    out = encoder.start()
    for chunk in (
        BlockStart(0, "reasoning"), ReasoningDelta(0, "hm"), BlockEnd(0, ReasoningBlock("hm")),
        BlockStart(1, "text"), TextDelta(1, "hi"), BlockEnd(1, TextBlock("hi")),
        BlockStart(2, "tool-call", id="c", name="f"), ToolCallDelta(2, "c", '{"a":1}'),
        BlockEnd(2, ToolCallBlock("c", "f", '{"a":1}')),
        BlockStart(3, "tool-call", id="d", name="g"),
        Usage(TokenUsage(input_tokens=1, output_tokens=2)),
    ):  # fmt: skip
        out += encoder.feed(chunk)
    assert encoder.feed(object()) == b""  # type: ignore[arg-type]  # unknown kinds pass
    out += encoder.feed(Finish(FinishReason(kind="stop"), {"v": 1}))
    seen = events(out)
    assert [e["sequence_number"] for e in seen] == list(range(len(seen)))
    assert [e["type"] for e in seen if "summary" in e["type"]] == [
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
    ]
    final = seen[-1]["response"]
    assert seen[-1]["type"] == "response.completed"
    assert final["usage"]["total_tokens"] == 3
    assert [item["type"] for item in final["output"]] == ["reasoning", "message", "function_call", "function_call"]
    assert final["output"][0]["encrypted_content"].startswith(STATE_PREFIX)
    assert final["output"][3]["arguments"] == "{}"  # left open: closed at the finish


def test_stream_encoder_failures() -> None:
    encoder = ResponsesStreamEncoder("resp_1", parse_responses_request(body()))
    failed = encoder.feed(Finish(FinishReason(kind="error", failure=Failure(code="OVERLOADED", message="busy"))))
    kinds = [e["type"] for e in events(failed)]
    assert kinds == ["error", "response.failed"]
    assert events(failed)[0]["error"]["message"] == "busy"
    assert encoder.failure is not None
    assert encoder.failure.status == 503
    early = events(ResponsesStreamEncoder("resp_4", parse_responses_request(body())).error(GatewayError(503, "gone")))
    assert [e["type"] for e in early] == ["error", "response.failed"]  # (a failure before the finish: no usage)
    assert (early[1]["response"]["error"], early[1]["response"]["usage"]["total_tokens"]) == (
        {"code": "server_error", "message": "gone"},
        0,
    )
    short = ResponsesStreamEncoder("resp_2", parse_responses_request(body())).feed(Finish(FinishReason(kind="length")))
    assert events(short)[-1]["type"] == "response.incomplete"
    aborted = ResponsesStreamEncoder("resp_3", parse_responses_request(body()))
    aborted.feed(BlockStart(0, "text"))
    aborted.feed(TextDelta(0, "par"))
    failure = Failure(code="ABORTED", message="aborted by an operator from the console")
    end = events(aborted.feed(Finish(FinishReason(kind="aborted", failure=failure))))
    assert [e["type"] for e in end][-2:] == ["error", "response.failed"]  # not completed, nor incomplete
    assert end[-2]["error"] == {
        "message": failure.message, "type": "server_error", "param": None, "code": "ABORTED"
    }  # fmt: skip
    assert end[-1]["response"]["status"] == "failed"
    assert end[-1]["response"]["error"] == {"code": "ABORTED", "message": failure.message}
    assert end[-1]["response"]["output"][0]["content"][0]["text"] == "par"  # the partial text is kept
    closed = [e["item"] for e in end if e["type"] == "response.output_item.done"]
    assert [item["status"] for item in closed] == ["incomplete"]  # open when it failed: not completed
    assert end[-1]["response"]["output"][0]["status"] == "incomplete"


def test_a_failure_marks_only_the_items_still_open_incomplete() -> None:
    encoder = ResponsesStreamEncoder("resp_1", parse_responses_request(body()))
    out = encoder.start()
    for chunk in (
        BlockStart(0, "reasoning"), ReasoningDelta(0, "hm"), BlockEnd(0, ReasoningBlock("hm")),
        BlockStart(1, "text"), TextDelta(1, "hi"), BlockEnd(1, TextBlock("hi")),
        BlockStart(2, "tool-call", id="c", name="f"), ToolCallDelta(2, "c", '{"a":'),
    ):  # fmt: skip
        out += encoder.feed(chunk)
    out += encoder.feed(Finish(FinishReason(kind="error", failure=Failure(code="NETWORK", message="reset"))))
    seen = events(out)
    assert [e["sequence_number"] for e in seen] == list(range(len(seen)))
    done = {e["item"]["id"]: e["item"].get("status") for e in seen if e["type"] == "response.output_item.done"}
    assert done == {"rs_resp_1_0": None, "msg_resp_1_1": "completed", "fc_resp_1_2": "incomplete"}
    failed = seen[-1]["response"]
    assert (seen[-1]["type"], failed["status"]) == ("response.failed", "failed")
    assert [item.get("status") for item in failed["output"]] == [None, "completed", "incomplete"]
    assert failed["output"][2]["arguments"] == '{"a":'  # what had arrived, as it arrived


def test_an_item_its_route_closed_as_the_stream_failed_is_incomplete() -> None:
    """A route's adapter closes its open blocks before a failed finish (the kit's block writer):
    the item ended right before the failure was cut by it, not completed."""
    encoder = ResponsesStreamEncoder("resp_1", parse_responses_request(body()))
    out = encoder.start()
    for chunk in (BlockStart(0, "text"), TextDelta(0, "Hel"), BlockEnd(0, TextBlock("Hel"))):
        out += encoder.feed(chunk)
    out += encoder.feed(Finish(FinishReason(kind="error", failure=Failure(code="OVERLOADED", message="busy"))))
    seen = events(out)
    done = [e["item"] for e in seen if e["type"] == "response.output_item.done"]
    assert [(item["id"], item["status"]) for item in done] == [("msg_resp_1_0", "incomplete")]
    assert [e["type"] for e in seen][-2:] == ["error", "response.failed"]
    assert seen[-1]["response"]["output"][0]["status"] == "incomplete"


def test_reasoning_cut_by_the_limit_is_an_incomplete_item() -> None:
    encoder = ResponsesStreamEncoder("resp_1", parse_responses_request(body()))
    encoder.feed(BlockStart(0, "reasoning"))
    encoder.feed(ReasoningDelta(0, "thinking abo"))
    end = events(encoder.feed(Finish(FinishReason(kind="length"))))  # still open: cut while thinking
    assert end[-1]["type"] == "response.incomplete"
    assert end[-1]["response"]["output"] == [
        {"type": "reasoning", "id": "rs_resp_1_0", "summary": [{"type": "summary_text", "text": "thinking abo"}],
         "status": "incomplete"},
    ]  # fmt: skip


@pytest.mark.parametrize(("kind", "reason"), [("length", "max_output_tokens"), ("content-filter", "content_filter")])
def test_the_item_a_limit_cut_is_incomplete(kind: FinishKind, reason: str) -> None:
    encoder = ResponsesStreamEncoder("resp_1", parse_responses_request(body()))
    out = encoder.start()
    out += encoder.feed(BlockStart(0, "text")) + encoder.feed(TextDelta(0, "one"))
    out += encoder.feed(BlockEnd(0, TextBlock("one")))
    assert b"output_item.done" not in out  # it waits for the next chunk: a finish may say it was cut
    out += encoder.feed(Usage(TokenUsage(input_tokens=1, output_tokens=2)))  # a usage chunk has no events
    assert b"output_item.done" not in out
    stored = encoder.final(Finish(FinishReason(kind=kind)))  # what the store keeps is asked for first
    out += encoder.feed(Finish(FinishReason(kind=kind)))
    seen = events(out)
    assert [e["sequence_number"] for e in seen] == list(range(len(seen)))
    assert [e["type"] for e in seen][-3:] == [
        "response.content_part.done", "response.output_item.done", "response.incomplete",
    ]  # fmt: skip
    assert seen[-2]["item"]["status"] == "incomplete"
    assert seen[-1]["response"]["incomplete_details"] == {"reason": reason}
    assert seen[-1]["response"]["output"][0]["status"] == "incomplete"
    assert stored["output"][0]["status"] == "incomplete"
    back = parse_responses_request(body(input=seen[-1]["response"]["output"]))  # a client sends it back
    assert back.options.messages[0].content == [TextBlock("one")]


def test_a_completed_item_goes_out_with_the_next_block() -> None:
    encoder = ResponsesStreamEncoder("resp_1", parse_responses_request(body()))
    encoder.start()
    encoder.feed(BlockStart(0, "text"))
    encoder.feed(TextDelta(0, "one"))
    assert encoder.feed(BlockEnd(0, TextBlock("one"))) == b""
    following = events(encoder.feed(BlockStart(1, "tool-call", id="c", name="f")))
    assert [e["type"] for e in following] == [
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added",
    ]  # fmt: skip
    assert following[2]["item"]["status"] == "completed"
    assert following[3]["output_index"] == 1
    encoder.feed(ToolCallDelta(1, "c", "{}"))
    encoder.feed(BlockEnd(1, ToolCallBlock("c", "f", "{}")))
    end = events(encoder.feed(Finish(FinishReason(kind="tool-calls"))))
    assert [e["type"] for e in end] == [
        "response.function_call_arguments.done", "response.output_item.done", "response.completed",
    ]  # fmt: skip
    assert [item["status"] for item in end[-1]["response"]["output"]] == ["completed", "completed"]


def test_the_first_replay_state_of_a_turn_wins_and_empty_assistant_text_adds_no_block() -> None:
    first, second = pack_state("a", {"n": 1}), pack_state("b", {"n": 2})
    items = [
        {"type": "reasoning", "summary": [], "encrypted_content": first},
        {"role": "assistant", "content": ""},
        {"type": "reasoning", "summary": [], "encrypted_content": second},
    ]
    (message,) = parse_responses_request(body(input=items)).options.messages
    assert message.replay_state == {"n": 1}
    assert message.source == "a"
    assert message.content == [ReasoningBlock("", signed=True), ReasoningBlock("", signed=True)]


def test_encrypted_reasoning_round_trips_to_a_scripted_anthropic_provider(tmp_path: Path) -> None:
    from test_gw_cross import anthropic_events

    provider = ScriptedServer(Reply(reads=anthropic_events()), Reply(reads=anthropic_events()))
    extra = "  anthropic:claude: {{base_url: '{}', api_key: dummy-key, routes: [claude]}}"
    with (
        provider,
        serve_gateway(tmp_path, gateway_yaml("", extra.format(provider.url), db=tmp_path / "gw.sqlite")) as running,
    ):
        clients = Clients(running.url)
        try:
            client = clients.openai()
            include: Any = ["reasoning.encrypted_content"]
            with client.responses.stream(model="claude/claude-x", input="hi", include=include, store=False) as stream:
                kinds = [e.type for e in stream]
                first = stream.get_final_response()
            assert "response.reasoning_summary_text.delta" in kinds
            reasoning, answer = first.output
            assert answer.type == "message"
            assert reasoning.type == "reasoning"
            assert reasoning.summary[0].text == "hmm"
            assert reasoning.encrypted_content is not None
            assert first.output_text == "Hello"
            assert first.usage is not None
            assert first.usage.input_tokens == 5
            history: list[Any] = [{"role": "user", "content": "hi"}]
            history += [item.model_dump(exclude_none=True) for item in first.output]
            history.append({"role": "user", "content": "again"})
            client.responses.create(model="claude/claude-x", input=history, store=False)
            sent = provider.requests[1].json()["messages"][1]["content"][0]
            assert sent == {"type": "thinking", "thinking": "hmm", "signature": "SIG-1"}  # byte for byte
        finally:
            clients.close()


def test_responses_over_a_scripted_openai_chat_provider(tmp_path: Path) -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    provider = ScriptedServer(Reply(reads=openai_sse("Hel", "lo", usage=usage)))
    extra = "  openai:chat: {{base_url: '{}/v1', api_key: dummy-key, routes: [chat]}}"
    with (
        provider,
        serve_gateway(tmp_path, gateway_yaml("", extra.format(provider.url), db=tmp_path / "gw.sqlite")) as running,
    ):
        clients = Clients(running.url)
        try:
            reply = clients.openai().responses.create(model="chat/gpt-x", instructions="terse", input="hi")
        finally:
            clients.close()
    assert reply.output_text == "Hello"
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (3, 2)
    sent = provider.requests[0].json()
    assert sent["messages"][0] == {"role": "system", "content": "terse"}


def test_an_agents_sdk_run_with_a_tool(gateway) -> None:  # type: ignore[no-untyped-def]
    import agents

    echoed: list[str] = []

    @agents.function_tool
    def echo(text: str) -> str:
        """Echo the text back."""
        echoed.append(text)
        return "ECHOED"

    async def run() -> Any:
        async with openai.AsyncOpenAI(
            base_url=gateway.url + "/v1", api_key="unused-on-loopback", max_retries=0
        ) as client:
            model = agents.OpenAIResponsesModel(model="mock/echo", openai_client=client)
            agent = agents.Agent(name="echoer", instructions="use the tool", model=model, tools=[echo])
            config = agents.RunConfig(tracing_disabled=True)
            return await agents.Runner.run(agent, "please echo this", run_config=config)

    result = anyio.run(run)
    assert echoed == ["please echo this"]
    assert result.final_output == "The echo tool returned: ECHOED"


def gemini_sse(*parts: dict[str, Any], finish: str = "STOP") -> bytes:
    """A Gemini ``alt=sse`` body of one candidate with ``parts`` (https://ai.google.dev/api/generate-content)."""
    candidate = {"content": {"role": "model", "parts": list(parts)}, "index": 0, "finishReason": finish}
    usage = {"promptTokenCount": 7, "candidatesTokenCount": 3, "thoughtsTokenCount": 2, "cachedContentTokenCount": 4}
    body = {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-x"}
    return f"data: {json.dumps(body)}\r\n\r\n".encode()


def test_a_tool_round_trip_to_a_scripted_gemini_provider_replays_its_thought_signature(tmp_path: Path) -> None:
    signature = "CiIB" + "s" * 40 + "=="
    call = {"functionCall": {"name": "echo", "args": {"text": "x"}}, "thoughtSignature": signature}
    provider = ScriptedServer(Reply(reads=[gemini_sse(call)]), Reply(reads=[gemini_sse({"text": "done"})]))
    extra = "  gemini:g: {{base_url: '{}/v1beta', api_key: dummy-key, routes: [g]}}"
    with (
        provider,
        serve_gateway(tmp_path, gateway_yaml("", extra.format(provider.url), db=tmp_path / "gw.sqlite")) as running,
    ):
        clients = Clients(running.url)
        try:
            client = clients.openai()
            include: Any = ["reasoning.encrypted_content"]
            first = client.responses.create(model="g/gemini-x", input="go", tools=TOOLS, include=include)
            assert first.usage is not None
            assert first.usage.input_tokens_details.cached_tokens == 4
            assert first.usage.output_tokens_details.reasoning_tokens == 2
            (function,) = [item for item in first.output if item.type == "function_call"]
            history: list[Any] = [{"role": "user", "content": "go"}]
            history += [item.model_dump(exclude_none=True) for item in first.output]
            history.append({"type": "function_call_output", "call_id": function.call_id, "output": "ok"})
            reply = client.responses.create(model="g/gemini-x", input=history, tools=TOOLS)
        finally:
            clients.close()
    assert reply.output_text == "done"
    replayed = provider.requests[1].json()["contents"][1]["parts"][0]
    assert replayed["thoughtSignature"] == signature
