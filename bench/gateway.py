"""The gateway bench: ``harness serve`` against calling the upstream directly and LiteLLM's proxy.

Everything on loopback, bounded loops: the upstream is :mod:`bench.server` (OpenAI format,
``text-200``: 200 text deltas per stream, one chunked-encoding chunk per event); each gateway
runs in its own process(es) and is measured alone; the load generator (:func:`load`, run as
``python -m bench.gateway load …`` in a process of its own) keeps ``clients`` connections busy,
each client running ``streams`` streams one after the other with raw asyncio sockets (so the
client is never the bottleneck), and reports streams/s and time to first token (TTFT: request
sent → first content delta seen). Gateway CPU is the user + system time of the gateway's
processes (``/proc/<pid>/stat`` before and after the load) divided by the content deltas relayed;
peak RSS is the largest ``VmHWM`` among them.

Gateways:

- ``direct``: the client talks to the upstream itself (the baseline of TTFT);
- ``harness``: ``harness serve`` (one worker; ``harness-2w``: two) with harness-llm-openai
  pointing at the upstream, no middleware;
- ``litellm``: ``litellm --config …`` (one worker, no database, ``disable_spend_logs``), when
  installed in ``bench/.venv-litellm`` (``--litellm-python``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["CLIENTS", "load", "measure"]

CLIENTS = (1, 16, 128)
SCENARIO = "text-200"
_CONTENT = re.compile(rb'"content":\s?"[^"]')
_ROOT = Path(__file__).resolve().parent.parent
BENCH_KEY = "sk-bench-" + "5f0c" * 12
"""The key every load request carries: LiteLLM's master key (its proxy refuses to start without a
strong one); harness serve on loopback accepts any key."""


# ----------------------------------------------------------------------------- load generator


async def _one(host: str, port: int, path: str, body: bytes) -> tuple[float | None, int, bool]:
    """One streamed request: (TTFT seconds, content deltas seen, ``[DONE]`` seen)."""
    head = (
        f"POST {path} HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n"
        f"authorization: Bearer {BENCH_KEY}\r\nconnection: close\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode()
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection(host, port)
    ttft: float | None = None
    deltas = 0
    tail = b""
    try:
        writer.write(head + body)
        while data := await reader.read(65536):
            window = tail + data
            found = len(_CONTENT.findall(window)) - len(_CONTENT.findall(tail))
            if found and ttft is None:
                ttft = time.perf_counter() - start
            deltas += found
            tail = window[-64:]
            if b"[DONE]" in window:
                break
    finally:
        writer.close()
    return ttft, deltas, b"[DONE]" in tail or deltas > 0


async def load(url: str, model: str, clients: int, streams: int) -> dict[str, Any]:
    """``clients`` concurrent clients, ``streams`` sequential streams each, against ``url``."""
    host, _, rest = url.removeprefix("http://").partition(":")
    port = int(rest.split("/")[0])
    body = json.dumps(
        {"model": model, "stream": True, "messages": [{"role": "user", "content": "Say something."}]}
    ).encode()
    ttfts: list[float] = []
    counts: list[int] = []
    errors: list[str] = []

    async def client() -> None:
        for _ in range(streams):
            try:
                ttft, deltas, _done = await _one(host, port, "/v1/chat/completions", body)
            except OSError as exc:
                errors.append(repr(exc))
                continue
            counts.append(deltas)
            if ttft is not None:
                ttfts.append(ttft)

    t0 = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - t0
    ttfts.sort()
    return {
        "clients": clients,
        "streams": len(counts),
        "seconds": elapsed,
        "streams_per_s": len(counts) / elapsed,
        "deltas": sum(counts),
        "short_streams": sum(1 for c in counts if c < 200),
        "ttft_p50_ms": statistics.median(ttfts) * 1000 if ttfts else None,
        "ttft_p99_ms": ttfts[min(len(ttfts) - 1, int(len(ttfts) * 0.99))] * 1000 if ttfts else None,
        "errors": errors[:3],
    }


# ----------------------------------------------------------------------------- gateways


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (from ``/proc``)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    found, frontier = [pid], [pid]
    while frontier:
        frontier = [child for child, parent in parents.items() if parent in frontier]
        found += frontier
    return found


def _cpu_s(pids: list[int]) -> float:
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def _peak_rss_mib(pids: list[int]) -> float:
    peak = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) / 1024)
    return peak


def _wait_ready(url: str, proc: subprocess.Popen[bytes], seconds: float = 120.0) -> None:
    """Poll ``url`` until it answers (a bounded wait for a server's start-up, not a measurement)."""
    import urllib.request

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the server exited with {proc.returncode}")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{url}: not ready after {seconds:.0f} s")


@contextlib.contextmanager
def _harness(python: str, upstream: str, tmp: Path, workers: int) -> Iterator[tuple[str, str, int]]:
    port = _free_port()
    config = tmp / f"harness-{workers}.yaml"
    config.write_text(
        "plugins:\n"
        f"  gateway: {{port: {port}, database: '{tmp}/gateway-{workers}.sqlite'}}\n"
        f"  openai: {{base_url: '{upstream}/v1', api_key: null, routes: [bench], max_connections: 1024}}\n"
    )
    harness = str(Path(python).parent / "harness")
    argv = [harness, "serve", "-c", str(config), "--port", str(port), "--workers", str(workers)]
    proc = subprocess.Popen(argv, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_ready(f"http://127.0.0.1:{port}/healthz", proc)
        yield f"http://127.0.0.1:{port}", f"bench/{SCENARIO}", proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextlib.contextmanager
def _litellm(litellm_python: str, upstream: str, tmp: Path) -> Iterator[tuple[str, str, int]]:
    port = _free_port()
    config = tmp / "litellm.yaml"
    config.write_text(
        "model_list:\n"
        "  - model_name: bench\n"
        f"    litellm_params: {{model: openai/{SCENARIO}, api_base: '{upstream}/v1', api_key: sk-bench}}\n"
        "general_settings:\n"
        "  disable_spend_logs: true\n"
        f"  master_key: {BENCH_KEY}\n"
    )
    litellm = str(Path(litellm_python).parent / "litellm")
    argv = [litellm, "--config", str(config), "--port", str(port), "--num_workers", "1"]
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    proc = subprocess.Popen(argv, cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_ready(f"http://127.0.0.1:{port}/health/liveliness", proc, seconds=300)
        yield f"http://127.0.0.1:{port}", "bench", proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _load(python: str, url: str, model: str, clients: int, streams: int) -> dict[str, Any]:
    argv = [python, "-m", "bench.gateway", "load", url, model, str(clients), str(streams)]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=_ROOT, check=False)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1][:300]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _run(python: str, url: str, model: str, pid: int | None, streams_for: dict[int, int], log: Any) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    _load(python, url, model, 4, 2)  # warm-up: connections, imports, first-request paths
    for clients in CLIENTS:
        pids = _tree(pid) if pid is not None else []
        c0 = _cpu_s(pids)
        row = _load(python, url, model, clients, streams_for[clients])
        if pids and "error" not in row:
            row["cpu_s"] = _cpu_s(pids) - c0
            row["cpu_us_per_chunk"] = row["cpu_s"] / max(1, row["deltas"]) * 1e6
            row["peak_rss_mib"] = _peak_rss_mib(pids)
        rows[str(clients)] = row
        log(f"    {clients} clients: {_short(row)}")
    return rows


def _short(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"ERROR {row['error']}"
    cpu = f" cpu={row['cpu_us_per_chunk']:.1f}µs/chunk" if "cpu_us_per_chunk" in row else ""
    return (
        f"{row['streams_per_s']:.1f} streams/s ttft p50={row['ttft_p50_ms']:.1f}ms p99={row['ttft_p99_ms']:.1f}ms{cpu}"
    )


def measure(
    python: str, upstream: str, log: Any, *, litellm_python: str | None = None, quick: bool = False
) -> dict[str, Any]:
    """Every gateway, one at a time, at :data:`CLIENTS` concurrent clients."""
    scale = 1 if quick else 2
    fast = {1: 40 * scale, 16: 8 * scale, 128: 2 * scale}  # streams per client
    slow = {1: 8, 16: 1, 128: 1}  # LiteLLM relays a few streams/s
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="harness-bench-gateway-") as name:
        tmp = Path(name)
        log("  direct")
        out["direct"] = _run(python, upstream, SCENARIO, None, fast, log)
        for workers in (1, 2):
            label = "harness" if workers == 1 else "harness-2w"
            log(f"  {label}")
            try:
                with _harness(python, upstream, tmp, workers) as (url, model, pid):
                    out[label] = _run(python, url, model, pid, fast, log)
            except RuntimeError as exc:
                out[label] = {"error": str(exc)}
        if litellm_python and Path(litellm_python).exists():
            log("  litellm")
            try:
                with _litellm(litellm_python, upstream, tmp) as (url, model, pid):
                    out["litellm"] = _run(python, url, model, pid, slow, log)
            except RuntimeError as exc:
                out["litellm"] = {"error": str(exc)}
        else:
            out["litellm"] = {"error": "LiteLLM's proxy is not installed (bench/.venv-litellm)"}
    return out


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.gateway load URL MODEL CLIENTS STREAMS``: one load run, JSON on stdout."""
    parser = argparse.ArgumentParser(prog="python -m bench.gateway")
    parser.add_argument("task", choices=["load"])
    parser.add_argument("url")
    parser.add_argument("model")
    parser.add_argument("clients", type=int)
    parser.add_argument("streams", type=int)
    args = parser.parse_args(argv)
    json.dump(asyncio.run(load(args.url, args.model, args.clients, args.streams)), sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
