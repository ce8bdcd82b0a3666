"""Bad input the gateway passed on or answered 200 (a fresh-user trial): each is now a 400 naming
the field (``param`` where the dialect has one), as the real provider answers, through a real
gateway over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from gw_helpers import Running, gateway_yaml, serve_gateway

from harness_gateway.errors import GatewayError
from harness_gateway.request import decode_json

MASTER = "master-" + "b" * 24  # built at run time: no key-shaped literal committed
HI = [{"role": "user", "content": "hi"}]
EXTRA = (  # a route whose model takes efforts without "off" (never reached: the adapter refuses first)
    "  openai:gpt: {base_url: 'http://127.0.0.1:9', api_key: dummy-key, routes: [gpt],"
    " models: {gpt-x: {reasoning_efforts: [low, high]}}}"
)


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp_path = tmp_path_factory.mktemp("bad-input")
    yaml = gateway_yaml(f"    master_key: {MASTER}", EXTRA, db=tmp_path / "gw.sqlite")
    with serve_gateway(tmp_path, yaml) as served:
        yield served


@pytest.fixture
def http(running: Running) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=running.url, timeout=30) as client:
        yield client


def refused(response: httpx.Response) -> tuple[int, str | None, str]:
    """Status, ``param`` and message of an OpenAI error answer."""
    error = response.json()["error"]
    return response.status_code, error["param"], error["message"]


def anthropic_refusal(response: httpx.Response) -> tuple[int, str, str]:
    """Status, error type and message of an Anthropic error answer (which has no ``param``)."""
    body = response.json()
    assert "param" not in body["error"]
    return response.status_code, body["error"]["type"], body["error"]["message"]


def chat(http: httpx.Client, **fields: Any) -> httpx.Response:
    return http.post("/v1/chat/completions", json={"model": "mock/echo", "messages": HI, **fields})


def messages(http: httpx.Client, **fields: Any) -> httpx.Response:
    return http.post("/v1/messages", json={"model": "mock/echo", "max_tokens": 5, "messages": HI, **fields})


def responses(http: httpx.Client, **fields: Any) -> httpx.Response:
    return http.post("/v1/responses", json={"model": "mock/echo", "input": "hi", **fields})


def test_stream_options_without_stream_is_refused_as_openai_does(http: httpx.Client) -> None:
    """It was read (and ignored) on a request that does not stream."""
    message = "stream_options: this parameter is only allowed when 'stream' is enabled"
    for fields in ({}, {"stream": False}):
        answer = chat(http, stream_options={"include_usage": True}, **fields)
        assert refused(answer) == (400, "stream_options", message)
    streamed = chat(http, stream=True, stream_options={"include_usage": True})
    assert streamed.status_code == 200
    assert '"usage":' in streamed.text


def test_more_than_four_stop_sequences_are_refused_on_chat_only(http: httpx.Client) -> None:
    """OpenAI takes up to 4; Anthropic's stop_sequences has no such bound (none is invented)."""
    too_many = chat(http, stop=["a", "b", "c", "d", "e"])
    assert refused(too_many) == (400, "stop", "stop: expected at most 4 sequences, got 5")
    assert chat(http, stop=["a", "b", "c", "d"]).status_code == 200
    assert messages(http, stop_sequences=[str(i) for i in range(10)]).status_code == 200


def function(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


def test_chat_tool_names_follow_openais_rule_and_are_unique(http: httpx.Client) -> None:
    rule = "a tool name matches ^[a-zA-Z0-9_-]{1,64}$"
    twice = chat(http, tools=[function("get"), function("get")])
    assert refused(twice) == (
        400,
        "tools[1].function.name",
        "tools[1].function.name: 'get' is offered more than once: tool names must be unique",
    )
    spaced = chat(http, tools=[function("ok"), function("get weather")])
    assert refused(spaced) == (
        400,
        "tools[1].function.name",
        f"tools[1].function.name: 'get weather' holds ' ' (U+0020), which is not allowed: {rule}",
    )
    long = chat(http, tools=[function("x" * 65)])
    assert refused(long) == (
        400,
        "tools[0].function.name",
        f"tools[0].function.name: is 65 characters long, more than 64: {rule}",
    )
    empty = chat(http, tools=[function("")])
    assert refused(empty) == (400, "tools[0].function.name", f"tools[0].function.name: must not be empty: {rule}")
    assert chat(http, tools=[function("A-z_0" + "x" * 59), function("b")]).status_code == 200  # 64 characters


def test_responses_tool_names_follow_openais_rule_and_are_unique(http: httpx.Client) -> None:
    def tool(name: str) -> dict[str, Any]:
        return {"type": "function", "name": name, "parameters": {"type": "object"}}

    twice = responses(http, tools=[tool("get"), tool("get")])
    assert refused(twice)[:2] == (400, "tools[1].name")
    dotted = responses(http, tools=[tool("a.b")])
    assert refused(dotted)[:2] == (400, "tools[0].name")
    assert "'a.b' holds '.' (U+002E)" in refused(dotted)[2]
    assert refused(responses(http, tools=[tool("x" * 65)]))[:2] == (400, "tools[0].name")
    assert responses(http, tools=[tool("x" * 64)]).status_code == 200


def test_messages_tool_names_follow_anthropics_rule_and_are_unique(http: httpx.Client) -> None:
    def tool(name: str) -> dict[str, Any]:
        return {"name": name, "input_schema": {"type": "object"}}

    twice = messages(http, tools=[tool("get"), tool("get")])
    assert anthropic_refusal(twice) == (
        400,
        "invalid_request_error",
        "tools[1].name: 'get' is offered more than once: tool names must be unique",
    )
    long = messages(http, tools=[tool("x" * 129)])
    assert anthropic_refusal(long)[2] == (
        "tools[0].name: is 129 characters long, more than 128: a tool name matches ^[a-zA-Z0-9_-]{1,128}$"
    )
    assert anthropic_refusal(messages(http, tools=[tool("a:b")]))[2].startswith("tools[0].name: 'a:b' holds ':'")
    assert messages(http, tools=[tool("x" * 128)]).status_code == 200  # Anthropic's bound, not OpenAI's 64


def test_a_number_too_large_for_a_float_names_its_field(http: httpx.Client) -> None:
    """It was "the request body is not valid JSON" without a field."""
    headers = {"content-type": "application/json"}
    body = b'{"model": "mock/echo", "max_tokens": 1e400, "messages": [{"role": "user", "content": "hi"}]}'
    answer = http.post("/v1/chat/completions", content=body, headers=headers)
    assert refused(answer) == (
        400,
        "max_tokens",
        "max_tokens: the number 1e400 is out of range: a JSON number must fit a 64-bit float",
    )
    nested = b'{"model": "mock/echo", "max_tokens": 5, "messages": [{"role": "user", "content": -2E+999}]}'
    assert anthropic_refusal(http.post("/v1/messages", content=nested, headers=headers))[2].startswith(
        "messages[0].content: the number -2E+999 is out of range"
    )
    small = b'{"model": "mock/echo", "temperature": 1e-400, "messages": [{"role": "user", "content": "hi"}]}'
    assert http.post("/v1/chat/completions", content=small, headers=headers).status_code == 200  # 0.0
    later = b'{"model": "mock/echo", "max_tokens": 1e400, "messages": ]'  # another fault after it: that one
    assert refused(http.post("/v1/chat/completions", content=later, headers=headers))[2].startswith(
        "the request body is not valid JSON: "
    )


def test_the_number_out_of_range_is_found_in_body_order_or_the_body_is_named() -> None:
    with pytest.raises(GatewayError) as caught:
        decode_json(b'{"a": [1, {"b": 2}, {"c": 1e999}], "d": 1e999}')
    assert caught.value.param == "a[2].c"
    with pytest.raises(GatewayError) as repeated:  # a repeated key replaced it: no field is left to name
        decode_json(b'{"a": 1e999, "a": 1}')
    assert repeated.value.param is None
    assert repeated.value.message.startswith("a number of the body is out of range")


def test_an_empty_messages_text_is_refused_as_anthropic_does(http: httpx.Client) -> None:
    """``content: ""`` was answered 200 with an empty reply."""
    empty = "text content blocks must be non-empty"
    assert anthropic_refusal(messages(http, messages=[{"role": "user", "content": ""}])) == (
        400,
        "invalid_request_error",
        f"messages[0].content: {empty}",
    )
    block = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": ""}]}]
    assert anthropic_refusal(messages(http, messages=block))[2] == f"messages[0].content[1].text: {empty}"
    listless = [{"role": "user", "content": []}, {"role": "assistant", "content": "x"}]
    assert anthropic_refusal(messages(http, messages=listless))[2] == (
        "messages[0].content: all messages must have non-empty content except for the optional final assistant message"
    )
    prefill = [*HI, {"role": "assistant", "content": []}]  # the optional final assistant message may be empty
    assert messages(http, messages=prefill).status_code == 200
    counted = http.post(
        "/v1/messages/count_tokens", json={"model": "mock/echo", "messages": [{"role": "user", "content": ""}]}
    )
    assert anthropic_refusal(counted)[2] == f"messages[0].content: {empty}"


def test_a_refused_thinking_names_the_messages_clients_own_field(http: httpx.Client) -> None:
    """A route that cannot honour a ``/v1/messages`` request's ``thinking`` (the effort it became)
    names ``thinking.budget_tokens`` (with the budgets it takes) or ``thinking``: it quoted
    ``reasoning_effort``, an OpenAI option a Messages client never sent."""
    scale = (
        "; the gateway passes thinking on as a reasoning effort: budget_tokens up to 4096 is 'low', up to 16384"
        " 'medium', more 'high', and type disabled is 'off'"
    )
    for thinking, named in (
        ({"type": "enabled", "budget_tokens": 8000}, "thinking.budget_tokens from 4097 to 16384 (taken as reasoning"
         " effort 'medium')"),
        ({"type": "disabled"}, "thinking (type disabled, taken as reasoning effort 'off')"),
    ):  # fmt: skip
        answer = messages(http, model="gpt/gpt-x", thinking=thinking)
        assert anthropic_refusal(answer) == (
            400,
            "invalid_request_error",
            f"{named} is not supported by model 'gpt-x' (supported: ['low', 'high']){scale}",
        )
        assert "reasoning_effort" not in answer.text
    assert messages(http, model="gpt/gpt-x", thinking={"type": "enabled", "budget_tokens": 20000}).status_code != 400


def test_a_refused_openai_effort_is_quoted_in_the_clients_spelling(http: httpx.Client) -> None:
    """``reasoning_effort: "none"`` is the vocabulary's ``"off"``: a route without it said ``'off'``."""
    answer = http.post("/v1/chat/completions", json={"model": "gpt/gpt-x", "messages": HI, "reasoning_effort": "none"})
    assert refused(answer) == (
        400,
        "reasoning_effort",
        "reasoning_effort 'none' is not supported by model 'gpt-x' (supported: ['low', 'high'])",
    )
    answer = http.post("/v1/responses", json={"model": "gpt/gpt-x", "input": "hi", "reasoning": {"effort": "none"}})
    assert refused(answer)[1:] == (
        "reasoning.effort",
        "reasoning.effort 'none' is not supported by model 'gpt-x' (supported: ['low', 'high'])",
    )


def test_control_characters_a_client_sent_are_shown_as_pictures_in_the_console(http: httpx.Client) -> None:
    """A model id with U+0000 reached the console's HTML as a raw NUL."""
    sent = http.post("/v1/chat/completions", json={"model": "mock/ec\u0000h\u001bo\u007f\u0085", "messages": HI})
    assert sent.status_code == 404, sent.text  # the mock has no such model: recorded all the same
    page = http.get("/console/requests", headers={"authorization": f"Bearer {MASTER}"})
    assert page.status_code == 200
    assert "ec\u2400h\u241bo\u2421\ufffd" in page.text
    assert not [c for c in page.text if (ord(c) < 0x20 and c not in "\t\n\r") or 0x7F <= ord(c) < 0xA0]
