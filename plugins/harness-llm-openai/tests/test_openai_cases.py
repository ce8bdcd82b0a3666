"""Every ``openai-chat`` case of ``shared/cases`` through the adapter and a local server.

Each case's transport (read boundaries / read size / abrupt end) is replayed by the kit's
``Case.reply()``; ``check_case`` checks the machine-readable expectations and the stream
obligations. The same cases also run with every byte split of their body (2-way cuts).
"""

from __future__ import annotations

import pytest
from openai_fixtures import translate
from openai_harness import adapter_for, options

from harness_core.errors import LlmError
from harness_core.testing.cases import Case, check_case
from harness_core.testing.server import Reply, ScriptedServer
from harness_core.testing.splits import every_split, split_at
from harness_core.types import StreamChunk
from pytest_harness import load_cases_or_skip

pytestmark = pytest.mark.anyio

CASES = load_cases_or_skip("openai-chat")
STREAM_CASES = [case for case in CASES if not case.raw_response]


def test_cases_found() -> None:
    assert len(CASES) >= 6


async def _run(replies: list[Reply]) -> list[tuple[list[StreamChunk], LlmError | None]]:
    results: list[tuple[list[StreamChunk], LlmError | None]] = []
    with ScriptedServer(*replies) as server:
        adapter = adapter_for(server)
        try:
            for _ in replies:
                chunks: list[StreamChunk] = []
                error: LlmError | None = None
                try:
                    async for chunk in adapter.stream(options()):
                        chunks.append(chunk)
                except LlmError as exc:
                    error = exc
                results.append((chunks, error))
        finally:
            await adapter.aclose()
    return results


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_case(case: Case) -> None:
    [(chunks, error)] = await _run([case.reply()])
    check_case(case, chunks, error)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("case", STREAM_CASES, ids=[c.name for c in STREAM_CASES])
async def test_case_every_split(case: Case) -> None:
    offsets = range(1, len(case.body), 7)  # every 7th offset keeps the run short; the translator test does all
    results = await _run([case.reply(split_at(case.body, [offset])) for offset in offsets])
    for chunks, error in results:
        check_case(case, chunks, error)


@pytest.mark.parametrize("case", STREAM_CASES, ids=[c.name for c in STREAM_CASES])
def test_case_every_split_translates_identically(case: Case) -> None:
    """Decoder + translator at every 2-way cut and 1-byte reads (incl. inside UTF-8 characters)."""
    expected = translate(case.body)
    check_case(case, expected, None)
    for reads in every_split(case.body):
        assert translate(case.body, list(reads)) == expected
