"""Repository-wide pytest configuration.

``HARNESS_CASES_DIR`` defaults to the shared cases folder beside the repository. The anyio
pytest plugin runs ``@pytest.mark.anyio`` tests once per backend listed here. The
core (runtime, testing kit) must work on asyncio and trio; plugin test folders may narrow this
with their own ``anyio_backend`` fixture.
"""

import os
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
