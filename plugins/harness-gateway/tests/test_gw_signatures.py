"""Thinking signatures through ``/v1/messages``: a signed and a redacted thinking block go from an
Anthropic client through the gateway to a scripted Anthropic provider and back, byte for byte
(the typed place: ``ReasoningSignature``, docs/vocabulary.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from gw_helpers import Clients, gateway_yaml, serve_gateway

from harness_core.testing import Reply, ScriptedServer

SIGNATURE = "EqQBCkYIBxgCKkDx+/=" + "s" * 40
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP=="
CLAUDE = "  anthropic:claude: {{base_url: '{}', api_key: dummy-key, routes: [claude]}}"


def signed_events() -> list[bytes]:
    """A reply of a redacted thinking block, a signed thinking block and a text block."""
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }

    def block(index: int, content: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_start", "index": index, "content_block": content}

    def delta(index: int, body: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": index, "delta": body}

    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": message},
        block(0, {"type": "redacted_thinking", "data": REDACTED}),
        {"type": "content_block_stop", "index": 0},
        block(1, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(1, {"type": "thinking_delta", "thinking": "hmm"}),
        delta(1, {"type": "signature_delta", "signature": SIGNATURE}),
        {"type": "content_block_stop", "index": 1},
        block(2, {"type": "text", "text": ""}),
        delta(2, {"type": "text_delta", "text": "Hello"}),
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 3},
        },
        {"type": "message_stop"},
    ]
    return [f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode() for event in events]


EXPECTED = [
    {"type": "redacted_thinking", "data": REDACTED},
    {"type": "thinking", "thinking": "hmm", "signature": SIGNATURE},
    {"type": "text", "text": "Hello"},
]


def test_signed_and_redacted_thinking_round_trip_through_the_sdk_unchanged(tmp_path: Path) -> None:
    provider = ScriptedServer(*(Reply(reads=signed_events()) for _ in range(3)))
    with (
        provider,
        serve_gateway(tmp_path, gateway_yaml("", CLAUDE.format(provider.url), db=tmp_path / "gw.sqlite")) as running,
    ):
        clients = Clients(running.url)
        try:
            client = clients.anthropic()
            with client.messages.stream(
                model="claude/claude-x", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
            ) as stream:
                events = [event.type for event in stream]
                final = stream.get_final_message()
            assert "signature" in events  # the SDK's accumulator applied the signature_delta
            assert [block.model_dump(exclude_none=True) for block in final.content] == EXPECTED
            history: list[Any] = [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in final.content]},
                {"role": "user", "content": "again"},
            ]
            reply = client.messages.create(model="claude/claude-x", max_tokens=64, messages=history)
            assert [block.model_dump(exclude_none=True) for block in reply.content] == EXPECTED  # non-streaming too
            raw = provider.requests[1].body
            assert isinstance(raw, bytes)
            assert f'"signature":"{SIGNATURE}"'.encode() in raw  # byte-exact on the wire
            assert f'"data":"{REDACTED}"'.encode() in raw
            assert json.loads(raw)["messages"][1]["content"] == EXPECTED
        finally:
            clients.close()


def test_client_sent_thinking_reaches_the_wire_unchanged_over_raw_http(tmp_path: Path) -> None:
    provider = ScriptedServer(Reply(reads=signed_events()))
    with (
        provider,
        serve_gateway(tmp_path, gateway_yaml("", CLAUDE.format(provider.url), db=tmp_path / "gw.sqlite")) as running,
    ):
        body = {
            "model": "claude/claude-x",
            "max_tokens": 64,
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": EXPECTED},
                {"role": "user", "content": "again"},
            ],
        }
        answer = httpx.post(f"{running.url}/v1/messages", json=body, timeout=30)
        assert answer.status_code == 200, answer.text
        assert answer.json()["content"] == EXPECTED
        assert json.loads(provider.requests[0].body or b"{}")["messages"][1]["content"] == EXPECTED
