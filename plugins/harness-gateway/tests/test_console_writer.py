"""The console's request records written behind (issue 25, cost per request): one writer task per
process writes every record queued meanwhile in one transaction (group commit); readers see what
their process queued before them; the overflow is pruned once every ``keep // 100`` records; a
failing database or a full queue drops records, counted and logged once per outage; the
shutdown writes what is left. On SQLite and on a real PostgreSQL server (``gw_postgres``).
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from gw_helpers import ledger_rows, serve_gateway
from test_console import HI, _row, admin, console_yaml

from harness_gateway.console.records import RecordStore
from harness_gateway.sqlite import SQLiteStore
from harness_gateway.store import SqlStore, Tx
from harness_gateway.writebehind import BATCH_MAX, WriteBehind

SECRET_PROMPT = "the prompt a log line must never show"


class _CountingSQLite(SQLiteStore):
    """The SQLite store, counting its write transactions (what group commit saves)."""

    writes = 0

    async def transaction(self, work: Any, *, write: bool = True) -> Any:
        self.writes += write
        return await super().transaction(work, write=write)


SQLITE_FAIL = (
    "CREATE TRIGGER console_fail BEFORE INSERT ON console_requests BEGIN SELECT RAISE(ABORT, 'disk on fire'); END",
)
SQLITE_HEAL = ("DROP TRIGGER console_fail",)
PG_FAIL = (
    "CREATE FUNCTION console_fail() RETURNS trigger LANGUAGE plpgsql"
    " AS $$ BEGIN RAISE EXCEPTION 'disk on fire'; END $$",
    "CREATE TRIGGER console_fail BEFORE INSERT ON console_requests FOR EACH ROW EXECUTE FUNCTION console_fail()",
)
PG_HEAL = ("DROP TRIGGER console_fail ON console_requests", "DROP FUNCTION console_fail()")


async def _run_all(store: SqlStore, statements: tuple[str, ...]) -> None:
    async def work(tx: Tx) -> None:
        for sql in statements:
            await tx.run(sql)

    await store.transaction(work)


async def _count(store: SqlStore) -> tuple[int, float]:
    found = await store.transaction(
        lambda tx: tx.one("SELECT count(*), min(started_at) FROM console_requests"), write=False
    )
    assert found is not None
    return int(found[0]), float(found[1])


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("console request records")]


async def _scenario(store: SqlStore, writes: Any, fail: tuple[str, ...], heal: tuple[str, ...], caplog: Any) -> None:
    """The writer's whole life on ``store``; ``writes()`` counts its write transactions."""
    records = RecordStore(store, keep=1000)
    await records.migrate()
    async with anyio.create_task_group() as group:
        await group.start(records.writer.run)

        # many concurrent requests: every record exactly once, in one transaction per batch
        before = writes()
        count = BATCH_MAX + 44

        async def request(i: int) -> None:
            await records.insert(_row(f"c{i}", 1000.0 + i), {"timeline": [i]})

        async with anyio.create_task_group() as clients:
            for i in range(count):
                clients.start_soon(request, i)
        found: dict[str, list[dict[str, Any]]] = {}

        async def read(name: str) -> None:  # two readers waiting on the same batches
            found[name] = await (records.recent(2 * count) if name == "recent" else records.since(0.0))

        async with anyio.create_task_group() as readers:
            readers.start_soon(read, "recent")
            readers.start_soon(read, "since")
        assert sorted(r["id"] for r in found["recent"]) == sorted(f"c{i}" for i in range(count))
        assert [r["id"] for r in found["since"]] == [f"c{i}" for i in range(count)]
        assert writes() - before == 2  # a full batch and the rest: not one transaction per record

        # read after request: a record queued just before is seen
        await records.insert(_row("now", 1500.0), {"timeline": ["seen"]})
        seen = await records.get("now")
        assert seen is not None
        assert seen[1] == {"timeline": ["seen"]}

        # a failing database: records dropped, counted, logged once per outage; the next batch works
        await _run_all(store, fail)
        with caplog.at_level(logging.WARNING, logger="harness_gateway"):
            await records.insert(_row("f1", 2000.0), {"messages": [SECRET_PROMPT]})  # never raises
            await records.insert(_row("f2", 2001.0), {"messages": [SECRET_PROMPT]})
            assert await records.get("f1") is None
            await records.insert(_row("f3", 2002.0), {"messages": [SECRET_PROMPT]})
            assert await records.recent(5, id="f3") == []
            assert records.writer.dropped == 3
            await _run_all(store, heal)
            await records.insert(_row("f4", 2003.0), {"timeline": []})
            assert [r["id"] for r in await records.recent(1)] == ["f4"]
        assert _messages(caplog) == [
            "console request records are being dropped: the database failed (store_unavailable);"
            " the count is logged once they are written again",
            "console request records are written again (3 dropped meanwhile)",
        ]
        assert SECRET_PROMPT not in caplog.text

        # the overflow is pruned at the first write of a process, then once every keep // 100 records
        pruned = RecordStore(store, keep=200)  # another process: prunes every 2 records
        await pruned.insert(_row("p0", 3000.0), {})
        assert await _count(store) == (200, 1000.0 + count - 197)  # the newest 200: p0, f4, now, c299 … c103
        await pruned.insert(_row("p1", 3001.0), {})
        assert (await _count(store))[0] == 201  # up to keep + keep // 100 - 1 between two prunes
        await pruned.insert(_row("p2", 3002.0), {})
        assert await _count(store) == (200, 1000.0 + count - 195)

        # shutdown: the writer stops; what was queued is written by the flush
        group.cancel_scope.cancel()
        for i in range(3):
            await records.insert(_row(f"s{i}", 4000.0 + i), {})
    assert not records.writer.running
    other = RecordStore(store)  # reads what is in the database only
    assert [r["id"] for r in await other.recent(1)] == ["p2"]
    await records.writer.flush()
    assert [r["id"] for r in await other.recent(4)] == ["s2", "s1", "s0", "p2"]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_writer_on_sqlite(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = _CountingSQLite(tmp_path / "gw.sqlite")
    try:
        await _scenario(store, lambda: store.writes, SQLITE_FAIL, SQLITE_HEAL, caplog)
    finally:
        await store.aclose()


def test_the_writer_on_postgresql(caplog: pytest.LogCaptureFixture) -> None:
    from gw_postgres import running_postgres

    from harness_gateway.postgres import PostgresStore

    class Counting(PostgresStore):
        writes = 0

        async def transaction(self, work: Any, *, write: bool = True) -> Any:
            self.writes += write
            return await super().transaction(work, write=write)

    async def main(dsn: str) -> None:
        store = Counting(dsn)
        try:
            await _scenario(store, lambda: store.writes, PG_FAIL, PG_HEAL, caplog)
        finally:
            await store.aclose()

    with running_postgres("harness-pg-console-writer-") as dsn:
        anyio.run(main, dsn)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_full_queue_drops_and_a_fault_at_shutdown_is_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteStore(tmp_path / "gw.sqlite")
    try:
        records = RecordStore(store, limit=2)
        await records.migrate()
        with caplog.at_level(logging.WARNING, logger="harness_gateway"):
            async with anyio.create_task_group() as group:
                await group.start(records.writer.run)
                for name in ("a", "b", "c"):  # no await between: the writer has not run yet
                    await records.insert(_row(name, 1.0 if name == "a" else 2.0), {"messages": [SECRET_PROMPT]})
                assert records.writer.dropped == 1  # c: the queue was full; the request did not fail
                assert [r["id"] for r in await records.recent(5)] == ["b", "a"]
                await _run_all(store, SQLITE_FAIL)
                group.cancel_scope.cancel()
                await records.insert(_row("d", 3.0), {})
            await records.writer.flush()  # d's write fails: counted and logged
        assert records.writer.dropped == 2
        assert _messages(caplog) == [
            "console request records are being dropped: 2 rows wait to be written (the database is slower"
            " than the requests); the count is logged once they are written again",
            "console request records are written again (1 dropped meanwhile)",
            "console request records are being dropped: the database failed (store_unavailable);"
            " the count is logged once they are written again",
            "console request records: 1 were dropped since the last one written (at shutdown)",
        ]
        assert SECRET_PROMPT not in caplog.text
    finally:
        await store.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_queue_is_bounded_in_bytes_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Records queued while the writer has not run are bounded by the size of their details (a
    stalled database holds at most ``limit_bytes`` of them, not ``limit`` x the detail cap): one
    that would pass the bound is dropped and counted; once written, the bytes are free again."""
    store = SQLiteStore(tmp_path / "gw.sqlite")
    try:
        records = RecordStore(store, limit_bytes=250)
        await records.migrate()
        big = {"messages": ["x" * 100]}  # a detail of a little over 100 characters
        with caplog.at_level(logging.WARNING, logger="harness_gateway"):
            async with anyio.create_task_group() as group:
                await group.start(records.writer.run)
                for name in ("a", "b", "c"):  # no await between: the writer has not run yet
                    await records.insert(_row(name, {"a": 1.0, "b": 2.0, "c": 3.0}[name]), big)
                assert records.writer.dropped == 1  # c would pass 250 bytes queued
                assert [r["id"] for r in await records.recent(5)] == ["b", "a"]
                await records.insert(_row("d", 4.0), big)  # the queue was written: room again
                assert [r["id"] for r in await records.recent(5)] == ["d", "b", "a"]
                group.cancel_scope.cancel()
        assert records.writer.dropped == 1
        assert _messages(caplog)[0] == (
            "console request records are being dropped: 250 bytes of rows wait to be written (the database is"
            " slower); the count is logged once they are written again"
        )
    finally:
        await store.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_write_that_raises_a_bug_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    written: list[list[int]] = []

    async def write(batch: list[int]) -> None:
        if batch == [1]:
            raise RuntimeError("a bug in the write")
        written.append(batch)

    writer: WriteBehind[int] = WriteBehind(write, what="rows")
    with caplog.at_level(logging.WARNING, logger="harness_gateway"):
        async with anyio.create_task_group() as group:
            await group.start(writer.run)
            writer.put(1)
            await writer.written()
            writer.put(2)
            writer.put(3)
            await writer.written()
            group.cancel_scope.cancel()
        await writer.flush()  # nothing left: returns at once
    assert written == [[2, 3]]
    assert writer.dropped == 1
    failed = next(r for r in caplog.records if r.getMessage() == "rows: writing 1 failed")
    assert failed.exc_info is not None
    assert "rows are being dropped: the write failed (RuntimeError)" in caplog.text
    assert "rows are written again (1 dropped meanwhile)" in caplog.text


def test_concurrent_requests_are_recorded_once_each_and_shown_at_once(tmp_path: Path) -> None:
    requests = 48
    seen: list[str] = []
    with serve_gateway(tmp_path, console_yaml(tmp_path)) as running, admin(running.url) as http:

        async def main() -> None:
            async with httpx.AsyncClient(base_url=running.url, timeout=30) as client:

                async def one(i: int) -> None:
                    body = {"model": "mock/echo", "messages": HI, "stream": i % 2 == 0}
                    reply = await client.post("/v1/chat/completions", json=body)
                    assert reply.status_code == 200
                    seen.append(reply.headers["x-request-id"])

                async with anyio.create_task_group() as group:
                    for i in range(requests):
                        group.start_soon(one, i)

        anyio.run(main)
        reply = http.post("/v1/chat/completions", json={"model": "mock/echo", "messages": HI})
        last = reply.headers["x-request-id"]
        listed = http.get(f"/console/requests?request_id={last}").text  # read right after the request
        assert listed.count('href="/console/requests/') == 1
        assert http.get("/console/requests").text.count('href="/console/requests/') == requests + 1
    with sqlite3.connect(tmp_path / "gw.sqlite") as db:
        rows = db.execute("SELECT id, request_id FROM console_requests").fetchall()
    assert sorted(request_id for _, request_id in rows) == sorted([*seen, last])
    assert sorted(ticket for ticket, _ in rows) == sorted(row["id"] for row in ledger_rows(tmp_path / "gw.sqlite"))
