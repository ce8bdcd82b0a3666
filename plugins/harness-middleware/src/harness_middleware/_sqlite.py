"""SQLite access for the usage ledger and the cache: one short-lived connection per operation.

Every operation runs in a worker thread (``anyio.to_thread.run_sync``) when called from async
code, so the event loop never blocks on disk. A connection per operation keeps threads apart
(``sqlite3`` connections are not shared between threads) and is cheap for SQLite. The database
uses WAL journaling so readers (``harness usage``) never block writers.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import TypeVar

__all__ = ["run"]

T = TypeVar("T")

_BUSY_TIMEOUT = 10.0  # seconds sqlite waits for another writer's lock


def run(path: Path, schema: str, operation: Callable[[sqlite3.Connection], T]) -> T:
    """Open ``path`` (creating its folder and the ``schema`` when missing), run ``operation`` in
    one transaction, commit, close. Raises :class:`sqlite3.Error` on database faults."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path, timeout=_BUSY_TIMEOUT)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(schema)
        with conn:
            return operation(conn)
