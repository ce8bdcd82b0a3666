"""The prompt log, the usage ledger, the cache and the trace are created private to the user:
files 0600, new folders 0700 (issue 21)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from harness_core import GenerateOptions, Harness, Message
from harness_core.loader import load_config


@pytest.fixture
def usual_umask() -> Iterator[None]:
    previous = os.umask(0o022)  # what makes files world-readable by default
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_every_file_a_run_writes_is_private(tmp_path: Path, usual_umask: None) -> None:
    data = tmp_path / "new" / "data"
    config = tmp_path / "plugins.yaml"
    config.write_text(
        "plugins:\n"
        f"  prompt-log: {{path: '{data}/logs.sqlite'}}\n"
        f"  usage: {{path: '{data}/usage.sqlite'}}\n"
        f"  trace: {{path: '{data}/trace/trace.jsonl'}}\n"
        f"  cache: {{path: '{data}/cache.sqlite'}}\n"
        "  mock: {}\n"
        "defaults: {route: mock, model: echo}\n",
        encoding="utf-8",
    )
    loaded = load_config(config, environ={})

    async def main() -> str:
        async with Harness.from_loaded(loaded) as harness:
            result = await harness.generate(GenerateOptions(messages=[Message.user("hi")]))
            return result.text

    assert anyio.run(main) == "hi"
    written = sorted(path.name for path in data.rglob("*") if path.is_file())
    assert {"logs.sqlite", "usage.sqlite", "cache.sqlite", "trace.jsonl"} <= set(written)
    for path in data.rglob("*"):
        assert mode(path) == (0o700 if path.is_dir() else 0o600), path
    assert (mode(tmp_path / "new"), mode(data)) == (0o700, 0o700)
