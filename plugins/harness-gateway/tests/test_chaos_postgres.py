"""Chaos on PostgreSQL (docs/chaos.md): the database restarted under load; a burst from one key
across two gateway processes ("hosts") sharing one database, counted against its rpm and budget."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from chaos_helpers import pg_ctl, record_figures, throwaway_cluster
from gw_helpers import Process, serve_gateway, wait_until
from gw_postgres import Cluster

from harness_gateway.keys import KeyRecord, KeySpec
from harness_gateway.postgres import PostgresStore

pytestmark = pytest.mark.chaos

HI = {"model": "mock/echo", "messages": [{"role": "user", "content": "hi"}]}
COST = 2.0  # USD per request: one input and one output token at 1,000,000 USD per million


def config_text(dsn: str, db_timeout: float = 2) -> str:
    """The gateway on ``dsn``; a short ``db_timeout`` makes an outage a quick 503 (the burst test
    uses a long one: a loaded machine may be slow, and that test counts limits, not outages)."""
    return f"""\
plugins:
  gateway:
    require_keys: true
    database: {dsn}
    db_timeout: {db_timeout}
    prices: {{mock/echo: {{input: 1000000, output: 1000000}}}}
  mock: {{}}
"""


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with throwaway_cluster() as pg:
        yield pg


def in_store(dsn: str, work: Any) -> Any:
    """``await work(store)`` on a fresh :class:`PostgresStore` of ``dsn`` (migrated, closed after)."""

    async def main() -> Any:
        store = PostgresStore(dsn)
        try:
            await store.migrate()
            return await work(store)
        finally:
            await store.aclose()

    return anyio.run(main)


def create(dsn: str, spec: KeySpec) -> str:
    async def work(store: PostgresStore) -> str:
        return (await store.create_key(spec))[0]

    return str(in_store(dsn, work))


def key_and_ledger(dsn: str, name: str) -> tuple[KeyRecord, list[dict[str, Any]]]:
    async def work(store: PostgresStore) -> tuple[KeyRecord, list[dict[str, Any]]]:
        key = next(k for k in await store.list_keys() if k.name == name)
        return key, await store.ledger(key.id)

    found: tuple[KeyRecord, list[dict[str, Any]]] = in_store(dsn, work)
    return found


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


class Load:
    """``threads`` clients posting one request after another until :meth:`stop`: every answer is
    kept as ``(monotonic time it was sent, time it came, status or the exception's name)``."""

    def __init__(self, url: str, key: str, threads: int) -> None:
        self.url, self.key = url, key
        self.answers: list[tuple[float, float, int | str]] = []
        self.odd: list[str] = []  # the bodies of answers other than 200 and 503
        self.done = threading.Event()
        self.pool = concurrent.futures.ThreadPoolExecutor(threads)
        self.workers = [self.pool.submit(self._run) for _ in range(threads)]

    def _run(self) -> None:
        # 30 s for one answer: longer is a hang (the store answers 503 after db_timeout, 2 s)
        with httpx.Client(timeout=30) as client:
            while not self.done.is_set():
                sent = time.monotonic()
                try:
                    response = client.post(self.url + "/v1/chat/completions", json=HI, headers=bearer(self.key))
                    status: int | str = response.status_code
                    if status not in (200, 503):
                        self.odd.append(f"{status}: {response.text[:300]}")
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                self.answers.append((sent, time.monotonic(), status))

    def since(self, moment: float, status: int | str | None = None) -> list[tuple[float, float, int | str]]:
        """The answers that came after ``moment`` (of ``status``, when given)."""
        return [a for a in list(self.answers) if a[1] > moment and (status is None or a[2] == status)]

    def stop(self) -> None:
        self.done.set()
        for worker in self.workers:
            worker.result(60)
        self.pool.shutdown()


def test_postgres_restart_under_load_is_503_then_recovers(cluster: Cluster, tmp_path: Path) -> None:
    threads = 8
    key = create(cluster.dsn, KeySpec(name="load", budget=1_000_000.0))
    with serve_gateway(tmp_path, config_text(cluster.dsn)) as running:
        # the first settled request sets the key's reservation per request (until then one runs at a time)
        assert httpx.post(running.url + "/v1/chat/completions", json=HI, headers=bearer(key), timeout=30).is_success
        load = Load(running.url, key, threads)
        try:
            began = time.monotonic()
            wait_until(lambda: len(load.since(began, 200)) >= 40, 60)
            stopping = time.monotonic()
            pg_ctl(cluster, "stop", "-m", "fast")
            stopped = time.monotonic()
            wait_until(lambda: len(load.since(stopped, 503)) >= 2 * threads, 60)
            assert httpx.get(running.url + "/healthz", timeout=30).status_code == 503
            restarting = time.monotonic()  # requests sent while pg_ctl start runs may reach the new server
            cluster.start()
            started = time.monotonic()
            wait_until(lambda: len(load.since(started, 200)) >= 40, 60)
        finally:
            load.stop()
        first_ok = min(came for _, came, _ in load.since(started, 200))
        assert httpx.get(running.url + "/healthz", timeout=30).status_code == 200
        successes = Counter(status for _, _, status in load.answers)[200] + 1  # and the first request

        def settled() -> bool:  # deferred settlements retried, stranded admissions reaped (one lease)
            rows = key_and_ledger(cluster.dsn, "load")[1]
            return sum(row["status"] == "complete" for row in rows) == successes and all(
                row["status"] != "running" for row in rows
            )

        wait_until(settled, 120)
    answers = Counter(status for _, _, status in load.answers)
    assert set(answers) <= {200, 503}, (answers, load.odd)  # never a hang, a reset or a 500
    during = Counter(status for sent, came, status in load.answers if sent > stopped and came < restarting)
    assert set(during) <= {503}, during  # nothing sent while the database was down reached the mock
    record, rows = key_and_ledger(cluster.dsn, "load")
    by_status = Counter(row["status"] for row in rows)
    # every 200 has its one ledger row, settled and charged once: a settlement the outage refused
    # was retried once the database was back; a 503 has no row, unless the database went down as
    # it committed the admission (the row is there, its reply was lost): the gateway never renews
    # it, so the reaper settles it as lost after one lease, charging nothing (docs/chaos.md)
    assert set(by_status) <= {"complete", "lost"}, by_status
    assert by_status["complete"] == successes
    assert successes <= len(rows) <= successes + threads
    assert record.spent == pytest.approx(COST * successes)
    record_figures(
        "postgres_restart",
        {
            "clients": threads,
            "requests": sum(answers.values()),
            "answers": {str(k): v for k, v in sorted(answers.items(), key=str)},
            "answers_while_down": {str(k): v for k, v in during.items()},
            "answered_during_pg_ctl_stop": len(load.since(stopping)) - len(load.since(stopped)),
            "pg_ctl_stop_s": round(stopped - stopping, 2),
            "first_503_after_stop_s": round(min(came for _, came, _ in load.since(stopped, 503)) - stopped, 3),
            "outage_s": round(started - stopped, 2),
            "recover_s": round(first_ok - started, 3),
            "ledger": dict(by_status),
            "spent_usd": record.spent,
            "successes": successes,
            "rows_lost": by_status["lost"],
            "rows_of_a_503": len(rows) - successes,
        },
    )


@pytest.fixture
def two_hosts(cluster: Cluster, tmp_path: Path) -> Iterator[list[str]]:
    """Two `harness serve` processes on different ports sharing one PostgreSQL (two "hosts")."""
    config = tmp_path / "plugins.yaml"
    config.write_text(config_text(cluster.dsn, db_timeout=60), encoding="utf-8")
    hosts: list[Process] = []
    try:
        for _ in range(2):
            hosts.append(Process(config))
        yield [host.url for host in hosts]
    finally:
        for host in hosts:
            host.stop()


def burst(urls: list[str], key: str, requests: int, threads: int, *, until_exhausted: bool = False) -> Counter[int]:
    """``requests`` POSTs from ``threads`` threads, alternating between ``urls``: the statuses.

    With ``until_exhausted`` every thread instead posts until the budget is spent (a 429 without
    ``retry-after``), retrying each "near its budget" 429 (which has one) after at most 50 ms.
    """

    def one(number: int) -> list[int]:
        statuses = []
        with httpx.Client(timeout=30) as client:
            while True:
                response = client.post(urls[number % 2] + "/v1/chat/completions", json=HI, headers=bearer(key))
                statuses.append(response.status_code)
                if not until_exhausted:
                    return statuses
                if response.status_code == 429 and "retry-after" not in response.headers:
                    return statuses
                assert response.status_code in (200, 429), response.text
                if response.status_code == 429:
                    time.sleep(min(float(response.headers["retry-after"]), 0.05))  # back-off, not a wait for an event

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return Counter(status for statuses in pool.map(one, range(requests)) for status in statuses)


def test_rpm_and_budget_are_exact_under_a_burst_across_two_hosts(cluster: Cluster, two_hosts: list[str]) -> None:
    rpm, requests, threads = 20, 80, 32
    key = create(cluster.dsn, KeySpec(name="rpm", rpm=rpm))
    began = time.monotonic()
    rpm_statuses = burst(two_hosts, key, requests, threads)
    rpm_s = time.monotonic() - began
    assert rpm_statuses == {200: rpm, 429: requests - rpm}  # exactly rpm, from both hosts together
    _, rpm_rows = key_and_ledger(cluster.dsn, "rpm")
    assert len(rpm_rows) == rpm

    budget = 20.0  # ten requests' worth
    key = create(cluster.dsn, KeySpec(name="budget", budget=budget))
    assert post_status(two_hosts[0], key) == 200  # the first settled request sets the reservation per request
    began = time.monotonic()
    budget_statuses = burst(two_hosts, key, threads, threads, until_exhausted=True)
    budget_s = time.monotonic() - began
    through = budget_statuses[200] + 1
    record, rows = key_and_ledger(cluster.dsn, "budget")
    # the documented guarantee: a request is admitted only when what it may cost fits in the room
    # left, so with every request costing what the key's costliest did, spend lands on the budget
    assert through == budget / COST
    assert record.spent == pytest.approx(COST * through)
    assert Counter(row["status"] for row in rows) == {"complete": through}
    record_figures(
        "two_hosts",
        {
            "hosts": 2,
            "rpm_limit": rpm,
            "rpm_requests": requests,
            "rpm_threads": threads,
            "rpm_through": rpm_statuses[200],
            "rpm_refused_429": rpm_statuses[429],
            "rpm_burst_s": round(rpm_s, 2),
            "budget_usd": budget,
            "cost_per_request_usd": COST,
            "budget_threads": threads,
            "budget_attempts": sum(budget_statuses.values()) + 1,
            "budget_through": through,
            "budget_limit_requests": int(budget / COST),
            "budget_spent_usd": record.spent,
            "budget_burst_s": round(budget_s, 2),
        },
    )


def post_status(url: str, key: str) -> int:
    return httpx.post(url + "/v1/chat/completions", json=HI, headers=bearer(key), timeout=30).status_code
