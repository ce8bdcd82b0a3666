"""The gateway's per-chunk relay path in one process: the gateway ASGI app called directly (no
HTTP server in front of it), streaming ``text-200`` from :mod:`bench.server` (its own process) to
16 concurrent in-memory clients, harness-llm-openai on aiohttp, no middleware, the master key.
``text-3`` instead (a second argument) measures a short request's path: the per-request work
(parse, auth, admission, chain setup, the upstream request, the ledger, the console record) is
then most of it. The heap is settled after the warm-up round, as ``harness serve`` settles it after
its first request (:func:`harness_gateway.server.settle_heap`: frozen, the youngest generation
collected every 7,000 allocations), so the collector costs what it costs in a serving process.
The gateway's background tasks that requests feed run as its lifespan runs
them (the console records' writer, where the measured commit has one: ``Gateway.writers``);
``RECORDS`` (a third argument) fills the console's table with that many old records first, as a
gateway that has served a while holds its ``keep`` (10,000): what pruning them costs depends on it.

Two uses (issue 25, items 2 and 3):

- ``python -m bench.relay_path ROUNDS [SCENARIO [RECORDS]]``: process CPU µs per relayed chunk and per
  request, min and median over ``ROUNDS`` rounds of 16 streams (after one warm-up round);
- under ``valgrind --tool=cachegrind --cache-sim=no``, once with 1 round and once with 5: the
  difference of the two instruction counts divided by the chunks of the 4 extra rounds (12,800
  for ``text-200``) is the instructions per relayed chunk (divided by their 64 requests: per
  request), a figure other processes on the machine cannot move (the start-up, the same in both
  runs, cancels out). ``PYTHONHASHSEED=0`` keeps it repeatable; put a
  ``git archive`` of another commit's ``harness_core`` and ``plugins/*/src`` on ``PYTHONPATH`` to
  count that commit.

Every stream must relay all its content (checked); the upstream's CPU is not counted.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from bench.__main__ import loopback_server
from bench.streams import expected

__all__ = ["main"]

STREAMS = 16


def _fill(database: Path, records: int) -> None:
    """``records`` console records started long ago in the SQLite store at ``database`` (its
    tables exist: the warm-up round created them), each with a small detail."""
    if not records:
        return
    with sqlite3.connect(database) as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(console_requests)")]
        values = {"dialect": "openai", "route": "bench", "model": "text-3", "status": "complete", "latency_ms": 1.0,
                  "cost": 0.0, "attempts": "[]", "detail": '{"timeline": []}'}  # fmt: skip
        rows = [
            [f"old-{i}" if name in ("id", "request_id") else 1e6 + i if name == "started_at" else values.get(name)
             for name in columns]
            for i in range(records)
        ]  # fmt: skip
        db.executemany(f"INSERT INTO console_requests VALUES ({', '.join('?' for _ in columns)})", rows)


async def _measure(upstream: str, tmp: Path, rounds: int, scenario: str = "text-200", records: int = 0) -> list[float]:
    """CPU µs per relayed chunk of each round (of :data:`STREAMS` streams of ``scenario``)."""
    from harness_gateway.server import GatewayServer, settle_heap

    master = "sk-" + "m" * 56  # key-shaped: the secret redactor masks them like real ones
    os.environ["BENCH_RELAY_MASTER"], os.environ["BENCH_RELAY_UPSTREAM"] = master, "sk-" + "u" * 56
    config = tmp / "plugins.yaml"
    config.write_text(
        "plugins:\n"
        f"  gateway: {{database: '{tmp}/gw.sqlite', master_key: \"${{{{ env.BENCH_RELAY_MASTER }}}}\"}}\n"
        f"  openai: {{base_url: '{upstream}/v1', api_key: \"${{{{ env.BENCH_RELAY_UPSTREAM }}}}\", routes: [bench]}}\n"
    )
    server = GatewayServer(str(config), "127.0.0.1")
    await server.start()
    body = json.dumps({"model": f"bench/{scenario}", "stream": True, "messages": [{"role": "user", "content": "Hi."}]})
    headers = [
        (b"content-type", b"application/json"),
        (b"authorization", f"Bearer {master}".encode()),
        (b"content-length", str(len(body)).encode()),
    ]

    async def one() -> list[bytes]:
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
            "scheme": "http", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
            "query_string": b"", "root_path": "", "headers": headers, "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 2),
        }  # fmt: skip
        sent = False
        done = asyncio.Event()
        bodies: list[bytes] = []  # checked after the round, outside the measured time

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body.encode(), "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                bodies.append(message.get("body", b""))
                if not message.get("more_body"):
                    done.set()

        await server.app(scope, receive, send)
        done.set()
        return bodies

    def relayed(bodies: list[bytes]) -> int:
        """Characters of content in one stream's SSE body (OpenAI Chat chunks)."""
        events = b"".join(bodies).split(b"\n\n")
        chunks = [json.loads(event[6:]) for event in events if event.startswith(b"data: {")]
        return sum(len(choice["delta"].get("content") or "") for chunk in chunks for choice in chunk["choices"])

    chunks, characters = expected(scenario)
    per_chunk: list[float] = []
    try:
        async with anyio.create_task_group() as group:
            for writer in getattr(server.gateway, "writers", []):  # as the lifespan runs them
                await group.start(writer.run)
            await asyncio.gather(*(one() for _ in range(STREAMS)))  # warm-up: connections, first-request paths
            settle_heap()  # the heap policy of `harness serve` (settled after its first request)
            if records:
                for writer in getattr(server.gateway, "writers", []):
                    await writer.written()  # the warm-up's records: the table exists
                _fill(tmp / "gw.sqlite", records)
            for _ in range(rounds):
                start = time.process_time()
                streams = await asyncio.gather(*(one() for _ in range(STREAMS)))
                per_chunk.append((time.process_time() - start) / (chunks * STREAMS) * 1e6)
                counts = [relayed(bodies) for bodies in streams]
                if any(count != characters for count in counts):
                    raise RuntimeError(
                        f"a stream relayed other than the {characters} characters of {scenario}: {counts}"
                    )
            group.cancel_scope.cancel()
    finally:
        await server.stop()
    return per_chunk


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.relay_path [ROUNDS] [SCENARIO] [RECORDS]``: prints one JSON line (µs per
    chunk and per request: min, median; the rounds). ``SCENARIO`` is ``text-N`` (default
    ``text-200``); ``RECORDS`` old console records are stored before the first round (default 0)."""
    args = argv if argv is not None else sys.argv[1:]
    rounds = int(args[0]) if args else 15
    scenario = args[1] if len(args) > 1 else "text-200"
    records = int(args[2]) if len(args) > 2 else 0
    if not re.fullmatch(r"text-[1-9][0-9]*", scenario):
        raise SystemExit(f"bench.relay_path: scenario {scenario!r} is not text-N (e.g. text-3, text-200)")
    with loopback_server(sys.executable) as upstream, tempfile.TemporaryDirectory() as name:
        per_chunk = asyncio.run(_measure(upstream, Path(name), rounds, scenario, records))
    chunks = expected(scenario)[0]
    result = {
        "scenario": scenario,
        "records": records,
        "cpu_us_per_chunk_min": min(per_chunk),
        "cpu_us_per_chunk_median": statistics.median(per_chunk),
        "cpu_us_per_request_min": min(per_chunk) * chunks,
        "cpu_us_per_request_median": statistics.median(per_chunk) * chunks,
        "rounds": per_chunk,
        "load": os.getloadavg(),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
