"""Any client format reaches any provider: the SDKs over scripted Anthropic and OpenAI providers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gw_helpers import Clients, gateway_yaml, serve_gateway

from harness_core.testing import Reply, ScriptedServer


def anthropic_events() -> list[bytes]:
    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-x",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 5, "output_tokens": 1},
                },
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            },
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}},
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "SIG-1"}},
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hello"}},
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 3},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events]


def test_sdks_over_a_scripted_anthropic_provider(tmp_path: Path) -> None:
    provider = ScriptedServer(
        Reply(reads=anthropic_events()), Reply(reads=anthropic_events()), Reply(reads=anthropic_events())
    )
    with provider:
        extra = f"  anthropic:claude: {{base_url: '{provider.url}', api_key: dummy-key, routes: [claude]}}"
        with serve_gateway(tmp_path, gateway_yaml("", extra, db=tmp_path / "gw.sqlite")) as running:
            clients = Clients(running.url)
            try:
                with clients.anthropic().messages.stream(
                    model="claude/claude-x", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
                ) as stream:
                    final = stream.get_final_message()
                thinking, text = final.content
                assert thinking.type == "thinking"
                assert (thinking.thinking, thinking.signature) == ("hmm", "SIG-1")  # the signature reaches the client
                assert text.text == "Hello"  # type: ignore[union-attr]
                # the signed thinking goes back to the provider unchanged on the next turn
                history: list[Any] = [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": [thinking.model_dump(), {"type": "text", "text": "Hello"}]},
                    {"role": "user", "content": "again"},
                ]
                clients.anthropic().messages.create(
                    model="claude/claude-x",
                    max_tokens=64,
                    messages=history,
                )
                sent = provider.requests[1].json()["messages"][1]["content"][0]
                assert sent == {"type": "thinking", "thinking": "hmm", "signature": "SIG-1"}
                reply = clients.openai().chat.completions.create(
                    model="claude/claude-x", messages=[{"role": "user", "content": "hi"}]
                )
                assert reply.choices[0].message.content == "Hello"
                assert reply.choices[0].message.model_extra["reasoning_content"] == "hmm"  # type: ignore[index]
                assert reply.usage is not None
                assert reply.usage.prompt_tokens == 5
            finally:
                clients.close()
