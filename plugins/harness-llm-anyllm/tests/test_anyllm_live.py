"""Live tests against real providers through any-llm (opt-in: ``pytest -m live``, and each needs
its key: ``MISTRAL_API_KEY``, ``ANTHROPIC_API_KEY``; ``ANYLLM_LIVE_MODEL_<PROVIDER>`` picks the
model). Loose assertions: a real model's words vary."""

from __future__ import annotations

import os

import pytest

from harness_core.testing.check import check_stream
from harness_core.types import BlockEnd, GenerateOptions, Message, TextBlock, Usage
from harness_llm_anyllm.adapter import AnyLLMAdapter
from harness_llm_anyllm.config import AnyLLMConfig
from harness_llm_anyllm.providers import PROVIDERS

pytestmark = [pytest.mark.anyio, pytest.mark.live]

MODELS = {"mistral": "mistral-small-latest", "anthropic": "claude-3-5-haiku-latest"}


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_live_text_and_usage(provider: str) -> None:
    variable = PROVIDERS[provider].env_var
    assert variable is not None
    if not os.environ.get(variable):
        pytest.skip(f"{variable} not set")
    model = os.environ.get(f"ANYLLM_LIVE_MODEL_{provider.upper()}", MODELS[provider])
    adapter = AnyLLMAdapter(AnyLLMConfig(provider=provider))  # the key from the provider's variable
    try:
        options = GenerateOptions(model=model, messages=[Message.user("Say the word: pong")], max_tokens=32)
        chunks = check_stream([chunk async for chunk in adapter.stream(options)])
    finally:
        await adapter.aclose()
    text = "".join(c.block.text for c in chunks if isinstance(c, BlockEnd) and isinstance(c.block, TextBlock))
    assert "pong" in text.lower()
    assert any(isinstance(c, Usage) for c in chunks)
