"""The gateway bench: ``harness serve`` against calling the upstream directly and LiteLLM's proxy.

Everything on loopback, bounded loops: the upstream is :mod:`bench.server` (OpenAI format,
``text-200``: 200 text deltas per stream, one chunked-encoding chunk per event); each gateway
runs in its own process(es) and is measured alone; the load generator (:func:`load`, run as
``python -m bench.gateway load …`` in a process of its own) keeps ``clients`` connections busy,
each client running ``streams`` streams one after the other with raw asyncio sockets (so the
client is never the bottleneck), and reports streams/s and time to first token (TTFT: request
sent → first content delta seen). Gateway CPU is the user + system time of the gateway's
processes (``/proc/<pid>/stat`` before and after the load) divided by the content deltas relayed;
peak RSS is the largest ``VmHWM`` among them. On a slow model's stream (``paced-NxMms``, one delta
every M ms; :data:`PACED`) the load generator also records when each delta reached the client and
reports how long the gateway held deltas back and how many came in bursts (:func:`hold`):
``compare --scenario paced-…`` and the gateway section of ``python -m bench`` (``gateway_paced``).

Gateways:

- ``direct``: the client talks to the upstream itself (the baseline of TTFT);
- ``harness``: ``harness serve`` (one worker; ``harness-2w``: two) with harness-llm-openai
  pointing at the upstream, no middleware, the gateway's default server settings (asyncio's
  loop; httptools when installed, else h11); ``harness-uvloop`` and ``harness-h11``: the same
  with uvloop, or with h11 (measured where uvloop and httptools are installed);
- ``litellm``: ``litellm --config …`` (one worker, no database, ``disable_spend_logs``), when
  installed in ``bench/.venv-litellm`` (``--litellm-python``).

Keys are as long as real ones and built at run time (the secret redactor's cost grows with
them): the gateways' master keys, harness's virtual key (created through ``/admin/keys``, the
key every harness load request carries: looked up, admitted and settled like a customer's) and
the upstream key. LiteLLM's proxy has no virtual keys without a database: its clients carry the
master key.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["CLIENTS", "compare", "hot_key", "load", "measure"]

CLIENTS = (1, 16, 128)
MANY = 512
"""Concurrent streams of the memory row (harness and direct only: LiteLLM would take minutes)."""
SCENARIO = "text-200"
_CONTENT = re.compile(rb'"content":\s?"[^"]')
_ROOT = Path(__file__).resolve().parent.parent
_KEY_ENV = "BENCH_GATEWAY_KEY"
"""The load generator's key (an environment variable, not an argument: ``ps`` shows arguments)."""
_HEADERS_ENV = "BENCH_GATEWAY_HEADERS"
"""Extra request headers of the load generator (JSON object; Portkey's provider and custom host)."""


def _new_key(prefix: str = "sk-") -> str:
    """A key-shaped secret of 59 characters, random per run."""
    return prefix + secrets.token_urlsafe(42)


# ----------------------------------------------------------------------------- load generator


async def _one(
    host: str, port: int, path: str, body: bytes, key: str, extra: str = ""
) -> tuple[float | None, int, bool, list[tuple[float, int]]]:
    """One streamed request: (TTFT seconds, content deltas seen, ``[DONE]`` seen, reads) where
    ``reads`` holds, for every socket read that completed the start of a content delta, its
    ``time.perf_counter()`` on return and how many deltas began in it; ``extra``: more header
    lines, each ending in CRLF."""
    head = (
        f"POST {path} HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n"
        f"authorization: Bearer {key}\r\n{extra}connection: close\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode()
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection(host, port)
    ttft: float | None = None
    deltas = 0
    tail = b""
    reads: list[tuple[float, int]] = []
    try:
        writer.write(head + body)
        while data := await reader.read(65536):
            now = time.perf_counter()
            window = tail + data
            found = len(_CONTENT.findall(window)) - len(_CONTENT.findall(tail))
            if found:
                reads.append((now, found))
                if ttft is None:
                    ttft = now - start
            deltas += found
            tail = window[-64:]
            if b"[DONE]" in window:
                break
    finally:
        writer.close()
    return ttft, deltas, b"[DONE]" in tail or deltas > 0, reads


def hold(streams: list[list[tuple[float, int]]], deltas: int, gap_s: float) -> dict[str, Any]:
    """How long a relay held the content deltas of ``paced-NxMms`` streams back: ``streams`` the
    ``reads`` of :func:`_one` per stream, ``deltas`` = N, ``gap_s`` = M / 1000.

    The upstream sends delta ``j`` of a stream at ``t0 + j·gap_s`` on its own clock
    (:func:`bench.server._send_on_schedule`), so the client's arrival ``a_j`` minus ``j·gap_s`` would
    be the same for every delta if nothing held one back; the hold of delta ``j`` is
    ``a_j − j·gap_s − min_k (a_k − k·gap_s)``: its delay beyond that of the stream's least delayed
    delta. This is the sound reference rather than the arrival of delta ``j`` through ``direct``,
    which is another stream in another run (its server and client jitter would be subtracted from
    ours, and the difference can go negative); and the client cannot read the server's clock for
    a scheduled send time, whose common offset (connect, the gateway's own upstream request) is
    the time to first token's business, not the hold's. ``direct``'s own hold is then the
    measurement's floor: the server's timers and the client's reads. Only streams with all
    ``deltas`` deltas count (the others are ``short_streams``).

    Returns ``hold_ms`` (every hold, ms, rounded to µs), ``hold_p50_ms`` / ``hold_p99_ms`` /
    ``hold_max_ms`` (``None`` without a complete stream), ``burst_events`` (deltas that arrived in
    one read with another: the upstream sent them ≥ ``gap_s`` apart), ``bursts`` (such reads) and
    ``largest_read`` (most deltas in one read)."""
    holds: list[float] = []
    bursts = [count for reads in streams for _t, count in reads if count > 1]
    for reads in streams:
        arrivals = [t for t, count in reads for _ in range(count)]
        if len(arrivals) != deltas:
            continue
        shifted = [t - j * gap_s for j, t in enumerate(arrivals)]
        base = min(shifted)
        holds += [round((t - base) * 1000, 3) for t in shifted]
    largest = max((count for reads in streams for _t, count in reads), default=0)
    figures = _hold_figures(holds)
    return {"hold_ms": holds, **figures, "burst_events": sum(bursts), "bursts": len(bursts), "largest_read": largest}


def _hold_figures(holds: list[float]) -> dict[str, float | None]:
    """p50 / p99 / max of ``holds`` (ms; ``None`` each when empty; p99 the nearest rank)."""
    ordered = sorted(holds)
    if not ordered:
        return {"hold_p50_ms": None, "hold_p99_ms": None, "hold_max_ms": None}
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"hold_p50_ms": statistics.median(ordered), "hold_p99_ms": p99, "hold_max_ms": ordered[-1]}


async def load(url: str, model: str, clients: int, streams: int) -> dict[str, Any]:
    """``clients`` concurrent clients, ``streams`` sequential streams each, against ``url``;
    ``model`` names the scenario (its last ``/`` part; LiteLLM's ``bench`` is :data:`SCENARIO`).
    For a ``paced-NxMms`` scenario the row has :func:`hold`'s figures too."""
    from bench.streams import expected, parse_scenario

    host, _, rest = url.removeprefix("http://").partition(":")
    port = int(rest.split("/")[0])
    body = json.dumps(
        {"model": model, "stream": True, "messages": [{"role": "user", "content": "Say something."}]}
    ).encode()
    scenario = model.rpartition("/")[2]
    scenario = scenario if scenario != "bench" else SCENARIO
    wanted = expected(scenario)[0]
    ttfts: list[float] = []
    counts: list[int] = []
    arrivals: list[list[tuple[float, int]]] = []
    errors: list[str] = []
    key = os.environ.get(_KEY_ENV) or _new_key()
    extra = "".join(f"{name}: {value}\r\n" for name, value in json.loads(os.environ.get(_HEADERS_ENV, "{}")).items())

    async def client() -> None:
        for _ in range(streams):
            try:
                ttft, deltas, _done, reads = await _one(host, port, "/v1/chat/completions", body, key, extra)
            except OSError as exc:
                errors.append(repr(exc))
                continue
            counts.append(deltas)
            arrivals.append(reads)
            if ttft is not None:
                ttfts.append(ttft)

    t0, cpu0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - t0
    ttfts.sort()
    row = {
        "clients": clients,
        "streams": len(counts),
        "seconds": elapsed,
        "streams_per_s": len(counts) / elapsed,
        "client_cpu_s": time.process_time() - cpu0,  # the load generator's own share of the cores
        "deltas": sum(counts),
        "short_streams": sum(1 for c in counts if c < wanted),
        "ttft_p50_ms": statistics.median(ttfts) * 1000 if ttfts else None,
        "ttft_p99_ms": ttfts[min(len(ttfts) - 1, int(len(ttfts) * 0.99))] * 1000 if ttfts else None,
        "errors": errors[:3],
    }
    gap_ms = parse_scenario(scenario).gap_ms
    return row | hold(arrivals, wanted, gap_ms / 1000) if gap_ms else row


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


def _create_key(url: str, master: str) -> str:
    """A virtual key without limits, created through ``POST /admin/keys`` with the master key."""
    import urllib.request

    request = urllib.request.Request(
        f"{url}/admin/keys",
        data=json.dumps({"name": f"bench-{secrets.token_hex(4)}"}).encode(),
        headers={"authorization": f"Bearer {master}", "content-type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        created: str = json.loads(answer.read())["key"]
    return created


@contextlib.contextmanager
def _harness(
    python: str,
    upstream: str,
    tmp: Path,
    workers: int,
    server: str = "",
    wrap: tuple[str, ...] = (),
    provider: str = "",
    database: str = "",
    scenario: str = SCENARIO,
    pythonpath: str = "",
    virtual_key: bool = True,
    label: str = "",
    limits: str = "",
) -> Iterator[tuple[str, str, int, str]]:
    port = _free_port()
    name = label or f"harness-{workers}{server.replace(' ', '').replace(',', '-').replace(':', '')}"
    config = tmp / f"{name}.yaml"
    config.write_text(
        "plugins:\n"
        f"  gateway: {{port: {port}, database: '{database or f'{tmp}/{name}.sqlite'}',"
        f' master_key: "${{{{ env.BENCH_MASTER_KEY }}}}"'
        f"{f', limits: {limits!r}' if limits else ''}"
        f"{', ' + server if server else ''}}}\n"
        f"  openai: {{base_url: '{upstream}/v1', api_key: \"${{{{ env.BENCH_UPSTREAM_KEY }}}}\", routes: [bench]"
        f"{', ' + provider if provider else ''}}}\n"
    )
    master = _new_key()
    env = {**os.environ, "BENCH_MASTER_KEY": master, "BENCH_UPSTREAM_KEY": _new_key()}
    if pythonpath:  # another copy of the sources (the "before" of a comparison) ahead of the editable installs
        env["PYTHONPATH"] = pythonpath
    harness = str(Path(python).parent / "harness")
    argv = [*wrap, harness, "serve", "-c", str(config), "--port", str(port), "--workers", str(workers)]
    logs = None if os.environ.get("BENCH_GATEWAY_STDERR") else subprocess.DEVNULL  # set it to see the gateway's log
    proc = subprocess.Popen(argv, cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=logs)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_ready(f"{url}/healthz", proc)
        yield url, f"bench/{scenario}", proc.pid, _create_key(url, master) if virtual_key else master
    finally:
        # uvicorn re-raises SIGTERM after its shutdown (the process dies before a profiler writes);
        # SIGINT ends in KeyboardInterrupt, which lets cProfile save its statistics
        proc.send_signal(signal.SIGINT if wrap else signal.SIGTERM)
        proc.wait(timeout=60)


@contextlib.contextmanager
def _litellm(litellm_python: str, upstream: str, tmp: Path) -> Iterator[tuple[str, str, int, str]]:
    port = _free_port()
    config = tmp / "litellm.yaml"
    config.write_text(
        "model_list:\n"
        "  - model_name: bench\n"
        f"    litellm_params: {{model: openai/{SCENARIO}, api_base: '{upstream}/v1',"
        " api_key: os.environ/BENCH_UPSTREAM_KEY}\n"
        "general_settings:\n"
        "  disable_spend_logs: true\n"
        "  master_key: os.environ/BENCH_MASTER_KEY\n"
    )
    master = _new_key()
    litellm = str(Path(litellm_python).parent / "litellm")
    argv = [litellm, "--config", str(config), "--port", str(port), "--num_workers", "1"]
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(BENCH_MASTER_KEY=master, BENCH_UPSTREAM_KEY=_new_key())
    proc = subprocess.Popen(argv, cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_ready(f"http://127.0.0.1:{port}/health/liveliness", proc, seconds=300)
        yield f"http://127.0.0.1:{port}", "bench", proc.pid, master
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextlib.contextmanager
def _floor(python: str, upstream: str, mode: str) -> Iterator[tuple[str, int]]:
    """:mod:`bench.floor` (``mode``: ``bytes`` or ``json``) on a loopback port: its URL and pid."""
    port = _free_port()
    argv = [python, "-m", "bench.floor", mode, str(port), upstream]
    proc = subprocess.Popen(argv, cwd=_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_ready(f"{url}/healthz", proc)
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=30)


PORTKEY = _ROOT / "bench" / ".portkey"
"""Where ``npm install`` put Portkey's gateway (``bench/.portkey/package.json``: 1.15.2 with
``@hono/node-server`` pinned to 1.14.1 through ``overrides``, since newer ones make every request
a 500)."""


@contextlib.contextmanager
def _portkey(upstream: str, root: Path = PORTKEY) -> Iterator[tuple[str, str, int, str, dict[str, str]]]:
    """Portkey's open-source gateway (Node) on a loopback port (``bench/portkey_loopback.mjs``
    binds it to 127.0.0.1), its upstream our bench server (``x-portkey-provider: openai`` with
    ``x-portkey-custom-host``, the upstream key as the bearer: Portkey has no keys of its own
    without its hosted control plane). Yields (url, model, pid, key, extra headers).

    Raises:
        RuntimeError: not installed (``npm install`` in ``bench/.portkey``), or it did not start.
    """
    start = root / "node_modules" / "@portkey-ai" / "gateway" / "build" / "start-server.js"
    node = shutil.which("node")
    if node is None or not start.exists():
        raise RuntimeError(f"Portkey's gateway is not installed ({root}: npm install)")
    port = _free_port()
    argv = [node, str(_ROOT / "bench" / "portkey_loopback.mjs"), str(start), f"--port={port}", "--headless"]
    env = {**os.environ, "NODE_ENV": "production"}
    proc = subprocess.Popen(argv, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_ready(f"{url}/", proc)
        headers = {"x-portkey-provider": "openai", "x-portkey-custom-host": f"{upstream}/v1"}
        yield url, SCENARIO, proc.pid, _new_key(), headers
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _load(
    python: str, url: str, model: str, clients: int, streams: int, key: str, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    argv = [python, "-m", "bench.gateway", "load", url, model, str(clients), str(streams)]
    env = {**os.environ, _KEY_ENV: key, _HEADERS_ENV: json.dumps(headers or {})}
    done = subprocess.run(argv, capture_output=True, text=True, cwd=_ROOT, env=env, check=False)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1][:300]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _run(
    python: str,
    url: str,
    model: str,
    pid: int | None,
    streams_for: dict[int, int],
    log: Any,
    key: str = "",
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    key = key or _new_key()
    _load(python, url, model, 4, 2, key, headers)  # warm-up: connections, imports, first-request paths
    for clients, streams in streams_for.items():
        pids = _tree(pid) if pid is not None else []
        c0 = _cpu_s(pids)
        row = _load(python, url, model, clients, streams, key, headers)
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
    rss = f" rss={row['peak_rss_mib']:.0f}MiB" if "peak_rss_mib" in row else ""
    held = (
        f" hold p50={row['hold_p50_ms']:.2f}ms p99={row['hold_p99_ms']:.2f}ms max={row['hold_max_ms']:.1f}ms"
        f" bursts={row['burst_events']}"
        if row.get("hold_p50_ms") is not None
        else ""
    )
    return (
        f"{row['streams_per_s']:.1f} streams/s ttft p50={row['ttft_p50_ms']:.1f}ms p99={row['ttft_p99_ms']:.1f}ms"
        f"{cpu}{rss}{held}"
    )


HARNESS_VARIANTS: dict[str, tuple[int, str]] = {
    "harness": (1, ""),
    "harness-uvloop": (1, "loop: uvloop"),
    "harness-h11": (1, "http: h11"),
    "harness-2w": (2, ""),
}
"""Label → (workers, extra gateway settings)."""


def measure(
    python: str,
    upstream: str,
    log: Any,
    *,
    litellm_python: str | None = None,
    portkey: str | None = None,
    quick: bool = False,
    only: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Every gateway (or those in ``only``), one at a time, at :data:`CLIENTS` concurrent clients
    (and :data:`MANY` for direct and one-worker harness)."""
    scale = 1 if quick else 2
    fast = {1: 40 * scale, 16: 8 * scale, 128: 2 * scale}  # streams per client
    slow = {1: 8, 16: 1, 128: 1}  # LiteLLM relays a few streams/s
    many = {**fast, MANY: 1}

    def wanted(label: str) -> bool:
        return not only or label in only

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="harness-bench-gateway-") as name:
        tmp = Path(name)
        if wanted("direct"):
            log("  direct")
            out["direct"] = _run(python, upstream, SCENARIO, None, many, log)
        for label, (workers, server) in HARNESS_VARIANTS.items():
            if not wanted(label):
                continue
            log(f"  {label}")
            try:
                with _harness(python, upstream, tmp, workers, server) as (url, model, pid, key):
                    out[label] = _run(python, url, model, pid, many if label == "harness" else fast, log, key)
            except (RuntimeError, OSError) as exc:
                out[label] = {"error": str(exc)}
        if portkey and wanted("portkey"):
            log("  portkey")
            try:
                with _portkey(upstream, Path(portkey)) as (url, model, pid, key, headers):
                    out["portkey"] = _run(python, url, model, pid, many, log, key, headers)
            except RuntimeError as exc:
                log(f"    skipped: {exc}")
                out["portkey"] = {"error": str(exc)}
        if not wanted("litellm"):
            return out
        if litellm_python and Path(litellm_python).exists():
            log("  litellm")
            try:
                with _litellm(litellm_python, upstream, tmp) as (url, model, pid, key):
                    out["litellm"] = _run(python, url, model, pid, slow, log, key)
            except RuntimeError as exc:
                out["litellm"] = {"error": str(exc)}
        else:
            out["litellm"] = {"error": "LiteLLM's proxy is not installed (bench/.venv-litellm)"}
    return out


def profile(
    python: str, upstream: str, out: Path, clients: int, streams: int, server: str = "", scenario: str = SCENARIO
) -> Path:
    """cProfile of a one-worker ``harness serve`` relaying ``clients`` × ``streams`` streams of
    ``scenario`` (after a warm-up; :data:`SHORT` profiles short requests); the statistics sorted
    by own time and by cumulative time go to ``out`` (text), the raw profile next to it
    (``.prof``)."""
    import pstats

    with tempfile.TemporaryDirectory(prefix="harness-bench-gateway-") as name:
        tmp = Path(name)
        raw = out.resolve().with_suffix(".prof")  # kept for pstats / snakeviz
        wrap = (python, "-m", "cProfile", "-o", str(raw))
        with _harness(python, upstream, tmp, 1, server, wrap, scenario=scenario) as (url, model, _pid, key):
            _load(python, url, model, 4, 2, key)
            row = _load(python, url, model, clients, streams, key)
        with out.open("w") as sink:
            sink.write(
                f"# harness serve under cProfile ({server or 'defaults'}), {clients} clients x {streams} streams "
                f"of {scenario} after a warm-up: {_short(row)} (cProfile's own overhead included)\n"
            )
            stats = pstats.Stats(str(raw), stream=sink)
            stats.sort_stats("tottime").print_stats(45)
            stats.sort_stats("cumulative").print_stats(60)
    return out


PACED = "paced-80x20ms"
"""A slow model's stream (:mod:`bench.streams`): 80 deltas, one every 20 ms (1.6 s). More than
:data:`harness_gateway.relay.RELAY_BUFFER` (64) events, so a relay that waits for a full batch
shows it; 20 ms apart, so a healthy relay's deltas can never share one client read."""

SHORT = "text-3"
"""The short request of :func:`hot_key`: five events (three text deltas, the finish, the usage)."""


def _test_helper(name: str) -> Any:
    """A server helper of the gateway's tests (``gw_postgres``, ``gw_redis``), imported from their folder."""
    tests = str(_ROOT / "plugins/harness-gateway/tests")
    if tests not in sys.path:
        sys.path.append(tests)  # the helpers import their shared part, gw_servers
    return importlib.import_module(name)


@contextlib.contextmanager
def _postgres() -> Iterator[str]:
    """A throwaway PostgreSQL (the gateway tests' :class:`Cluster`, Debian's binaries); its DSN."""
    module = _test_helper("gw_postgres")
    # a directory of its own under /tmp (the Cluster hands it to the postgres user, who cannot
    # enter the root-only directory ``tmp``)
    root = Path(tempfile.mkdtemp(prefix="harness-bench-pg-"))
    try:
        cluster = module.Cluster(root)
        cluster.start()
        try:
            yield str(cluster.dsn)
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def _redis() -> Iterator[str]:
    """A throwaway Redis (the gateway tests' :class:`RedisServer`, Debian's ``redis-server``); its URL."""
    module = _test_helper("gw_redis")
    with tempfile.TemporaryDirectory(prefix="harness-bench-redis-") as root:
        server = module.RedisServer(Path(root))
        server.start()
        try:
            yield str(server.url)
        finally:
            server.stop()


def hot_key(python: str, upstream: str, log: Any, *, quick: bool = False, rounds: int = 10) -> dict[str, Any]:
    """Short requests (:data:`SHORT`) at 128 clients, ``rounds`` rounds one after the other: direct,
    one-worker harness with its one virtual key on SQLite, and (when PostgreSQL is installed) on
    PostgreSQL, then (when redis-server is installed too) on PostgreSQL with admission in Redis
    (``limits: redis://…``): every request of every client carries that one key (a hot key: admitted and
    settled on the same key row). Rows: requests/s per round (flat over the rounds when admission
    does not grow with the key's traffic)."""
    clients, per_client = 128, 2 if quick else 4
    out: dict[str, Any] = {}

    def rounds_of(url: str, model: str, pid: int | None, key: str) -> list[dict[str, Any]]:
        _load(python, url, model, 4, 2, key)  # warm-up
        rows = []
        for number in range(rounds):
            pids = _tree(pid) if pid is not None else []
            c0 = _cpu_s(pids)
            row = _load(python, url, model, clients, per_client, key)
            if pids and "error" not in row:
                row["cpu_ms_per_request"] = (_cpu_s(pids) - c0) / max(1, row["streams"]) * 1000
            rows.append(row)
            log(
                f"    round {number + 1}: "
                + (f"{row['streams_per_s']:.0f} requests/s" if "error" not in row else row["error"])
            )
        return rows

    with tempfile.TemporaryDirectory(prefix="harness-bench-hotkey-") as name:
        tmp = Path(name)
        log("  direct (short requests)")
        out["direct"] = rounds_of(upstream, SHORT, None, _new_key())
        log("  harness, key on SQLite")
        with _harness(python, upstream, tmp, 1, scenario=SHORT) as (url, model, pid, key):
            out["harness-sqlite"] = rounds_of(url, model, pid, key)
        try:
            with _postgres() as dsn:
                log("  harness, key on PostgreSQL")
                with _harness(python, upstream, tmp, 1, database=dsn, scenario=SHORT) as (url, model, pid, key):
                    out["harness-postgres"] = rounds_of(url, model, pid, key)
                with _redis() as limits:
                    log("  harness, key on PostgreSQL, admission in Redis")
                    with _harness(python, upstream, tmp, 1, database=dsn, limits=limits, scenario=SHORT) as (
                        url,
                        model,
                        pid,
                        key,
                    ):
                        out["harness-postgres-redis"] = rounds_of(url, model, pid, key)
        except BaseException as exc:  # PostgreSQL or Redis absent (the test helpers skip): said in the results
            if isinstance(exc, KeyboardInterrupt):
                raise
            out.setdefault("harness-postgres", [{"error": f"{type(exc).__name__}: {exc}"}])
            out.setdefault("harness-postgres-redis", [{"error": f"{type(exc).__name__}: {exc}"}])
    return out


def _source_copy(commit: str, into: Path) -> str:
    """The ``harness_core`` and ``plugins`` trees of ``commit`` extracted under ``into`` (``git
    archive``: no checkout); the ``PYTHONPATH`` that puts them ahead of the editable installs."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(_ROOT), "archive", commit, "harness_core", "plugins"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return os.pathsep.join([str(into), *sorted(str(src) for src in into.glob("plugins/*/src"))])


def compare(
    python: str,
    upstream: str,
    log: Any,
    *,
    gateways: tuple[str, ...],
    scenario: str,
    clients: tuple[int, ...],
    per_client: int,
    rounds: int,
    before: str = "",
    portkey: Path = PORTKEY,
) -> dict[str, Any]:
    """Every gateway of ``gateways`` started at once and loaded in turn, round after round (so that
    the ratios come from the same minutes of a shared machine): ``direct``, ``harness`` (this
    checkout, no middleware, the load carries the master key: no virtual key, no admission),
    ``harness-vkey`` (a virtual key on SQLite), ``harness-before`` / ``harness-before-vkey`` (the
    sources of commit ``before``, without or with a virtual key), ``harness-h11`` /
    ``harness-httptools`` (uvicorn's parser chosen), ``harness-2w`` (two workers),
    ``portkey`` (its npm install in ``portkey``), ``floor-bytes`` / ``floor-json`` (:mod:`bench.floor`:
    a minimal relay on the same stack, doing none of a gateway's work).
    ``scenario``: :data:`SHORT` for short requests, :data:`SCENARIO` for 200-chunk streams,
    :data:`PACED` (any ``paced-NxMms``) for a slow model's stream: each cell then has ``hold``,
    :func:`hold`'s figures over every delta of every round (``events``: the holds pooled), and a
    ``WARNING`` line goes to ``log`` for a harness gateway that delivered deltas in bursts.
    Returns per gateway and client count the rounds' rows and their medians (requests/s, gateway
    CPU per request in ms and per chunk in µs, TTFT), each median's ratio to ``direct`` and to
    ``portkey`` in the same run, and the time to first token it adds to ``direct``'s
    (``added_ttft_p50_ms``, medians of the same run: at one client, the row of issue 25)."""
    out: dict[str, Any] = {"scenario": scenario, "rounds": rounds, "per_client": per_client, "gateways": {}}
    with tempfile.TemporaryDirectory(prefix="harness-bench-compare-") as name, contextlib.ExitStack() as stack:
        tmp = Path(name)
        running: dict[str, tuple[str, str, int | None, str, dict[str, str]]] = {}
        paths: dict[str, str] = {}  # the "before" sources, extracted once for harness-before and harness-before-vkey
        for label in gateways:
            try:
                if label == "direct":
                    running[label] = (upstream, scenario, None, _new_key(), {})
                elif label == "portkey":
                    url, _model, pid, key, headers = stack.enter_context(_portkey(upstream, portkey))
                    running[label] = (url, scenario, pid, key, headers)
                elif label in ("floor-bytes", "floor-json"):
                    url, pid = stack.enter_context(_floor(python, upstream, label.removeprefix("floor-")))
                    running[label] = (url, scenario, pid, _new_key(), {})
                elif label.startswith("harness"):
                    server = {"harness-h11": "http: h11", "harness-httptools": "http: httptools"}.get(label, "")
                    path = ""
                    if label.startswith("harness-before"):
                        if "before" not in paths:
                            paths["before"] = _source_copy(before, tmp / "before")
                        path = paths["before"]
                    url, model, pid, key = stack.enter_context(
                        _harness(
                            python,
                            upstream,
                            tmp,
                            2 if label == "harness-2w" else 1,
                            server,
                            scenario=scenario,
                            pythonpath=path,
                            virtual_key=label.endswith("-vkey"),
                            label=label,
                        )
                    )
                    running[label] = (url, model, pid, key, {})
                else:
                    raise RuntimeError(f"unknown gateway {label!r}")
            except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
                log(f"  {label}: skipped: {exc}")
                out["gateways"][label] = {"error": str(exc)}
        for url, model, _pid, key, headers in running.values():
            _load(python, url, model, 4, 2, key, headers)  # warm-up
        table: dict[str, dict[str, list[dict[str, Any]]]] = {label: {} for label in running}
        for number in range(rounds):
            for count in clients:
                for label, (url, model, pid, key, headers) in running.items():
                    pids = _tree(pid) if pid is not None else []
                    c0 = _cpu_s(pids)
                    row = _load(python, url, model, count, per_client, key, headers)
                    if pids and "error" not in row:
                        row["cpu_s"] = _cpu_s(pids) - c0
                        row["cpu_ms_per_request"] = row["cpu_s"] / max(1, row["streams"]) * 1000
                        row["cpu_us_per_chunk"] = row["cpu_s"] / max(1, row["deltas"]) * 1e6
                    table[label].setdefault(str(count), []).append(row)
                    log(f"    round {number + 1}, {count} clients, {label}: {_short(row)}")
    for label, by_clients in table.items():
        out["gateways"][label] = {}
        for count, rows in by_clients.items():
            good = [row for row in rows if "error" not in row]
            keys = ("streams_per_s", "cpu_ms_per_request", "cpu_us_per_chunk", "ttft_p50_ms", "ttft_p99_ms")
            median = {
                k: statistics.median(r[k] for r in good if r.get(k) is not None)
                for k in keys
                if any(r.get(k) is not None for r in good)
            }
            out["gateways"][label][count] = {"median": median, "rounds": rows}
            if any("hold_ms" in row for row in rows):
                out["gateways"][label][count]["hold"] = pooled = _pooled_hold(good)
                if label.startswith("harness") and pooled["burst_events"]:
                    log(
                        f"WARNING: {label} delivered {pooled['burst_events']} of {pooled['events']} deltas of "
                        f"{scenario} in bursts (up to {pooled['largest_read']} in one read, at {count} clients): "
                        "its relay holds events back"
                    )
    for by_clients in out["gateways"].values():
        for count, cell in by_clients.items() if "error" not in by_clients else ():
            for anchor in ("direct", "portkey"):
                other = out["gateways"].get(anchor, {}).get(count, {}).get("median", {})
                if other.get("streams_per_s") and cell["median"].get("streams_per_s"):
                    cell[f"x_{anchor}"] = cell["median"]["streams_per_s"] / other["streams_per_s"]
                if anchor == "portkey" and other.get("cpu_ms_per_request") and cell["median"].get("cpu_ms_per_request"):
                    cell["cpu_x_portkey"] = cell["median"]["cpu_ms_per_request"] / other["cpu_ms_per_request"]
                if anchor == "direct" and other.get("ttft_p50_ms") is not None and cell["median"].get("ttft_p50_ms"):
                    # the first-token latency the gateway adds (the row of issue 25 at one client)
                    cell["added_ttft_p50_ms"] = cell["median"]["ttft_p50_ms"] - other["ttft_p50_ms"]
    return out


def _pooled_hold(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`hold`'s figures over the rounds ``rows`` of one gateway and client count: the
    percentiles of every delta's hold pooled (each row's ``hold_ms`` list is removed: the results
    keep the figures, not the samples), the bursts summed, the largest read the largest."""
    holds = [h for row in rows for h in row.pop("hold_ms", [])]
    return {
        "events": len(holds),
        **_hold_figures(holds),
        "burst_events": sum(row.get("burst_events", 0) for row in rows),
        "bursts": sum(row.get("bursts", 0) for row in rows),
        "largest_read": max((row.get("largest_read", 0) for row in rows), default=0),
    }


def combine(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several ``measure`` results (``results.json``-shaped) as one: every figure the median over
    the runs that have it, ``rounds`` their number, every run kept under ``runs``."""
    labels = dict.fromkeys(label for run in runs for label in run["gateway"])
    table: dict[str, Any] = {}
    for label in labels:
        rows = [run["gateway"][label] for run in runs if "error" not in run["gateway"].get(label, {"error": 1})]
        if not rows:
            table[label] = {"error": "no run succeeded"}
            continue
        table[label] = {}
        for clients in dict.fromkeys(c for row in rows for c in row):
            cells = [row[clients] for row in rows if clients in row and "error" not in row[clients]]
            numbers = {k for cell in cells for k, v in cell.items() if isinstance(v, int | float)}
            merged = {k: statistics.median(cell[k] for cell in cells if cell.get(k) is not None) for k in numbers}
            table[label][clients] = merged if cells else {"error": "no run succeeded"}
    first, last = runs[0], runs[-1]
    return {
        "machine": first["machine"],
        "rounds": len(runs),
        "load_before": first["load_before"],
        "load_after": last["load_after"],
        "gateway": table,
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.gateway load URL MODEL CLIENTS STREAMS``: one load run, JSON on stdout;
    ``python -m bench.gateway measure [--only LABEL …] [--litellm-python PY]``: the gateway
    section alone (its own upstream), ``results.json``-shaped JSON on stdout (``python -m
    bench.report FILE`` renders it), progress on stderr; ``python -m bench.gateway combine A.json
    B.json …``: :func:`combine`; ``python -m bench.gateway profile OUT``: :func:`profile`."""
    parser = argparse.ArgumentParser(prog="python -m bench.gateway")
    tasks = parser.add_subparsers(dest="task", required=True)
    one = tasks.add_parser("load")
    one.add_argument("url")
    one.add_argument("model")
    one.add_argument("clients", type=int)
    one.add_argument("streams", type=int)
    every = tasks.add_parser("measure")
    every.add_argument("--only", nargs="*", default=[])
    every.add_argument("--litellm-python", default=str(_ROOT / "bench" / ".venv-litellm" / "bin" / "python"))
    every.add_argument(
        "--portkey",
        default=str(PORTKEY),
        help="Portkey's npm install (skipped with a line when absent; '' to leave out)",
    )
    every.add_argument("--quick", action="store_true")
    prof = tasks.add_parser("profile")
    prof.add_argument("out", type=Path)
    prof.add_argument("--clients", type=int, default=16)
    prof.add_argument("--streams", type=int, default=8)
    prof.add_argument("--server", default="", help="extra gateway settings, e.g. 'loop: asyncio, http: h11'")
    prof.add_argument("--scenario", default=SCENARIO, help=f"the upstream's scenario ({SHORT}: short requests)")
    hot = tasks.add_parser("hot-key")
    hot.add_argument("--quick", action="store_true")
    hot.add_argument("--rounds", type=int, default=10)
    both = tasks.add_parser("compare", help="gateways side by side, loaded in turn round after round")
    both.add_argument("--gateways", nargs="+", default=["direct", "harness", "portkey"])
    both.add_argument("--scenario", default=SHORT)
    both.add_argument("--clients", nargs="+", type=int, default=[128])
    both.add_argument("--per-client", type=int, default=4, help="requests per client per round")
    both.add_argument("--rounds", type=int, default=5)
    both.add_argument("--before", default="", help="commit for harness-before (git archive, on PYTHONPATH)")
    merge = tasks.add_parser("combine")
    merge.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    if args.task == "combine":
        result = combine([json.loads(path.read_text()) for path in args.files])
    elif args.task == "load":
        result = asyncio.run(load(args.url, args.model, args.clients, args.streams))
    elif args.task == "hot-key":
        from bench.__main__ import loopback_server, machine

        def say(message: str) -> None:
            print(message, file=sys.stderr, flush=True)

        result = {"machine": machine(), "load_before": os.getloadavg()}
        with loopback_server(sys.executable) as base:
            result["hot_key"] = hot_key(sys.executable, base, say, quick=args.quick, rounds=args.rounds)
        result["load_after"] = os.getloadavg()
    elif args.task == "compare":
        from bench.__main__ import loopback_server, machine

        def note(message: str) -> None:
            print(message, file=sys.stderr, flush=True)

        result = {"machine": machine(), "load_before": os.getloadavg()}
        with loopback_server(sys.executable) as base:
            result["compare"] = compare(
                sys.executable,
                base,
                note,
                gateways=tuple(args.gateways),
                scenario=args.scenario,
                clients=tuple(args.clients),
                per_client=args.per_client,
                rounds=args.rounds,
                before=args.before,
            )
        result["load_after"] = os.getloadavg()
    elif args.task == "profile":
        from bench.__main__ import loopback_server

        with loopback_server(sys.executable) as base:
            result = {
                "profile": str(
                    profile(sys.executable, base, args.out, args.clients, args.streams, args.server, args.scenario)
                )
            }
    else:
        from bench.__main__ import loopback_server

        def log(message: str) -> None:
            print(message, file=sys.stderr, flush=True)

        from bench.__main__ import machine

        result = {"machine": machine(), "rounds": 1, "load_before": os.getloadavg()}
        with loopback_server(sys.executable) as base:
            result["gateway"] = measure(
                sys.executable,
                base,
                log,
                litellm_python=args.litellm_python,
                portkey=args.portkey,
                quick=args.quick,
                only=tuple(args.only),
            )
        result["load_after"] = os.getloadavg()
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
