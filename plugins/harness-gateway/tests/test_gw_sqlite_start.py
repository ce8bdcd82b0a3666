"""Several gateway processes starting at once on one new SQLite file (``harness serve --workers N``
on the default store): every one migrates and serves; none starts without its state store."""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import harness_gateway.sqlite as store_module
from harness_gateway.errors import GatewayError
from harness_gateway.sqlite import SQLiteStore

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


def _busy_error(message: str = "database is locked", code: int = sqlite3.SQLITE_BUSY) -> sqlite3.OperationalError:
    error = sqlite3.OperationalError(message)
    error.sqlite_errorcode = code  # type: ignore[misc]
    return error


class _BusyConnection:
    """A real connection whose first ``busy`` switches to WAL answer ``SQLITE_BUSY`` at once, as
    SQLite does (without waiting) to a process switching a new file to WAL while another does."""

    def __init__(self, real: sqlite3.Connection, busy: int, error: Callable[[], sqlite3.Error] = _busy_error) -> None:
        self.real, self.busy, self.error, self.closed = real, busy, error, False

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "PRAGMA journal_mode=WAL" and self.busy:
            self.busy -= 1
            raise self.error()
        return self.real.execute(sql, *args)

    def close(self) -> None:
        self.closed = True
        self.real.close()


def _patch_connect(monkeypatch: pytest.MonkeyPatch, busy: int, **kwargs: Any) -> list[_BusyConnection]:
    made: list[_BusyConnection] = []
    connect = sqlite3.connect

    def fake(*args: Any, **options: Any) -> _BusyConnection:
        made.append(_BusyConnection(connect(*args, **options), busy, **kwargs))
        return made[-1]

    monkeypatch.setattr(sqlite3, "connect", fake)
    monkeypatch.setattr(store_module, "SET_UP_RETRY", 0.0)
    return made


def test_the_wal_switch_is_retried_while_another_process_holds_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _patch_connect(monkeypatch, busy=3)
    store = SQLiteStore(tmp_path / "gateway.sqlite", timeout=30.0)
    latest = max(version for version, _ in SQLiteStore.migrations)
    assert anyio.run(store.migrate) == latest
    assert made
    assert all(connection.busy == 0 and not connection.closed for connection in made)
    anyio.run(store.aclose)


def test_a_file_busy_beyond_the_timeout_or_a_real_fault_is_a_503(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _patch_connect(monkeypatch, busy=1)
    with pytest.raises(GatewayError) as busy:
        anyio.run(SQLiteStore(tmp_path / "busy.sqlite", timeout=0.0).migrate)
    assert busy.value.status == 503
    assert made[-1].closed  # the half set-up connection is not kept
    made = _patch_connect(monkeypatch, busy=1, error=lambda: _busy_error("disk I/O error", sqlite3.SQLITE_IOERR))
    with pytest.raises(GatewayError) as fault:
        anyio.run(SQLiteStore(tmp_path / "fault.sqlite", timeout=30.0).migrate)
    assert fault.value.status == 503
    assert made[-1].closed
    assert made[-1].busy == 0  # not retried: only a busy file is waited for
