"""Fixtures for the CLI tests: run `harness` in a subprocess, isolated from any real config."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

FAKE_PLUGINS = Path(__file__).parents[1] / "loader" / "fakeplugins"

Harness = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a CLI subprocess: inherited (coverage hooks included), the test-only
    plugins on PYTHONPATH, no HARNESS_CONFIG, an empty user config dir."""
    env = dict(os.environ)
    env.pop("HARNESS_CONFIG", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(FAKE_PLUGINS), env.get("PYTHONPATH")) if p)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    env["NO_COLOR"] = "1"
    return env


@pytest.fixture
def harness(tmp_path: Path, cli_env: dict[str, str]) -> Harness:
    """``harness(*args, input=None)`` runs ``python -m harness_core.cli *args`` in tmp_path
    (stdin is ``input``, else empty: ``harness run`` reads piped stdin)."""

    def run(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "harness_core.cli", *args],
            input=input,
            stdin=subprocess.DEVNULL if input is None else None,  # never the test runner's stdin
            capture_output=True,
            text=True,
            env=cli_env,
            cwd=tmp_path,
            timeout=120,
        )

    return run


@pytest.fixture
def spawn(tmp_path: Path, cli_env: dict[str, str]) -> Callable[..., subprocess.Popen[str]]:
    """``spawn(*args, stdin=DEVNULL)`` starts ``python -m harness_core.cli *args`` in tmp_path
    (text pipes for stdout and stderr) for tests that talk to the running process."""

    def start(*args: str, stdin: int = subprocess.DEVNULL) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "harness_core.cli", *args],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env,
            cwd=tmp_path,
        )

    return start


@pytest.fixture
def config(tmp_path: Path) -> Callable[[str], str]:
    """Write plugins.yaml text to tmp_path/plugins.yaml (found by the search) and return its path."""

    def write(text: str) -> str:
        path = tmp_path / "plugins.yaml"
        path.write_text(text, encoding="utf-8")
        return str(path)

    return write
