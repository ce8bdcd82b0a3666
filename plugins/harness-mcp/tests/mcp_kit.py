"""Helpers of the harness-mcp tests: OpenAI chat SSE replies, plugins.yaml text, paths."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from harness_core.testing.server import Reply

__all__ = [
    "ERRORS",
    "FAKE",
    "TIME",
    "anthropic_text_reply",
    "anthropic_tool_call_reply",
    "text_reply",
    "tool_call_reply",
    "tool_messages",
    "write_config",
    "yaml_list",
]

FAKE = str(Path(__file__).with_name("fake_server.py"))
ERRORS = str(Path(__file__).with_name("error_server.py"))
TIME = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]


def sse(*events: dict[str, Any]) -> bytes:
    return "".join(f"data: {json.dumps(e)}\n\n" for e in [*events]).encode() + b"data: [DONE]\n\n"


def tool_call_reply(name: str, arguments: str) -> Reply:
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}
    return Reply(
        reads=[
            sse(
                {"id": "a", "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}}]},
                {"id": "a", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            )
        ]
    )


def text_reply(text: str) -> Reply:
    return Reply(
        reads=[
            sse(
                {"id": "b", "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
                {"id": "b", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            )
        ]
    )


def anthropic_sse(*events: dict[str, Any]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _anthropic(block: dict[str, Any], body: dict[str, Any], stop_reason: str) -> Reply:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "content": []}
    return Reply(
        reads=[
            anthropic_sse(
                {"type": "message_start", "message": {**message, "usage": {"input_tokens": 3, "output_tokens": 1}}},
                {"type": "content_block_start", "index": 0, "content_block": block},
                {"type": "content_block_delta", "index": 0, "delta": body},
                {"type": "content_block_stop", "index": 0},
                {"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": {"output_tokens": 2}},
                {"type": "message_stop"},
            )
        ]
    )


def anthropic_tool_call_reply(name: str, arguments: str) -> Reply:
    """A Messages API stream calling tool ``name`` (id ``toolu_1``) with ``arguments`` (JSON text)."""
    block = {"type": "tool_use", "id": "toolu_1", "name": name, "input": {}}
    return _anthropic(block, {"type": "input_json_delta", "partial_json": arguments}, "tool_use")


def anthropic_text_reply(text: str) -> Reply:
    """A Messages API stream answering ``text``."""
    return _anthropic({"type": "text", "text": ""}, {"type": "text_delta", "text": text}, "end_turn")


def yaml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def write_config(tmp_path: Path, provider_url: str, servers: str) -> Path:
    path = tmp_path / "plugins.yaml"
    path.write_text(
        "plugins:\n"
        f"  openai: {{base_url: {provider_url}, api_key: not-a-key, routes: [openai]}}\n"
        f"{servers}"
        "defaults: {route: openai, model: gpt-test}\n",
        encoding="utf-8",
    )
    return path


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "tool"]
