"""Repository-wide pytest configuration.

``HARNESS_CASES_DIR`` defaults to the shared cases folder beside the repository. The anyio
pytest plugin runs ``@pytest.mark.anyio`` tests once per backend listed here. The
core (runtime, testing kit) must work on asyncio and trio; plugin test folders may narrow this
with their own ``anyio_backend`` fixture.
"""

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The shared real-world fault cases live beside the repository (harness_core.testing.cases_dir).
os.environ.setdefault("HARNESS_CASES_DIR", str(Path(__file__).resolve().parent.parent / "shared" / "cases"))


@pytest.fixture(autouse=True)
def _user_data_in_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the user's data dir (prompt log, usage ledger defaults) out of reach of every test:
    ``harness run`` logs prompts by default, and subprocesses inherit this environment."""
    data: Path = tmp_path_factory.mktemp("xdg-data")
    monkeypatch.setenv("XDG_DATA_HOME", str(data))


@pytest.fixture(autouse=True)
def _auto_transport_is_httpcore() -> Iterator[None]:
    """``transport: auto`` means httpcore in every test (as in the ``harness`` command line) unless
    the test chooses otherwise: the library's default is aiohttp, but many tests prove a closed
    connection with :meth:`ScriptedServer.wait_idle`, which blocks the event loop, and aiohttp
    closes a socket on the loop's next turn. The conformance suite runs every obligation on
    both transports explicitly; tests/http/test_http_transport.py checks the default itself."""
    from harness_core.http.transport import prefer_transport, preferred_transport

    before = preferred_transport()
    prefer_transport("httpcore")
    yield
    prefer_transport(before)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


CPU_BOUND_OBLIGATIONS = {"test_every_byte_split": 900}
"""Hang guards (seconds, pytest-timeout) above pyproject's 300 s for the conformance suite's
obligations that are CPU-bound for minutes: every-byte-split replays each recording at every cut
(sampled to ``max_two_way_splits``), on asyncio and trio, under coverage's tracer. Under ``nox -s
tests`` it shares the cores with the other worker; on a loaded 2-core machine openai's and
Gemini's took over 300 s (the Responses one 253 s). Still a hang guard, never a time assertion."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        seconds = CPU_BOUND_OBLIGATIONS.get(getattr(item, "originalname", item.name))
        if seconds is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(seconds))


@pytest.fixture(autouse=True)
def _no_harness_left_running(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test that leaves a :class:`~harness_core.Harness` running (entered, never closed).

    A running harness keeps its :class:`~harness_core.secret.RedactFilter` on the HTTP loggers;
    one left behind changes what every later test in the same xdist worker sees (CI once failed
    that way, in a file far from the leak). The leaked filters are detached so later tests start
    clean, and this test is reported, not the one that trips over it."""
    from harness_core.secret import HTTP_LOGGERS, RedactFilter

    def running() -> set[int]:
        return {id(f) for name in HTTP_LOGGERS for f in logging.getLogger(name).filters if isinstance(f, RedactFilter)}

    before = running()
    yield
    leaked = running() - before
    if leaked:
        for name in HTTP_LOGGERS:
            named = logging.getLogger(name)
            for item in [f for f in named.filters if id(f) in leaked]:
                named.removeFilter(item)
        pytest.fail(f"{request.node.nodeid} left a Harness running (its log filter is still attached)", pytrace=False)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Save this process's coverage data once its tests ended, before pytest-xdist hears that the
    worker finished (under ``nox -s tests`` every worker is measured through coverage's subprocess
    patch, which saves at exit otherwise).

    pytest-xdist gives its workers 10 s to exit after the session (``EXIT_TIMEOUT``), then kills
    them (execnet's ``Group.terminate``); on a loaded machine a worker's exit, the save of its
    data included, took longer, and everything that worker measured was lost: the coverage gate
    then failed 129 files whose tests had all passed (CI of 2026-12-07). A kill during the save at
    exit now loses nothing (the data file is SQLite: an interrupted write rolls back to this one).
    """
    if "coverage" in sys.modules:  # measured: coverage was started before pytest
        import coverage

        current = coverage.Coverage.current()
        if current is not None:
            current.save()
