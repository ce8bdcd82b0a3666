"""The embedded state store: :class:`SQLiteStore`, one SQLite file in WAL mode shared by the
processes of one host, and its schema (:data:`MIGRATIONS_SQLITE`).

Every statement and every decision is :class:`~harness_gateway.store.SqlStore`'s (the store's
policy); this module only runs its transactions on SQLite: on the event loop's thread when the
write lock is free (the writes of one loop turn group-committed), in a worker thread while
another process holds it.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from harness_core import private_file
from harness_gateway.store import LEASE, SqlStore, Tx, unavailable

__all__ = ["MIGRATIONS_SQLITE", "SET_UP_RETRY", "SQLiteStore"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

MIGRATIONS_SQLITE: Final = (
    (
        1,
        """
        CREATE TABLE gateway_keys (
            id TEXT PRIMARY KEY,
            hash TEXT NOT NULL UNIQUE,          -- SHA-256 hex of the key (the key itself is never stored)
            name TEXT NOT NULL,
            routes TEXT,                        -- JSON list, NULL = every route
            budget REAL,                        -- USD, NULL = unlimited
            rpm INTEGER,
            tpm INTEGER,
            expires_at REAL,                    -- unix seconds
            created_at REAL NOT NULL,
            revoked_at REAL,
            spent REAL NOT NULL,                -- USD settled so far
            max_cost REAL NOT NULL              -- the most one request has cost (budget reservation)
        );
        CREATE TABLE gateway_ledger (
            id TEXT PRIMARY KEY,
            key_id TEXT,
            route TEXT NOT NULL,
            model TEXT NOT NULL,
            started_at REAL NOT NULL,
            ended_at REAL,
            status TEXT NOT NULL,               -- running | complete | aborted | error
            input_tokens INTEGER,
            output_tokens INTEGER,
            cost REAL,
            reserved REAL NOT NULL
        );
        CREATE INDEX gateway_ledger_key_started ON gateway_ledger (key_id, started_at);
        CREATE INDEX gateway_ledger_key_ended ON gateway_ledger (key_id, ended_at);
        """,
    ),
    (
        2,
        """
        ALTER TABLE gateway_ledger ADD COLUMN owner TEXT;          -- host:pid:nonce of the admitting process
        ALTER TABLE gateway_ledger ADD COLUMN lease_until REAL;    -- unix seconds, renewed while it runs
        -- status may now also be lost (its owner died: settled by another process, the recorded usage charged)
        CREATE INDEX gateway_ledger_running ON gateway_ledger (key_id, lease_until) WHERE status = 'running';
        """,
    ),
    (
        3,
        """
        ALTER TABLE gateway_keys ADD COLUMN running INTEGER NOT NULL DEFAULT 0;   -- running ledger rows
        ALTER TABLE gateway_keys ADD COLUMN reserved REAL NOT NULL DEFAULT 0;     -- USD they reserve
        ALTER TABLE gateway_keys ADD COLUMN windows TEXT;  -- JSON [[second, requests, tokens], ...] of the last minute
        UPDATE gateway_keys SET
            running = (SELECT count(*) FROM gateway_ledger WHERE key_id = gateway_keys.id AND status = 'running'),
            reserved = (SELECT coalesce(sum(reserved), 0) FROM gateway_ledger
                        WHERE key_id = gateway_keys.id AND status = 'running'),
            windows = (SELECT json_group_array(json_array(second, requests, tokens)) FROM (
                SELECT second, sum(requests) AS requests, sum(tokens) AS tokens FROM (
                    SELECT CAST(started_at AS INTEGER) AS second, 1 AS requests, 0 AS tokens FROM gateway_ledger
                    WHERE key_id = gateway_keys.id AND started_at > CAST(strftime('%s', 'now') AS REAL) - 61
                    UNION ALL
                    SELECT CAST(ended_at AS INTEGER), 0, coalesce(input_tokens, 0) + coalesce(output_tokens, 0)
                    FROM gateway_ledger
                    WHERE key_id = gateway_keys.id AND ended_at > CAST(strftime('%s', 'now') AS REAL) - 61
                ) GROUP BY second ORDER BY second
            ))
        """,
    ),
    (
        4,
        """
        CREATE TABLE gateway_responses (
            id TEXT PRIMARY KEY,                -- the public response id (resp_…)
            owner TEXT NOT NULL,                -- key:<key id>, master, or '' (anonymous)
            previous_id TEXT,                   -- its previous_response_id
            route TEXT NOT NULL,                -- the route and model that served it
            model TEXT NOT NULL,
            source TEXT,                        -- its plugins.yaml key (the replay state goes back only there)
            replay_state TEXT,                  -- JSON: the route's finish.replay_state, or NULL
            input_items TEXT NOT NULL,          -- JSON list: the input items it was given
            response TEXT NOT NULL,             -- JSON: the Response object as answered
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL            -- unix seconds: created_at + the configured retention
        );
        CREATE INDEX gateway_responses_expires ON gateway_responses (expires_at)
        """,
    ),
    (
        5,
        """
        UPDATE gateway_keys SET name = name || ' #' || id
        WHERE revoked_at IS NULL AND EXISTS (
            SELECT 1 FROM gateway_keys AS older
            WHERE older.name = gateway_keys.name AND older.revoked_at IS NULL
              AND (older.created_at < gateway_keys.created_at
                   OR (older.created_at = gateway_keys.created_at AND older.id < gateway_keys.id))
        );
        CREATE UNIQUE INDEX gateway_keys_live_name ON gateway_keys (name) WHERE revoked_at IS NULL
        """,
    ),
)
"""Versioned schema migrations for SQLite: ``(version, script)``, applied in order, once each."""


class _SQLiteTx:
    """A transaction's statements, run at once on the calling (worker) thread: awaiting one
    never suspends, so :func:`_run_now` can drive the whole transaction in that thread."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    async def one(self, sql: str, *args: Any) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.conn.execute(sql, args).fetchone()
        return row

    async def all(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, args).fetchall()

    async def run(self, sql: str, *args: Any) -> int:
        return self.conn.execute(sql, args).rowcount


def _run_now(work: Awaitable[T]) -> T:
    """The result of ``work``, driven to its end on this thread without an event loop.

    Raises:
        RuntimeError: ``work`` awaited something that suspends (only :class:`_SQLiteTx`
            statements may be awaited in a SQLite transaction).
    """
    steps = work.__await__()
    try:
        steps.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    steps.close()
    raise RuntimeError("a SQLite transaction may only await its own statements")


SET_UP_RETRY: Final = 0.01
"""Seconds between two attempts to set a SQLite file up while another process holds it."""


class SQLiteStore(SqlStore):
    """The embedded store: one SQLite file in WAL mode, shared by the processes of one host.

    A transaction runs whole (``BEGIN`` … ``COMMIT``, a few microseconds without ``fsync``)
    on the event loop's thread when it can start at once, and in a worker thread, waiting up to
    ``timeout`` seconds, when another process holds the write lock (``SQLITE_BUSY``): the common
    case costs no thread hop (not even a lock: nothing else runs on the loop while it does), and
    the event loop never waits on another process; the worker threads' connection serves one
    transaction at a time. Write transactions take the write lock first (``BEGIN IMMEDIATE``),
    which serialises admissions across processes too, and are **group-committed**: those this
    process starts in one turn of the event loop run in one transaction, in order, each in a
    savepoint (:meth:`_grouped`; docs/gateway.md, "Group commit on SQLite"), so concurrent
    requests share one commit, its WAL write, instead of paying one each; a read runs at once.
    A request cancelled before its group ran, or while its group waited for the lock in a worker
    thread, commits nothing, but for the group's leader: its work commits and returns (shielded:
    the others wait on it), and its cancellation reaches its caller at the next checkpoint.

    Durability: ``synchronous=NORMAL``, SQLite's advice for WAL
    (https://www.sqlite.org/pragma.html#pragma_synchronous): a commit does not wait for
    ``fsync`` (measured here: 4.5 ms per commit with ``FULL``, three commits per request, under
    one lock), the database stays consistent, and a crash of the gateway loses nothing; an
    operating-system crash or power loss may lose the transactions since the last checkpoint
    (the newest ledger rows and their spend). Use PostgreSQL where that matters. Checkpoints
    (which do ``fsync``) run in a worker thread every :attr:`checkpoint_every` write
    transactions, never on the event loop: ``PASSIVE``, which waits for nobody, and then, when
    the WAL still holds more than :attr:`wal_limit` frames, ``TRUNCATE``
    (https://www.sqlite.org/pragma.html#pragma_wal_checkpoint), which this process's
    transactions wait for (~15 ms here for 1,000 transactions' frames; they wait on the event
    loop, not in worker threads) and which empties the WAL file. Under steady traffic a
    ``PASSIVE`` checkpoint never catches up with the writes made while it runs, so the WAL is
    never restarted (https://www.sqlite.org/wal.html#avoiding_excessively_large_wal_files): with
    ``PASSIVE`` alone it grew without end (~40 KB per request, 1 GB after 25,000). The WAL now
    stays within about :attr:`wal_limit` frames plus :attr:`checkpoint_every` transactions per
    process.
    """

    migrations = MIGRATIONS_SQLITE

    def violates_live_name(self, exc: BaseException) -> bool:
        # SQLite names the columns, not the index: https://www.sqlite.org/rescode.html#constraint_unique
        return isinstance(exc, sqlite3.IntegrityError) and "UNIQUE constraint failed: gateway_keys.name" in str(exc)

    checkpoint_every = 1000
    """Write transactions of this process between two WAL checkpoints."""

    group_commit = True
    """Whether the write transactions of one event-loop turn commit together (:meth:`_grouped`);
    ``False``: each commits alone, as before group commit (``bench.store`` compares the two)."""

    wal_limit = 10_000
    """WAL frames (pages: 4 KiB by default, so ~40 MB) a ``PASSIVE`` checkpoint may leave before a
    ``TRUNCATE`` one empties the WAL."""

    def __init__(self, path: Path, *, timeout: float = 5.0, lease: float = LEASE) -> None:
        super().__init__(lease=lease)
        self.path = path
        self.timeout = timeout
        self.description = f"SQLite state store {path}"
        self._conns: dict[bool, sqlite3.Connection] = {}
        """``False``: the event loop's connection (never waits for a lock); ``True``: the
        worker threads' (waits up to ``timeout`` seconds)."""
        self._lock = anyio.Lock()
        self._writes = 0
        self._truncating: anyio.Event | None = None
        """Set while this process's ``TRUNCATE`` checkpoint runs: its transactions wait for it."""
        self._group: _Group | None = None
        """The write transactions gathered for the next group commit (:meth:`_grouped`)."""

    def _connect(self, wait: bool) -> sqlite3.Connection:
        conn = self._conns.get(wait)
        if conn is None:
            private_file(self.path)  # keys' hashes, spend and request records: the user's only (0600)
            # Opened on a worker thread either way: setting the file up waits for other processes
            # (switching a new file to WAL takes its lock: two workers starting at once would
            # otherwise see "database is locked"); only then does the event loop's connection
            # stop waiting (busy_timeout 0: a busy transaction moves to a worker thread).
            conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
            try:
                self._set_up(conn)
            except BaseException:
                conn.close()
                raise
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000) if wait else 0}")
            self._conns[wait] = conn
        return conn

    def _set_up(self, conn: sqlite3.Connection) -> None:
        """WAL mode and its settings, retried for up to :attr:`timeout` seconds while another
        process holds the file: switching to WAL promotes a read lock to an exclusive one, and
        SQLite answers ``SQLITE_BUSY`` at once rather than wait when that could deadlock with
        another process doing the same (https://www.sqlite.org/c3ref/busy_handler.html)."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")  # no fsync per commit (see the class docs)
                conn.execute("PRAGMA wal_autocheckpoint = 0")  # checkpoints run on a worker thread
                return
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(SET_UP_RETRY)  # on a worker thread, never the event loop

    def _whole(
        self, conn: sqlite3.Connection, work: Callable[[Tx], Awaitable[T]], write: bool, threaded: bool = False
    ) -> T:
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            result = _run_now(work(_SQLiteTx(conn)))
            if threaded:  # the request may have been cancelled while this thread waited for the lock
                anyio.from_thread.check_cancelled()
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    def _waiting(self, work: Callable[[Tx], Awaitable[T]], write: bool) -> T:  # on a worker thread
        return self._whole(self._connect(True), work, write, threaded=True)

    async def _grouped(self, conn: sqlite3.Connection, work: Callable[[Tx], Awaitable[T]]) -> T:
        """The result of write transaction ``work``, committed together with every other write
        transaction of this process that starts before the next turn of the event loop (group
        commit: see the class docs). The first of a group (its leader) yields one turn, shielded,
        then runs the group; the others wait for it. When another process holds the write lock
        the group runs whole in a worker thread, waiting for it (:meth:`_commit_waiting`). One
        cancelled before its group ran commits nothing; raises what ``work`` raised, or what
        ``BEGIN``/``COMMIT`` raised (then nothing of the group was committed: ``SQLITE_BUSY``
        after :attr:`timeout` seconds of waiting)."""
        entry = _Entry(work)
        group = self._group
        if group is not None:  # a leader is gathering: join its group
            group.entries.append(entry)
            try:
                await group.committed.wait()
            except BaseException:
                entry.skipped = not entry.done  # cancelled before its group ran: nothing done
                raise
        else:
            group = self._group = _Group(entry)
            try:  # one turn of the loop, which the leader's cancellation cannot cut short
                await anyio.lowlevel.cancel_shielded_checkpoint()
            finally:
                self._group = None
                try:
                    if _commit(conn, group.entries):  # another process holds the write lock
                        with anyio.CancelScope(shield=True):  # the others wait on this group
                            await self._commit_waiting(group.entries)
                finally:
                    group.committed.set()
        if entry.error is not None:
            raise entry.error
        return entry.result  # type: ignore[no-any-return]

    async def _commit_waiting(self, entries: list[_Entry]) -> None:
        """Run a group whose ``BEGIN`` met another process's write lock again, whole, on the
        worker threads' connection (which waits up to :attr:`timeout` seconds for the lock), one
        group or transaction at a time; a fault of opening it (or any other) becomes every entry's
        error, never a group's silence."""
        for entry in entries:
            entry.done = False  # not run: a caller cancelled while it waits is skipped
        try:
            async with self._lock:
                conn = await anyio.to_thread.run_sync(self._connect, True)
                await anyio.to_thread.run_sync(_commit, conn, entries, False)
        except Exception as exc:  # (opening the connection; a bug): every entry's error
            for entry in entries:
                entry.error = entry.error or exc

    async def transaction(self, work: Callable[[Tx], Awaitable[T]], *, write: bool = True) -> T:
        truncating = self._truncating
        if truncating is not None:  # it holds the file's write lock: wait here, not in a worker thread
            await truncating.wait()
        try:
            conn = self._conns.get(False)
            if conn is None:  # opening the file touches the disk: off the event loop
                async with self._lock:
                    conn = await anyio.to_thread.run_sync(self._connect, False)
            if write and self.group_commit:  # (another process's lock: the group waits in a thread)
                result = await self._grouped(conn, work)
            else:
                try:  # no await until it has committed or rolled back: no other task can interleave
                    result = self._whole(conn, work, write)
                except sqlite3.OperationalError as exc:
                    if not _busy(exc):
                        raise
                    async with self._lock:  # the worker threads' connection: one transaction at a time
                        result = await anyio.to_thread.run_sync(self._waiting, work, write)
        except (sqlite3.Error, OSError) as exc:
            raise unavailable(self.description, exc) from exc
        if write:
            self._writes += 1
            if self._writes % self.checkpoint_every == 0:
                await self._checkpoints()
        return result

    async def _checkpoints(self) -> None:
        """A ``PASSIVE`` checkpoint, then a ``TRUNCATE`` one when the WAL is still longer than
        :attr:`wal_limit` frames (this process's transactions wait for that one: see the class
        docs); both in a worker thread."""
        async with self._lock:
            frames = await anyio.to_thread.run_sync(self._checkpoint, "PASSIVE")
            if frames is None or frames <= self.wal_limit:
                return
            self._truncating = anyio.Event()
            try:
                await anyio.to_thread.run_sync(self._checkpoint, "TRUNCATE")
            finally:
                self._truncating.set()
                self._truncating = None

    def _checkpoint(self, mode: str) -> int | None:  # on a worker thread
        """Run a checkpoint of ``mode`` (``PASSIVE`` or ``TRUNCATE``); the frames the WAL still
        holds after it (``None`` when it failed, which is logged: the next one retries, the WAL
        only grows meanwhile). A ``TRUNCATE`` one another process's transaction kept from
        completing (it waits up to :attr:`timeout` seconds) is logged too."""
        try:
            busy, frames, _done = self._connect(True).execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
        except sqlite3.Error as exc:
            logger.warning("%s: WAL checkpoint failed: %s", self.description, exc)
            return None
        if busy:
            logger.info("%s: %s WAL checkpoint not completed (the file is busy)", self.description, mode)
        return int(frames)

    async def aclose(self) -> None:
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            await anyio.to_thread.run_sync(conn.close)


class _Entry:
    """One write transaction of a group commit (:meth:`SQLiteStore._grouped`): its work and how it ended."""

    __slots__ = ("done", "error", "result", "skipped", "work")

    def __init__(self, work: Callable[[Tx], Awaitable[Any]]) -> None:
        self.work = work
        self.done = False  # its group ran (committed or rolled back)
        self.skipped = False  # its caller was cancelled before that: it is not run
        self.result: Any = None
        self.error: BaseException | None = None


class _Group:
    """The write transactions gathered by one leader; ``committed`` is set once they ran."""

    __slots__ = ("committed", "entries")

    def __init__(self, leader: _Entry) -> None:
        self.entries = [leader]
        self.committed = anyio.Event()


def _commit(conn: sqlite3.Connection, entries: list[_Entry], busy_returns: bool = True) -> bool:
    """Run ``entries`` (those not skipped) in one transaction on ``conn``, in order, each inside
    a savepoint when there are several: one whose work raises is rolled back alone (its ``error``)
    and the others still commit. A fault of ``COMMIT``, or of ``BEGIN IMMEDIATE`` other than
    ``SQLITE_BUSY``, rolls the whole group back and becomes every entry's ``error``: each caller
    then handles it as its own (:meth:`SQLiteStore.transaction`). Returns ``True``, having run
    nothing, when ``BEGIN`` met another process's write lock and ``busy_returns`` (the caller runs
    the group again where it may wait: :meth:`SQLiteStore._commit_waiting`)."""
    live = [entry for entry in entries if not entry.skipped]
    for entry in entries:
        entry.done = True
    if not live:
        return False
    alone = len(live) == 1
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        if busy_returns and isinstance(exc, sqlite3.OperationalError) and _busy(exc):
            return True
        for entry in live:
            entry.error = exc
        return False
    try:
        for entry in live:
            if entry.skipped:  # its caller was cancelled while the group waited for the lock
                continue
            if not alone:
                conn.execute("SAVEPOINT grouped")
            try:
                entry.result = _run_now(entry.work(_SQLiteTx(conn)))
            except Exception as exc:  # this work's own failure (a refusal, a fault of its statement)
                entry.error = exc
                if alone or not conn.in_transaction:  # (SQLite rolls back itself on some faults)
                    raise
                conn.execute("ROLLBACK TO grouped")
            if not alone:
                conn.execute("RELEASE grouped")
        conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        for entry in live:
            if entry.error is None:
                entry.error = exc
                entry.result = None
        if not isinstance(exc, Exception):
            raise
    return False


def _busy(exc: sqlite3.OperationalError) -> bool:
    """Whether ``exc`` is SQLite's "another connection holds the lock" (``SQLITE_BUSY`` or
    ``SQLITE_LOCKED``, any extended code), as opposed to a real fault."""
    return exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
