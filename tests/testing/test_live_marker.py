"""Live tests (real provider APIs, paid) are opt-in: deselected by default even when a key is exported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
LIVE = [
    "plugins/harness-llm-openai/tests/test_openai_live.py",
    "plugins/harness-llm-anthropic/tests/test_anthropic_live.py",
    "plugins/harness-llm-deepseek/tests/test_deepseek_live.py",
]


def _collect(*args: str) -> str:
    env = dict(os.environ)
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "DEEPSEEK_API_KEY"):
        env[var] = "placeholder-not-a-key"  # a developer machine with keys exported
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", *args, *LIVE],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    return result.stdout


def test_live_tests_are_deselected_by_default() -> None:
    out = _collect()
    assert "::test_" not in out
    assert " deselected" in out


def test_pytest_m_live_selects_them() -> None:
    out = _collect("-m", "live")
    selected = [line for line in out.splitlines() if "::test_" in line]
    assert {line.split("::")[0] for line in selected} == set(LIVE)
