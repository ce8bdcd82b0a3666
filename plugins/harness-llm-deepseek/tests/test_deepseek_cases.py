"""Every ``openai-chat`` case of ``shared/cases`` (incl. ``15-deepseek-reasoning-content``) through
the DeepSeek adapter: DeepSeek speaks the same wire format, so each must pass unchanged."""

from __future__ import annotations

import pytest

from harness_core.errors import LlmError
from harness_core.testing.cases import Case, check_case
from harness_core.testing.server import ScriptedServer
from harness_core.types import GenerateOptions, Message, StreamChunk
from harness_llm_deepseek import DeepSeekAdapter, DeepSeekConfig
from pytest_harness import load_cases_or_skip

pytestmark = pytest.mark.anyio

CASES = load_cases_or_skip("openai-chat")


def test_deepseek_case_present() -> None:
    assert "15-deepseek-reasoning-content" in [case.name for case in CASES]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_case(case: Case) -> None:
    chunks: list[StreamChunk] = []
    error: LlmError | None = None
    with ScriptedServer(case.reply()) as server:
        adapter = DeepSeekAdapter(DeepSeekConfig(base_url=server.url))
        try:
            async for chunk in adapter.stream(GenerateOptions(model="deepseek-chat", messages=[Message.user("q")])):
                chunks.append(chunk)
        except LlmError as exc:
            error = exc
        finally:
            await adapter.aclose()
    check_case(case, chunks, error)
