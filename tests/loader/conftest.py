"""Fixtures for the loader tests: test-only plugins on sys.path and an isolated environment."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

FAKE_PLUGINS = Path(__file__).parent / "fakeplugins"


@pytest.fixture
def fake_plugins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Put the test-only plugins on sys.path; run in an empty tmp dir with no config around."""
    monkeypatch.syspath_prepend(str(FAKE_PLUGINS))
    monkeypatch.delenv("HARNESS_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[[str], Path]:
    """Write a plugins.yaml into tmp_path and return its path."""

    def write(text: str, name: str = "plugins.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write
