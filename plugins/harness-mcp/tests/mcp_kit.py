"""Helpers of the harness-mcp tests: OpenAI chat SSE replies, plugins.yaml text, paths."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from harness_core.testing.server import Reply

__all__ = ["ERRORS", "FAKE", "TIME", "text_reply", "tool_call_reply", "tool_messages", "write_config", "yaml_list"]

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


def yaml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def write_config(tmp_path: Path, provider_url: str, servers: str) -> Path:
    path = tmp_path / "plugins.yaml"
    path.write_text(
        "plugins:\n"
        f"  openai: {{base_url: {provider_url}, api_key: not-a-key, routes: [openai]}}\n"
        f"{servers}"
        "defaults: {provider: openai, model: gpt-test}\n",
        encoding="utf-8",
    )
    return path


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "tool"]
