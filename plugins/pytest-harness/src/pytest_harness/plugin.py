"""The ``harness`` pytest plugin: fixtures over :mod:`harness_core.testing`.

Every fixture is prefixed ``harness_``. The plugin defines no hooks, no command-line options,
no markers and never ``anyio_backend``: installing it changes nothing in a suite that does not
ask for its fixtures. The kit is imported lazily, inside the fixtures.

Fixtures:
    harness_server: a started :class:`~harness_core.testing.ScriptedServer` (stopped after the
        test); script it with ``harness_server.add(Reply(...))``.
    harness_server_factory: ``(*replies, routes=None) -> ScriptedServer``, started; every server
        it made is stopped after the test.
    harness_fake_adapter: ``(*scripts, models=None) -> FakeAdapter``.
    harness_check_stream: :func:`~harness_core.testing.check_stream`.
    harness_stream_checker: a fresh :class:`~harness_core.testing.StreamChecker`.
    harness_cases: :func:`~harness_core.testing.load_cases` (``harness_cases("openai-chat")``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_core import ModelInfo
    from harness_core.testing import FakeAdapter, Reply, Script, ScriptedServer, StreamChecker

__all__ = [
    "harness_cases",
    "harness_check_stream",
    "harness_fake_adapter",
    "harness_server",
    "harness_server_factory",
    "harness_stream_checker",
]


@pytest.fixture
def harness_server_factory() -> Iterator[Callable[..., ScriptedServer]]:
    """Start :class:`ScriptedServer` instances on demand; all are stopped at teardown."""
    from harness_core.testing import ScriptedServer

    servers: list[ScriptedServer] = []

    def make(*replies: Reply, routes: Mapping[tuple[str, str], Reply] | None = None) -> ScriptedServer:
        server = ScriptedServer(*replies, routes=routes).start()
        servers.append(server)
        return server

    try:
        yield make
    finally:
        for server in servers:
            server.stop()


@pytest.fixture
def harness_server(harness_server_factory: Callable[..., ScriptedServer]) -> ScriptedServer:
    """A started :class:`ScriptedServer` with an empty script (``.add(...)`` replies)."""
    return harness_server_factory()


@pytest.fixture
def harness_fake_adapter() -> Callable[..., FakeAdapter]:
    """A factory of :class:`FakeAdapter`: ``harness_fake_adapter(text_reply("hi"))``."""
    from harness_core.testing import FakeAdapter

    def make(*scripts: Script, models: Sequence[ModelInfo] | None = None) -> FakeAdapter:
        return FakeAdapter(*scripts, models=models)

    return make


@pytest.fixture
def harness_check_stream() -> Callable[..., Any]:
    """:func:`harness_core.testing.check_stream` (raises ``StreamViolation``)."""
    from harness_core.testing import check_stream

    return check_stream


@pytest.fixture
def harness_stream_checker() -> StreamChecker:
    """A new incremental :class:`StreamChecker`."""
    from harness_core.testing import StreamChecker

    return StreamChecker()


@pytest.fixture
def harness_cases() -> Callable[..., Any]:
    """:func:`harness_core.testing.load_cases` (folder from ``HARNESS_CASES_DIR``)."""
    from harness_core.testing import load_cases

    return load_cases
