"""Live tests against api.deepseek.com (marker `live`: run with `pytest -m live` and ``DEEPSEEK_API_KEY`` set)."""

from __future__ import annotations

import os

import pytest

from harness_core.secret import Secret
from harness_core.testing.check import check_stream
from harness_core.types import BlockEnd, GenerateOptions, Message, ReasoningBlock, TextBlock, Usage
from harness_llm_deepseek import DeepSeekAdapter, DeepSeekConfig

KEY = os.environ.get("DEEPSEEK_API_KEY")

pytestmark = [pytest.mark.live, pytest.mark.anyio, pytest.mark.skipif(not KEY, reason="DEEPSEEK_API_KEY not set")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("model", ["deepseek-chat", "deepseek-reasoner"])
async def test_live_text(model: str) -> None:
    adapter = DeepSeekAdapter(DeepSeekConfig(api_key=Secret(KEY or "unset")))
    try:
        options = GenerateOptions(model=model, messages=[Message.user("Reply with the word pong.")], max_tokens=512)
        chunks = check_stream([c async for c in adapter.stream(options)])
    finally:
        await adapter.aclose()
    blocks = [c.block for c in chunks if isinstance(c, BlockEnd)]
    assert "pong" in "".join(b.text for b in blocks if isinstance(b, TextBlock)).lower()
    if model == "deepseek-reasoner":
        assert any(isinstance(b, ReasoningBlock) for b in blocks)
    assert any(isinstance(c, Usage) for c in chunks)
