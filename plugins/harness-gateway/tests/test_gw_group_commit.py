"""Group commit on SQLite: the write transactions of one event-loop turn commit together.

docs/gateway.md#group-commit-on-sqlite: each concurrent request used to pay its own ``BEGIN IMMEDIATE`` …
``COMMIT`` (the largest single cost of a short request: BENCHMARKS.md, issue 25); now the writes
that start in one turn share one, each in a savepoint, so one refused or failing write is rolled
back alone and the others still commit. Exactness of admission is unchanged: a group's
admissions of one key run one after the other under its lock.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from gw_helpers import open_key

from harness_gateway.errors import GatewayError
from harness_gateway.keys import KeyRecord, KeySpec
from harness_gateway.sqlite import SQLiteStore, _commit, _Entry
from harness_gateway.store import Tx

T0 = 2_000_000.5


def traced(store: SQLiteStore) -> list[str]:
    """Every statement the event loop's connection runs from now on (opened first)."""
    statements: list[str] = []
    store._conns[False].set_trace_callback(statements.append)
    return statements


async def rows(store: SQLiteStore) -> list[tuple[Any, ...]]:
    return await store.transaction(
        lambda tx: tx.all("SELECT key_id, status FROM gateway_ledger ORDER BY started_at, id"), write=False
    )


def test_admissions_of_one_turn_commit_in_one_transaction(tmp_path: Path) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "gw.sqlite")
        key = await open_key(store)
        statements = traced(store)
        tickets: list[str] = []

        async def admit(i: int) -> None:
            tickets.append(await store.admit(key, "mock", f"m{i}", now=T0 + i))

        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(admit, i)
        assert len(tickets) == 20
        assert statements.count("BEGIN IMMEDIATE") == 1  # one transaction for the twenty
        assert statements.count("COMMIT") == 1
        assert statements.count("SAVEPOINT grouped") == 20
        assert len(await rows(store)) == 20
        assert store.running == set(tickets)
        await store.aclose()

    anyio.run(main)


def test_a_lone_write_takes_no_savepoint(tmp_path: Path) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "gw.sqlite")
        key = await open_key(store)
        statements = traced(store)
        await store.admit(key, "mock", "m", now=T0)
        assert [s.split(" ")[0] for s in statements] == ["BEGIN", "SELECT", "UPDATE", "INSERT", "COMMIT"]
        await store.aclose()

    anyio.run(main)


def test_a_refused_admission_in_a_group_is_rolled_back_alone_and_the_key_stays_exact(tmp_path: Path) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "gw.sqlite")
        await store.migrate()
        _, key = await store.create_key(KeySpec(name="k", rpm=3), now=T0)
        statements = traced(store)
        admitted: list[str] = []
        refused: list[GatewayError] = []

        async def admit() -> None:
            try:
                admitted.append(await store.admit(key, "mock", "m", now=T0 + 1))
            except GatewayError as exc:
                refused.append(exc)

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(admit)
        assert statements.count("BEGIN IMMEDIATE") == 1
        assert statements.count("ROLLBACK TO grouped") == 2
        assert len(admitted) == 3
        assert [exc.status for exc in refused] == [429, 429]
        assert all("requests per minute" in exc.message for exc in refused)
        counters = await store.transaction(
            lambda tx: tx.one("SELECT running, windows FROM gateway_keys WHERE id = ?", key.id), write=False
        )
        assert counters == (3, "[[2000001,3,0]]")  # three running, three requests in the window
        assert len(await rows(store)) == 3
        await store.aclose()

    anyio.run(main)


def test_a_failing_write_in_a_group_raises_its_own_error_and_the_others_commit(tmp_path: Path) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "gw.sqlite")
        await store.migrate()
        outcomes: dict[str, Any] = {}

        async def broken(tx: Tx) -> None:
            await tx.run("INSERT INTO gateway_schema (version, applied_at) VALUES (?, ?)", 99, 0.0)
            await tx.run("INSERT INTO no_such_table VALUES (1)")  # fails after a write of its own

        async def write(name: str, work: Any) -> None:
            try:
                outcomes[name] = await store.transaction(work)
            except Exception as exc:  # the store's 503 for a statement's fault
                outcomes[name] = exc

        async with anyio.create_task_group() as tg:
            tg.start_soon(write, "good", lambda tx: tx.run("INSERT INTO gateway_schema VALUES (98, 0)"))
            tg.start_soon(write, "bad", broken)
            tg.start_soon(write, "late", lambda tx: tx.run("INSERT INTO gateway_schema VALUES (97, 0)"))
        assert outcomes["good"] == 1
        assert outcomes["late"] == 1
        assert isinstance(outcomes["bad"], GatewayError)
        assert outcomes["bad"].status == 503
        assert isinstance(outcomes["bad"].__cause__, sqlite3.OperationalError)
        versions = await store.transaction(
            lambda tx: tx.all("SELECT version FROM gateway_schema WHERE version > 90 ORDER BY version"), write=False
        )
        assert versions == [(97,), (98,)]  # 99 was the failing write's: rolled back with it
        await store.aclose()

    anyio.run(main)


def test_an_admission_cancelled_after_its_group_committed_is_settled_as_aborted(tmp_path: Path) -> None:
    """The follower's cancellation arrives after its leader ran the group: its row was committed,
    so the admission defers an ``aborted`` settlement (its key's running count is released)."""

    async def main() -> None:
        store = SQLiteStore(tmp_path / "gw.sqlite")
        await store.migrate()
        _, key = await store.create_key(KeySpec(name="k", rpm=10), now=T0)
        scopes: list[anyio.CancelScope] = []
        leader: list[str] = []

        async def first() -> None:
            leader.append(await store.admit(key, "mock", "m", now=T0))

        async def second() -> None:
            with anyio.CancelScope() as scope:
                scopes.append(scope)
                await store.admit(key, "mock", "m", now=T0)
                raise AssertionError("the cancellation is delivered by the admission's wait")

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            tg.start_soon(second)
            await anyio.lowlevel.checkpoint()  # both gathered: the leader yields, the follower waits
            scopes[0].cancel()
        assert len(leader) == 1
        assert len(store.deferred) == 1
        assert store.running == set(leader)
        running = await store.transaction(
            lambda tx: tx.one("SELECT running FROM gateway_keys WHERE id = ?", key.id), write=False
        )
        assert running == (2,)  # both rows were committed
        assert await store.settle_deferred(force=True) == 1
        statuses = sorted(status for _, status in await rows(store))
        assert statuses == ["aborted", "running"]
        running = await store.transaction(
            lambda tx: tx.one("SELECT running FROM gateway_keys WHERE id = ?", key.id), write=False
        )
        assert running == (1,)
        await store.aclose()

    anyio.run(main)


def test_a_deferred_settlement_of_an_admission_that_never_committed_changes_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "gw.sqlite")
        await store.migrate()
        store.defer("0" * 32, "aborted", None, 0.0, now=T0)
        assert await store.settle_deferred(force=True) == 1
        assert await rows(store) == []
        await store.aclose()

    anyio.run(main)


async def _held(tmp_path: Path) -> tuple[SQLiteStore, KeyRecord, sqlite3.Connection]:
    """A migrated store, a key of it, and another process's connection holding its file's write lock."""
    store = SQLiteStore(tmp_path / "gw.sqlite")
    key = await open_key(store)
    holder = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    return store, key, holder


def test_a_skipped_entry_is_not_run_and_a_group_of_skipped_entries_opens_no_transaction() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    ran: list[int] = []

    async def work(tx: Tx) -> int:
        ran.append(1)
        return await tx.run("SELECT 1")

    skipped = _Entry(work)
    skipped.skipped = True
    _commit(conn, [skipped])
    assert statements == []
    assert ran == []
    assert skipped.done
    kept = _Entry(work)
    _commit(conn, [_skipped(work), kept])
    assert ran == [1]
    assert kept.error is None
    assert statements == ["BEGIN IMMEDIATE", "SELECT 1", "COMMIT"]  # alone once the skipped one is left out


def _skipped(work: Any) -> _Entry:
    entry = _Entry(work)
    entry.skipped = True
    return entry


def test_a_busy_begin_runs_nothing_and_says_so_or_fails_every_entry_with_it(tmp_path: Path) -> None:
    path = tmp_path / "busy.sqlite"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")  # another connection holds the write lock
    conn = sqlite3.connect(path, isolation_level=None, timeout=0)

    async def work(tx: Tx) -> int:
        return await tx.run("INSERT INTO t VALUES (1)")

    entries = [_Entry(work), _Entry(work)]
    assert _commit(conn, entries) is True  # busy: nothing run, the caller waits elsewhere
    assert [e.error for e in entries] == [None, None]
    assert _commit(conn, entries, False) is False  # where it waited already: the error of each
    assert all(isinstance(e.error, sqlite3.OperationalError) for e in entries)
    assert entries[0].error is entries[1].error
    assert not conn.in_transaction
    holder.execute("ROLLBACK")


def test_a_group_that_meets_another_process_s_lock_waits_for_it_whole_in_a_thread(tmp_path: Path) -> None:
    """The writes of one turn, when another process holds the write lock, wait for it together
    in one transaction of the worker threads' connection (each used to wait on its own, one after
    the other)."""

    async def main() -> None:
        path = tmp_path / "gw.sqlite"
        store = SQLiteStore(path)
        key = await open_key(store)
        waiting = store._connect(True)
        statements: list[str] = []
        waiting.set_trace_callback(statements.append)
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN IMMEDIATE")  # another process's write transaction
        tickets: list[str] = []

        async def admit(i: int) -> None:
            tickets.append(await store.admit(key, "mock", f"m{i}", now=T0 + i))

        async with anyio.create_task_group() as tg:
            for i in range(10):
                tg.start_soon(admit, i)
            while not store._lock.locked():  # the group went to the worker thread: it waits there
                await anyio.lowlevel.checkpoint()
            holder.execute("ROLLBACK")  # the lock is free: the group commits
        assert len(tickets) == 10
        assert statements.count("BEGIN IMMEDIATE") == 1
        assert statements.count("COMMIT") == 1
        assert len(await rows(store)) == 10
        holder.close()
        await store.aclose()

    anyio.run(main)


def test_a_group_that_cannot_open_the_waiting_connection_fails_every_write(tmp_path: Path) -> None:
    async def main() -> None:
        store, key, holder = await _held(tmp_path)

        def broken(wait: bool) -> sqlite3.Connection:
            raise sqlite3.OperationalError("unable to open database file")

        store._connect = broken  # type: ignore[method-assign]
        outcomes: list[Any] = []

        async def admit() -> None:
            try:
                await store.admit(key, "mock", "m", now=T0)
            except GatewayError as exc:
                outcomes.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(admit)
            tg.start_soon(admit)
        assert [exc.status for exc in outcomes] == [503, 503]
        holder.execute("ROLLBACK")
        holder.close()
        await store.aclose()

    anyio.run(main)


def test_a_base_exception_of_a_work_fails_the_group_and_is_raised(tmp_path: Path) -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE t (x)")

    async def fine(tx: Tx) -> int:
        return await tx.run("INSERT INTO t VALUES (1)")

    async def interrupted(tx: Tx) -> int:
        raise KeyboardInterrupt

    entries = [_Entry(fine), _Entry(interrupted)]
    with pytest.raises(KeyboardInterrupt):
        _commit(conn, entries)
    assert isinstance(entries[0].error, KeyboardInterrupt)
    assert entries[0].result is None
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
    assert not conn.in_transaction


def test_a_begin_that_fails_otherwise_fails_every_entry_with_it() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.close()  # any fault of BEGIN but the lock: here a closed connection

    async def work(tx: Tx) -> int:
        raise AssertionError("never run")

    entries = [_Entry(work), _Entry(work)]
    assert _commit(conn, entries) is False
    assert all(isinstance(e.error, sqlite3.ProgrammingError) for e in entries)


def test_a_follower_cancelled_while_its_group_waits_for_the_lock_commits_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        store, key, holder = await _held(tmp_path)
        scopes: list[anyio.CancelScope] = []
        done: list[str] = []

        async def leader() -> None:
            done.append(await store.admit(key, "mock", "leader", now=T0))

        async def follower() -> None:
            with anyio.CancelScope() as scope:
                scopes.append(scope)
                await store.admit(key, "mock", "follower", now=T0)
            done.append("cancelled")

        async with anyio.create_task_group() as tg:
            tg.start_soon(leader)
            tg.start_soon(follower)
            while not store._lock.locked():  # the group waits for the lock in a worker thread
                await anyio.lowlevel.checkpoint()
            scopes[0].cancel()
            while "cancelled" not in done:  # the follower saw its cancellation: it is skipped
                await anyio.lowlevel.checkpoint()
            holder.execute("ROLLBACK")
        models = await store.transaction(lambda tx: tx.all("SELECT model FROM gateway_ledger"), write=False)
        assert models == [("leader",)]  # the follower was never run
        assert await store.settle_deferred(force=True) == 1  # its aborted settlement changes nothing
        assert await store.transaction(lambda tx: tx.all("SELECT model FROM gateway_ledger"), write=False) == models
        holder.close()
        await store.aclose()

    anyio.run(main)


class _Scripted(sqlite3.Connection):
    """A connection that runs ``after[sql]`` once it executed ``sql``, and ``instead[sql]`` in
    place of it: what happens to a group while its ``BEGIN`` waits, or a fault of ``COMMIT``."""

    after: dict[str, Any]
    instead: dict[str, Any]

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        replaced = self.instead.get(sql)
        if replaced is not None:
            return replaced(self)  # type: ignore[no-any-return]
        cursor = super().execute(sql, *args)
        action = self.after.get(sql)
        if action is not None:
            action(self)
        return cursor


def _scripted(after: dict[str, Any] | None = None, instead: dict[str, Any] | None = None) -> _Scripted:
    conn = sqlite3.connect(":memory:", isolation_level=None, factory=_Scripted)
    conn.after, conn.instead = {}, {}
    conn.execute("CREATE TABLE t (x)")
    conn.after, conn.instead = after or {}, instead or {}
    return conn


async def _insert(tx: Tx) -> int:
    return await tx.run("INSERT INTO t VALUES (1)")


def test_an_entry_cancelled_while_its_group_s_begin_waited_is_not_run() -> None:
    """The thread's ``BEGIN IMMEDIATE`` waits for another process's lock; meanwhile one caller
    is cancelled (its entry ``skipped``): the group runs without it."""
    ran: list[str] = []

    def work(name: str) -> Any:
        async def run(tx: Tx) -> int:
            ran.append(name)
            return await _insert(tx)

        return run

    entries = [_Entry(work("a")), _Entry(work("b")), _Entry(work("c"))]

    def cancel_b(conn: sqlite3.Connection) -> None:
        entries[1].skipped = True

    conn = _scripted(after={"BEGIN IMMEDIATE": cancel_b})
    assert _commit(conn, entries, False) is False
    assert ran == ["a", "c"]
    assert [e.error for e in entries] == [None, None, None]
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (2,)


def test_a_commit_that_fails_after_sqlite_rolled_back_itself_fails_every_entry() -> None:
    """A ``COMMIT`` fault after which the transaction is already gone (SQLite rolls back itself
    on some faults): no second ``ROLLBACK``, every entry gets the fault, nothing is kept."""

    def fault(conn: _Scripted) -> None:
        conn.instead = {}
        conn.execute("ROLLBACK")
        raise sqlite3.OperationalError("disk I/O error")

    conn = _scripted(instead={"COMMIT": fault})
    entries = [_Entry(_insert), _Entry(_insert)]
    assert _commit(conn, entries) is False
    assert all(isinstance(e.error, sqlite3.OperationalError) for e in entries)
    assert entries[0].error is entries[1].error
    assert not conn.in_transaction
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)


@pytest.mark.parametrize("group_commit", [True, False])
def test_a_statement_fault_that_is_not_the_lock_is_a_503_at_once(tmp_path: Path, group_commit: bool) -> None:
    """A fault of SQLite other than another process's lock (here a missing table) is no reason to
    wait in a thread: the caller gets the store's 503 (``store_unavailable``) at once, and the
    transaction left nothing open."""

    async def main() -> None:
        store = SQLiteStore(tmp_path / "gw.sqlite")
        store.group_commit = group_commit
        await store.migrate()
        for write in (False, True):
            with pytest.raises(GatewayError) as caught:
                await store.transaction(lambda tx: tx.all("SELECT * FROM no_such_table"), write=write)
            assert (caught.value.status, caught.value.code) == (503, "store_unavailable")
        assert not store._conns[False].in_transaction
        assert not store._lock.locked()
        await store.aclose()

    anyio.run(main)
