"""Fixtures of the anyllm plugin's tests: asyncio only (any-llm and the provider SDKs it wraps
run on asyncio), a scripted provider server, and the ``live`` marker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness_core.testing.server import ScriptedServer


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "live: talks to a real provider (opt-in: -m live, and its key in the environment)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Live tests run only when selected with ``-m live`` (never in CI by accident)."""
    if "live" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="live test: select it with -m live")
    for item in items:
        if "live" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as scripted:
        yield scripted
