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
