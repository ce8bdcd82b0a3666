"""The field rule and the cache_control convention of both dialects, parsed without a server."""

from __future__ import annotations

from typing import Any

import pytest

from harness_core.types import CacheMark, FileBlock, JsonSchemaFormat, Message, TextBlock, TokenUsage, ToolResultBlock
from harness_gateway.anthropic_messages import parse_messages_request
from harness_gateway.errors import GatewayError
from harness_gateway.openai_chat import parse_chat_request, usage_body
from harness_gateway.openai_responses import parse_responses_request
from harness_gateway.request import Body, Target, build_options, pass_through

ANTHROPIC = Target("claude", "anthropic-messages", "anthropic")
CHAT = Target("gpt", "openai-chat", "openai")
HI = [{"role": "user", "content": "hi"}]
HOUR = {"type": "ephemeral", "ttl": "1h"}
PNG = "data:image/png;base64,iVBORw0KGgo="


def bad(parse: Any, body: dict[str, Any], **kwargs: Any) -> GatewayError:
    with pytest.raises(GatewayError) as caught:
        parse(body, **kwargs)
    assert caught.value.status == 400
    return caught.value


def test_pass_through_follows_the_one_rule() -> None:
    body = Body({"model": "m", "top_k": 1, "metadata": {}})
    assert pass_through(body, {"model"}, {"metadata"}, wire="anthropic-messages", target=ANTHROPIC) == {
        "top_k": 1,
        "metadata": {},
    }
    assert pass_through(Body({"model": "m", "metadata": {}}), {"model"}, {"metadata"}, wire="x", target=CHAT) == {}
    error = bad(lambda b: pass_through(Body(b), {"model"}, (), wire="x", target=None), {"model": "m", "top_k": 1})
    assert "top_k: this request cannot take this field" in error.message


def test_messages_cache_control_everywhere_and_its_errors() -> None:
    raw = {
        "model": "claude/x",
        "max_tokens": 5,
        "system": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "url", "url": "https://h/i.png"}, "cache_control": HOUR},
                    {"type": "text", "text": "x"},
                ],
            }
        ],
    }
    parsed = parse_messages_request(raw, target=ANTHROPIC)
    assert parsed.options.system == "a\n\nb"  # unmarked blocks stay one system prompt
    image = parsed.options.messages[0].content[0]
    assert isinstance(image, FileBlock)
    assert image.cache == CacheMark(3600)
    assert parse_messages_request({**raw, "system": ""}).options.system is None
    error = bad(parse_messages_request, {**raw, "system": [{"type": "image"}]})
    assert error.param == "system[0].type"
    for control, param in (({"type": "persistent"}, "type"), ({"type": "ephemeral", "ttl": "2h"}, "ttl")):
        tool = {"name": "t", "input_schema": {"type": "object"}, "cache_control": control}
        assert bad(parse_messages_request, {**raw, "tools": [tool]}).param == f"tools[0].cache_control.{param}"


def test_messages_output_formats() -> None:
    raw: dict[str, Any] = {"model": "claude/x", "max_tokens": 5, "messages": HI}
    schema = {"type": "object"}
    legacy = parse_messages_request({**raw, "output_format": {"type": "json_schema", "schema": schema}})
    assert legacy.options.response_format == JsonSchemaFormat(name="output", schema=schema)
    assert bad(parse_messages_request, {**raw, "output_format": {"type": "text"}}).param == "output_format.type"
    config = {"format": {"type": "json_schema", "schema": schema}, "effort": "low"}
    passed = parse_messages_request({**raw, "output_config": config}, target=ANTHROPIC)
    assert passed.options.provider_options == {"anthropic": {"output_config": config}}  # same wire: unchanged
    only_effort = parse_messages_request({**raw, "output_config": {"effort": "low"}}, target=ANTHROPIC)
    assert only_effort.options.response_format is None
    counting = parse_messages_request({"model": "claude/x", "messages": HI}, counting=True)
    assert counting.options.max_tokens is None


def test_chat_cache_control_on_parts() -> None:
    text = [{"type": "text", "text": "a", "cache_control": HOUR}, {"type": "text", "text": "b"}]
    raw = {
        "model": "gpt/x",
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "s1"}, {"type": "text", "text": "s2"}]},
            {"role": "developer", "content": text},
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": PNG}, "cache_control": HOUR}]},
            {"role": "assistant", "content": text},
            {"role": "tool", "tool_call_id": "c", "content": text},
        ],
    }
    options = parse_chat_request(raw, target=CHAT).options
    assert options.system is None
    system, user, assistant, tool = options.messages
    assert system == Message(
        role="system", content=[TextBlock("s1s2"), TextBlock("a", CacheMark(3600)), TextBlock("b")]
    )
    assert isinstance(user.content[0], FileBlock)
    assert user.content[0].cache == CacheMark(3600)
    assert assistant.content == [TextBlock("ab", CacheMark(3600))]
    assert tool.content == [ToolResultBlock("c", "a\nb", cache=CacheMark(3600))]  # one part a line
    unmarked = parse_chat_request({**raw, "messages": raw["messages"][:1]}).options
    assert unmarked.system == "s1s2"
    passed = parse_chat_request({**raw, "logprobs": True, "user": "u"}, target=CHAT).options
    assert passed.provider_options == {"openai": {"logprobs": True, "user": "u"}}
    assert parse_chat_request({**raw, "user": "u"}, target=ANTHROPIC).options.provider_options == {}


def test_chat_usage_reports_cache_writes_only_when_made() -> None:
    from harness_core.types import TokenUsage

    body = usage_body(TokenUsage(10, 1, cache_read_tokens=4))
    assert body is not None
    assert body["prompt_tokens_details"] == {"cached_tokens": 4}


def test_anthropic_usage_splits_cache_writes_by_ttl_when_the_route_reported_it() -> None:
    from harness_gateway.anthropic_messages import usage_body as messages_usage

    plain = messages_usage(TokenUsage(100, 5, cache_read_tokens=10, cache_write_tokens=40))
    assert plain == {
        "input_tokens": 50,
        "output_tokens": 5,
        "cache_read_input_tokens": 10,
        "cache_creation_input_tokens": 40,
    }
    hour = messages_usage(TokenUsage(100, 5, cache_write_tokens=40, cache_write_1h_tokens=30))
    assert hour["cache_creation"] == {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 30}
    assert hour["cache_creation_input_tokens"] == 40


def test_build_options_names_the_request_field_of_a_refused_value() -> None:
    assert build_options({"max_tokens": 5, "temperature": None}).max_tokens == 5
    with pytest.raises(GatewayError) as named:
        build_options({"max_tokens": 0}, {"max_tokens": "max_output_tokens"})
    assert (named.value.param, str(named.value)) == (
        "max_output_tokens",
        "max_output_tokens: must be at least 1, got 0",
    )
    with pytest.raises(GatewayError) as same:
        build_options({"top_p": 2.0})
    assert same.value.param == "top_p"
    with pytest.raises(GatewayError) as unnamed:  # an error naming no options field names the whole body
        build_options({"no_such_option": 1})
    assert unnamed.value.param is None
    assert "no_such_option" in str(unnamed.value)


def test_a_forced_tool_that_was_not_sent_is_a_400_naming_tool_choice() -> None:
    """Found by a fresh user: the openai SDK forcing `other` with only `echo` sent got a 200 (echo ran)."""
    from harness_core.types import NamedToolChoice, ToolSpec
    from harness_gateway.openai_chat import parse_chat_request

    echo = ToolSpec(name="echo")
    with pytest.raises(GatewayError) as forced:
        build_options({"tools": [echo], "tool_choice": NamedToolChoice("other")})
    assert (forced.value.status, forced.value.param) == (400, "tool_choice")
    assert str(forced.value) == "tool_choice: forces the tool 'other', which is not among the tools sent ('echo')"
    with pytest.raises(GatewayError, match=r"not among the tools sent \(none\)"):
        build_options({"tool_choice": NamedToolChoice("other")})
    assert build_options({"tools": [echo], "tool_choice": NamedToolChoice("echo")}).unoffered_tool_choice() is None
    body = {
        "model": "r/m",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "echo", "parameters": {"type": "object"}}}],
        "tool_choice": {"type": "function", "function": {"name": "other"}},
    }
    with pytest.raises(GatewayError) as through:  # the dialect parses, the vocabulary's rule refuses
        parse_chat_request(body)
    assert through.value.param == "tool_choice"


RESPONSES = Target("resp", "openai-responses", "openai")


def test_responses_fields_follow_the_field_rule() -> None:
    """Found after the Responses dialect landed: it dropped every field it did not read."""
    from harness_gateway.openai_responses import parse_responses_request

    fields = {"service_tier": "flex", "prompt_cache_retention": "24h", "max_tool_calls": 3, "user": "u1"}
    body = {"model": "m", "input": "hi", **fields}
    same_wire = parse_responses_request(body, "openai", RESPONSES)
    assert same_wire.options.provider_options == {"openai": fields}
    with pytest.raises(GatewayError) as refused:
        parse_responses_request(body, "anthropic", ANTHROPIC)
    assert refused.value.param == "service_tier"
    assert "route 'claude' cannot take this field" in str(refused.value)
    ignored = parse_responses_request({"model": "m", "input": "hi", "user": "u1", "stream_options": {}}, None, CHAT)
    assert ignored.options.provider_options == {}
    with pytest.raises(GatewayError) as nowhere:  # no route known: nothing may pass
        parse_responses_request({"model": "m", "input": "hi", "background": True})
    assert nowhere.value.param == "background"


def test_an_unknown_message_field_is_a_400_naming_it_and_echoed_reply_fields_pass() -> None:
    chat = bad(parse_chat_request, {"model": "m", "messages": [{"role": "user", "content": "hi", "colour": "red"}]})
    assert (chat.param, chat.message) == (
        "messages[0].colour",
        "messages[0].colour: unknown field of the user message; this gateway reads content, role",
    )
    legacy = [*HI, {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}}]
    assert bad(parse_chat_request, {"model": "m", "messages": legacy}).param == "messages[1].function_call"
    tool = [{"role": "tool", "content": "4", "tool_call_id": "c1", "is_error": True}]
    assert bad(parse_chat_request, {"model": "m", "messages": tool}).message.startswith(
        "messages[0].is_error: unknown field of the tool message"
    )
    # what a client appends back of a reply (the SDK's model_dump: null refusal / audio / function_call,
    # empty annotations) and a participant name are read or dropped as documented, never refused
    echoed: dict[str, Any] = {
        "role": "assistant", "content": "4", "refusal": None, "audio": None, "function_call": None,
        "annotations": [], "tool_calls": None, "name": "calc",
    }  # fmt: skip
    parsed = parse_chat_request({"model": "m", "messages": [{**HI[0], "name": "ann"}, echoed]})
    assert [m.role for m in parsed.options.messages] == ["user", "assistant"]
    claude = bad(
        parse_messages_request,
        {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi", "id": "msg_1"}]},
    )
    assert (claude.param, claude.message) == (
        "messages[0].id",
        "messages[0].id: unknown field of the user message; this gateway reads content, role",
    )


@pytest.mark.parametrize(
    ("parse", "body", "param", "words"),
    [
        (parse_chat_request, {"messages": HI, "temperature": 5}, "temperature", "must be between 0 and 2, got 5"),
        (parse_chat_request, {"messages": HI, "temperature": -0.5}, "temperature", "between 0 and 2, got -0.5"),
        (parse_chat_request, {"messages": HI, "top_p": 1.5}, "top_p", "must be between 0 and 1, got 1.5"),
        (parse_messages_request, {"messages": HI, "max_tokens": 5, "temperature": 1.5}, "temperature", "0 and 1"),
        (parse_responses_request, {"input": "hi", "temperature": 2.5}, "temperature", "must be between 0 and 2"),
    ],
)
def test_sampling_values_outside_the_dialects_range_are_400(
    parse: Any, body: dict[str, Any], param: str, words: str
) -> None:
    error = bad(parse, {"model": "m", **body})
    assert error.param == param
    assert words in error.message
    # the range's ends are accepted
    edge = {**body, param: 1 if parse is parse_messages_request and param == "temperature" else 0}
    assert parse({"model": "m", **edge}).options is not None


def test_an_unknown_field_of_a_content_part_block_or_input_item_is_a_400_naming_it() -> None:
    def user(*parts: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"role": "user", "content": list(parts)}]

    text = {"type": "text", "text": "hi", "colour": "red"}
    assert bad(parse_chat_request, {"model": "m", "messages": user(text)}).message == (
        "messages[0].content[0].colour: unknown field of the text part; this gateway reads cache_control, text, type"
    )
    image = {"type": "image_url", "image_url": {"url": PNG}, "colour": 1}
    assert bad(parse_chat_request, {"model": "m", "messages": user(image)}).param == "messages[0].content[0].colour"
    system = [{"role": "system", "content": [text]}, *HI]
    assert bad(parse_chat_request, {"model": "m", "messages": system}).param == "messages[0].content[0].colour"
    marked = {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}
    assert parse_chat_request({"model": "m", "messages": user(marked)}).options.messages
    claude = {"model": "m", "max_tokens": 5, "messages": user(text)}
    assert bad(parse_messages_request, claude).param == "messages[0].content[0].colour"
    # one reader for every text block: the system prompt's and a tool result's are checked alike
    assert bad(parse_messages_request, {**claude, "messages": HI, "system": [text]}).param == "system[0].colour"
    result = {"type": "tool_result", "tool_use_id": "t1", "content": [text]}
    assert bad(parse_messages_request, {**claude, "messages": user(result)}).param == (
        "messages[0].content[0].content[0].colour"
    )
    echoed = {"type": "text", "text": "hi", "citations": None}  # a reply's block sent back
    assert parse_messages_request({**claude, "messages": user(echoed)}).options.messages
    item = {"type": "message", "role": "user", "content": "hi", "colour": 1}
    assert bad(parse_responses_request, {"model": "m", "input": [item]}).message.startswith(
        "input[0].colour: unknown field of the message item"
    )
    part = {"role": "user", "content": [{"type": "input_text", "text": "hi", "colour": 1}]}
    assert bad(parse_responses_request, {"model": "m", "input": [part]}).param == "input[0].content[0].colour"
    output = {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant", "content": "4"}
    assert parse_responses_request({"model": "m", "input": [item | {"colour": None}, output]}).options.messages


def test_an_unknown_field_inside_a_part_or_of_a_non_text_block_is_a_400_naming_it() -> None:
    def user(*parts: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"role": "user", "content": list(parts)}]

    def chat(*parts: dict[str, Any]) -> str:
        return bad(parse_chat_request, {"model": "m", "messages": user(*parts)}).message

    assert chat({"type": "image_url", "image_url": {"url": PNG, "colour": 1}}) == (
        "messages[0].content[0].image_url.colour: unknown field of the image_url; this gateway reads detail, url"
    )
    detail = {"type": "image_url", "image_url": {"url": PNG, "detail": "high"}}  # carried to the route
    [block] = parse_chat_request({"model": "m", "messages": user(detail)}).options.messages[0].content
    assert isinstance(block, FileBlock)
    assert block.detail == "high"
    assert chat({"type": "image_url", "image_url": {"url": PNG, "detail": "max"}}) == (
        "messages[0].content[0].image_url.detail: expected one of auto, low, high, got 'max'"
    )
    pdf = {"type": "image_url", "image_url": {"url": "data:application/pdf;base64,JVBERi0=", "detail": "low"}}
    assert chat(pdf) == (
        "messages[0].content[0].image_url.url: a detail is an image's resolution hint, and this is application/pdf"
    )
    audio = {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav", "rate": 8000}}
    assert chat(audio).startswith("messages[0].content[0].input_audio.rate: unknown field of the input_audio")
    file = {"type": "file", "file": {"file_data": PNG, "filename": "a.png", "purpose": "x"}}
    assert chat(file).startswith("messages[0].content[0].file.purpose: unknown field of the file")

    def responses(part: dict[str, Any]) -> str:
        return bad(parse_responses_request, {"model": "m", "input": user(part)}).message

    image = {"type": "input_image", "image_url": PNG, "detail": "low"}
    [block] = parse_responses_request({"model": "m", "input": user(image)}).options.messages[0].content
    assert isinstance(block, FileBlock)
    assert block.detail == "low"
    assert parse_responses_request({"model": "m", "input": user({**image, "detail": None})}).options.messages[
        0
    ].content[0] == FileBlock("image/png", data=block.data)
    assert responses({**image, "detail": 2}).startswith("input[0].content[0].detail: ")
    assert responses({**image, "colour": 1}).startswith("input[0].content[0].colour: unknown field of the input_image")
    document = {"type": "input_file", "file_data": PNG, "filename": "a.png", "colour": 1}
    assert responses(document).startswith("input[0].content[0].colour: unknown field of the input_file part")

    def claude(*blocks: dict[str, Any]) -> str:
        return bad(parse_messages_request, {"model": "m", "max_tokens": 5, "messages": user(*blocks)}).message

    pdf = {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}
    assert claude({"type": "document", "source": pdf, "title": "T"}).startswith(
        "messages[0].content[0].title: unknown field of the document block"
    )
    assert claude({"type": "document", "source": pdf, "citations": {"enabled": True}}).startswith(
        "messages[0].content[0].citations: unknown field of the document block"
    )
    assert claude({"type": "image", "source": {"type": "url", "url": "https://h/i.png", "detail": 1}}).startswith(
        "messages[0].content[0].source.detail: unknown field of the url source"
    )
    assert claude({"type": "tool_result", "tool_use_id": "t", "content": "x", "colour": 1}).startswith(
        "messages[0].content[0].colour: unknown field of the tool_result block"
    )
    turn = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}, "colour": 1}]},
    ]
    assert bad(parse_messages_request, {"model": "m", "max_tokens": 5, "messages": turn}).param == (
        "messages[1].content[0].colour"
    )
    thought = {"type": "thinking", "thinking": "hm", "signature": "s", "colour": None}  # a null is absent
    echoed = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [thought]}]
    assert parse_messages_request({"model": "m", "max_tokens": 5, "messages": echoed}).options.messages


def test_a_tool_without_the_part_its_api_requires_is_a_400_naming_it() -> None:
    chat = {"model": "m", "messages": HI, "tools": [{"function": {"name": "f"}}]}
    assert bad(parse_chat_request, chat).param == "tools[0].type"
    responses = {"model": "m", "input": "hi", "tools": [{"name": "f", "parameters": {}}]}
    assert bad(parse_responses_request, responses).param == "tools[0].type"
    assert bad(parse_responses_request, {**responses, "tools": [{"type": None, "name": "f"}]}).param == "tools[0].type"
    claude = {"model": "m", "max_tokens": 5, "messages": HI, "tools": [{"name": "f"}]}
    assert bad(parse_messages_request, claude).param == "tools[0].input_schema"


def test_responses_fields_read_for_the_echo_reach_a_responses_route_and_refuse_a_non_default_elsewhere() -> None:
    """``parallel_tool_calls`` and ``truncation`` were read for the echo and dropped on every
    route, the Responses wire's own included; any ``include`` but encrypted reasoning was dropped."""
    responses = Target("resp", "openai-responses", "openai")
    raw = {"model": "m", "input": "hi", "parallel_tool_calls": False, "truncation": "auto"}
    passed = parse_responses_request(raw, target=responses).options.provider_options
    assert passed == {"openai": {"parallel_tool_calls": False, "truncation": "auto"}}
    error = bad(parse_responses_request, raw, target=ANTHROPIC)
    assert error.message.startswith("parallel_tool_calls: route 'claude' cannot take this field")
    assert bad(parse_responses_request, {**raw, "parallel_tool_calls": True}, target=ANTHROPIC).param == "truncation"
    defaults = {"model": "m", "input": "hi", "parallel_tool_calls": True, "truncation": "disabled"}
    assert parse_responses_request(defaults, target=ANTHROPIC).options.provider_options == {}
    for target in (responses, ANTHROPIC):  # a bad value is named as such on any route, before the wire's rule
        unknown = bad(parse_responses_request, {**raw, "truncation": "sometimes"}, target=target)
        assert (unknown.param, unknown.message) == (
            "truncation",
            "truncation: expected auto or disabled, got 'sometimes'",
        )
        wrong = bad(parse_responses_request, {**raw, "parallel_tool_calls": "yes"}, target=target)
        assert wrong.param == "parallel_tool_calls"
        assert "cannot take" not in wrong.message
    logprobs = {"model": "m", "input": "hi", "include": ["reasoning.encrypted_content", "message.output_text.logprobs"]}
    assert bad(parse_responses_request, logprobs).message.startswith(
        "include[1]: include 'message.output_text.logprobs' is not supported by the gateway"
    )


def test_a_reasoning_summary_dropped_on_another_wire_is_still_checked() -> None:
    """``reasoning.summary`` is dropped on a route of another wire (every reasoning block becomes
    a summary item anyway); a value the API would refuse is a 400 there, not a silent drop. A
    Responses route receives it unchanged (its upstream checks it)."""
    raw = {"model": "m", "input": "hi", "reasoning": {"effort": "low", "summary": "concise"}}
    assert parse_responses_request(raw, target=ANTHROPIC).options.reasoning_effort == "low"
    for name, value in (("summary", "short"), ("generate_summary", "brief")):
        error = bad(parse_responses_request, {**raw, "reasoning": {name: value}}, target=ANTHROPIC)
        assert (error.param, error.message) == (
            f"reasoning.{name}",
            f"reasoning.{name}: expected one of auto, concise, detailed, got {value!r}",
        )
    assert bad(parse_responses_request, {**raw, "reasoning": {"summary": 1}}, target=ANTHROPIC).param == (
        "reasoning.summary"
    )
    responses = Target("resp", "openai-responses", "openai")
    passed = parse_responses_request({**raw, "reasoning": {"summary": "new-kind"}}, target=responses)
    assert passed.options.provider_options == {"openai": {"reasoning": {"summary": "new-kind"}}}
