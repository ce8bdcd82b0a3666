"""The anthropic adapter against the conformance suite (bodies from ``anthropic_wire_fixtures``)."""

from __future__ import annotations

from typing import ClassVar

from anthropic_wire_fixtures import (
    API_KEY,
    INBAND_ERROR_BODY,
    MODEL,
    PARALLEL_TOOLS_BODY,
    TEXT_BODY,
    THINKING_TOOL_BODY,
    make_config_for,
)

from harness_core.adapter import LlmAdapter
from harness_core.testing.conformance import AdapterConformance, Recording
from harness_core.types import FileBlock, GenerateOptions, JsonSchemaFormat, Message
from harness_llm_anthropic.adapter import AnthropicAdapter

ASK = [Message.user("Say hello")]
HEADERS = {"request-id": "req_011CNTu8", "content-type": "application/json"}


def error(status: int, kind: str, message: str, **headers: str) -> Recording:
    body = f'{{"type":"error","error":{{"type":"{kind}","message":"{message}"}}}}'.encode()
    return Recording(body, status, {**HEADERS, **headers})


class TestAnthropicConformance(AdapterConformance):
    options = GenerateOptions(model=MODEL, messages=ASK, max_tokens=256)
    recordings: ClassVar[dict[str, Recording]] = {
        "text": Recording(TEXT_BODY),
        "usage": Recording(TEXT_BODY),
        "reasoning": Recording(THINKING_TOOL_BODY),
        "tool-call": Recording(THINKING_TOOL_BODY),
        "replay": Recording(THINKING_TOOL_BODY),
        "parallel-tool-calls": Recording(PARALLEL_TOOLS_BODY),
        "in-band-error": Recording(INBAND_ERROR_BODY),
        "truncated": Recording(TEXT_BODY[: TEXT_BODY.index(b"event: content_block_stop")]),
        "http-401": error(401, "authentication_error", "invalid x-api-key"),
        "http-429": error(429, "rate_limit_error", "Too many requests", **{"retry-after": "12"}),
        "http-500": error(500, "api_error", "Internal server error"),
    }
    unsupported: ClassVar[dict[str, GenerateOptions]] = {"seed": GenerateOptions(model=MODEL, messages=ASK, seed=7)}
    media_options = GenerateOptions(
        model=MODEL,
        max_tokens=256,
        messages=[
            Message.user(
                "Compare",
                FileBlock("image/png", data=b"\x89PNG\r\n\x1a\n\x00"),
                FileBlock("image/jpeg", url="https://example.com/cat.jpg"),
                FileBlock("application/pdf", data=b"%PDF-1.7 tiny"),
            )
        ],
    )
    schema_options = GenerateOptions(
        model=MODEL,
        max_tokens=256,
        messages=ASK,
        response_format=JsonSchemaFormat("person", {"type": "object", "properties": {"name": {"type": "string"}}}),
    )
    api_key = API_KEY

    def make_adapter(self, base_url: str) -> LlmAdapter:
        return AnthropicAdapter(make_config_for(base_url))
