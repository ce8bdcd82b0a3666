"""Admission state in Redis (``limits: redis://…``, :mod:`harness_gateway.redis_limits`) on a real
``redis-server``: exact rpm and budget bursts across two stores ("hosts") on one Redis and one SQL
database, leases that return a crashed process's reservations, Redis down → 503, config errors."""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from gw_helpers import burst, gateway_yaml, serve_gateway
from gw_postgres import Cluster
from gw_redis import RedisServer, running_redis

from harness_core.config import ConfigError
from harness_core.loader import load_config
from harness_core.types import TokenUsage
from harness_gateway.database import store_from_spec
from harness_gateway.errors import GatewayError
from harness_gateway.keys import KeyRecord, KeySpec
from harness_gateway.redis_limits import RedisAdmission, RedisLimits, RedisPostgresStore, RedisSQLiteStore

NOW = 1_000_000.25


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with running_redis() as url:
        yield url


def two_hosts(db: Path, url: str, lease: float = 5.0) -> list[RedisSQLiteStore]:
    """Two stores on one SQLite file and one Redis: two gateway processes ("hosts")."""
    stores = []
    for _ in range(2):
        store = store_from_spec(str(db), db, lease=lease, limits=url)
        assert isinstance(store, RedisSQLiteStore)
        stores.append(store)
    return stores


async def key_of(store: RedisAdmission, spec: KeySpec) -> KeyRecord:
    await store.migrate()
    return (await store.create_key(spec, now=NOW - 100))[1]


def test_rpm_burst_across_two_hosts_is_exact(tmp_path: Path, redis_url: str) -> None:
    async def main() -> None:
        stores = two_hosts(tmp_path / "gw.sqlite", redis_url)
        key = await key_of(stores[0], KeySpec(name="rpm", rpm=7))
        results = await burst(stores, key, 30, NOW)
        admitted = [r for r in results if isinstance(r, str)]
        refused = [r for r in results if isinstance(r, GatewayError)]
        assert len(admitted) == 7
        assert {(e.status, e.code) for e in refused} == {(429, "rate_limit_exceeded")}
        assert refused[0].retry_after == pytest.approx(NOW // 1 + 1 + 60 - NOW)  # the oldest leaves the window
        assert len([row for row in await stores[1].ledger(key.id) if row["status"] == "running"]) == 7
        later = await stores[1].admit(key, "mock", "echo", now=NOW + 61)  # the window moved on
        assert isinstance(later, str)
        for store in stores:
            await store.aclose()

    anyio.run(main)


def test_budget_burst_across_two_hosts_is_exact_and_spend_is_in_sql_and_redis(tmp_path: Path, redis_url: str) -> None:
    async def main() -> None:
        stores = two_hosts(tmp_path / "gw.sqlite", redis_url)
        key = await key_of(stores[0], KeySpec(name="budget", budget=1.0))
        # cost unknown yet: one request at a time
        first = await burst(stores, key, 10, NOW)
        assert len([r for r in first if isinstance(r, str)]) == 1
        assert {e.code for e in first if isinstance(e, GatewayError)} == {"budget_exceeded"}
        ticket = next(r for r in first if isinstance(r, str))
        await stores[1].settle(ticket, "complete", TokenUsage(3, 4), 0.25, now=NOW + 1)  # the other host settles
        # 0.25 spent, 0.25 reserved per request: exactly three more fit in the budget of 1.0
        second = await burst(stores, key, 12, NOW + 2)
        tickets = [r for r in second if isinstance(r, str)]
        assert len(tickets) == 3
        for number, ticket in enumerate(tickets):
            await stores[number % 2].settle(ticket, "complete", TokenUsage(1, 1), 0.25, now=NOW + 3)
        spent = await burst(stores, key, 4, NOW + 4)
        assert {(e.status, e.code, e.retryable) for e in spent} == {(429, "insufficient_quota", False)}
        (record,) = [k for k in await stores[0].list_keys() if k.id == key.id]
        assert record.spent == pytest.approx(1.0)  # the SQL spend, kept by every settlement
        assert sum(row["cost"] or 0 for row in await stores[0].ledger(key.id)) == pytest.approx(1.0)
        for store in stores:
            await store.aclose()

    anyio.run(main)


def test_a_crashed_hosts_reservations_come_back_when_its_lease_passes(tmp_path: Path, redis_url: str) -> None:
    async def main() -> None:
        crashed, survivor = two_hosts(tmp_path / "gw.sqlite", redis_url, lease=2.0)
        key = await key_of(crashed, KeySpec(name="lease", budget=1.5))
        ticket = await crashed.admit(key, "mock", "echo", now=NOW)
        await crashed.admit(None, "mock", "echo", now=NOW)  # one without a key dies too: no row, charges nobody
        await crashed.record(ticket, TokenUsage(5, 5), 0.4, now=NOW + 0.5)  # usage so far, then it dies
        with pytest.raises(GatewayError) as held:  # its reservation holds while its lease runs
            await survivor.admit(key, "mock", "echo", now=NOW + 1.0)
        assert held.value.code == "budget_exceeded"
        # until its Redis lease passes (record() moves the ledger row's; Redis's is renewed by maintain)
        assert held.value.retry_after == pytest.approx(1.0)
        assert await survivor.reap(now=NOW + 1.0) == 0
        # the lease passed: the reaper settles the row as lost, charging what was recorded ...
        assert await survivor.reap(now=NOW + 3.0) == 1
        (row,) = await survivor.ledger(key.id)
        assert (row["status"], row["cost"]) == ("lost", 0.4)
        # ... in Redis too: the next admission reserves what the lost request cost
        again = await survivor.admit(key, "mock", "echo", now=NOW + 3.5)
        await survivor.settle(again, "complete", TokenUsage(1, 1), 0.5, now=NOW + 4)
        assert isinstance(await survivor.admit(key, "mock", "echo", now=NOW + 5), str)  # 0.9 spent: reserves 0.5
        with pytest.raises(GatewayError) as spent:
            await survivor.admit(key, "mock", "echo", now=NOW + 5)
        assert spent.value.code == "budget_exceeded"  # 0.9 spent + 0.5 reserved: another 0.5 fits once it ends
        # the crashed process comes back late: only the difference is charged, never twice
        await crashed.settle(ticket, "complete", TokenUsage(5, 5), 0.45, now=NOW + 6)
        (record,) = [k for k in await survivor.list_keys() if k.id == key.id]
        assert record.spent == pytest.approx(0.95)
        for store in (crashed, survivor):
            await store.aclose()

    anyio.run(main)


def test_renewed_leases_keep_reservations_held(tmp_path: Path, redis_url: str) -> None:
    async def main() -> None:
        owner, other = two_hosts(tmp_path / "gw.sqlite", redis_url, lease=2.0)
        key = await key_of(owner, KeySpec(name="renew", budget=1.0))
        await owner.admit(key, "mock", "echo", now=NOW)
        assert await owner.renew(now=NOW + 1.5) == 1  # SQL and Redis: held until NOW + 3.5
        with pytest.raises(GatewayError) as held:
            await other.admit(key, "mock", "echo", now=NOW + 3.0)
        assert held.value.retry_after == pytest.approx(0.5)
        assert await other.reap(now=NOW + 3.0) == 0
        assert await RedisSQLiteStore(tmp_path / "x.sqlite", limits=owner.limits).renew() == 0  # none running
        for store in (owner, other):
            await store.aclose()

    anyio.run(main)


def test_anonymous_rows_are_recorded_without_redis(tmp_path: Path) -> None:
    async def main() -> None:
        store = RedisSQLiteStore(tmp_path / "gw.sqlite", limits=RedisLimits("redis://127.0.0.1:1/0", timeout=1))
        await store.migrate()
        ticket = await store.admit(None, "mock", "echo", now=NOW)
        await store.settle(ticket, "complete", TokenUsage(1, 2), 0.0, now=NOW + 1)
        (row,) = await store.ledger()
        assert (row["key_id"], row["status"], row["output_tokens"]) == (None, "complete", 2)
        await store.settle("no-such-ticket", "complete", None, 0.0, now=NOW + 1)  # nothing to settle: no-op
        await store.aclose()

    anyio.run(main)


def test_redis_down_refuses_with_503_and_charges_wait_for_it(tmp_path: Path) -> None:
    root = Path(tempfile.mkdtemp(prefix="harness-redis-"))
    server = RedisServer(root)

    async def main() -> None:
        server.start()
        store = store_from_spec(str(tmp_path / "gw.sqlite"), tmp_path / "unused", limits=server.url, timeout=1.0)
        assert isinstance(store, RedisSQLiteStore)
        key = await key_of(store, KeySpec(name="down", budget=1.0, rpm=100))
        ticket = await store.admit(key, "mock", "echo", now=NOW)
        server.stop()
        with pytest.raises(GatewayError) as down:  # never an admission without a check
            await store.admit(key, "mock", "echo", now=NOW + 1)
        assert (down.value.status, down.value.code) == (503, "store_unavailable")
        assert "Redis" in down.value.message
        assert server.url not in down.value.message
        assert len(await store.ledger(key.id)) == 1  # no row for the refused request
        with pytest.raises(GatewayError):
            await store.ping()
        with pytest.raises(GatewayError):  # SQL settled; the Redis charge waits
            await store.settle(ticket, "complete", TokenUsage(1, 1), 0.3, now=NOW + 2)
        assert ticket in store.charges
        store.defer(ticket, "complete", TokenUsage(1, 1), 0.3, now=NOW + 2)  # as the app does
        with pytest.raises(GatewayError):
            await store.settle_deferred(force=True)
        server.start()  # back, empty (nothing was saved): the SQL spend seeds it again
        await store.settle(ticket, "complete", TokenUsage(1, 1), 0.3, now=NOW + 2)  # only the Redis part now
        assert not store.charges
        assert await store.settle_deferred(force=True) == 1  # the deferred one again: nothing more charged
        assert not store.charges
        assert not store.deferred
        (record,) = await store.list_keys()
        assert record.spent == pytest.approx(0.3)  # charged once, though settled twice
        again = await burst([store, store], key, 5, NOW + 3)  # 0.3 spent, 0.3 reserved each
        assert len([r for r in again if isinstance(r, str)]) == 2  # two fit in the 0.7 left
        await store.aclose()

    try:
        anyio.run(main)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_a_pending_charge_taken_by_two_tasks_at_once_is_charged_once(tmp_path: Path) -> None:
    """Redis came back while a settlement waited for it: the maintenance loop's retry
    (settle_deferred) and the settlement's own retry take the same pending charge at once. Redis
    is charged once and neither task fails (the loop's KeyError stopped a gateway's lifespan)."""
    root = Path(tempfile.mkdtemp(prefix="harness-redis-"))
    server = RedisServer(root)

    async def main() -> None:
        server.start()
        store = store_from_spec(str(tmp_path / "gw.sqlite"), tmp_path / "unused", limits=server.url, timeout=1.0)
        assert isinstance(store, RedisSQLiteStore)
        key = await key_of(store, KeySpec(name="twice", budget=1.0))
        ticket = await store.admit(key, "mock", "echo", now=NOW)
        server.stop()
        with pytest.raises(GatewayError):  # SQL settled; the Redis charge waits
            await store.settle(ticket, "complete", TokenUsage(1, 1), 0.3, now=NOW + 2)
        assert ticket in store.charges
        server.start()  # back, empty: the SQL spend seeds it again on the next admission
        async with anyio.create_task_group() as group:
            group.start_soon(functools.partial(store.settle_deferred, force=True))
            group.start_soon(store.settle, ticket, "complete", TokenUsage(1, 1), 0.3)
        assert not store.charges
        await store._take(ticket)  # a take that finds the charge taken meanwhile hands nothing over
        (record,) = await store.list_keys()
        assert record.spent == pytest.approx(0.3)
        again = await burst([store, store], key, 5, NOW + 3)  # Redis holds 0.3 spent (0.6 if charged twice: 1)
        assert len([r for r in again if isinstance(r, str)]) == 2  # 0.3 reserved each: two fit in the 0.7 left
        await store.aclose()

    try:
        anyio.run(main)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_an_admission_whose_ledger_insert_fails_releases_its_reservation(tmp_path: Path, redis_url: str) -> None:
    async def main() -> None:
        store, other = two_hosts(tmp_path / "gw.sqlite", redis_url)
        key = await key_of(store, KeySpec(name="insert", rpm=100, budget=1.0))
        await store.transaction(lambda tx: tx.run("DROP TABLE gateway_ledger"))  # every insert now fails
        with pytest.raises(GatewayError) as failed:
            await store.admit(key, "mock", "echo", now=NOW)
        assert failed.value.status == 503
        await store.transaction(
            lambda tx: tx.run(
                "CREATE TABLE gateway_ledger (id TEXT PRIMARY KEY, key_id TEXT, route TEXT, model TEXT,"
                " started_at REAL, ended_at REAL, status TEXT, input_tokens INTEGER, output_tokens INTEGER,"
                " cost REAL, reserved REAL, owner TEXT, lease_until REAL)"
            )
        )
        # the failed admission holds nothing: the cost is still unknown, yet one request is admitted
        assert isinstance(await other.admit(key, "mock", "echo", now=NOW + 1), str)
        for one in (store, other):
            await one.aclose()

    anyio.run(main)


def test_a_revoked_or_deleted_key_is_refused_before_redis(tmp_path: Path) -> None:
    async def main() -> None:
        store = RedisSQLiteStore(tmp_path / "gw.sqlite", limits=RedisLimits("redis://127.0.0.1:1/0", timeout=1))
        key = await key_of(store, KeySpec(name="gone"))
        await store.revoke("gone")
        with pytest.raises(GatewayError) as refused:
            await store.admit(key, "mock", "echo", now=NOW)
        assert (refused.value.status, refused.value.code) == (401, "invalid_api_key")
        assert repr(store.limits) == "RedisLimits(<url hidden>)"
        await store.aclose()

    anyio.run(main)


def test_postgres_keys_with_redis_limits_are_built_from_the_settings(tmp_path: Path) -> None:
    url = "redis://:" + "pw" * 8 + "@127.0.0.1:1/0"
    store = store_from_spec("postgresql://u@127.0.0.1:1/db", tmp_path, limits=url)
    assert isinstance(store, RedisPostgresStore)
    assert "pw" * 8 not in repr(store)
    assert "pw" * 8 not in repr(store.limits)
    assert store.description == "PostgreSQL state store, admission in Redis"


def test_the_limits_setting_is_located_when_wrong(tmp_path: Path) -> None:
    path = tmp_path / "plugins.yaml"
    path.write_text("plugins:\n  gateway:\n    limits: postgresql://u:secretpw@db/x\n  mock: {}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as wrong:
        load_config(path, environ={})
    text = str(wrong.value)
    assert f"{path}:3, plugin 'gateway', field 'limits': expected a Redis or Valkey URL" in text
    assert "got postgresql://" in text
    assert "secretpw" not in text
    path.write_text("plugins:\n  gateway:\n    limits: localhost\n  mock: {}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="got a value without a scheme"):
        load_config(path, environ={})


def test_gateway_answers_503_while_redis_is_down(tmp_path: Path) -> None:
    root = Path(tempfile.mkdtemp(prefix="harness-redis-"))
    server = RedisServer(root)  # its port, not started: nothing listens there
    master = "master-" + "r" * 24
    settings = f"    require_keys: true\n    master_key: {master}\n    limits: {server.url}\n    db_timeout: 1"
    hi = {"model": "mock/echo", "messages": [{"role": "user", "content": "hi"}]}
    try:
        with serve_gateway(tmp_path, gateway_yaml(settings, db=tmp_path / "gw.sqlite")) as running:
            admin = {"authorization": f"Bearer {master}"}
            made = httpx.post(f"{running.url}/admin/keys", json={"name": "k", "rpm": 5}, headers=admin, timeout=30)
            assert made.status_code in (200, 201), made.text
            key = made.json()["key"]
            answer = httpx.post(
                f"{running.url}/v1/chat/completions", json=hi, headers={"authorization": f"Bearer {key}"}, timeout=30
            )
            assert answer.status_code == 503
            assert answer.json()["error"]["code"] == "store_unavailable"
            assert answer.headers["retry-after"] == "1"
            assert httpx.get(f"{running.url}/healthz", timeout=30).status_code == 503
            server.start()  # Redis is back: served, no restart needed
            assert httpx.get(f"{running.url}/healthz", timeout=30).status_code == 200
            answer = httpx.post(
                f"{running.url}/v1/chat/completions", json=hi, headers={"authorization": f"Bearer {key}"}, timeout=30
            )
            assert answer.status_code == 200, answer.text
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_keys_on_postgres_with_admission_in_redis_hold_exactly_across_two_hosts(redis_url: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="harness-pg-"))  # the postgres user cannot enter pytest's tmp_path
    try:
        cluster = Cluster(root)
        cluster.start()
        try:

            async def main() -> None:
                stores = [store_from_spec(cluster.dsn, root, limits=redis_url, lease=2.0) for _ in range(2)]
                assert all(isinstance(store, RedisPostgresStore) for store in stores)
                await stores[0].migrate()
                _, key = await stores[0].create_key(KeySpec(name="pg", rpm=50, budget=1.0), now=NOW - 100)
                (ticket,) = [r for r in await burst(stores, key, 6, NOW) if isinstance(r, str)]  # cost unknown
                await stores[1].settle(ticket, "complete", TokenUsage(1, 1), 0.25, now=NOW + 1)
                tickets = [r for r in await burst(stores, key, 10, NOW + 2) if isinstance(r, str)]
                assert len(tickets) == 3  # exactly what the budget holds
                assert await stores[1].reap(now=NOW + 5) == 3  # their owner "died": lost, nothing recorded
                assert len([r for r in await burst(stores, key, 10, NOW + 6) if isinstance(r, str)]) == 3
                await stores[0].settle(tickets[0], "complete", TokenUsage(2, 2), 0.1, now=NOW + 7)  # late: lost
                await stores[0].settle(tickets[0], "complete", TokenUsage(2, 2), 0.1, now=NOW + 7)  # again: +0
                anonymous = await stores[0].admit(None, "mock", "echo", now=NOW + 7)
                await stores[0].settle(anonymous, "complete", TokenUsage(1, 1), 0.0, now=NOW + 8)  # its row now
                await stores[1].settle("no-such-ticket", "complete", None, 0.0, now=NOW + 8)
                (record,) = await stores[0].list_keys()
                assert record.spent == pytest.approx(0.35)  # charged the difference once
                for store in stores:
                    await store.aclose()

            anyio.run(main)
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_tpm_counts_settled_tokens_across_two_hosts(tmp_path: Path, redis_url: str) -> None:
    async def main() -> None:
        stores = two_hosts(tmp_path / "gw.sqlite", redis_url)
        key = await key_of(stores[0], KeySpec(name="tpm", tpm=10))
        first = await stores[0].admit(key, "mock", "echo", now=NOW)
        await stores[1].settle(first, "complete", TokenUsage(3, 5), 0.0, now=NOW + 1)  # 8 tokens at second +1
        second = await stores[1].admit(key, "mock", "echo", now=NOW + 2)  # 8 < 10
        await stores[0].settle(second, "complete", TokenUsage(1, 1), 0.0, now=NOW + 3)  # 10 in the window
        with pytest.raises(GatewayError) as over:
            await stores[0].admit(key, "mock", "echo", now=NOW + 4)
        assert (over.value.status, over.value.code) == (429, "rate_limit_exceeded")
        assert "10 tokens per minute" in over.value.message
        assert over.value.retry_after == pytest.approx(1_000_001 + 1 + 60 - (NOW + 4))  # the oldest tokens leave
        later = await stores[1].admit(key, "mock", "echo", now=NOW + 62)  # the first 8 left the window: 2 remain
        assert isinstance(later, str)
        for store in stores:
            await store.aclose()

    anyio.run(main)


def test_an_older_gateways_running_row_without_a_key_is_reaped_charging_nobody(tmp_path: Path, redis_url: str) -> None:
    """A gateway before this release wrote a running row for a request without a key too: one of
    its processes dying during a rolling upgrade leaves such a row, which the reaper settles as
    lost without charging anyone (this release writes such a row only when its request ended)."""

    async def main() -> None:
        (store,) = two_hosts(tmp_path / "gw.sqlite", redis_url, lease=2.0)[:1]
        await store.migrate()
        older = (
            "INSERT INTO gateway_ledger (id, key_id, route, model, started_at, status, reserved, owner, lease_until)"
            " VALUES ('old', NULL, 'mock', 'echo', ?, 'running', 0, 'old-host:1:x', ?)"
        )
        await store.transaction(lambda tx: tx.run(older, NOW, NOW + 2.0))
        assert await store.reap(now=NOW + 3.0) == 1
        (row,) = await store.ledger()
        assert (row["id"], row["status"], row["key_id"]) == ("old", "lost", None)
        assert not store.charges
        await store.aclose()

    anyio.run(main)
