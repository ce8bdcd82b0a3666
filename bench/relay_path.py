"""The gateway's per-chunk relay path in one process: the gateway ASGI app called directly (no
HTTP server in front of it), streaming ``text-200`` from :mod:`bench.server` (its own process) to
16 concurrent in-memory clients, harness-llm-openai on aiohttp, no middleware, the master key.

Two uses (issue 25, item 3):

- ``python -m bench.relay_path ROUNDS``: process CPU µs per relayed chunk, min and median over
  ``ROUNDS`` rounds of 16 streams (after one warm-up round);
- under ``valgrind --tool=cachegrind --cache-sim=no``, once with 1 round and once with 5: the
  difference of the two instruction counts divided by the 12,800 chunks of the 4 extra rounds is
  the instructions per relayed chunk, a figure other processes on the machine cannot move (the
  start-up, the same in both runs, cancels out). ``PYTHONHASHSEED=0`` keeps it repeatable; put a
  ``git archive`` of another commit's ``harness_core`` and ``plugins/*/src`` on ``PYTHONPATH`` to
  count that commit.

Every stream must relay all 200 deltas (checked); the upstream's CPU is not counted.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.__main__ import loopback_server

__all__ = ["main"]

STREAMS = 16
_CONTENT = re.compile(rb'"content":\s?"[^"]')


async def _measure(upstream: str, tmp: Path, rounds: int) -> list[float]:
    from harness_gateway.server import GatewayServer

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
    body = json.dumps({"model": "bench/text-200", "stream": True, "messages": [{"role": "user", "content": "Hi."}]})
    headers = [
        (b"content-type", b"application/json"),
        (b"authorization", f"Bearer {master}".encode()),
        (b"content-length", str(len(body)).encode()),
    ]

    async def one() -> int:
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
            "scheme": "http", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
            "query_string": b"", "root_path": "", "headers": headers, "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 2),
        }  # fmt: skip
        sent = False
        done = asyncio.Event()
        deltas = 0

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body.encode(), "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal deltas
            if message["type"] == "http.response.body":
                deltas += len(_CONTENT.findall(message.get("body", b"")))
                if not message.get("more_body"):
                    done.set()

        await server.app(scope, receive, send)
        done.set()
        return deltas

    per_chunk: list[float] = []
    try:
        await asyncio.gather(*(one() for _ in range(STREAMS)))  # warm-up: connections, first-request paths
        for _ in range(rounds):
            start = time.process_time()
            counts = await asyncio.gather(*(one() for _ in range(STREAMS)))
            per_chunk.append((time.process_time() - start) / sum(counts) * 1e6)
            if any(count != 200 for count in counts):
                raise RuntimeError(f"a stream relayed fewer than 200 deltas: {counts}")
    finally:
        await server.stop()
    return per_chunk


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.relay_path [ROUNDS]``: prints one JSON line (µs per chunk: min, median, rounds)."""
    rounds = int((argv if argv is not None else sys.argv[1:] or ["15"])[0])
    with loopback_server(sys.executable) as upstream, tempfile.TemporaryDirectory() as name:
        per_chunk = asyncio.run(_measure(upstream, Path(name), rounds))
    result = {
        "cpu_us_per_chunk_min": min(per_chunk),
        "cpu_us_per_chunk_median": statistics.median(per_chunk),
        "rounds": per_chunk,
        "load": os.getloadavg(),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
