"""PostgreSQL state: two gateway processes share keys, budgets and rate limits; the database goes and comes back."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type information
import httpx
import pytest
from gw_helpers import GatedUpstream, killed_mid_stream, serve_gateway
from gw_postgres import Cluster

from harness_gateway.errors import GatewayError
from harness_gateway.keys import LATEST_EXPIRY, MAX_RATE, KeyChange, KeyRecord, KeySpec
from harness_gateway.postgres import PostgresStore

MASTER = "master-" + "p" * 24
HI = {"model": "mock/echo", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    # a directory of its own under /tmp: the postgres user cannot enter pytest's root-only tmp_path
    root = Path(tempfile.mkdtemp(prefix="harness-pg-"))
    try:
        pg = Cluster(root)
        pg.start()
        try:
            yield pg
        finally:
            pg.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def config_text(dsn: str) -> str:
    return f"""\
plugins:
  gateway:
    require_keys: true
    database: {dsn}
    prices: {{mock/echo: {{input: 1000000, output: 1000000}}}}
  mock: {{}}
"""


@contextlib.contextmanager
def gateways(config: Path, count: int) -> Iterator[list[str]]:
    """``count`` `harness serve` processes on different ports serving ``config``."""
    processes: list[subprocess.Popen[str]] = []
    urls: list[str] = []
    try:
        for _ in range(count):
            process = subprocess.Popen(
                [sys.executable, "-m", "harness_core.cli", "serve", "-c", str(config), "--port", "0"],
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            processes.append(process)
            assert process.stderr is not None
            for line in process.stderr:  # wait for the event "listening", not for a time
                found = re.search(r"running on (http://\S+)", line)
                if found:
                    urls.append(found.group(1))
                    break
            else:
                pytest.fail(f"gateway exited with {process.wait()}")
        yield urls
    finally:
        for process in processes:
            process.terminate()
            process.wait(30)
            assert process.stderr is not None
            process.stderr.close()


@pytest.fixture
def two_gateways(cluster: Cluster, tmp_path: Path) -> Iterator[list[str]]:
    """Two `harness serve` processes on different ports, one PostgreSQL."""
    config = tmp_path / "plugins.yaml"
    config.write_text(config_text(cluster.dsn), encoding="utf-8")
    with gateways(config, 2) as urls:
        yield urls


def create(dsn: str, spec: KeySpec) -> str:
    async def work() -> str:
        store = PostgresStore(dsn)
        try:
            await store.migrate()
            return (await store.create_key(spec))[0]
        finally:
            await store.aclose()

    return anyio.run(work)


def post(url: str, key: str) -> int:
    with httpx.Client(timeout=30) as client:
        return client.post(
            url + "/v1/chat/completions", json=HI, headers={"authorization": f"Bearer {key}"}
        ).status_code


def test_budget_for_n_requests_gives_n_across_two_processes(cluster: Cluster, two_gateways: list[str]) -> None:
    key = create(cluster.dsn, KeySpec(name="budget", budget=10.0))  # 5 requests of 2 USD
    statuses = [post(two_gateways[i % 2], key) for i in range(12)]
    assert statuses.count(200) == 5
    assert statuses[:5] == [200] * 5
    assert set(statuses[5:]) == {429}


def test_a_raised_budget_admits_again_at_once_in_every_process(cluster: Cluster, two_gateways: list[str]) -> None:
    key = create(cluster.dsn, KeySpec(name="raised", budget=2.0))  # one request of 2 USD
    assert [post(url, key) for url in two_gateways] == [200, 429]

    async def raise_budget() -> KeyRecord | None:
        store = PostgresStore(cluster.dsn)
        try:
            return await store.update_key("raised", KeyChange(budget=6.0, name="grown"))
        finally:
            await store.aclose()

    changed = anyio.run(raise_budget)
    assert changed is not None
    assert (changed.name, changed.budget, changed.spent) == ("grown", 6.0, 2.0)
    assert [post(two_gateways[i % 2], key) for i in range(3)] == [200, 200, 429]
    assert spent_of(cluster.dsn, "grown") == 6.0


def test_concurrent_burst_never_overruns_the_budget(cluster: Cluster, two_gateways: list[str]) -> None:
    key = create(cluster.dsn, KeySpec(name="burst", budget=10.0))
    post(two_gateways[0], key)  # the first settled request sets the reservation per request
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(lambda i: post(two_gateways[i % 2], key), range(32)))
    assert 1 <= statuses.count(200) <= 4
    assert set(statuses) <= {200, 429}
    spent = spent_of(cluster.dsn, "burst")
    assert spent == pytest.approx(2.0 * (1 + statuses.count(200)))
    assert spent <= 10.0


def spent_of(dsn: str, name: str) -> float:
    async def work() -> float:
        store = PostgresStore(dsn)
        try:
            return next(k.spent for k in await store.list_keys() if k.name == name)
        finally:
            await store.aclose()

    return anyio.run(work)


def test_a_key_at_every_bound_fits_postgresql(cluster: Cluster) -> None:
    """KeySpec's bounds are what PostgreSQL holds: rpm / tpm in its 32-bit ``INTEGER`` columns (one
    more is refused by the driver: a misleading 503 "store unavailable" had KeySpec let it through), the
    latest expiry."""

    async def main() -> None:
        store = PostgresStore(cluster.dsn)
        try:
            await store.migrate()
            edge = KeySpec(name="edge", rpm=MAX_RATE, tpm=MAX_RATE, budget=1e308, expires_at=LATEST_EXPIRY)
            _, key = await store.create_key(edge)
            [listed] = await store.list_keys()
            assert (listed.rpm, listed.tpm, listed.budget, listed.expires_at) == (
                MAX_RATE,
                MAX_RATE,
                1e308,
                LATEST_EXPIRY,
            )
            ticket = await store.admit(listed, "mock", "echo")  # gateway_admit's INTEGER variables hold them too
            await store.settle(ticket, "complete", None, 0.0)
            update = "UPDATE gateway_keys SET rpm = ? WHERE id = ?"
            with pytest.raises(GatewayError) as over:
                await store.transaction(lambda tx: tx.run(update, MAX_RATE + 1, key.id))
            assert over.value.status == 503
            assert "value out of int32 range" in str(over.value.__cause__)
        finally:
            await store.aclose()

    anyio.run(main)


def test_rpm_holds_across_two_processes(cluster: Cluster, two_gateways: list[str]) -> None:
    key = create(cluster.dsn, KeySpec(name="rpm", rpm=10))
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(lambda i: post(two_gateways[i % 2], key), range(30)))
    assert statuses.count(200) == 10
    assert statuses.count(429) == 20


def test_database_down_is_503_and_the_gateway_recovers(cluster: Cluster, tmp_path: Path) -> None:
    key = create(cluster.dsn, KeySpec(name="k"))
    with serve_gateway(tmp_path, config_text(cluster.dsn)) as running:
        assert post(running.url, key) == 200
        cluster.stop()
        with httpx.Client(timeout=30) as client:
            down = client.post(
                running.url + "/v1/chat/completions", json=HI, headers={"authorization": f"Bearer {key}"}
            )
            assert down.status_code == 503
            assert down.headers["retry-after"] == "1"
            assert "unavailable" in down.json()["error"]["message"]
            assert client.get(running.url + "/healthz").status_code == 503
        cluster.start()
        assert post(running.url, key) == 200
        with httpx.Client(timeout=30) as client:
            assert client.get(running.url + "/healthz").status_code == 200


def test_store_hides_its_dsn_and_keeps_the_pool_on_sql_errors(cluster: Cluster) -> None:
    async def main() -> None:
        store = PostgresStore(cluster.dsn)
        assert repr(store) == "PostgresStore(<dsn hidden>)"
        await store.aclose()  # never opened: nothing to close
        assert await store.migrate() == 5
        with pytest.raises(GatewayError) as caught:
            await store.transaction(lambda tx: tx.one("SELECT * FROM no_such_table"))
        assert caught.value.status == 503
        pool = store._pool
        await store.ping()
        assert store._pool is pool  # a statement error is no connection fault: the pool stays
        await store._reset_pool(object())  # a connection of an older pool failed late: this pool stays
        assert store._pool is pool
        await store._reset_pool()
        await store._reset_pool()  # nothing left to reset
        await store.aclose()

    anyio.run(main)


def test_a_killed_gateway_process_strands_no_budget_on_postgres(cluster: Cluster, tmp_path: Path) -> None:
    """SIGKILL mid-stream; a gateway process started afterwards settles the row (and charges it)."""
    settled = killed_mid_stream(tmp_path, cluster.dsn, lambda: PostgresStore(cluster.dsn), restart=True)
    print(f"PostgreSQL: settled {settled:.2f} s after SIGKILL (lease 2 s, a restarted process)")


def test_reapers_admissions_and_settlements_run_together_without_deadlock(cluster: Cluster) -> None:
    """Two stores (two pools: real concurrency) on one key: dead rows reaped by admissions and by a
    reaper at once, while requests settle. Locks are taken key first, so no transaction fails and
    every dead row is charged once."""

    async def main() -> None:
        first, second = PostgresStore(cluster.dsn), PostgresStore(cluster.dsn)
        await first.migrate()
        _, key = await first.create_key(KeySpec(name="busy", budget=100.0))
        gone = time.time() - 60

        async def strand(tx: Any) -> None:
            # reserve 1 USD each; the counters as 20 admissions left them
            await tx.run("UPDATE gateway_keys SET max_cost = 1, running = 20, reserved = 20 WHERE id = ?", key.id)
            for number in range(20):
                await tx.run(
                    "INSERT INTO gateway_ledger (id, key_id, route, model, started_at, status, reserved, owner,"
                    " lease_until, cost) VALUES (?, ?, 'mock', 'echo', ?, 'running', 1, 'dead:1:x', ?, 0.25)",
                    f"dead-{number}",
                    key.id,
                    gone,
                    gone + 2,
                )

        await first.transaction(strand)
        reaped: list[int] = []

        async def request(store: PostgresStore) -> None:
            ticket = await store.admit(key, "mock", "echo")
            await store.settle(ticket, "complete", None, 1.0)

        async def reaper() -> None:
            for _ in range(5):
                reaped.append(await second.reap())

        async with anyio.create_task_group() as group:
            group.start_soon(reaper)
            for number in range(20):
                group.start_soon(request, first if number % 2 else second)
        rows = await first.ledger(key.id)
        assert sum(row["status"] == "lost" for row in rows) == 20
        assert sum(row["status"] == "complete" for row in rows) == 20
        assert abs((await first.list_keys())[0].spent - (20 * 0.25 + 20 * 1.0)) < 1e-9  # each dead row once
        await first.aclose()
        await second.aclose()


def test_a_connection_broken_under_a_statement_is_503_and_resets_the_pool() -> None:
    """asyncpg raises ``InternalClientError`` (no ``InterfaceError``) for a statement on a connection
    whose pool another request's fault terminated meanwhile (docs/chaos.md): a 503, not a 500."""
    import asyncpg  # type: ignore[import-untyped]

    class BrokenPool:
        terminated = False

        def acquire(self) -> BrokenPool:
            return self

        async def __aenter__(self) -> None:
            raise asyncpg.InternalClientError("cannot switch to state 15; another operation (2) is in progress")

        async def __aexit__(self, *exc: object) -> None:
            raise AssertionError("never entered")

        def terminate(self) -> None:
            self.terminated = True

    async def main() -> None:
        store = PostgresStore("postgresql://nobody@127.0.0.1:9/none")
        broken = store._pool = BrokenPool()
        with pytest.raises(GatewayError) as caught:
            await store.ping()
        assert caught.value.status == 503
        assert broken.terminated
        assert store._pool is None

    anyio.run(main)


def test_pool_member_rpm_holds_exactly_across_two_processes(cluster: Cluster, tmp_path: Path) -> None:
    config = tmp_path / "plugins.yaml"
    config.write_text(
        f"""\
plugins:
  gateway:
    database: {cluster.dsn}
  balance:
    wait: 0
    pools:
      pool:
        - {{target: east/echo, rpm: 7}}
        - {{target: west/echo, rpm: 5}}
  mock:east: {{routes: [east]}}
  mock:west: {{routes: [west]}}
""",
        encoding="utf-8",
    )
    body = {"model": "pool/echo", "messages": [{"role": "user", "content": "hi"}]}

    def one(url: str) -> int:
        with httpx.Client(timeout=30) as client:
            return client.post(url + "/v1/chat/completions", json=body).status_code

    with gateways(config, 2) as urls, concurrent.futures.ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(lambda i: one(urls[i % 2]), range(40)))
    assert statuses.count(200) == 12  # 7 + 5 per minute, not twice that with two processes
    assert statuses.count(429) == 28

    async def served() -> dict[str, int]:
        store = PostgresStore(cluster.dsn)
        try:
            rows = await store.transaction(
                lambda tx: tx.all("SELECT member, count(*) FROM balance_streams GROUP BY member"), write=False
            )
            return {member: int(count) for member, count in rows}
        finally:
            await store.aclose()

    assert anyio.run(served) == {"east/echo": 7, "west/echo": 5}


def test_previous_response_id_works_across_two_processes(cluster: Cluster, two_gateways: list[str]) -> None:
    import openai

    key = create(cluster.dsn, KeySpec(name="conversation"))
    other = create(cluster.dsn, KeySpec(name="other"))
    clients = [openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0) for url in two_gateways]
    stranger = openai.OpenAI(base_url=two_gateways[1] + "/v1", api_key=other, max_retries=0)
    try:
        first = clients[0].responses.create(model="mock/echo", input="one two three")
        second = clients[1].responses.create(model="mock/echo", input="four", previous_response_id=first.id)
        assert second.output_text == "four"
        assert second.usage is not None
        assert second.usage.input_tokens == 3 + 3 + 1  # the other process's turn came back from PostgreSQL
        with clients[0].responses.stream(model="mock/echo", input="five", previous_response_id=second.id) as stream:
            third = stream.get_final_response()
        assert third.usage is not None
        assert third.usage.input_tokens == 7 + 1 + 1
        assert clients[1].responses.retrieve(third.id).output_text == "five"
        with pytest.raises(openai.NotFoundError):
            stranger.responses.retrieve(first.id)
        clients[1].responses.delete(first.id)
        with pytest.raises(openai.NotFoundError) as broken:
            clients[0].responses.create(model="mock/echo", input="six", previous_response_id=third.id)
        assert broken.value.param == "previous_response_id"
    finally:
        for client in [*clients, stranger]:
            client.close()


def test_a_streams_end_is_sent_once_its_ledger_row_is_settled(cluster: Cluster, tmp_path: Path) -> None:
    """A stream's last events (its finish, ``[DONE]``, the end of the body) go out once its ledger
    row is settled: while another session holds that row locked (the settlement waits on it, as
    on a slow database), the client has the content but not the end; the lock released, the end
    comes and the row is settled. A client that sends its next request as soon as it sees the end
    is then never refused as waiting for this one (a budgeted key whose cost is unknown runs one
    request at a time; the end used to go out before the settlement, which raced it)."""
    key = create(cluster.dsn, KeySpec(name="settled", budget=5.0))
    with GatedUpstream(["first ", "second "]) as upstream:
        yaml = (
            f"plugins:\n  gateway:\n    require_keys: true\n    database: {cluster.dsn}\n"
            f"  openai:slow: {{base_url: '{upstream.url}/v1', api_key: provider-test-credential, routes: [slow]}}\n"
        )
        with serve_gateway(tmp_path, yaml) as running:

            async def main() -> None:
                lock = await asyncpg.connect(cluster.dsn)
                request = {"model": "slow/m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
                headers = {"authorization": f"Bearer {key}"}
                try:
                    async with httpx.AsyncClient(timeout=30) as client:
                        url = running.url + "/v1/chat/completions"
                        async with client.stream("POST", url, json=request, headers=headers) as reply:
                            assert reply.status_code == 200
                            raw = reply.aiter_raw()
                            received = b""
                            while b"first " not in received:
                                received += await anext(raw)
                            locked = lock.transaction()
                            await locked.start()
                            await lock.execute("SELECT 1 FROM gateway_ledger WHERE status = 'running' FOR UPDATE")
                            for index in range(1, len(upstream.gates)):
                                upstream.release(index)  # the rest, the finish among it
                            waiting = "SELECT count(*) FROM pg_locks WHERE NOT granted"
                            for _ in range(3000):  # until the settlement waits on the row (30 s guard)
                                if await lock.fetchval(waiting):
                                    break
                                await anyio.sleep(0.01)
                            else:
                                pytest.fail("the settlement never waited on the locked row")
                            while b"second " not in received:
                                received += await anext(raw)
                            assert b"[DONE]" not in received  # the end waits for the settlement
                            await locked.rollback()
                            async for piece in raw:
                                received += piece
                            assert received.endswith(b"data: [DONE]\n\n")
                    status = (
                        "SELECT status FROM gateway_ledger WHERE key_id = (SELECT id FROM gateway_keys WHERE name = $1)"
                    )
                    assert await lock.fetchval(status, "settled") == "complete"
                finally:
                    await lock.close()

            anyio.run(main)
