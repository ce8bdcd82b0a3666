"""Fixtures of the Anthropic adapter tests: a scripted provider and an adapter pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from harness_core.secret import Secret
from harness_core.testing.server import ScriptedServer
from harness_llm_anthropic.adapter import AnthropicAdapter
from harness_llm_anthropic.config import AnthropicConfig

API_KEY = "sk-ant-test-key-0123456789"


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as scripted:
        yield scripted


def make_config(server: ScriptedServer, **fields: object) -> AnthropicConfig:
    fields.setdefault("api_key", Secret(API_KEY))
    return AnthropicConfig(base_url=server.url, **fields)  # type: ignore[arg-type]


@pytest.fixture
async def adapter(server: ScriptedServer) -> AsyncIterator[AnthropicAdapter]:
    instance = AnthropicAdapter(make_config(server))
    try:
        yield instance
    finally:
        await instance.aclose()
