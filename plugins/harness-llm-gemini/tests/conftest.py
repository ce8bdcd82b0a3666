"""Fixtures of the Gemini adapter tests: a scripted provider and an adapter pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from gemini_fixtures import make_config

from harness_core.testing.server import ScriptedServer
from harness_llm_gemini.adapter import GeminiAdapter


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "live: talks to the real provider; runs only when its key is set")


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as scripted:
        yield scripted


@pytest.fixture
async def adapter(server: ScriptedServer) -> AsyncIterator[GeminiAdapter]:
    instance = GeminiAdapter(make_config(server))
    try:
        yield instance
    finally:
        await instance.aclose()
