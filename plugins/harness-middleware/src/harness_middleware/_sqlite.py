"""SQLite access for the usage ledger, the cache and the prompt log: one short-lived connection per
operation; :func:`read` opens a database read-only for the commands that only show it.

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

from harness_core.middleware import WriteFailureLog, check_output_file, private_file, write_in_thread

__all__ = ["NotThisDatabase", "check_database_path", "read", "record", "run"]

T = TypeVar("T")

_BUSY_TIMEOUT = 10.0  # seconds sqlite waits for another writer's lock


def run(path: Path, schema: str, operation: Callable[[sqlite3.Connection], T]) -> T:
    """Open ``path`` (creating it private, 0600 in 0700 folders, and the ``schema`` when missing),
    run ``operation`` in one transaction, commit, close. Raises :class:`sqlite3.Error` on
    database faults, :class:`OSError` when the file cannot be created."""
    private_file(path)
    with closing(sqlite3.connect(path, timeout=_BUSY_TIMEOUT)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(schema)
        with conn:
            return operation(conn)


class NotThisDatabase(sqlite3.DatabaseError):
    """The file is an SQLite database, but not the one asked for (it lacks the expected table)."""


def read(path: Path, table: str, what: str, operation: Callable[[sqlite3.Connection], T]) -> T:
    """Open ``path`` read-only (nothing is created or changed: no folder, no table, no journal
    mode), check that it holds ``table``, and run ``operation``.

    Raises:
        NotThisDatabase: ``path`` has no ``table``: ``"<path> is not a <what> (…)"``.
        sqlite3.Error: any other database fault (a missing file, a file that is not SQLite).
    """
    uri = f"{path.expanduser().resolve().as_uri()}?mode=ro"  # https://www.sqlite.org/uri.html
    with closing(sqlite3.connect(uri, uri=True, timeout=_BUSY_TIMEOUT)) as conn:
        found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
        if found is None:
            raise NotThisDatabase(f"{path} is not a {what} (it has no `{table}` table)")
        return operation(conn)


async def record(write: Callable[[], object], *, bound: float, failures: WriteFailureLog) -> None:
    """Run ``write`` (a blocking database write) in a worker thread, shielded from cancellation
    and bounded by ``bound`` seconds: accounting after a stream ended must run even when the
    caller was cancelled, and must not hold it up for long.

    A database or file system fault (:class:`sqlite3.Error`, :class:`OSError`: the folder was
    removed, the disk is full) is reported to ``failures`` (logged once, not raised), and so is a
    write that outlasts ``bound``: the caller's stream has already ended and must not fail
    because of its accounting.
    """
    await write_in_thread(write, bound=bound, failures=failures, errors=(sqlite3.Error, OSError))


def check_database_path(path: Path, what: str) -> Path:
    """Check at start-up that ``path`` can hold an SQLite file, so a bad ``path`` fails the plugin
    (named in ``harness config check``) instead of every stream; leaves nothing behind
    (:func:`harness_core.outfile.check_output_file`).

    Raises:
        ValueError: ``path`` is a directory, or cannot be written or created.
    """
    return check_output_file(path, f"{what} path", example=f"{what}.sqlite")
