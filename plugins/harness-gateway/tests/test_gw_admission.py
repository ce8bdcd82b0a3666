"""Admission on per-key counters and settlements deferred by a store fault (SQLite, explicit clocks).

docs/gateway.md#admission-counters-not-scans: a key's running count, reservations and its per-second
window of the last minute live on its row; admission reads and writes that row only. A settlement
the store refuses is kept and retried (docs/gateway.md#leases-a-killed-gateway-strands-no-budget).
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from harness_core.types import TokenUsage
from harness_gateway import store as store_module
from harness_gateway.errors import GatewayError
from harness_gateway.keys import KeySpec
from harness_gateway.sqlite import MIGRATIONS_SQLITE, SQLiteStore

T0 = 1_000_000.25  # a fixed clock, a quarter into a second


async def counters(store: SQLiteStore, key_id: str) -> tuple[Any, ...]:
    found = await store.transaction(
        lambda tx: tx.one("SELECT running, reserved, spent, windows FROM gateway_keys WHERE id = ?", key_id),
        write=False,
    )
    assert found is not None
    return found


async def status(store: SQLiteStore, ticket: str) -> str:
    found = await store.transaction(lambda tx: tx.one("SELECT status FROM gateway_ledger WHERE id = ?", ticket))
    assert found is not None
    return str(found[0])


def test_rpm_counts_per_second_for_a_full_minute_and_names_the_wait(tmp_path: Path) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "gw.sqlite")
        await store.migrate()
        _, key = await store.create_key(KeySpec(name="k", rpm=2), now=T0)
        await store.admit(key, "mock", "echo", now=T0)
        await store.admit(key, "mock", "echo", now=T0 + 0.5)  # the same second: one entry
        assert (await counters(store, key.id))[3] == "[[1000000,2,0]]"
        with pytest.raises(GatewayError) as over:
            await store.admit(key, "mock", "echo", now=T0 + 30)
        assert over.value.status == 429
        assert over.value.retry_after == pytest.approx(30.75)  # leaves at 1000061
        with pytest.raises(GatewayError):
            await store.admit(key, "mock", "echo", now=T0 + 60.5)  # 60.5 s on: still in (never under a minute)
        await store.admit(key, "mock", "echo", now=T0 + 60.75)  # second 1000061: the first second left
        assert (await counters(store, key.id))[3] == "[[1000061,1,0]]"
        await store.admit(key, "mock", "echo", now=T0 + 59)  # another host's clock behind: the newest second
        assert (await counters(store, key.id))[3] == "[[1000061,2,0]]"
        await store.aclose()

    anyio.run(main)


def test_tpm_counts_the_tokens_settled_in_the_last_minute(tmp_path: Path) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "gw.sqlite")
        await store.migrate()
        _, key = await store.create_key(KeySpec(name="k", tpm=10), now=T0)
        ticket = await store.admit(key, "mock", "echo", now=T0)
        assert (await counters(store, key.id))[:2] == (1, 0.0)
        await store.settle(ticket, "complete", TokenUsage(6, 4), 0.0, now=T0 + 1)
        assert await counters(store, key.id) == (0, 0.0, 0.0, "[[1000001,0,10]]")
        with pytest.raises(GatewayError) as over:
            await store.admit(key, "mock", "echo", now=T0 + 2)
        assert "tokens per minute" in over.value.message
        assert over.value.retry_after == pytest.approx(59.75)
        empty = await store.admit(key, "mock", "echo", now=T0 + 62)
        await store.settle(empty, "error", None, 0.0, now=T0 + 62)  # no usage: the window is not rewritten
        assert (await counters(store, key.id))[3] == "[[1000001,0,10]]"
        await store.aclose()

    anyio.run(main)


def test_budget_counters_reserve_release_and_a_late_settlement_charges_the_difference(tmp_path: Path) -> None:
    async def main() -> None:
        mine, other = SQLiteStore(tmp_path / "gw.sqlite", lease=2.0), SQLiteStore(tmp_path / "gw.sqlite")
        await mine.migrate()
        _, key = await mine.create_key(KeySpec(name="k", budget=10.0, tpm=1000), now=T0)
        first = await mine.admit(key, "mock", "echo", now=T0)
        await mine.settle(first, "complete", TokenUsage(1, 1), 2.0, now=T0 + 0.5)  # max_cost 2: reserves 2 each
        second = await mine.admit(key, "mock", "echo", now=T0 + 1)
        third = await mine.admit(key, "mock", "echo", now=T0 + 1)
        assert (await counters(mine, key.id))[:3] == (2, 4.0, 2.0)
        assert await mine.record(second, TokenUsage(2, 1), 1.5, now=T0 + 1.5)
        assert await other.reap(now=T0 + 3.6) == 2  # both leases passed: the recorded usage is charged
        assert (await counters(mine, key.id))[:3] == (0, 0.0, 3.5)
        assert (await counters(mine, key.id))[3] == "[[1000000,0,2],[1000003,0,3]]"
        await mine.settle(second, "complete", TokenUsage(2, 3), 2.5, now=T0 + 4)  # stalled, not dead
        assert (await counters(mine, key.id))[:3] == (0, 0.0, 4.5)  # 1.0 more, nothing released twice
        assert (await counters(mine, key.id))[3] == "[[1000000,0,2],[1000003,0,3],[1000004,0,2]]"
        await other.settle(third, "complete", None, 0.0, now=T0 + 4)  # a row another process admitted
        await mine.settle("no-such-row", "complete", None, 0.0, now=T0 + 4)  # nothing to settle: nothing charged
        anonymous = await mine.admit(None, "mock", "echo", now=T0 + 4)
        await mine.settle(anonymous, "complete", TokenUsage(1, 1), 9.0, now=T0 + 5)
        assert (await counters(mine, key.id))[:3] == (0, 0.0, 4.5)
        assert [await status(mine, t) for t in (second, third, anonymous)] == ["complete", "complete", "complete"]
        await mine.aclose()
        await other.aclose()

    anyio.run(main)


def test_near_the_budget_the_counters_are_recounted_from_the_running_rows(tmp_path: Path) -> None:
    """Counters left wrong (rows written by a gateway before schema 3 during an upgrade) are
    repaired by the recount an admission near its budget makes."""

    async def main() -> None:
        store = SQLiteStore(tmp_path / "gw.sqlite")
        await store.migrate()
        _, key = await store.create_key(KeySpec(name="k", budget=1.0), now=T0)
        await store.transaction(
            lambda tx: tx.run("UPDATE gateway_keys SET running = 3, reserved = 5 WHERE id = ?", key.id)
        )
        ticket = await store.admit(key, "mock", "echo", now=T0)  # nothing really runs: admitted, repaired
        assert (await counters(store, key.id))[:2] == (1, 0.0)
        await store.settle(ticket, "complete", None, 0.0, now=T0)
        await store.aclose()

    anyio.run(main)


def test_migration_3_seeds_the_counters_and_the_last_minute(tmp_path: Path) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "gw.sqlite")
        assert await store.apply_migrations("gateway_schema", MIGRATIONS_SQLITE[:2]) == 2
        now = time.time()
        _, key = await store.create_key(KeySpec(name="k", rpm=5, tpm=100, budget=9.0), now=now)

        async def rows(tx: Any) -> None:
            insert = (
                "INSERT INTO gateway_ledger (id, key_id, route, model, started_at, ended_at, status, reserved,"
                " input_tokens, output_tokens) VALUES (?, ?, 'mock', 'echo', ?, ?, ?, ?, ?, ?)"
            )
            await tx.run(insert, "a", key.id, now - 10, None, "running", 1.5, None, None)
            await tx.run(insert, "b", key.id, now - 5, now - 4, "complete", 0.0, 3, 4)
            await tx.run(insert, "c", key.id, now - 600, now - 599, "complete", 0.0, 50, 50)  # long gone

        await store.transaction(rows)
        assert await store.migrate() == 5  # 3, then 4 (stored responses), 5 (unique live names)
        running, reserved, _, windows = await counters(store, key.id)
        assert (running, reserved) == (1, 1.5)
        seconds = store_module._slide(windows, now)
        assert store_module._totals(seconds)[::2] == (2, 7)  # two starts, seven tokens
        await store.aclose()

    anyio.run(main)


def test_a_settlement_the_store_refuses_is_deferred_and_retried_with_backoff(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        path = tmp_path / "gw.sqlite"
        store = SQLiteStore(path, timeout=0.2, lease=2.0)
        await store.migrate()
        _, key = await store.create_key(KeySpec(name="k", budget=10.0), now=T0)
        ticket = await store.admit(key, "mock", "echo", now=T0)
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")  # the store is away: every transaction times out (a 503)
        with pytest.raises(GatewayError) as down:
            await store.settle(ticket, "complete", TokenUsage(1, 1), 2.0, now=T0 + 1)
        assert down.value.status == 503
        store.defer(ticket, "complete", TokenUsage(1, 1), 2.0, now=T0 + 1)
        assert ticket not in store.running  # its lease is no longer renewed
        before = time.monotonic()
        assert await store.settle_deferred() == 0  # still away: kept, the next retry backs off 0.1 s
        assert list(store.deferred) == [ticket]
        assert (store._failures, store._retry_at >= before + 0.1) == (1, True)
        assert await store.settle_deferred(force=True) == 0  # a second fault: 0.2 s
        assert store._failures == 2
        store._retry_at = time.monotonic() + 3600  # (a backoff that cannot pass during this test)
        blocker.execute("ROLLBACK")
        assert await store.settle_deferred() == 0  # within the backoff: not even tried
        assert store._failures == 2
        assert await store.settle_deferred(force=True) == 1
        assert not store.deferred
        assert store._failures == 0
        assert await status(store, ticket) == "complete"
        assert (await store.list_keys())[0].spent == 2.0  # charged once
        # bounded: beyond DEFERRED_MAX the oldest is dropped, logged; drain() logs what is left
        monkeypatch.setattr(store_module, "DEFERRED_MAX", 2)
        for number in range(3):
            store.defer(f"gone-{number}", "complete", None, 0.0)
        assert list(store.deferred) == ["gone-1", "gone-2"]
        blocker.execute("BEGIN EXCLUSIVE")
        await store.drain()
        blocker.execute("ROLLBACK")
        blocker.close()
        assert list(store.deferred) == ["gone-1", "gone-2"]
        await store.drain()  # back: settled (rows unknown to the ledger charge nothing)
        assert not store.deferred
        await store.aclose()

    with caplog.at_level(logging.WARNING, "harness_gateway"):
        anyio.run(main)
    assert "dropped ledger row gone-0's" in caplog.text
    assert "ledger row gone-1 could not be settled before shutdown" in caplog.text
    assert "settled 1 deferred ledger row(s)" in caplog.text
