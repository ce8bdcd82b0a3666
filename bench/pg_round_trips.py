"""Round trips per admission and per settlement of one key on PostgreSQL (issue 25).

``python -m bench.pg_round_trips``: a throwaway cluster (the gateway tests' ``Cluster``), a
:class:`~harness_gateway.postgres.PostgresStore` warmed up (statement caches filled), then
``log_statement = all`` and :data:`N` admissions followed by their settlements; every statement
the server logs is one client round trip. Prints the statements per admission and per settlement.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import anyio

_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(_ROOT / "plugins/harness-gateway/tests"))

N = 50
"""Admissions (then settlements) counted."""


def _statements(log: bytes) -> int:
    lines = log.decode(errors="replace").splitlines()
    return sum(1 for line in lines if "LOG:  statement:" in line or "LOG:  execute" in line)


async def _count(dsn: str, log: Path) -> tuple[float, float]:
    import asyncpg  # type: ignore[import-untyped]

    from harness_core.types import TokenUsage
    from harness_gateway.keys import KeySpec
    from harness_gateway.postgres import PostgresStore

    admin = await asyncpg.connect(dsn)
    store = PostgresStore(dsn)
    await store.migrate()
    _, key = await store.create_key(KeySpec(name="hot", budget=1e6, rpm=10**6, tpm=10**9))
    for _ in range(4):  # the first settlement sets the reservation; the rest fill the statement caches
        ticket = await store.admit(key, "mock", "echo")
        await store.settle(ticket, "complete", TokenUsage(3, 4), 0.001)
    await admin.execute("ALTER SYSTEM SET log_statement = 'all'")
    await admin.execute("SELECT pg_reload_conf()")
    await anyio.sleep(0.5)  # the reload reaches every backend
    start = (await anyio.Path(log).stat()).st_size
    tickets = [await store.admit(key, "mock", "echo") for _ in range(N)]
    middle = (await anyio.Path(log).stat()).st_size
    for ticket in tickets:
        await store.settle(ticket, "complete", TokenUsage(3, 4), 0.001)
    await anyio.sleep(0.5)  # the server's log catches up
    text = await anyio.Path(log).read_bytes()
    await store.aclose()
    await admin.close()
    return _statements(text[start:middle]) / N, _statements(text[middle:]) / N


def main() -> None:
    """Start the cluster, count, print, stop."""
    from gw_postgres import Cluster

    root = Path(tempfile.mkdtemp(prefix="harness-bench-pg-"))
    try:
        cluster = Cluster(root)
        cluster.start()
        try:
            admission, settlement = anyio.run(_count, cluster.dsn, root / "log")
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"round trips per admission: {admission:.2f}, per settlement: {settlement:.2f}")


if __name__ == "__main__":
    main()
