"""Live end-to-end tests against generativelanguage.googleapis.com (marker ``live``): they run only
when ``GOOGLE_API_KEY`` or ``GEMINI_API_KEY`` is set, and are skipped otherwise.

Loose assertions (structure, the expected word) and small limits, so they stay cheap. The model
can be chosen with ``GEMINI_TEST_MODEL``. The second test is a real two-turn tool conversation:
Gemini 3 rejects a function-call turn whose thought signature did not come back unchanged.
"""

from __future__ import annotations

import os

import pytest

from harness_core.runtime import Harness
from harness_core.secret import Secret
from harness_core.types import GenerateOptions, Message, ToolResultBlock, ToolSpec
from harness_llm_gemini import GeminiConfig, GeminiPlugin

KEY = os.environ.get("GOOGLE_API_KEY") or os.environ.get("GEMINI_API_KEY")
MODEL = os.environ.get("GEMINI_TEST_MODEL", "gemini-2.5-flash")

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.live,
    pytest.mark.skipif(not KEY, reason="GOOGLE_API_KEY / GEMINI_API_KEY is not set (live test)"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # one live call per test is enough


def plugins() -> list[tuple[str, object]]:
    assert KEY is not None
    return [("gemini", GeminiPlugin(GeminiConfig(api_key=Secret(KEY))))]


async def test_live_short_answer() -> None:
    async with Harness(plugins()) as harness:
        result = await harness.generate(
            GenerateOptions(route="gemini", model=MODEL, messages=[Message.user("Say the word 'pong'.")])
        )
    assert result.finish.kind in ("stop", "length")
    assert "pong" in result.text.lower()
    assert result.usage is not None
    assert result.usage.input_tokens


async def test_live_tool_round_trip_replays_signatures() -> None:
    tools = [ToolSpec("get_weather", "Current weather", {"type": "object", "properties": {"city": {"type": "string"}}})]
    async with Harness(plugins()) as harness:
        first = GenerateOptions(
            route="gemini",
            model=MODEL,
            messages=[Message.user("What is the weather in Paris? Use the tool.")],
            tools=tools,
            tool_choice="required",
        )
        result = await harness.generate(first)
        assert result.finish.kind == "tool-calls"
        call = result.message.tool_calls[0]
        history = [*first.messages, result.message, Message(role="tool", content=[ToolResultBlock(call.id, "18 C")])]
        second = await harness.generate(GenerateOptions(route="gemini", model=MODEL, messages=history, tools=tools))
    assert "18" in second.text
