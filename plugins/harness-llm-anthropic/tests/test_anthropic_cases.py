"""Every ``anthropic-messages`` case of ``shared/cases`` through the adapter, with the case's own
transport, checked against its machine-readable expectations (``harness_core.testing.cases``)."""

from __future__ import annotations

import pytest
from anthropic_wire_fixtures import make_config

from harness_core.errors import LlmError
from harness_core.testing.cases import Case
from harness_core.testing.server import ScriptedServer
from harness_core.testing.splits import every_split
from harness_core.types import GenerateOptions, Message, StreamChunk
from harness_llm_anthropic.adapter import AnthropicAdapter
from pytest_harness import load_cases_or_skip

pytestmark = pytest.mark.anyio

CASES = load_cases_or_skip("anthropic-messages")
OPTIONS = GenerateOptions(route="anthropic", model="claude-x", messages=[Message.user("hi")], max_tokens=64)


async def run(adapter: AnthropicAdapter) -> tuple[list[StreamChunk], LlmError | None]:
    chunks: list[StreamChunk] = []
    try:
        async for chunk in adapter.stream(OPTIONS):
            chunks.append(chunk)
    except LlmError as exc:
        return chunks, exc
    return chunks, None


def test_the_cases_folder_has_anthropic_cases() -> None:
    assert any(case.name.startswith("13-") for case in CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
async def test_case(server: ScriptedServer, case: Case) -> None:
    server.add(case.reply())
    adapter = AnthropicAdapter(make_config(server))
    try:
        chunks, raised = await run(adapter)
    finally:
        await adapter.aclose()
    case.check(chunks, raised)


@pytest.mark.parametrize("case", [c for c in CASES if not c.raw_response], ids=lambda case: case.name)
async def test_case_at_every_split(server: ScriptedServer, case: Case) -> None:
    """The same outcome however the body is cut into reads (every offset, then 1-byte reads)."""
    adapter = AnthropicAdapter(make_config(server))
    try:
        server.add(case.reply())
        expected = await run(adapter)
        for reads in every_split(case.body):
            server.add(case.reply(reads))
            chunks, raised = await run(adapter)
            case.check(chunks, raised)
            assert chunks == expected[0]
            assert (raised.code if raised else None) == (expected[1].code if expected[1] else None)
    finally:
        await adapter.aclose()
