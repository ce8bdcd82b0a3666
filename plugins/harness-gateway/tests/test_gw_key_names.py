"""Live key names are unique in the database itself (schema 5: a unique partial index), so two
concurrent creates of one name cannot both succeed; a database that already holds duplicate
live names still migrates (the newer ones are renamed ``<name> #<id>``)."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import asyncpg  # type: ignore[import-untyped]
import pytest
from gw_postgres import Cluster

from harness_gateway.errors import GatewayError
from harness_gateway.keys import KeySpec
from harness_gateway.postgres import MIGRATIONS_POSTGRES, PostgresStore
from harness_gateway.sqlite import MIGRATIONS_SQLITE, SQLiteStore
from harness_gateway.store import SqlStore

INSERT = (
    "INSERT INTO gateway_keys (id, hash, name, created_at, revoked_at, spent, max_cost) VALUES (?, ?, ?, ?, ?, 0, 0)"
)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    root = Path(tempfile.mkdtemp(prefix="harness-pg-"))  # the postgres user cannot enter pytest's tmp_path
    try:
        pg = Cluster(root)
        pg.start()
        try:
            yield pg
        finally:
            pg.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def names_after_migrating_duplicates(store: SqlStore, migrations: Any) -> list[tuple[str, str, Any]]:
    """Schema 4 holding two live keys named ``team`` (and a revoked one), then migrated: the names."""
    assert await store.apply_migrations("gateway_schema", migrations[:4]) == 4

    async def rows(tx: Any) -> None:
        await tx.run(INSERT, "old", "h1", "team", 1.0, None)
        await tx.run(INSERT, "new", "h2", "team", 2.0, None)
        await tx.run(INSERT, "gone", "h3", "team", 0.5, 3.0)  # revoked: keeps its name
        await tx.run(INSERT, "solo", "h4", "solo", 1.0, None)

    await store.transaction(rows)
    assert await store.migrate() == 5
    found = await store.transaction(
        lambda tx: tx.all("SELECT id, name, revoked_at FROM gateway_keys ORDER BY id"), write=False
    )
    return [tuple(row) for row in found]


EXPECTED = [("gone", "team", 3.0), ("new", "team #new", None), ("old", "team", None), ("solo", "solo", None)]


def test_sqlite_migrates_duplicate_live_names_and_refuses_new_ones(tmp_path: Path) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "gw.sqlite")
        assert await names_after_migrating_duplicates(store, MIGRATIONS_SQLITE) == EXPECTED
        with pytest.raises(GatewayError) as taken:
            await store.create_key(KeySpec(name="team"))
        assert (taken.value.status, taken.value.code, taken.value.param) == (409, "key_name_taken", "name")
        with pytest.raises(GatewayError) as duplicate:  # the index itself refuses a live duplicate
            await store.transaction(lambda tx: tx.run(INSERT, "dup", "h5", "solo", 4.0, None))
        assert isinstance(duplicate.value.__cause__, sqlite3.IntegrityError)
        assert store.violates_live_name(duplicate.value.__cause__)
        await store.transaction(lambda tx: tx.run(INSERT, "dup", "h5", "solo", 4.0, 5.0))  # a revoked one may
        # another constraint failing at the INSERT stays what it is: a store fault (503), not a 409
        trigger = "CREATE TRIGGER refuse BEFORE INSERT ON gateway_keys BEGIN SELECT RAISE(ABORT, 'refused'); END"
        await store.transaction(lambda tx: tx.run(trigger))
        with pytest.raises(GatewayError) as other:
            await store.create_key(KeySpec(name="fresh"))
        assert other.value.status == 503
        assert not store.violates_live_name(other.value.__cause__ or ValueError())
        await store.aclose()

    anyio.run(main)


def test_postgres_migrates_duplicates_and_concurrent_creates_of_one_name_give_one_key(cluster: Cluster) -> None:
    async def main() -> None:
        store = PostgresStore(cluster.dsn)
        assert await names_after_migrating_duplicates(store, MIGRATIONS_POSTGRES) == EXPECTED
        outcomes: list[object] = []

        async def create() -> None:
            try:
                outcomes.append(await store.create_key(KeySpec(name="burst")))
            except GatewayError as exc:
                outcomes.append(exc)

        async with anyio.create_task_group() as group:
            for _ in range(12):
                group.start_soon(create)
        refused = [o for o in outcomes if isinstance(o, GatewayError)]
        assert len(outcomes) - len(refused) == 1
        assert {(e.status, e.code) for e in refused} == {(409, "key_name_taken")}
        live = await store.transaction(
            lambda tx: tx.one("SELECT count(*) FROM gateway_keys WHERE name = 'burst' AND revoked_at IS NULL")
        )
        assert live == (1,)
        await store.aclose()

    anyio.run(main)


async def blocked_on_a_lock(dsn: str) -> None:
    """Return once a session waits on a lock in an ``INSERT INTO gateway_keys`` (PostgreSQL's
    own view of its sessions, polled: the server sends no event for it)."""
    watcher = await asyncpg.connect(dsn)
    try:
        query = (
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE 'INSERT INTO gateway_keys%'"
        )
        waiting = await watcher.fetchval(query)
        while not waiting:
            await anyio.sleep(0.01)
            waiting = await watcher.fetchval(query)
    finally:
        await watcher.close()


def test_postgres_a_create_racing_an_uncommitted_one_is_409_not_503(cluster: Cluster) -> None:
    """The other transaction inserts the name first and commits only once this create waits on
    the index (after its check found nothing): the race the check alone loses, made certain."""

    async def main() -> None:
        store = PostgresStore(cluster.dsn)
        await store.migrate()
        other = await asyncpg.connect(cluster.dsn)
        try:
            racing = other.transaction()
            await racing.start()
            await other.execute(INSERT.replace("?", "${}").format(1, 2, 3, 4, 5), "first", "hx", "race", 1.0, None)
            outcome: list[object] = []

            async def create() -> None:
                try:
                    outcome.append(await store.create_key(KeySpec(name="race")))
                except GatewayError as exc:
                    outcome.append(exc)

            async with anyio.create_task_group() as group:
                group.start_soon(create)
                await blocked_on_a_lock(cluster.dsn)
                await racing.commit()
            (error,) = outcome
            assert isinstance(error, GatewayError)
            assert (error.status, error.code, error.param) == (409, "key_name_taken", "name")
            assert "(id " not in error.message  # the index refused it, not the check before the INSERT
        finally:
            await other.close()
            await store.aclose()

    anyio.run(main)
