"""Live end-to-end test against api.anthropic.com (marker `live`: `pytest -m live` with
ANTHROPIC_API_KEY set; docs/testing.md).

Loose assertions (structure, non-empty text) and a small max_tokens, so it stays cheap. The model
can be chosen with ANTHROPIC_TEST_MODEL.
"""

from __future__ import annotations

import os

import pytest

from harness_core.assembler import BlockAssembler
from harness_core.secret import Secret
from harness_core.types import Finish, GenerateOptions, Message, Usage
from harness_llm_anthropic.adapter import AnthropicAdapter
from harness_llm_anthropic.config import AnthropicConfig

KEY = os.environ.get("ANTHROPIC_API_KEY")

pytestmark = [
    pytest.mark.live,
    pytest.mark.anyio,
    pytest.mark.skipif(not KEY, reason="ANTHROPIC_API_KEY is not set (live test)"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # one live call is enough


async def test_live_short_answer() -> None:
    assert KEY is not None
    adapter = AnthropicAdapter(AnthropicConfig(api_key=Secret(KEY)))
    model = os.environ.get("ANTHROPIC_TEST_MODEL", "claude-3-5-haiku-latest")
    options = GenerateOptions(model=model, messages=[Message.user("Say the word 'pong'.")], max_tokens=16)
    assembler = BlockAssembler()
    kinds: list[type] = []
    try:
        async for chunk in adapter.stream(options):
            assembler.feed(chunk)
            kinds.append(type(chunk))
    finally:
        await adapter.aclose()
    assert kinds[-1] is Finish
    assert Usage in kinds
    assert assembler.finish is not None
    assert assembler.finish.kind in ("stop", "length")
    assert "pong" in assembler.message().text.lower()
