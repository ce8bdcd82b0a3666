"""The official ``openai`` and ``anthropic`` SDKs as clients of a real gateway over the mock provider."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
from gw_helpers import Clients, gateway_yaml, serve_gateway

ECHO_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}


@pytest.fixture
def gateway(tmp_path: Path):  # type: ignore[no-untyped-def]
    settings = "    aliases: {fast: mock/echo}\n    prices: {mock/echo: {input: 1.0, output: 2.0}}"
    yaml_text = gateway_yaml(settings, db=tmp_path / "gw.sqlite")
    with serve_gateway(tmp_path, yaml_text) as running:
        yield running


@pytest.fixture
def clients(gateway):  # type: ignore[no-untyped-def]
    opened = Clients(gateway.url)
    yield opened
    opened.close()


def test_openai_non_streaming(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    reply = clients.openai().chat.completions.create(
        model="mock/echo",
        messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}],
    )
    assert reply.choices[0].message.content == "hello there"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (4, 2)
    assert reply.model == "mock/echo"


def test_openai_streaming_with_usage(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    stream = clients.openai().chat.completions.create(
        model="fast",
        messages=[{"role": "user", "content": "one two three"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "one two three"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 3


def test_openai_tools_round_trip(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    client = clients.openai()
    tools = [{"type": "function", "function": {"name": "echo", "parameters": ECHO_SCHEMA}}]
    messages: list[Any] = [{"role": "user", "content": "please echo this"}]
    stream = client.chat.completions.create(model="mock/echo", messages=messages, tools=tools, stream=True)
    calls: dict[int, dict[str, Any]] = {}
    for chunk in stream:
        for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            entry = calls.setdefault(call.index, {"id": None, "name": None, "arguments": ""})
            entry["id"] = call.id or entry["id"]
            if call.function is not None:
                entry["name"] = call.function.name or entry["name"]
                entry["arguments"] += call.function.arguments or ""
    assert list(calls) == [0]
    assert calls[0]["name"] == "echo"
    assert json.loads(calls[0]["arguments"]) == {"text": "please echo this"}
    messages.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": calls[0]["id"], "type": "function", "function": {"name": "echo", "arguments": calls[0]["arguments"]}}
    ]})  # fmt: skip
    messages.append({"role": "tool", "tool_call_id": calls[0]["id"], "content": "ECHOED"})
    reply = client.chat.completions.create(model="mock/echo", messages=messages, tools=tools)
    assert reply.choices[0].message.content == "The echo tool returned: ECHOED"


def test_openai_errors(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    client = clients.openai()
    with pytest.raises(openai.NotFoundError) as not_found:
        client.chat.completions.create(model="nope/x", messages=[{"role": "user", "content": "hi"}])
    assert "nope/x" in not_found.value.message
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="mock/echo", messages=[{"role": "user", "content": 5}])  # type: ignore[list-item]
    assert "messages[0].content" in bad.value.message


def test_anthropic_non_streaming(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    reply = clients.anthropic().messages.create(
        model="mock/echo", max_tokens=100, system="short", messages=[{"role": "user", "content": "hi you"}]
    )
    assert [block.type for block in reply.content] == ["text"]
    assert reply.content[0].text == "hi you"  # type: ignore[union-attr]
    assert reply.stop_reason == "end_turn"
    assert reply.usage.output_tokens == 2


def test_anthropic_streaming_and_tools(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    client = clients.anthropic()
    tools = [{"name": "echo", "description": "echo", "input_schema": ECHO_SCHEMA}]
    with client.messages.stream(
        model="mock/echo",
        max_tokens=100,
        tools=tools,
        messages=[{"role": "user", "content": "echo me"}],  # type: ignore[arg-type]
    ) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    call = final.content[0]
    assert call.type == "tool_use"
    assert call.input == {"text": "echo me"}
    follow = client.messages.create(
        model="mock/echo",
        max_tokens=100,
        tools=tools,  # type: ignore[arg-type]
        messages=[
            {"role": "user", "content": "echo me"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": call.id, "name": "echo", "input": {"text": "x"}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "done"}]},
        ],
    )
    assert follow.content[0].text == "The echo tool returned: done"  # type: ignore[union-attr]


def test_anthropic_streaming_text(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    with clients.anthropic().messages.stream(
        model="fast", max_tokens=100, messages=[{"role": "user", "content": "a b c d"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "a b c d"
    assert final.usage.output_tokens == 4


def test_models_lists_routes_and_aliases(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    ids = [m.id for m in clients.openai().models.list()]
    assert ids == ["mock/echo", "mock/hash", "fast"]  # the embedding model too, as OpenAI lists its own


def test_openai_models_retrieve_answers_a_listed_id_and_404s_another(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    client = clients.openai()
    echo = client.models.retrieve("mock/echo")  # an id holding '/': the whole path is the id
    assert (echo.id, echo.object, echo.owned_by) == ("mock/echo", "model", "mock")
    assert client.models.retrieve("fast").owned_by == "alias of mock/echo"
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("mock/nope")
    body: Any = missing.value.body
    assert body["code"] == "model_not_found"
    assert body["param"] == "model"
    assert "'mock/nope' is not listed here" in body["message"]
    long = "mock/" + "x" * 10_000  # quoted as an excerpt, on both 404s
    with pytest.raises(openai.NotFoundError) as unlisted:
        client.models.retrieve(long)
    with pytest.raises(openai.NotFoundError) as unserved:
        client.chat.completions.create(model="nowhere/" + "x" * 10_000, messages=[{"role": "user", "content": "hi"}])
    for raised in (unlisted, unserved):
        message: str = raised.value.body["message"]  # type: ignore[index]
        assert "xxx…" in message
        assert len(message) < 600


def test_anthropic_models_list_and_retrieve_in_its_shape(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    import anthropic

    client = clients.anthropic()
    listed = list(client.models.list())  # the SDK pages through has_more / last_id
    assert [m.id for m in listed] == ["mock/echo", "mock/hash", "fast"]
    assert {m.type for m in listed} == {"model"}
    assert listed[0].display_name == "mock/echo"
    assert listed[0].created_at.year == 1970  # unknown: the epoch (a datetime the SDK parses)
    one = client.models.retrieve("mock/echo")
    assert (one.id, one.type) == ("mock/echo", "model")
    with pytest.raises(anthropic.NotFoundError) as missing:
        client.models.retrieve("nope")
    assert missing.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]


def test_an_alias_spelled_as_a_model_id_replaces_it_in_the_list(tmp_path: Path) -> None:
    """The alias wins when a request names the id, so the list shows the alias, once; an alias
    carries what its target's adapter says of the model (Anthropic's token limits)."""
    import httpx

    settings = "    aliases: {mock/hash: mock/echo, fast: mock/echo, odd: mock/unlisted}"
    with serve_gateway(tmp_path, gateway_yaml(settings, db=tmp_path / "gw.sqlite")) as running:
        clients = Clients(running.url)
        try:
            listed = [(m.id, m.owned_by) for m in clients.openai().models.list()]
            shadow = clients.openai().models.retrieve("mock/hash")
        finally:
            clients.close()
        anthropic_list = httpx.get(running.url + "/v1/models", headers={"anthropic-version": "2023-06-01"}).json()
    assert listed == [
        ("mock/echo", "mock"),
        ("mock/hash", "alias of mock/echo"),
        ("fast", "alias of mock/echo"),
        ("odd", "alias of mock/unlisted"),
    ]
    assert shadow.owned_by == "alias of mock/echo"
    by_id = {m["id"]: m for m in anthropic_list["data"]}
    assert by_id["fast"].get("max_input_tokens") == by_id["mock/echo"].get("max_input_tokens")
    assert "max_input_tokens" in by_id["mock/echo"]  # the mock says so: the alias has it too
    assert "max_input_tokens" not in by_id["odd"]  # its target is not listed: nothing known of it


def test_anthropic_models_pages_by_limit_after_id_and_before_id(gateway) -> None:  # type: ignore[no-untyped-def]
    import httpx

    def page(**query: str) -> httpx.Response:
        return httpx.get(gateway.url + "/v1/models", params=query, headers={"anthropic-version": "2023-06-01"})

    first = page(limit="2").json()
    assert [m["id"] for m in first["data"]] == ["mock/echo", "mock/hash"]
    assert (first["has_more"], first["first_id"], first["last_id"]) == (True, "mock/echo", "mock/hash")
    rest = page(limit="2", after_id="mock/hash").json()
    assert ([m["id"] for m in rest["data"]], rest["has_more"]) == (["fast"], False)
    before = page(limit="1", before_id="fast").json()
    assert ([m["id"] for m in before["data"]], before["has_more"]) == (["mock/hash"], True)
    everything = page().json()  # default limit 20
    assert (len(everything["data"]), everything["has_more"]) == (3, False)
    empty = page(after_id="fast").json()
    assert empty == {"data": [], "has_more": False, "first_id": None, "last_id": None}
    refusals = (
        ({"limit": "0"}, "limit"),
        ({"limit": "x"}, "limit"),
        ({"limit": "\u00b2"}, "limit"),  # '²' passes str.isdigit and fails int(): was a 500
        ({"limit": "\u0662"}, "limit"),  # an Arabic-Indic two: was read as 2
        ({"after_id": "zz"}, "after_id"),
        ({"after_id": "mock/echo", "before_id": "fast"}, "after_id"),
    )
    for query, named in refusals:
        refused = page(**query)
        assert refused.status_code == 400
        assert refused.json()["error"]["type"] == "invalid_request_error"
        assert refused.json()["error"]["message"].startswith(named)
    twice = httpx.get(
        gateway.url + "/v1/models?limit=1&limit=50", headers={"anthropic-version": "2023-06-01"}
    )  # one of the two would have been kept in silence
    assert twice.status_code == 400
    assert twice.json()["error"]["message"] == "limit: given more than once in the query"
