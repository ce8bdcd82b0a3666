"""Fixtures of the Anthropic adapter tests: a scripted provider and an adapter pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from anthropic_wire_fixtures import make_config

from harness_core.testing.server import ScriptedServer
from harness_llm_anthropic.adapter import AnthropicAdapter


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as scripted:
        yield scripted


@pytest.fixture
async def adapter(server: ScriptedServer) -> AsyncIterator[AnthropicAdapter]:
    instance = AnthropicAdapter(make_config(server))
    try:
        yield instance
    finally:
        await instance.aclose()
