"""Issue 23: prompt caching end to end and no silently dropped field, through both dialects.

Scripted Anthropic and OpenAI providers record the request bodies the gateway sends; the official
SDKs (and raw httpx, for what the SDKs do not type) are the clients.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from gw_helpers import Clients, gateway_yaml, serve_gateway

from harness_core.testing import Reply, ScriptedServer

MASTER = "master-" + "y" * 24  # built at run time: no key-shaped literal committed
ONE_HOUR: Any = {"type": "ephemeral", "ttl": "1h"}
FIVE_MINUTES = {"type": "ephemeral"}


def sse(*events: dict[str, Any]) -> list[bytes]:
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def anthropic_reply(text: str = "Hello") -> Reply:
    """A text reply with cache usage: 5 fresh input tokens, 100 read from the cache, 20 written."""
    usage = {"input_tokens": 5, "output_tokens": 1, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20}
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": []}
    return Reply(
        reads=sse(
            {"type": "message_start", "message": {**message, "stop_reason": None, "usage": usage}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
            {"type": "message_stop"},
        )
    )


def openai_reply() -> Reply:
    chunks = [
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "model": "gpt-x",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}}],
        },
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "model": "gpt-x",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        },
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "model": "gpt-x",
            "choices": [],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1},
        },
    ]
    return Reply(reads=[*(f"data: {json.dumps(c)}\n\n".encode() for c in chunks), b"data: [DONE]\n\n"])


@pytest.fixture
def providers() -> Iterator[tuple[ScriptedServer, ScriptedServer]]:
    with ScriptedServer() as claude, ScriptedServer() as gpt:
        yield claude, gpt


@pytest.fixture
def running(tmp_path: Path, providers: tuple[ScriptedServer, ScriptedServer], monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    claude, gpt = providers
    monkeypatch.setenv("GW_MASTER", MASTER)
    settings = (
        "    require_keys: true\n"
        "    master_key: ${{ env.GW_MASTER }}\n"
        "    prices: {claude/claude-x: {input: 1000000, output: 1000000, cache_read: 100000, cache_write: 2000000}}"
    )
    extra = (
        f"  anthropic:claude: {{base_url: '{claude.url}', api_key: dummy-key, routes: [claude]}}\n"
        f"  openai:gpt: {{base_url: '{gpt.url}', api_key: dummy-key, routes: [gpt]}}\n"
        f"  anthropic:down: {{base_url: 'http://127.0.0.1:9', api_key: dummy-key, routes: [down]}}"
    )
    with serve_gateway(tmp_path, gateway_yaml(settings, extra, db=tmp_path / "gw.sqlite")) as served:
        yield served


def new_key(url: str, **spec: Any) -> str:
    response = httpx.post(
        url + "/admin/keys",
        json={"name": f"agent-{uuid.uuid4().hex[:8]}", **spec},  # names are unique among live keys
        headers={"authorization": "Bearer " + MASTER},
    )
    assert response.status_code == 201, response.text
    key: str = response.json()["key"]
    return key


def spent(url: str) -> float:
    keys = httpx.get(url + "/admin/keys", headers={"authorization": "Bearer " + MASTER}).json()["data"]
    return float(sum(k["spent"] for k in keys))


MESSAGES_BODY: dict[str, Any] = {
    "model": "claude/claude-x",
    "max_tokens": 64,
    "system": [
        {"type": "text", "text": "You are a coding agent."},
        {"type": "text", "text": "Project rules.", "cache_control": ONE_HOUR},
    ],
    "tools": [{"name": "read", "input_schema": {"type": "object"}, "cache_control": ONE_HOUR}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "read a.py", "cache_control": FIVE_MINUTES}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "print()", "cache_control": ONE_HOUR}],
        },
    ],
    "top_k": 5,
    "metadata": {"user_id": "u1"},
}


def test_anthropic_cache_breakpoints_reach_the_wire_and_usage_comes_back_priced(running, providers) -> None:  # type: ignore[no-untyped-def]
    claude, _ = providers
    claude.add(anthropic_reply(), anthropic_reply())
    key = new_key(running.url)
    clients = Clients(running.url)
    try:
        client = clients.anthropic(key)
        body = {k: v for k, v in MESSAGES_BODY.items() if k not in ("model", "top_k")}
        reply = client.messages.create(model="claude/claude-x", extra_body={"top_k": 5}, **body)
        with client.messages.stream(model="claude/claude-x", **body) as stream:
            streamed = stream.get_final_message()
    finally:
        clients.close()
    for usage in (reply.usage, streamed.usage):
        assert (usage.input_tokens, usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (5, 100, 20)
        assert usage.output_tokens == 3
    sent = claude.requests[0].json()
    assert sent["system"] == MESSAGES_BODY["system"]  # the blocks unchanged, breakpoint in place
    assert sent["tools"] == [{"name": "read", "input_schema": {"type": "object"}, "cache_control": ONE_HOUR}]
    assert sent["messages"][0]["content"][0]["cache_control"] == FIVE_MINUTES
    assert sent["messages"][2]["content"][0]["cache_control"] == ONE_HOUR
    assert sent["top_k"] == 5  # same wire: passed through unchanged
    assert sent["metadata"] == {"user_id": "u1"}
    assert "top_k" not in claude.requests[1].json()
    # 5 fresh input tokens at 1 USD, 100 cache reads at 0.1, 20 cache writes at 2, 3 output at 1; twice
    assert spent(running.url) == pytest.approx(2 * (5 + 10 + 40 + 3))


def test_chat_completions_cache_control_parts_reach_anthropic(running, providers) -> None:  # type: ignore[no-untyped-def]
    claude, _ = providers
    claude.add(anthropic_reply(), anthropic_reply())
    key = new_key(running.url)
    request = {
        "model": "claude/claude-x",
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "Rules.", "cache_control": ONE_HOUR}]},
            {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": ONE_HOUR}]},
        ],
        "user": "u1",
        "prompt_cache_key": "session-1",
    }
    headers = {"authorization": "Bearer " + key}
    plain = httpx.post(running.url + "/v1/chat/completions", json=request, headers=headers, timeout=30)
    streamed = httpx.post(
        running.url + "/v1/chat/completions",
        json={**request, "stream": True, "stream_options": {"include_usage": True}},
        headers=headers,
        timeout=30,
    )
    assert plain.status_code == 200, plain.text
    details = plain.json()["usage"]["prompt_tokens_details"]
    assert details == {"cached_tokens": 100, "cache_write_tokens": 20}
    assert plain.json()["usage"]["prompt_tokens"] == 125
    last = [json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: {")][-1]
    assert last["usage"]["prompt_tokens_details"] == details
    sent = claude.requests[0].json()
    assert sent["system"] == [{"type": "text", "text": "Rules.", "cache_control": ONE_HOUR}]
    assert sent["messages"][0]["content"] == [{"type": "text", "text": "hi", "cache_control": ONE_HOUR}]
    assert "user" not in sent  # on the ignore list: changes nothing on another wire
    assert "prompt_cache_key" not in sent
    assert claude.requests[1].json()["messages"][0]["content"] == sent["messages"][0]["content"]  # streamed too
    # priced as through /v1/messages: 5 fresh at 1 USD, 100 reads at 0.1, 20 writes at 2, 3 output at 1; twice
    assert spent(running.url) == pytest.approx(2 * (5 + 10 + 40 + 3))


def test_an_unmapped_field_is_a_400_naming_it_and_the_route(running, providers) -> None:  # type: ignore[no-untyped-def]
    key = new_key(running.url)
    headers = {"authorization": "Bearer " + key}
    hi = [{"role": "user", "content": "hi"}]
    chat = httpx.post(
        running.url + "/v1/chat/completions",
        json={"model": "claude/claude-x", "messages": hi, "logprobs": True},
        headers=headers,
    )
    assert chat.status_code == 400
    error = chat.json()["error"]
    assert error["param"] == "logprobs"
    assert "route 'claude' cannot take this field" in error["message"]
    messages = httpx.post(
        running.url + "/v1/messages",
        json={"model": "gpt/gpt-x", "max_tokens": 5, "messages": hi, "top_k": 3},
        headers=headers,
    )
    assert messages.status_code == 400
    assert messages.json()["error"]["message"].startswith("top_k: route 'gpt' cannot take this field")
    nested = httpx.post(
        running.url + "/v1/messages",
        json={"model": "gpt/gpt-x", "max_tokens": 5, "messages": hi, "output_config": {"effort": "low"}},
        headers=headers,
    )
    assert nested.status_code == 400
    assert nested.json()["error"]["message"].startswith("output_config.effort: route 'gpt'")
    assert providers[0].requests == []
    assert providers[1].requests == []


def test_chat_fields_reach_an_openai_route_unchanged(running, providers) -> None:  # type: ignore[no-untyped-def]
    _, gpt = providers
    gpt.add(openai_reply())
    key = new_key(running.url)
    fields = {
        "frequency_penalty": 0.5,
        "presence_penalty": 0.25,
        "logit_bias": {"42": -100},
        "parallel_tool_calls": False,
        "prompt_cache_key": "session-1",
        "prompt_cache_retention": "24h",
        "service_tier": "flex",
        "verbosity": "low",
        "prediction": {"type": "content", "content": "ok"},
        "user": "u1",
    }
    clients = Clients(running.url)
    try:
        reply = clients.openai(key).chat.completions.create(
            model="gpt/gpt-x", messages=[{"role": "user", "content": "hi"}], extra_body=fields
        )
    finally:
        clients.close()
    assert reply.choices[0].message.content == "ok"
    sent = gpt.requests[0].json()
    assert {k: sent[k] for k in fields} == fields


def test_a_chat_field_an_openai_route_refuses_is_named_as_the_client_sent_it(running, providers) -> None:  # type: ignore[no-untyped-def]
    """``logprobs`` passes through to the route's adapter, which refuses it (no slot in the stream
    protocol): the 400 names the client's field, not the route's ``provider_options['openai']``."""
    _, gpt = providers
    key = new_key(running.url)
    alone = httpx.post(
        running.url + "/v1/chat/completions",
        json={"model": "gpt/gpt-x", "messages": [{"role": "user", "content": "hi"}], "logprobs": True},
        headers={"authorization": "Bearer " + key},
    )
    assert (alone.status_code, alone.json()["error"]["param"]) == (400, "logprobs")
    message = "logprobs: not supported by this route: logprobs (no slot in the stream protocol)"
    assert (alone.json()["error"]["message"], alone.json()["error"]["code"]) == (message, "UNSUPPORTED")
    assert "provider_options" not in alone.text
    assert gpt.requests == []


def test_output_config_format_maps_to_native_structured_output(running, providers) -> None:  # type: ignore[no-untyped-def]
    claude, gpt = providers
    claude.add(anthropic_reply('{"a": 1}'))
    gpt.add(openai_reply())
    key = new_key(running.url)
    schema = {
        "type": "object",
        "properties": {"a": {"type": "number"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    body: dict[str, Any] = {
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "give a"}],
        "output_config": {"format": {"type": "json_schema", "schema": schema}},
    }
    headers = {"authorization": "Bearer " + key, "anthropic-version": "2023-06-01"}
    native = httpx.post(running.url + "/v1/messages", json={"model": "claude/claude-x", **body}, headers=headers)
    assert native.status_code == 200, native.text
    assert native.json()["content"][0]["text"] == '{"a": 1}'
    assert claude.requests[0].json()["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    legacy = {**body, "output_format": body["output_config"]["format"]}
    del legacy["output_config"]
    other = httpx.post(running.url + "/v1/messages", json={"model": "gpt/gpt-x", **legacy}, headers=headers)
    assert other.status_code == 200, other.text
    assert gpt.requests[0].json()["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": schema, "strict": False},
    }


VERCEL_GENERATE_OBJECT: dict[str, Any] = {
    "model": "claude/claude-sonnet-4-5",
    "max_tokens": 64000,
    "output_config": {
        "format": {
            "type": "json_schema",
            "schema": {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "properties": {"city": {"type": "string"}, "population": {"type": "number"}},
                "additionalProperties": False,
                "required": ["city", "population"],
            },
        }
    },
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "The largest city of France and its population."}]}
    ],
}
"""The body the Vercel AI SDK (``ai`` 6.0.326, ``@ai-sdk/anthropic`` 3.0.140, Node 20) sends for
``generateObject({model: anthropic("claude/claude-sonnet-4-5"), schema: z.object({city: z.string(),
population: z.number()}), prompt})``, recorded byte for byte from the SDK against a recording server
(its default ``structuredOutputMode: "auto"`` picks ``output_config.format`` for this model); the
same script's ``generateObject`` returned the object through ``harness serve``."""


def test_the_vercel_ai_sdk_default_anthropic_structured_output(running, providers) -> None:  # type: ignore[no-untyped-def]
    claude, _ = providers
    answer = '{"city": "Paris", "population": 2102650}'
    claude.add(anthropic_reply(answer))
    headers = {
        "x-api-key": new_key(running.url),
        "anthropic-version": "2023-06-01",
        "user-agent": "ai/6.0.326 ai-sdk/provider-utils/4.0.65 runtime/node.js/v20.20.2",
    }
    reply = httpx.post(running.url + "/v1/messages", json=VERCEL_GENERATE_OBJECT, headers=headers, timeout=30)
    assert reply.status_code == 200, reply.text
    message = reply.json()
    assert (message["type"], message["role"], message["stop_reason"]) == ("message", "assistant", "end_turn")
    assert message["content"] == [{"type": "text", "text": answer}]  # what generateObject parses
    sent = claude.requests[0].json()
    assert sent["output_config"] == VERCEL_GENERATE_OBJECT["output_config"]  # native structured output, unchanged
    assert sent["model"] == "claude-sonnet-4-5"
    assert sent["max_tokens"] == 64000
    assert "tools" not in sent  # no json-tool emulation


def test_count_tokens_through_the_anthropic_sdk(running, providers) -> None:  # type: ignore[no-untyped-def]
    claude, _ = providers
    claude.route("POST", "/v1/messages/count_tokens", Reply.json(200, {"input_tokens": 321}))
    key = new_key(running.url)
    only_claude = new_key(running.url, routes=["claude"])
    clients = Clients(running.url)
    try:
        counted = clients.anthropic(key).messages.count_tokens(
            model="claude/claude-x",
            system=[{"type": "text", "text": "Rules.", "cache_control": ONE_HOUR}],
            messages=[{"role": "user", "content": "hi"}],
        )
        mock = clients.anthropic(key).messages.count_tokens(
            model="mock/echo", messages=[{"role": "user", "content": "one two three"}]
        )
    finally:
        clients.close()
    assert counted.input_tokens == 321
    assert mock.input_tokens == 3  # the mock counts words
    sent = claude.requests[-1].json()
    assert sent["system"] == [{"type": "text", "text": "Rules.", "cache_control": ONE_HOUR}]
    assert "max_tokens" not in sent
    assert spent(running.url) == 0  # counting is not billed
    url = running.url + "/v1/messages/count_tokens"
    hi = [{"role": "user", "content": "hi"}]
    refused = httpx.post(url, json={"model": "mock/echo", "messages": hi}, headers={"x-api-key": only_claude})
    assert refused.status_code == 403
    assert refused.json()["type"] == "error"
    assert httpx.post(url, json={"model": "mock/echo", "messages": hi}).status_code == 401
    cannot = httpx.post(url, json={"model": "gpt/gpt-x", "messages": hi}, headers={"x-api-key": key})
    assert cannot.status_code == 400
    assert "route 'gpt' cannot count tokens (model 'gpt-x')" in cannot.json()["error"]["message"]
    assert "Adapter" not in cannot.json()["error"]["message"]  # the route the client named, never a class
    down = httpx.post(url, json={"model": "down/claude-x", "messages": hi}, headers={"x-api-key": key}, timeout=30)
    assert down.status_code >= 500
    assert "route 'down' is unreachable" in down.json()["error"]["message"]  # the transport error stays in the log


def test_responses_input_tokens_through_the_openai_sdk(running, providers) -> None:  # type: ignore[no-untyped-def]
    key = new_key(running.url)
    only_claude = new_key(running.url, routes=["claude"])
    clients = Clients(running.url)
    try:
        counted = clients.openai(key).responses.input_tokens.count(model="mock/echo", input="one two three")
        items = clients.openai(key).responses.input_tokens.count(
            model="mock/echo", instructions="be brief", input=[{"role": "user", "content": "four five"}]
        )
    finally:
        clients.close()
    assert (counted.object, counted.input_tokens) == ("response.input_tokens", 3)  # the mock counts words
    assert items.input_tokens == 4  # the instructions count too
    assert spent(running.url) == 0  # counting is not billed
    url = running.url + "/v1/responses/input_tokens"
    refused = httpx.post(
        url, json={"model": "mock/echo", "input": "hi"}, headers={"authorization": f"Bearer {only_claude}"}
    )
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "route_not_allowed"  # OpenAI's error shape
    assert httpx.post(url, json={"model": "mock/echo", "input": "hi"}).status_code == 401
    empty = httpx.post(url, json={"model": "mock/echo", "input": ""}, headers={"authorization": f"Bearer {key}"})
    assert (empty.status_code, empty.json()["error"]["param"]) == (400, "input")
    cannot = httpx.post(url, json={"model": "gpt/gpt-x", "input": "hi"}, headers={"authorization": f"Bearer {key}"})
    assert cannot.status_code == 400
    assert "route 'gpt' cannot count tokens (model 'gpt-x')" in cannot.json()["error"]["message"]


STRICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


def test_a_strict_tool_stays_strict_on_every_wire(running, providers) -> None:  # type: ignore[no-untyped-def]
    """``strict`` on a tool (the OpenAI Agents SDK sends it on every function tool) reaches the
    provider as its own strict mode: Chat → OpenAI ``function.strict``, Messages → Anthropic
    ``strict``, Chat → Anthropic too; it was dropped in silence."""
    claude, gpt = providers
    gpt.add(openai_reply())
    claude.add(anthropic_reply())
    claude.add(anthropic_reply())
    headers = {"authorization": "Bearer " + new_key(running.url)}
    hi = [{"role": "user", "content": "weather?"}]
    chat_tool = {"type": "function", "function": {"name": "weather", "parameters": STRICT_SCHEMA, "strict": True}}
    for model in ("gpt/gpt-x", "claude/claude-x"):
        answer = httpx.post(
            running.url + "/v1/chat/completions",
            json={"model": model, "messages": hi, "tools": [chat_tool], "max_tokens": 8},
            headers=headers,
        )
        assert answer.status_code == 200, answer.text
    assert gpt.requests[0].json()["tools"][0]["function"]["strict"] is True
    assert claude.requests[0].json()["tools"][0] == {"name": "weather", "input_schema": STRICT_SCHEMA, "strict": True}
    messages = httpx.post(
        running.url + "/v1/messages",
        json={
            "model": "claude/claude-x",
            "max_tokens": 8,
            "messages": hi,
            "tools": [{"type": "custom", "name": "weather", "input_schema": STRICT_SCHEMA, "strict": True}],
        },
        headers=headers,
    )
    assert messages.status_code == 200, messages.text
    assert claude.requests[1].json()["tools"][0]["strict"] is True


def test_an_image_detail_reaches_an_openai_route_and_is_refused_by_name_where_the_wire_has_none(  # type: ignore[no-untyped-def]
    running, providers
) -> None:
    """An image's ``detail`` (``low`` saves tokens, ``high`` reads small print) was dropped on
    every route: an OpenAI route now receives it; a Claude route, whose API has no such hint,
    answers 400 naming the file and the hint, before any upstream request; ``auto`` passes."""
    claude, gpt = providers
    gpt.add(openai_reply())
    claude.add(anthropic_reply())
    headers = {"authorization": "Bearer " + new_key(running.url)}

    def ask(model: str, detail: str) -> httpx.Response:
        image = {"type": "image_url", "image_url": {"url": "https://example.com/chart.png", "detail": detail}}
        content = [{"type": "text", "text": "read it"}, image]
        body = {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 8}
        return httpx.post(running.url + "/v1/chat/completions", json=body, headers=headers)

    assert ask("gpt/gpt-x", "low").status_code == 200
    assert gpt.requests[0].json()["messages"][0]["content"][1]["image_url"] == {
        "url": "https://example.com/chart.png",
        "detail": "low",
    }
    refused = ask("claude/claude-x", "high")
    assert refused.status_code == 400, refused.text
    assert "image/png (url https://example.com/chart.png): detail 'high'" in refused.json()["error"]["message"]
    assert not claude.requests
    assert ask("claude/claude-x", "auto").status_code == 200
    assert claude.requests[0].json()["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "url", "url": "https://example.com/chart.png"},
    }


@pytest.mark.parametrize(
    ("path", "tool", "param", "words"),
    [
        (
            "/v1/chat/completions",
            {"type": "function", "function": {"name": "f", "parameters": {}, "examples": []}},
            "tools[0].function.examples",
            "unknown field of the function",
        ),
        ("/v1/chat/completions", {"type": "function", "function": {"name": "f"}, "id": "x"}, "tools[0].id", "tool"),
        ("/v1/responses", {"type": "function", "name": "f", "defer_loading": True}, "tools[0].defer_loading", "tool"),
        ("/v1/messages", {"name": "f", "input_schema": {}, "input_examples": [{}]}, "tools[0].input_examples", "tool"),
        ("/v1/messages", {"type": "web_search_20250305", "name": "web_search"}, "tools[0].type", "server tool"),
    ],
)
def test_a_tool_field_the_gateway_does_not_read_is_a_400_naming_it(  # type: ignore[no-untyped-def]
    running, providers, path: str, tool: dict[str, Any], param: str, words: str
) -> None:
    headers = {"authorization": "Bearer " + new_key(running.url)}
    hi = [{"role": "user", "content": "hi"}]
    body: dict[str, Any] = {"model": "claude/claude-x", "tools": [tool]}
    if path == "/v1/responses":
        body["input"] = hi
    else:
        body.update(messages=hi, max_tokens=8)
    answer = httpx.post(running.url + path, json=body, headers=headers)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["message"].startswith(param + ": ")
    assert words in error["message"]
    assert providers[0].requests == []


@pytest.mark.parametrize(
    ("path", "fields", "param", "words"),
    [
        (
            "/v1/chat/completions",
            {"response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": {}, "strictt": True}}},
            "response_format.json_schema.strictt",
            "unknown field of the json_schema",
        ),
        (
            "/v1/chat/completions",
            {"response_format": {"type": "json_object", "schema": {}}},
            "response_format.schema",
            "unknown field of the json_object response format",
        ),
        (
            "/v1/responses",
            {"text": {"format": {"type": "json_schema", "name": "o", "schema": {}, "json_schema": {}}}},
            "text.format.json_schema",
            "unknown field of the json_schema format",
        ),
        ("/v1/responses", {"text": {"verbosity": "low"}}, "text.verbosity", "route 'claude' cannot take this field"),
        ("/v1/responses", {"reasoning": {"effort": "low", "mode": "x"}}, "reasoning.mode", "cannot take this field"),
    ],
)
def test_a_format_field_the_gateway_does_not_read_is_a_400_naming_it(  # type: ignore[no-untyped-def]
    running, providers, path: str, fields: dict[str, Any], param: str, words: str
) -> None:
    headers = {"authorization": "Bearer " + new_key(running.url)}
    hi = [{"role": "user", "content": "hi"}]
    body: dict[str, Any] = {"model": "claude/claude-x", **fields}
    if path == "/v1/responses":
        body["input"] = hi
    else:
        body["messages"] = hi
    answer = httpx.post(running.url + path, json=body, headers=headers)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["message"].startswith(param + ": ")
    assert words in error["message"]
    assert providers[0].requests == []


def test_a_reasoning_summary_asked_of_another_wire_is_accepted(running, providers) -> None:  # type: ignore[no-untyped-def]
    claude, _ = providers
    claude.add(anthropic_reply())
    answer = httpx.post(
        running.url + "/v1/responses",
        json={"model": "claude/claude-x", "input": "hi", "reasoning": {"summary": "auto"}, "stream": False},
        headers={"authorization": "Bearer " + new_key(running.url)},
    )
    assert answer.status_code == 200, answer.text
    assert "reasoning" not in claude.requests[0].json()  # summaries come from reasoning blocks anyway


def test_an_unset_option_sent_as_null_is_absent_on_a_route_of_another_wire(running, providers) -> None:  # type: ignore[no-untyped-def]
    claude, _ = providers
    claude.add(anthropic_reply())
    claude.add(anthropic_reply())
    key = new_key(running.url)
    clients = Clients(running.url)
    try:
        reply = clients.openai(key).chat.completions.create(
            model="claude/claude-x",
            messages=[{"role": "user", "content": "hi"}],
            frequency_penalty=None,  # the SDK sends JSON null for an option given as None
            extra_body={"parallel_tool_calls": None},
        )
        answer = clients.openai(key).responses.create(
            model="claude/claude-x", input="hi", text={"format": {"type": "text"}, "verbosity": None}
        )
    finally:
        clients.close()
    assert reply.choices[0].message.content == "Hello"
    assert answer.output_text == "Hello"
    assert "frequency_penalty" not in claude.requests[0].json()
