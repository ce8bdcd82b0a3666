"""The shared real-world fault cases through the library's providers: ``openai-chat`` cases
through its OpenAI and Mistral providers, ``anthropic-messages`` cases through its Anthropic
provider, each with the case's own transport (read boundaries, abrupt ends).

Two cases show what any-llm 1.40 cannot read (documented in the README); they must fail loudly
as ``PROTOCOL`` rather than lose content:

- ``08-tool-call-missing-index``: tool-call deltas without ``index`` (Gemini's OpenAI endpoint)
  are refused by the library's pydantic chunk model (OpenAI provider) and by the Mistral SDK.
- ``15-deepseek-reasoning-content``: Mistral's SDK drops DeepSeek's ``reasoning_content``
  (not a Mistral field), so only the answer arrives.
"""

from __future__ import annotations

import pytest
from anyllm_wire import make_adapter, run

from harness_core.testing.cases import Case
from harness_core.testing.server import ScriptedServer
from harness_core.types import BlockEnd, TextBlock
from pytest_harness import load_cases_or_skip

pytestmark = pytest.mark.anyio

OPENAI_CASES = load_cases_or_skip("openai-chat")
ANTHROPIC_CASES = load_cases_or_skip("anthropic-messages")
UNREADABLE = {"08-tool-call-missing-index"}
MISTRAL_DROPS_REASONING = {"15-deepseek-reasoning-content"}

RUNS = [
    *(pytest.param("openai", case, id=f"openai-{case.name}") for case in OPENAI_CASES),
    *(pytest.param("mistral", case, id=f"mistral-{case.name}") for case in OPENAI_CASES),
    *(pytest.param("anthropic", case, id=f"anthropic-{case.name}") for case in ANTHROPIC_CASES),
]


def test_the_cases_folder_has_both_formats() -> None:
    assert len(OPENAI_CASES) >= 6
    assert ANTHROPIC_CASES


@pytest.mark.parametrize(("provider", "case"), RUNS)
async def test_case(server: ScriptedServer, provider: str, case: Case) -> None:
    server.add(case.reply())
    adapter = make_adapter(provider, server)
    try:
        chunks, error = await run(adapter)
    finally:
        await adapter.aclose()
    if case.name in UNREADABLE:
        assert error is not None
        assert error.code == "PROTOCOL"
        assert not chunks  # nothing half-translated before the unreadable chunk
    elif provider == "mistral" and case.name in MISTRAL_DROPS_REASONING:
        assert error is None
        assert [c.block for c in chunks if isinstance(c, BlockEnd)] == [TextBlock(case.expect["text"])]
    else:
        case.check(chunks, error)
