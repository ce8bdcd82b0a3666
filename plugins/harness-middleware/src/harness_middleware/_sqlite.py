"""SQLite access for the usage ledger and the cache: one short-lived connection per operation.

Every operation runs in a worker thread (``anyio.to_thread.run_sync``) when called from async
code, so the event loop never blocks on disk. A connection per operation keeps threads apart
(``sqlite3`` connections are not shared between threads) and is cheap for SQLite. The database
uses WAL journaling so readers (``harness usage``) never block writers.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import TypeVar

__all__ = ["check_database_path", "record", "run"]

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


async def record(write: Callable[[], object], *, bound: float, log: logging.Logger, what: str) -> None:
    """Run ``write`` (a blocking database write) in a worker thread, shielded from cancellation
    and bounded by ``bound`` seconds: accounting after a stream ended must run even when the
    caller was cancelled, and must not hold it up for long.

    A :class:`sqlite3.Error` or a write that outlasts ``bound`` is logged on ``log`` naming
    ``what`` (e.g. ``"usage: recording the stream in /path"``), not raised: the caller's stream
    has already ended and must not fail because of its accounting.
    """
    import anyio
    import anyio.to_thread

    with anyio.CancelScope(shield=True), anyio.move_on_after(bound) as scope:
        try:
            await anyio.to_thread.run_sync(write, abandon_on_cancel=True)
        except sqlite3.Error:
            log.exception("%s failed (could not record)", what)
    if scope.cancelled_caught:
        log.error("%s took over %ss", what, bound)


def check_database_path(path: Path, what: str) -> Path:
    """Check at start-up that ``path`` can hold an SQLite file, so a bad ``path`` fails the plugin
    (named in ``harness config check``) instead of every stream. Creates nothing.

    Raises:
        ValueError: ``path`` is a directory, or its nearest existing folder is not a writable
            directory.
    """
    if path.is_dir():
        raise ValueError(f"{what} path {str(path)!r} is a directory; expected a file such as {what}.sqlite")
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"{what} path {str(path)!r} cannot be created: {str(folder)!r} is not a writable folder")
    return path
