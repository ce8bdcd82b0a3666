"""`harness run -p <route>` through each provider adapter, configured as its README shows,
against a scripted provider server on 127.0.0.1 (the provider is mocked, never the harness)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness_core.testing.server import Reply, ScriptedServer

KEY = "test-key-provider-0001"

OPENAI_BODY = [
    b'data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant",'
    b'"content":"Hello "},"finish_reason":null}]}\n\n',
    b'data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"w\xc3',
    b'\xb6rld"},"finish_reason":"stop"}]}\n\n',
    b'data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":3,'
    b'"completion_tokens":2,"total_tokens":5}}\n\ndata: [DONE]\n\n',
]

DEEPSEEK_BODY = [
    b'data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"Think."},'
    b'"finish_reason":null}]}\n\n',
    b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hello w\xc3\xb6rld","reasoning_content":null},'
    b'"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"prompt_cache_hit_tokens":1,'
    b'"completion_tokens_details":{"reasoning_tokens":2}}}\n\ndata: [DONE]\n\n',
]


def responses_body(text: str) -> list[bytes]:
    """A Responses API stream (``event:`` + ``data:``, no ``[DONE]``) answering ``text``."""
    events: list[dict[str, object]] = [
        {"type": "response.output_item.added", "output_index": 0, "item": {"id": "msg_1", "type": "message"}},
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": text,
        },
        {"type": "response.output_item.done", "output_index": 0, "item": {"id": "msg_1", "type": "message"}},
        {
            "type": "response.completed",
            "response": {"status": "completed", "usage": {"input_tokens": 3, "output_tokens": 2}},
        },
    ]
    return [f"event: {e['type']}\ndata: {json.dumps(e, ensure_ascii=False)}\n\n".encode() for e in events]


def anthropic_event(name: str, data: dict[str, object]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


ANTHROPIC_BODY = [
    anthropic_event(
        "message_start",
        {"type": "message_start", "message": {"id": "msg_1", "model": "claude-x", "usage": {"input_tokens": 3}}},
    ),
    anthropic_event(
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ),
    anthropic_event(
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello wörld"}},
    ),
    anthropic_event("content_block_stop", {"type": "content_block_stop", "index": 0}),
    anthropic_event(
        "message_delta",
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
    ),
    anthropic_event("message_stop", {"type": "message_stop"}),
]

GEMINI_BODY = [
    b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Hello w\xc3',
    b'\xb6rld"}]},"index":0}],"responseId":"r1"}\r\n\r\ndata: {"candidates":[{"content":{"role":"model",'
    b'"parts":[{"text":""}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":3,'
    b'"candidatesTokenCount":2}}\r\n\r\n',
]

CASES = {
    # route: (plugins.yaml entry as in the plugin's README, body, request path, auth header, auth value)
    "groq": (
        "  openai:groq:\n    base_url: {url}/v1\n    api_key: ${{{{ env.PROVIDER_KEY }}}}\n    routes: [groq]\n",
        OPENAI_BODY,
        "/v1/chat/completions",
        "authorization",
        f"Bearer {KEY}",
    ),
    "openai-responses": (
        "  openai:responses:\n    base_url: {url}/v1\n    api_key: ${{{{ env.PROVIDER_KEY }}}}\n    api: responses\n"
        "    routes: [openai-responses]\n",
        responses_body("Hello wörld"),
        "/v1/responses",
        "authorization",
        f"Bearer {KEY}",
    ),
    "claude-gw": (
        "  anthropic:gateway:\n    base_url: {url}\n    api_key: ${{{{ env.PROVIDER_KEY }}}}\n"
        "    routes: [claude-gw]\n    max_tokens_default: 8192\n",
        ANTHROPIC_BODY,
        "/v1/messages",
        "x-api-key",
        KEY,
    ),
    "deepseek": (
        "  deepseek:\n    base_url: {url}\n    api_key: ${{{{ env.PROVIDER_KEY }}}}\n",
        DEEPSEEK_BODY,
        "/chat/completions",
        "authorization",
        f"Bearer {KEY}",
    ),
    "gemini-gw": (
        "  gemini:gateway:\n    base_url: {url}/v1beta\n    api_key: ${{{{ env.PROVIDER_KEY }}}}\n"
        "    routes: [gemini-gw]\n",
        GEMINI_BODY,
        "/v1beta/models/model-x:streamGenerateContent?alt=sse",
        "x-goog-api-key",
        KEY,
    ),
}


def run_with(tmp_path: Path, entry: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``harness run *args`` with a plugins.yaml holding ``entry`` (and the key in the environment)."""
    config = tmp_path / "plugins.yaml"
    config.write_text("plugins:\n" + entry)
    env = {**os.environ, "PROVIDER_KEY": KEY, "HARNESS_CONFIG": str(config)}
    return subprocess.run(
        [sys.executable, "-m", "harness_core.cli", "run", *args],
        stdin=subprocess.DEVNULL,  # `harness run` reads piped stdin: never the test runner's
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("route", sorted(CASES))
def test_run_through_each_provider_adapter(tmp_path: Path, route: str) -> None:
    entry, body, path, header, value = CASES[route]
    with ScriptedServer(Reply(headers={"content-type": "text/event-stream"}, reads=body)) as server:
        result = run_with(tmp_path, entry.format(url=server.url), "-r", route, "-m", "model-x", "Say hello")
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "Hello wörld"
        assert "finish: stop" in result.stderr
        assert KEY not in result.stdout + result.stderr
        (request,) = server.requests
    assert (request.method, request.path) == ("POST", path)
    assert request.headers[header] == value
    sent = request.json()
    if route == "gemini-gw":  # the model is in the path, the stream in alt=sse
        assert sent["contents"] == [{"role": "user", "parts": [{"text": "Say hello"}]}]
        return
    assert sent["model"] == "model-x"
    assert sent["stream"] is True
    last = (sent["messages"] if "messages" in sent else sent["input"])[-1]
    assert last["content"] in ("Say hello", [{"type": "text", "text": "Say hello"}])
