"""Several gateway processes starting at once on one new SQLite file (``harness serve --workers N``
on the default store): every one migrates and serves; none starts without its state store."""

from __future__ import annotations

import asyncio
import multiprocessing
from pathlib import Path
from typing import Any

from harness_gateway.store import SQLiteStore

PROCESSES = 4


def _start(path: str, barrier: Any, results: Any) -> None:  # in a child process
    async def main() -> None:
        store = SQLiteStore(Path(path), timeout=30.0)
        barrier.wait()  # every process opens the new file at the same moment
        try:
            results.put(("ok", await store.migrate()))
        except Exception as exc:
            results.put(("error", repr(exc)))
        finally:
            await store.aclose()

    asyncio.run(main())


def test_processes_starting_together_all_migrate(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES)
    results = context.Queue()
    path = tmp_path / "gateway.sqlite"
    processes = [context.Process(target=_start, args=(str(path), barrier, results)) for _ in range(PROCESSES)]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    latest = max(version for version, _ in SQLiteStore.migrations)
    assert outcomes == [("ok", latest)] * PROCESSES
