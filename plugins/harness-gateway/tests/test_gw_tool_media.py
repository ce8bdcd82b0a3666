"""Media in tool results through the real gateway: an Anthropic ``tool_result`` holding ``image`` /
``document`` blocks (a coding agent's screenshot) and a Responses ``function_call_output`` holding
``input_image`` / ``input_file`` parts reach a scripted provider in that provider's own wire
format, on its own wire and across wires; a wire whose tool result takes no media refuses by
name, and bad media is a 400 naming the field (PROTOCOLS.md §2, §9.4, §10.1)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from gw_helpers import Clients, Running, gateway_yaml, serve_gateway
from test_gw_fidelity import anthropic_reply, openai_reply
from test_gw_responses import gemini_sse

from harness_core.testing import Reply, ScriptedServer

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
PDF = base64.b64encode(b"%PDF-1.4").decode()
TEXT_SSE = Path(__file__).parents[2] / "harness-llm-openai" / "tests" / "recorded-responses" / "text.sse"
TOOL = {"name": "screenshot", "input_schema": {"type": "object"}}
FUNCTION = {"type": "function", "name": "screenshot", "parameters": {"type": "object"}}


@pytest.fixture(scope="module")
def upstreams() -> Iterator[tuple[ScriptedServer, ScriptedServer, ScriptedServer, ScriptedServer]]:
    with ScriptedServer() as claude, ScriptedServer() as responses, ScriptedServer() as chat, ScriptedServer() as gem:
        yield claude, responses, chat, gem


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory, upstreams: Any) -> Iterator[Running]:
    claude, responses, chat, gem = upstreams
    tmp = tmp_path_factory.mktemp("tool-media")
    extra = (
        f"  anthropic:claude: {{base_url: '{claude.url}', api_key: dummy-key, routes: [claude]}}\n"
        f"  openai:resp: {{base_url: '{responses.url}/v1', api_key: dummy-key, api: responses, routes: [resp]}}\n"
        f"  openai:gpt: {{base_url: '{chat.url}/v1', api_key: dummy-key, routes: [gpt]}}\n"
        f"  gemini:gem: {{base_url: '{gem.url}/v1beta', api_key: dummy-key, routes: [gem]}}"
    )
    with serve_gateway(tmp, gateway_yaml("", extra, db=tmp / "gw.sqlite")) as served:
        yield served


def responses_reply() -> Reply:
    return Reply(reads=[TEXT_SSE.read_bytes()])


def screenshot_turns(*content: dict[str, Any]) -> list[dict[str, Any]]:
    """A Messages conversation whose last turn is a ``tool_result`` with ``content``."""
    return [
        {"role": "user", "content": "take a screenshot"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "screenshot", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": list(content)}]},
    ]


def screenshot_items(*output: dict[str, Any]) -> list[dict[str, Any]]:
    """A Responses input whose last item is a ``function_call_output`` with ``output``."""
    return [
        {"role": "user", "content": "take a screenshot"},
        {"type": "function_call", "call_id": "c1", "name": "screenshot", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": list(output)},
    ]


def messages(running: Running, model: str, turns: list[dict[str, Any]]) -> httpx.Response:
    body = {"model": model, "max_tokens": 64, "tools": [TOOL], "messages": turns}
    return httpx.post(running.url + "/v1/messages", json=body, timeout=30)


def responses(running: Running, model: str, items: list[dict[str, Any]]) -> httpx.Response:
    body = {"model": model, "input": items, "tools": [FUNCTION], "store": False}
    return httpx.post(running.url + "/v1/responses", json=body, timeout=30)


def last_sent(server: ScriptedServer) -> dict[str, Any]:
    sent: dict[str, Any] = server.requests[-1].json()
    return sent


SCREENSHOT = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}


def test_a_tool_results_screenshot_reaches_anthropic_as_an_image_block(running: Running, upstreams: Any) -> None:
    claude, *_ = upstreams
    claude.add(anthropic_reply("I see it"))
    clients = Clients(running.url)
    try:
        reply = clients.anthropic().messages.create(
            model="claude/claude-x",
            max_tokens=64,
            tools=[TOOL],  # type: ignore[list-item]
            messages=screenshot_turns(  # type: ignore[arg-type]
                {"type": "text", "text": "the screen:"},
                SCREENSHOT,
                {"type": "document", "source": {"type": "url", "url": "https://example.org/spec.pdf"}},
                {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "log"}},
            ),
        )
    finally:
        clients.close()
    assert reply.content[0].text == "I see it"  # type: ignore[union-attr]
    (result,) = last_sent(claude)["messages"][2]["content"]
    assert result == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": [
            {"type": "text", "text": "the screen:"},
            SCREENSHOT,
            {"type": "document", "source": {"type": "url", "url": "https://example.org/spec.pdf"}},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "log"}},
        ],
    }


def test_a_function_call_outputs_image_and_file_reach_a_responses_route_as_parts(
    running: Running, upstreams: Any
) -> None:
    _, upstream, *_ = upstreams
    upstream.add(responses_reply())
    image = {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "high"}
    pdf = {"type": "input_file", "file_data": f"data:application/pdf;base64,{PDF}", "filename": "a.pdf"}
    linked = {"type": "input_file", "file_url": "https://example.org/b.pdf"}
    answer = responses(
        running, "resp/gpt-4.1", screenshot_items({"type": "input_text", "text": "shot"}, image, pdf, linked)
    )
    assert answer.status_code == 200, answer.text
    (output,) = [item for item in last_sent(upstream)["input"] if item.get("type") == "function_call_output"]
    assert output == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": [{"type": "input_text", "text": "shot"}, image, pdf, linked],
    }


def test_a_tool_results_media_crosses_wires_in_the_targets_own_format(running: Running, upstreams: Any) -> None:
    claude, upstream, _, gem = upstreams
    upstream.add(responses_reply())
    assert messages(running, "resp/gpt-4.1", screenshot_turns(SCREENSHOT)).status_code == 200
    (output,) = [item for item in last_sent(upstream)["input"] if item.get("type") == "function_call_output"]
    assert output["output"] == [{"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"}]
    claude.add(anthropic_reply())
    image = {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"}
    assert responses(running, "claude/claude-x", screenshot_items(image)).status_code == 200
    (result,) = last_sent(claude)["messages"][-1]["content"]
    assert result == {"type": "tool_result", "tool_use_id": "c1", "content": [SCREENSHOT]}
    gem.add(Reply(reads=[gemini_sse({"text": "seen"})]))
    answer = messages(running, "gem/gemini-3-pro", screenshot_turns({"type": "text", "text": "shot"}, SCREENSHOT))
    assert answer.status_code == 200, answer.text
    (part,) = last_sent(gem)["contents"][-1]["parts"]
    assert part["functionResponse"]["response"] == {"output": "shot"}
    assert part["functionResponse"]["parts"] == [{"inlineData": {"mimeType": "image/png", "data": PNG}}]


def test_a_wire_whose_tool_result_takes_no_media_refuses_it_by_name(running: Running, upstreams: Any) -> None:
    _, _, chat, gem = upstreams
    before = len(chat.requests), len(gem.requests)
    refused = messages(running, "gpt/gpt-4o", screenshot_turns(SCREENSHOT))
    assert refused.status_code == 400, refused.text
    message = refused.json()["error"]["message"]
    assert "route 'gpt'" in message
    assert "image/png" in message
    assert "tool message takes text only" in message
    audio = {"type": "input_file", "file_data": "data:audio/wav;base64,UklGRg=="}
    refused = responses(running, "resp/gpt-4.1", screenshot_items(audio))
    assert refused.status_code == 400, refused.text
    assert "a function_call_output takes no audio" in refused.json()["error"]["message"]
    gif = {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": PNG}}
    refused = messages(running, "gem/gemini-3-pro", screenshot_turns(gif))
    assert refused.status_code == 400, refused.text
    assert "image/gif" in refused.json()["error"]["message"]
    assert (len(chat.requests), len(gem.requests)) == before  # refused before any request


def test_a_chat_tool_messages_image_is_a_400_naming_the_part_as_openai_refuses_it(running: Running) -> None:
    tool_turn = [
        {"role": "user", "content": "take a screenshot"},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}}],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}],
        },
    ]
    refused = httpx.post(
        running.url + "/v1/chat/completions", json={"model": "gpt/gpt-4o", "messages": tool_turn}, timeout=30
    )
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["param"] == "messages[2].content[0].type"
    assert error["message"].startswith(
        "messages[2].content[0].type: a Chat Completions tool message takes text parts only, as OpenAI's API does"
    )
    assert "/v1/responses" in error["message"]


def test_a_tool_results_text_parts_stay_apart_on_every_dialect(running: Running, upstreams: Any) -> None:
    """Two text parts of one tool result reach the route one a line, never run together
    ("takenmore"): a Messages ``tool_result``, a Responses ``function_call_output`` and a Chat
    ``tool`` message."""
    claude, upstream, chat, _ = upstreams
    two = ({"type": "text", "text": "taken"}, {"type": "text", "text": "more"})
    claude.add(anthropic_reply())
    assert messages(running, "claude/claude-x", screenshot_turns(*two, SCREENSHOT)).status_code == 200
    (result,) = last_sent(claude)["messages"][2]["content"]
    assert result["content"] == [{"type": "text", "text": "taken\nmore"}, SCREENSHOT]
    upstream.add(responses_reply())
    parts = ({"type": "input_text", "text": "taken"}, {"type": "input_text", "text": "more"})
    assert responses(running, "resp/gpt-4.1", screenshot_items(*parts)).status_code == 200
    (output,) = [item for item in last_sent(upstream)["input"] if item.get("type") == "function_call_output"]
    assert output["output"] == "taken\nmore"
    chat.add(openai_reply())
    tool_turn = [
        {"role": "user", "content": "take a screenshot"},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": list(two)},
    ]
    answer = httpx.post(
        running.url + "/v1/chat/completions", json={"model": "gpt/gpt-4o", "messages": tool_turn}, timeout=30
    )
    assert answer.status_code == 200, answer.text
    assert last_sent(chat)["messages"][2] == {"role": "tool", "tool_call_id": "c1", "content": "taken\nmore"}


IN_RESULT = "messages[2].content[0].content[1]"


@pytest.mark.parametrize(
    ("block", "param", "says"),
    [
        ({"type": "search_result", "source": "s"}, f"{IN_RESULT}.type", "text, image and document"),
        (
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "not*base64"}},
            f"{IN_RESULT}.source.data",
            "not valid base64",
        ),
        (
            {"type": "image", "source": {"type": "base64", "data": PNG}},
            f"{IN_RESULT}.source.media_type",
            "required",
        ),
        (
            {"type": "image", "source": {"type": "url", "url": "https://example.org/shot"}},
            f"{IN_RESULT}.source.url",
            "cannot tell the media type",
        ),
        ({"type": "document", "source": {"type": "file"}}, f"{IN_RESULT}.source.type", "expected base64"),
        (
            {"type": "document", "source": {"type": "url", "url": "https://example.org/a.pdf"}, "title": "T"},
            f"{IN_RESULT}.title",
            "unknown field of the document block",
        ),
    ],
)  # fmt: skip
def test_bad_media_in_a_tool_result_is_a_400_naming_the_field(
    running: Running, block: dict[str, Any], param: str, says: str
) -> None:
    refused = messages(running, "claude/claude-x", screenshot_turns({"type": "text", "text": "shot"}, block))
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(param + ": ")
    assert says in error["message"]


@pytest.mark.parametrize(
    ("part", "param", "says"),
    [
        ({"type": "input_audio", "input_audio": {}}, "input[2].output[1].type", "input_text, input_image and"),
        ({"type": "input_image", "image_url": "data:image/png;base64,***"}, "input[2].output[1].image_url", "base64"),
        ({"type": "input_image", "file_id": "file-1"}, "input[2].output[1].file_id", "uploaded file ids"),
        ({"type": "input_file", "file_data": PDF}, "input[2].output[1].file_data", "expected a data: URL"),
        ({"type": "input_text"}, "input[2].output[1].text", "required"),
    ],
)  # fmt: skip
def test_bad_media_in_a_function_call_output_is_a_400_naming_the_field(
    running: Running, part: dict[str, Any], param: str, says: str
) -> None:
    refused = responses(running, "resp/gpt-4.1", screenshot_items({"type": "input_text", "text": "shot"}, part))
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["param"] == param
    assert says in error["message"]


def user_turn(*content: dict[str, Any]) -> list[dict[str, Any]]:
    """A one-message conversation: the user's ``content`` parts (or blocks)."""
    return [{"role": "user", "content": list(content)}]


EMPTY_PNG = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}
EMPTY_DATA_URL = "data:image/png;base64,"
EMPTY_TEXT = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": ""}}


@pytest.mark.parametrize(
    ("path", "model", "body", "param", "says"),
    [
        ("/v1/messages", "claude/claude-x", {"messages": user_turn(EMPTY_PNG)},
         "messages[0].content[0].source.data", "the data is empty (0 bytes)"),
        ("/v1/messages", "claude/claude-x", {"messages": screenshot_turns({"type": "text", "text": "shot"}, EMPTY_PNG)},
         f"{IN_RESULT}.source.data", "the data is empty (0 bytes)"),
        ("/v1/messages", "claude/claude-x",
         {"messages": user_turn(EMPTY_TEXT)},
         "messages[0].content[0].source.data", "the data is empty (0 bytes)"),
        ("/v1/messages", "claude/claude-x",
         {"messages": user_turn({"type": "image", "source": {"type": "url", "url": "ftp://example.org/a.png"}})},
         "messages[0].content[0].source.url", "expected an absolute http, https or data: URL, got the scheme 'ftp'"),
        ("/v1/messages", "claude/claude-x",
         {"messages": screenshot_turns({"type": "document", "source": {"type": "url", "url": "file:///etc/a.pdf"}})},
         "messages[2].content[0].content[0].source.url", "got the scheme 'file'"),
        ("/v1/chat/completions", "gpt/gpt-4o",
         {"messages": user_turn({"type": "image_url", "image_url": {"url": EMPTY_DATA_URL}})},
         "messages[0].content[0].image_url.url", "the data is empty (0 bytes)"),
        ("/v1/chat/completions", "gpt/gpt-4o",
         {"messages": user_turn({"type": "image_url", "image_url": {"url": "file:///home/me/a.png"}})},
         "messages[0].content[0].image_url.url", "got the scheme 'file'"),
        ("/v1/chat/completions", "gpt/gpt-4o",
         {"messages": user_turn({"type": "image_url", "image_url": {"url": "shots/a.png"}})},
         "messages[0].content[0].image_url.url", "expected an absolute http, https or data: URL, got no scheme"),
        ("/v1/chat/completions", "gpt/gpt-4o",
         {"messages": user_turn({"type": "image_url", "image_url": {"url": "http:/x.png"}})},
         "messages[0].content[0].image_url.url", "got no host in 'http:/x.png'"),
        ("/v1/messages", "claude/claude-x",
         {"messages": user_turn({"type": "image", "source": {"type": "url", "url": "https:///x.png"}})},
         "messages[0].content[0].source.url", "got no host in 'https:///x.png'"),
        ("/v1/chat/completions", "gpt/gpt-4o",
         {"messages": user_turn({"type": "input_audio", "input_audio": {"data": "", "format": "wav"}})},
         "messages[0].content[0].input_audio.data", "the data is empty (0 bytes)"),
        ("/v1/chat/completions", "gpt/gpt-4o",
         {"messages": user_turn({"type": "file", "file": {"file_data": "data:application/pdf;base64,"}})},
         "messages[0].content[0].file.file_data", "the data is empty (0 bytes)"),
        ("/v1/responses", "resp/gpt-4.1",
         {"input": user_turn({"type": "input_image", "image_url": "ftp://example.org/a.png"})},
         "input[0].content[0].image_url", "got the scheme 'ftp'"),
        ("/v1/responses", "resp/gpt-4.1",
         {"input": screenshot_items({"type": "input_image", "image_url": EMPTY_DATA_URL})},
         "input[2].output[0].image_url", "the data is empty (0 bytes)"),
        ("/v1/responses", "resp/gpt-4.1",
         {"input": screenshot_items({"type": "input_file", "file_url": "file:///etc/passwd.pdf"})},
         "input[2].output[0].file_url", "got the scheme 'file'"),
        ("/v1/responses", "resp/gpt-4.1",
         {"input": user_turn({"type": "input_file", "file_data": "DATA:application/pdf;base64,"})},
         "input[0].content[0].file_data", "expected a data: URL"),
    ],
)  # fmt: skip
def test_an_empty_file_or_a_url_of_another_scheme_is_a_400_naming_the_field_before_any_request(
    running: Running, upstreams: Any, path: str, model: str, body: dict[str, Any], param: str, says: str
) -> None:
    before = [len(server.requests) for server in upstreams]
    sent = {"model": model, "max_tokens": 64, **body} if path == "/v1/messages" else {"model": model, **body}
    refused = httpx.post(running.url + path, json=sent, timeout=30)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(param + ": ")
    assert says in error["message"]
    if path != "/v1/messages":  # Anthropic's error body has no param
        assert error["param"] == param
    assert [len(server.requests) for server in upstreams] == before  # refused before any upstream request


def test_http_and_https_urls_and_an_upper_case_data_url_are_passed_on(running: Running, upstreams: Any) -> None:
    claude, *_ = upstreams
    claude.add(anthropic_reply())
    linked: list[dict[str, Any]] = [
        {"type": "image", "source": {"type": "url", "url": "http://example.org/a.png"}},
        {"type": "document", "source": {"type": "url", "url": "HTTPS://example.org/b.pdf"}},
        {"type": "text", "text": "what are these?"},
    ]
    assert messages(running, "claude/claude-x", user_turn(*linked)).status_code == 200
    assert last_sent(claude)["messages"][0]["content"] == linked
    _, upstream, *_ = upstreams
    upstream.add(responses_reply())
    image = {"type": "input_image", "image_url": f"DATA:image/png;base64,{PNG}"}
    answer = responses(running, "resp/gpt-4.1", user_turn(image))
    assert answer.status_code == 200, answer.text
    (part,) = last_sent(upstream)["input"][0]["content"]
    assert part["image_url"] == f"data:image/png;base64,{PNG}"


def test_a_routes_refusal_of_a_file_names_the_request_field_and_the_route(running: Running, upstreams: Any) -> None:
    """The adapter refuses a file naming its plugin (``openai cannot take the file …``); the
    client is told which field held it (``param``) and which route it asked for, as the gateway's
    own 400s say, before any request, streaming or not, in a user message or a tool result."""
    before = [len(server.requests) for server in upstreams]
    log = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "log"}}
    refused = messages(running, "gpt/gpt-4o", user_turn({"type": "text", "text": "read"}, log))
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["message"].startswith(
        "messages[0].content[1]: route 'gpt' (model 'gpt/gpt-4o') cannot take the file text/plain (3 bytes): "
        "media type text/plain is not one of ["
    )
    refused = messages(running, "gpt/gpt-4o", screenshot_turns({"type": "text", "text": "shot"}, SCREENSHOT))
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["message"].startswith(
        f"{IN_RESULT}: route 'gpt' (model 'gpt/gpt-4o') cannot take the file image/png (8 bytes): "
    )
    png = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}  # taken: not the one named
    gif = {"type": "image_url", "image_url": {"url": f"data:image/gif;base64,{PNG}"}}
    for stream in (False, True):
        body = {"model": "gem/gemini-3-pro", "stream": stream, "messages": user_turn(png, gif)}
        refused = httpx.post(running.url + "/v1/chat/completions", json=body, timeout=30)
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert (error["param"], error["code"]) == ("messages[0].content[1]", "UNSUPPORTED")
        assert error["message"] == (
            "messages[0].content[1]: route 'gem' (model 'gem/gemini-3-pro') cannot take the file image/gif "
            "(8 bytes): Gemini does not take image/gif"
        )
    body = {"model": "gem/gemini-dummy-key", "messages": user_turn(gif)}  # a model quoting the route's key
    refused = httpx.post(running.url + "/v1/chat/completions", json=body, timeout=30)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == "messages[0].content[0]"
    assert "dummy-key" not in refused.text  # masked, as in every output
    audio = {"type": "input_file", "file_data": "data:audio/wav;base64,UklGRg=="}
    refused = responses(running, "resp/gpt-4.1", screenshot_items({"type": "input_text", "text": "shot"}, audio))
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["param"] == "input[2].output[1]"
    assert error["message"].startswith("input[2].output[1]: route 'resp' (model 'resp/gpt-4.1') cannot take the file")
    assert "a function_call_output takes no audio" in error["message"]
    assert [len(server.requests) for server in upstreams] == before  # refused before any request
