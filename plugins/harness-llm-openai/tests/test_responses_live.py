"""Live tests of the Responses API against api.openai.com (marker ``live``; skipped without
``OPENAI_API_KEY``): ``pytest -m live plugins/harness-llm-openai``.

``OPENAI_LIVE_RESPONSES_MODEL`` picks a reasoning model (default ``gpt-5-nano``). The two-turn
test is the real proof of replay: OpenAI rejects a second turn whose reasoning item lost its
encrypted content ("Item with id 'rs_…' not found").
"""

from __future__ import annotations

import os

import pytest

from harness_core.conversation import Conversation
from harness_core.runtime import Harness
from harness_core.secret import Secret
from harness_core.tools import Tool
from harness_core.types import GenerateOptions, Message, ReasoningBlock, ToolCallBlock
from harness_llm_openai import Config, OpenAIPlugin

KEY = os.environ.get("OPENAI_API_KEY")
MODEL = os.environ.get("OPENAI_LIVE_RESPONSES_MODEL", "gpt-5-nano")

pytestmark = [pytest.mark.live, pytest.mark.anyio, pytest.mark.skipif(not KEY, reason="OPENAI_API_KEY not set")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def harness() -> Harness:
    return Harness([("openai", OpenAIPlugin(Config(api_key=Secret(KEY or "unset"), api="responses")))])


def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"Sunny, 21 °C in {city}"


async def test_live_text_with_reasoning_and_usage() -> None:
    async with harness() as running:
        options = GenerateOptions(
            route="openai", model=MODEL, messages=[Message.user("Say the word: pong")], reasoning_effort="low"
        )
        result = await running.generate(options)
    assert "pong" in result.text.lower()
    assert result.usage is not None
    assert result.usage.input_tokens
    assert result.finish.kind == "stop"


async def test_live_tool_round_trip_replays_encrypted_reasoning() -> None:
    async with harness() as running:
        chat = Conversation(running, route="openai", model=MODEL, tools=[Tool(get_weather)])
        reply = await chat.send("What is the weather in Paris? Use the tool, then answer in one sentence.")
    assert reply.finish.kind == "stop"
    turn = chat.messages[1]
    assert any(isinstance(block, ToolCallBlock) for block in turn.content)
    if any(isinstance(block, ReasoningBlock) for block in turn.content):
        assert turn.replay_state["reasoning"]
    assert "21" in reply.text or "sunny" in reply.text.lower()
