"""Live tests against api.openai.com (marker `live`: `pytest -m live` with ``OPENAI_API_KEY`` set).

``OPENAI_LIVE_MODEL`` picks the model (default ``gpt-4o-mini``).
"""

from __future__ import annotations

import os

import pytest
from openai_harness import check

from harness_core.secret import Secret
from harness_core.types import BlockEnd, GenerateOptions, Message, ToolCallBlock, ToolSpec, Usage
from harness_llm_openai import Config, OpenAIAdapter

KEY = os.environ.get("OPENAI_API_KEY")
MODEL = os.environ.get("OPENAI_LIVE_MODEL", "gpt-4o-mini")

pytestmark = [pytest.mark.live, pytest.mark.anyio, pytest.mark.skipif(not KEY, reason="OPENAI_API_KEY not set")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_live_text() -> None:
    adapter = OpenAIAdapter(Config(api_key=Secret(KEY or "unset")))
    try:
        options = GenerateOptions(model=MODEL, messages=[Message.user("Say the word: pong")], max_tokens=16)
        chunks = check([c async for c in adapter.stream(options)])
    finally:
        await adapter.aclose()
    text = "".join(c.block.text for c in chunks if isinstance(c, BlockEnd) and hasattr(c.block, "text"))
    assert "pong" in text.lower()
    assert any(isinstance(c, Usage) for c in chunks)


async def test_live_tool_call() -> None:
    adapter = OpenAIAdapter(Config(api_key=Secret(KEY or "unset")))
    weather = ToolSpec(
        "get_weather", "Weather for a city", {"type": "object", "properties": {"city": {"type": "string"}}}
    )
    try:
        options = GenerateOptions(
            model=MODEL,
            messages=[Message.user("What is the weather in Paris? Use the tool.")],
            tools=[weather],
            tool_choice="required",
            max_tokens=64,
        )
        chunks = check([c async for c in adapter.stream(options)])
    finally:
        await adapter.aclose()
    calls = [c.block for c in chunks if isinstance(c, BlockEnd) and isinstance(c.block, ToolCallBlock)]
    assert calls
    assert calls[0].name == "get_weather"
