"""One upstream request's client side through harness's HTTP client in one process: an
``AdapterClient`` (:func:`harness_core.http.make_client`) on ``transport: aiohttp`` sends a
short streamed request (``text-3``, OpenAI Chat) to :mod:`bench.server` (its own process, not
counted), reads the body as it arrives and closes it, one request after the other.

``python -m bench.transport_path REQUESTS [ROUNDS]`` prints the process CPU µs per request (min
and median over ``ROUNDS`` rounds of ``REQUESTS``, after 50 warm-up requests). Under
``valgrind --tool=cachegrind --cache-sim=no``, run once with ``200 1`` and once with ``1000 1``:
the difference of the two instruction counts divided by 800 is the instructions per request, a
figure the machine's load cannot move (issue 25: the aiohttp transport's cost per request).
To count another tree (a ``git worktree`` of another commit), run this file by its path with
that tree first on ``PYTHONPATH``: ``PYTHONPATH=OTHER:. python bench/transport_path.py 200 1``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time

from bench.__main__ import loopback_server
from harness_core.http import make_client

__all__ = ["main"]

BODY = json.dumps({"model": "text-3", "stream": True, "messages": [{"role": "user", "content": "Hi."}]}).encode()
WARM_UP = 50


async def _measure(url: str, requests: int, rounds: int) -> list[float]:
    """CPU µs per request of each round of ``requests`` sequential requests to ``url``."""
    key = "sk-" + "u" * 56
    async with make_client(base_url=url + "/v1", backend="aiohttp", headers={"authorization": f"Bearer {key}"}) as http:

        async def one() -> None:
            request = http.build_request(
                "POST", "/chat/completions", content=BODY, headers={"content-type": "application/json"}
            )
            response = await http.send(request, stream=True)
            async for _ in response.aiter_raw():
                pass
            await response.aclose()

        for _ in range(WARM_UP):
            await one()
        per_request = []
        for _ in range(rounds):
            start = time.process_time()
            for _ in range(requests):
                await one()
            per_request.append((time.process_time() - start) / requests * 1e6)
        return per_request


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.transport_path [REQUESTS] [ROUNDS]`` (default 500, 7): prints one JSON
    line (CPU µs per request: min, median; the rounds)."""
    args = argv if argv is not None else sys.argv[1:]
    requests = int(args[0]) if args else 500
    rounds = int(args[1]) if len(args) > 1 else 7
    with loopback_server(sys.executable) as url:
        per_request = asyncio.run(_measure(url, requests, rounds))
    result = {
        "cpu_us_per_request_min": min(per_request),
        "cpu_us_per_request_median": statistics.median(per_request),
        "rounds": per_request,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
