"""`harness run -a … --schema …` end to end: each provider adapter against a scripted provider
server on 127.0.0.1, and the mock; UNSUPPORTED exactly where a wire cannot take the request."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from test_cli_providers import ANTHROPIC_BODY, CASES, anthropic_event, responses_body
from test_cli_providers import run_with as run

from harness_core.testing.server import Reply, ScriptedServer

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"
REPLY = '{"name": "Zoë", "age": 36}'
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def openai_body(text: str) -> list[bytes]:
    piece = json.dumps({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]})
    return [f"data: {piece}\n\ndata: [DONE]\n\n".encode()]


def anthropic_body(text: str) -> list[bytes]:
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}
    return [*ANTHROPIC_BODY[:2], anthropic_event("content_block_delta", delta), *ANTHROPIC_BODY[3:]]


def gemini_body(text: str) -> list[bytes]:
    piece = json.dumps({"candidates": [{"content": {"parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}]})
    return [f"data: {piece}\r\n\r\n".encode()]


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("groq", openai_body(REPLY)),
        ("openai-responses", responses_body(REPLY)),
        ("claude-gw", anthropic_body(REPLY)),
        ("gemini-gw", gemini_body(REPLY)),
    ],
)
def test_an_image_and_a_concise_schema_reach_each_wire(tmp_path: Path, route: str, body: list[bytes]) -> None:
    (tmp_path / "photo.jpg").write_bytes(PNG)  # detected from its content: image/png
    with ScriptedServer(Reply(headers={"content-type": "text/event-stream"}, reads=body)) as server:
        entry = CASES[route][0].format(url=server.url)
        result = run(tmp_path, entry, "-r", route, "-m", "m", "-a", "photo.jpg", "--schema", "name, age int", "who?")
        assert result.returncode == 0, result.stderr
        (request,) = server.requests
    assert result.stdout.strip() == REPLY
    sent = request.json()
    encoded = base64.b64encode(PNG).decode()
    if route == "gemini-gw":
        assert sent["contents"][-1]["parts"][1] == {"inlineData": {"mimeType": "image/png", "data": encoded}}
        assert sent["generationConfig"] == {"responseMimeType": "application/json", "responseJsonSchema": SCHEMA}
        return
    content = (sent["messages"] if "messages" in sent else sent["input"])[-1]["content"]
    if route == "openai-responses":
        assert content[1] == {"type": "input_image", "image_url": "data:image/png;base64," + encoded, "detail": "auto"}
        assert sent["text"] == {"format": {"type": "json_schema", "name": "output", "schema": SCHEMA, "strict": False}}
    elif route == "groq":
        assert content[1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64," + encoded}}
        assert sent["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": SCHEMA, "strict": False},
        }
    else:
        assert content[1] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": encoded}}
        assert sent["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["-a", "photo.png"], "UNSUPPORTED"),
        (["--schema", "name, age int"], "JSON schema ('output') is not supported by DeepSeek"),
    ],
)
def test_deepseek_says_unsupported_precisely_and_sends_nothing(tmp_path: Path, args: list[str], named: str) -> None:
    (tmp_path / "photo.png").write_bytes(PNG)
    with ScriptedServer() as server:
        result = run(
            tmp_path, CASES["deepseek"][0].format(url=server.url), "-r", "deepseek", "-m", "deepseek-chat", *args, "hi"
        )
        assert server.requests == []
    assert result.returncode == 2
    assert named in result.stderr
    if "-a" in args:
        assert "deepseek cannot take the file image/png 'photo.png' (20 bytes): the DeepSeek chat API takes text" in (
            result.stderr
        )


def test_a_url_attachment_is_passed_on_and_anthropic_rejects_audio(tmp_path: Path) -> None:
    (tmp_path / "voice.wav").write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00")
    with ScriptedServer(Reply(headers={"content-type": "text/event-stream"}, reads=openai_body("ok"))) as server:
        entry = CASES["groq"][0].format(url=server.url)
        result = run(tmp_path, entry, "-r", "groq", "-m", "m", "-a", "https://example.com/cat.webp", "what is it?")
        assert result.returncode == 0, result.stderr
        content = server.requests[0].json()["messages"][-1]["content"]
    assert content[1] == {"type": "image_url", "image_url": {"url": "https://example.com/cat.webp"}}
    with ScriptedServer() as server:
        entry = CASES["claude-gw"][0].format(url=server.url)
        result = run(tmp_path, entry, "-r", "claude-gw", "-m", "m", "-a", "voice.wav", "transcribe")
        assert server.requests == []
    assert result.returncode == 2
    assert "anthropic cannot take the file audio/wav 'voice.wav' (20 bytes): media type audio/wav" in result.stderr


MOCK = "  mock: {}\n"


def test_mock_schema_prints_the_json_and_checks_it(tmp_path: Path) -> None:
    ok = run(tmp_path, MOCK, "-r", "mock", "--schema", json.dumps(SCHEMA), REPLY)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == REPLY
    bad = run(tmp_path, MOCK, "-r", "mock", "--schema", "name, age int", "Zoë is 36")
    assert bad.returncode == 1
    assert "error: INVALID_OUTPUT from route 'mock' (mock): the reply is not JSON" in bad.stderr


def test_mock_acknowledges_attachments_and_attach_type_forces_the_type(tmp_path: Path) -> None:
    (tmp_path / "scan.bin").write_bytes(b"\x00\x01\x02")
    result = run(tmp_path, MOCK, "-r", "mock", "--attach-type", "scan.bin", "image/png", "look")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "look [image/png 'scan.bin' (3 bytes)]"
    both = run(tmp_path, MOCK, "-r", "mock", "-a", "scan.bin", "--at", "scan.bin", "image/png", "look")
    assert both.returncode == 0, both.stderr
    assert both.stdout.strip() == "look [image/png 'scan.bin' (3 bytes)]"  # one attachment: -a's, typed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-a", "missing.png"], "error: --attach: missing.png: cannot read"),
        (["-a", "https://example.com/x"], "error: --attach: https://example.com/x: cannot tell the media type"),
        (["-a", ""], "error: --attach: an empty path: give a file, a URL, or - for standard input"),
        (["--at", "x.png", "describe"], "error: --attach: x.png describe: 'describe' is not a media type"),
        (["-a", "-", "-a", "-"], "error: --attach: - (standard input) can be attached once"),
        (["--schema", "{bad"], "error: --schema: not valid JSON: Expecting"),
        (["--schema", "age integr"], "error: --schema: field 'age' has unknown type 'integr'"),
    ],
)
def test_bad_attachments_and_schemas_are_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    result = run(tmp_path, MOCK, "-r", "mock", *args, "hi")
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stderr.count("--schema:") <= 1, result.stderr
