"""The adapter conformance suite (``harness_core.testing.conformance``) over the library's
OpenAI-wire and Anthropic-wire providers against scripted servers.

The OpenAI provider replays the openai plugin's recorded responses; the Anthropic provider
replays this plugin's Anthropic bodies. asyncio only: any-llm and the SDKs it wraps run on
asyncio.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from anyllm_wire import (
    ANTHROPIC_TEXT,
    ANTHROPIC_THINKING_TOOL,
    MODEL,
    anthropic_sse,
    block_start,
    block_stop,
    delta,
    key,
    message_delta,
    message_start,
)

from harness_core.adapter import LlmAdapter
from harness_core.secret import Secret
from harness_core.testing.conformance import AdapterConformance, Recording, load_recordings
from harness_core.types import GenerateOptions, Message
from harness_llm_anyllm.adapter import AnyLLMAdapter
from harness_llm_anyllm.config import AnyLLMConfig

OPENAI_RECORDED = Path(__file__).parents[2] / "harness-llm-openai" / "tests" / "recorded"
ASK = [Message.user("Say hello")]
KEY = key()


def _tool(index: int, call_id: str, name: str, arguments: str) -> list[dict[str, object]]:
    return [
        block_start(index, {"type": "tool_use", "id": call_id, "name": name, "input": {}}),
        delta(index, {"type": "input_json_delta", "partial_json": arguments}),
        block_stop(index),
    ]


ANTHROPIC_PARALLEL = anthropic_sse(
    [
        message_start(input_tokens=30, output_tokens=1),
        *_tool(0, "toolu_a", "get_weather", '{"city": "Paris"}'),
        *_tool(1, "toolu_b", "get_time", '{"tz": "CET"}'),
        message_delta("tool_use", 40),
        {"type": "message_stop"},
    ]
)
ANTHROPIC_INBAND_ERROR = anthropic_sse(
    [
        message_start(input_tokens=20, output_tokens=1),
        block_start(0, {"type": "text", "text": ""}),
        delta(0, {"type": "text_delta", "text": "partial \u20ac"}),
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ]
)


def _anthropic_error(status: int, kind: str, message: str, **headers: str) -> Recording:
    body = f'{{"type":"error","error":{{"type":"{kind}","message":"{message}"}}}}'.encode()
    return Recording(body, status, {"request-id": "req_1", "content-type": "application/json", **headers})


class _LibraryConformance(AdapterConformance):
    provider: ClassVar[str]
    backends = ("asyncio",)
    api_key = KEY

    def make_adapter(self, base_url: str) -> LlmAdapter:
        return AnyLLMAdapter(AnyLLMConfig(provider=self.provider, base_url=base_url, api_key=Secret(KEY)))


class TestOpenAIWireConformance(_LibraryConformance):
    provider = "openai"
    options = GenerateOptions(model="gpt-4o-mini", messages=ASK)
    recordings = load_recordings(OPENAI_RECORDED)
    unsupported: ClassVar[dict[str, GenerateOptions]] = {
        "n=2": GenerateOptions(model="gpt-4o-mini", messages=ASK, provider_options={"anyllm": {"n": 2}}),
        "reasoning_effort": GenerateOptions(model="gpt-4o-mini", messages=ASK, reasoning_effort="high"),
    }


class TestAnthropicWireConformance(_LibraryConformance):
    provider = "anthropic"
    options = GenerateOptions(model=MODEL, messages=ASK, max_tokens=256)
    recordings: ClassVar[dict[str, Recording]] = {
        "text": Recording(ANTHROPIC_TEXT),
        "usage": Recording(ANTHROPIC_TEXT),
        "reasoning": Recording(ANTHROPIC_THINKING_TOOL),
        "tool-call": Recording(ANTHROPIC_THINKING_TOOL),
        "parallel-tool-calls": Recording(ANTHROPIC_PARALLEL),
        "in-band-error": Recording(ANTHROPIC_INBAND_ERROR),
        "truncated": Recording(ANTHROPIC_TEXT[: ANTHROPIC_TEXT.index(b"event: content_block_stop")]),
        "http-401": _anthropic_error(401, "authentication_error", "invalid x-api-key"),
        "http-429": _anthropic_error(429, "rate_limit_error", "Too many requests", **{"retry-after": "12"}),
        "http-500": _anthropic_error(500, "api_error", "Internal server error"),
    }
    unsupported: ClassVar[dict[str, GenerateOptions]] = {
        "seed": GenerateOptions(model=MODEL, messages=ASK, max_tokens=256, seed=7)
    }
