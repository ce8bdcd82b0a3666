"""Fixtures of the anyllm plugin's tests: asyncio only (any-llm and the provider SDKs it wraps
run on asyncio), a scripted provider server, and the ``live`` marker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness_core.testing.server import ScriptedServer


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "live: talks to a real provider (opt-in: needs its key in the environment)")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as scripted:
        yield scripted
