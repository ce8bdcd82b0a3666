"""The console's schema upgrades in place: a gateway whose state store holds the previous schema
(``console_schema`` 2, records in it) gets the index on ``console_requests(request_id)`` (version
3), which the console's look-up of a request by its ``x-request-id`` uses (``EXPLAIN QUERY PLAN``
on SQLite). On SQLite and on a real PostgreSQL server (``gw_postgres``)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from test_console import _row

from harness_gateway.console.records import COLUMNS, MIGRATIONS, RecordStore
from harness_gateway.sqlite import SQLiteStore
from harness_gateway.store import SqlStore, Tx

T = TypeVar("T")

INSERT = f"INSERT INTO console_requests ({', '.join(COLUMNS)}, detail) VALUES ({', '.join('?' * (len(COLUMNS) + 1))})"


async def _upgrade_from_the_previous_schema(store: SqlStore) -> RecordStore:
    """Schema 2 holding two records (as the previous gateway wrote them), then migrated."""
    assert MIGRATIONS[-1][0] == 3
    assert await store.apply_migrations("console_schema", MIGRATIONS[:2]) == 2

    async def old_rows(tx: Tx) -> None:
        for ticket, started_at in (("old-1", 100.0), ("old-2", 101.0)):
            row = _row(ticket, started_at, request_id=f"req-{ticket}")
            values = [json.dumps(row[n]) if n == "attempts" else row[n] for n in COLUMNS]
            await tx.run(INSERT, *values, "{}")

    await store.transaction(old_rows)
    records = RecordStore(store)
    assert await records.migrate() == 3
    assert await RecordStore(store).migrate() == 3  # another process: already in place
    found = await records.recent(5, request_id="req-old-2")
    assert [r["id"] for r in found] == ["old-2"]  # the records of the previous schema are kept
    return records


class _Recording(SQLiteStore):
    """The SQLite store, keeping the read statements (SQL, arguments) its transactions ran."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.reads: list[tuple[str, tuple[Any, ...]]] = []

    async def transaction(self, work: Callable[[Tx], Awaitable[T]], *, write: bool = True) -> T:
        reads = self.reads

        class Recorder:
            def __init__(self, tx: Tx) -> None:
                self.tx = tx

            async def one(self, sql: str, *args: Any) -> tuple[Any, ...] | None:
                return await self.tx.one(sql, *args)

            async def all(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
                reads.append((sql, args))
                return await self.tx.all(sql, *args)

            async def run(self, sql: str, *args: Any) -> int:
                return await self.tx.run(sql, *args)

        return await super().transaction(lambda tx: work(Recorder(tx)), write=write)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_sqlite_upgrade_adds_the_request_id_index_and_the_look_up_uses_it(tmp_path: Path) -> None:
    store = _Recording(tmp_path / "gw.sqlite")
    try:
        records = await _upgrade_from_the_previous_schema(store)
        indexes = await store.transaction(
            lambda tx: tx.all(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'console_requests'"
            ),
            write=False,
        )
        assert (
            "console_requests_request_id",
            "CREATE INDEX console_requests_request_id ON console_requests (request_id)",
        ) in indexes
        for i in range(50):  # enough rows that a scan and a search differ
            await records.insert(_row(f"r{i}", 200.0 + i), {"timeline": []})
        store.reads.clear()
        assert [r["id"] for r in await records.recent(5, request_id="r7")] == ["r7"]
        [(sql, args)] = [read for read in store.reads if "request_id = ?" in read[0]]
        plan = await store.transaction(lambda tx: tx.all("EXPLAIN QUERY PLAN " + sql, *args), write=False)
        details = [str(step[-1]) for step in plan]
        assert any("USING INDEX console_requests_request_id (request_id=?)" in d for d in details), details
        assert not any(d.startswith("SCAN console_requests") for d in details), details
    finally:
        await store.aclose()


def test_postgres_upgrade_adds_the_request_id_index() -> None:
    from gw_postgres import running_postgres

    from harness_gateway.postgres import PostgresStore

    async def main(dsn: str) -> None:
        store = PostgresStore(dsn)
        try:
            await _upgrade_from_the_previous_schema(store)
            found = await store.transaction(
                lambda tx: tx.all(
                    "SELECT indexdef FROM pg_indexes WHERE tablename = 'console_requests'"
                    " AND indexname = 'console_requests_request_id'"
                ),
                write=False,
            )
            assert [row[0] for row in found] == [
                "CREATE INDEX console_requests_request_id ON public.console_requests USING btree (request_id)"
            ]
        finally:
            await store.aclose()

    with running_postgres("harness-pg-console-schema-") as dsn:
        anyio.run(main, dsn)
