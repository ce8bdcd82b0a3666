"""The state store's CPU per request under concurrency: SQLite's group commit against one commit
per write transaction (issue 25, cost per request).

``python -m bench.store [--rounds N]``, and the ``store`` section of ``python -m bench``: in one
process, ``clients`` tasks each admit and settle ``per_client`` requests on a fresh
:class:`~harness_gateway.sqlite.SQLiteStore` (anonymous, then with a virtual key that has an rpm
and a budget), with one event-loop turn between a request's admission and its settlement (as a
gateway's request has many). CPU time of the process's thread (``time.thread_time``) per
request, the median over ``rounds`` timed rounds after one untimed; ``grouped`` and ``alone``
(:attr:`~harness_gateway.sqlite.SQLiteStore.group_commit` off) alternate in fresh stores round
after round, so both see the same minutes of a shared machine. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from harness_core import TokenUsage
from harness_gateway.keys import KeySpec
from harness_gateway.sqlite import SQLiteStore

CLIENTS = 128
"""Concurrent requests, as the gateway bench's short-request phase."""


async def _round(root: Path, *, grouped: bool, keyed: bool, clients: int, per_client: int) -> float:
    """CPU µs per request (admission + settlement) of one round on a fresh store under ``root``."""
    store = SQLiteStore(root / f"store-{grouped}-{keyed}-{time.monotonic_ns()}.sqlite")
    store.group_commit = grouped
    await store.migrate()
    key = None
    if keyed:
        _, key = await store.create_key(KeySpec(name="bench", rpm=10**9, budget=10.0**9))

    async def client() -> None:
        for _ in range(per_client):
            ticket = await store.admit(key, "bench", "m", bound=0.001 if keyed else None)
            await anyio.lowlevel.checkpoint()  # the request runs
            await store.settle(ticket, "complete", TokenUsage(5, 3), 0.0001)

    c0 = time.thread_time()
    async with anyio.create_task_group() as tg:
        for _ in range(clients):
            tg.start_soon(client)
    spent = time.thread_time() - c0
    await store.aclose()
    return spent / (clients * per_client) * 1e6


def measure(rounds: int = 5, *, clients: int = CLIENTS, per_client: int = 8) -> dict[str, Any]:
    """``{"anonymous" | "virtual key": {"grouped", "alone": median CPU µs per request, "rounds": …,
    "x": grouped / alone}}`` (see the module docs)."""

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {"clients": clients, "per_client": per_client}
        with tempfile.TemporaryDirectory(prefix="harness-bench-store-") as name:
            root = Path(name)
            for keyed in (False, True):
                rows: dict[str, list[float]] = {"grouped": [], "alone": []}
                for number in range(rounds + 1):
                    for grouped in (number % 2 == 0, number % 2 == 1):  # the order alternates
                        value = await _round(root, grouped=grouped, keyed=keyed, clients=clients, per_client=per_client)
                        if number:  # round 0 warms up
                            rows["grouped" if grouped else "alone"].append(value)
                cell = {k: statistics.median(v) for k, v in rows.items()}
                out["virtual key" if keyed else "anonymous"] = {
                    **cell,
                    "x": cell["grouped"] / cell["alone"],
                    "rounds": rows,
                }
        return out

    return anyio.run(main)


def main(argv: list[str] | None = None) -> None:
    """Command-line entry: prints :func:`measure`'s figures as JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.store", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=CLIENTS)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.rounds, clients=args.clients), indent=1))


if __name__ == "__main__":
    main()
