"""The benchmark driver: ``python -m bench [--rounds N] [--peers] [--only SECTION …]``.

Starts the loopback server (:mod:`bench.server`) in its own process, runs every measurement in
fresh worker processes (:mod:`bench.worker`), consumers interleaved round by round (the order
rotates every round, cancelling drift), and reports medians over rounds. Ratios are taken to
the floor **of the same round**, then their median is reported. Prints markdown tables and the
targets of issue 7 as met / not met, and writes them with the raw figures to ``--out``
(default ``bench-results/``: ``results.md``, ``results.json``, profiles).

Sections (``--only``): ``throughput``, ``chain``, ``balance``, ``startup``, ``concurrency``,
``ttfc``, ``httpx2``, ``gateway``, ``hot_key``, ``store`` (:mod:`bench.store`: SQLite's group
commit), ``profile``, and ``against`` with ``--against TREE``
(the per-chunk path of this checkout against another one, e.g. the code before a change).
Nothing here asserts a time: targets are reported, never enforced.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.report import markdown

SECTIONS = (
    *("throughput", "chain", "balance", "startup", "concurrency", "ttfc", "httpx2", "gateway", "hot_key"),
    *("store", "profile", "against"),
)
OPENAI_SCENARIOS = "text-2000:3,text-20000:1,tool-2000:3,paced-500:1"
DISTRIBUTIONS = (
    *("harness-core", "harness-llm-openai", "harness-llm-anthropic", "harness-llm-gemini", "harness-llm-mock"),
    "harness-middleware",
    *("httpx", "httpcore", "h11", "httpx2", "httpcore2", "msgspec", "anyio", "pluggy", "click", "pyyaml"),
    *("openai", "litellm", "llm", "pyinstrument"),
)


# ----------------------------------------------------------------------------- processes


@contextlib.contextmanager
def loopback_server(python: str) -> Iterator[str]:
    """Run :mod:`bench.server` in its own process; yields its base URL."""
    proc = subprocess.Popen([python, "-m", "bench.server"], stdout=subprocess.PIPE, text=True, cwd=_root())
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"bench server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _root() -> Path:
    return Path(__file__).resolve().parent.parent


def worker(
    python: str, consumer: str, base: str, *args: str, env: dict[str, str] | None = None, tree: Path | None = None
) -> dict[str, Any]:
    """Run one :mod:`bench.worker` process; returns its JSON result or ``{"error": …}``.

    ``tree``: the source tree to run in (default this one); its ``bench`` and ``harness_core``
    are imported from there (the working directory is first on ``sys.path``)."""
    argv = [python, "-m", "bench.worker", "--consumer", consumer, "--base", base, *args]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tree or _root(), env=env, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["?"]
        return {"error": tail[0][:300]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def available(module: str) -> bool:
    """Whether ``module`` is importable here (the peers are optional)."""
    return importlib.util.find_spec(module) is not None


def rotate(items: list[str], r: int) -> list[str]:
    """``items`` rotated by ``r`` places (the per-round interleaving)."""
    k = r % len(items) if items else 0
    return items[k:] + items[:k]


def med(values: list[float]) -> float | None:
    """Median, or ``None`` for no values."""
    return statistics.median(values) if values else None


# ----------------------------------------------------------------------------- sections


def throughput(python: str, base: str, rounds: int, peers: bool, log: Any) -> dict[str, Any]:
    """µs/chunk, chunks/s, CPU and peak RSS of every consumer on every scenario, with ratios."""
    openai_consumers = ["floor", "bytes", "msgspec", "harness-openai", "harness-openai-3mw", "harness-openai-3mw-abort"]
    if available("httpx_aiohttp"):
        openai_consumers += ["floor-aiohttp", "harness-openai-aiohttp", "harness-openai-3mw-aiohttp"]
    if available("openai"):
        openai_consumers.append("openai-sdk")
    if peers:
        openai_consumers += [name for name in ("litellm", "llm") if available(name)]
    anthropic_consumers = ["floor-anthropic", "harness-anthropic", "harness-anthropic-3mw"]
    gemini_consumers = ["floor-gemini", "harness-gemini", "harness-gemini-3mw"]
    if available("httpx_aiohttp"):
        anthropic_consumers.append("harness-anthropic-aiohttp")
        gemini_consumers.append("harness-gemini-aiohttp")
    everyone = openai_consumers + anthropic_consumers + gemini_consumers
    raw: dict[str, list[dict[str, Any]]] = {name: [] for name in everyone}
    for r in range(rounds):
        for name in rotate(everyone, r):
            result = worker(python, name, base, "--scenarios", OPENAI_SCENARIOS)
            raw[name].append(result)
            log(f"  round {r + 1}/{rounds} {name}: {_short(result)}")
    return _aggregate(raw, openai_consumers, anthropic_consumers, gemini_consumers)


def _short(result: dict[str, Any]) -> str:
    if "error" in result:
        return f"ERROR {result['error']}"
    parts = [f"{k}={v['us_per_chunk']:.1f}µs" for k, v in result.items() if isinstance(v, dict) and "us_per_chunk" in v]
    return " ".join(parts) + f" rss={result.get('peak_rss_mib', 0):.0f}MiB"


def _aggregate(
    raw: dict[str, list[dict[str, Any]]], openai_c: list[str], anthropic_c: list[str], gemini_c: list[str]
) -> dict[str, Any]:
    scenarios = [s.split(":")[0] for s in OPENAI_SCENARIOS.split(",")]
    table: dict[str, Any] = {}
    for name, runs in raw.items():
        own = "floor-anthropic" if name in anthropic_c else "floor-gemini" if name in gemini_c else "floor"
        floors = raw[own]
        row: dict[str, Any] = {"errors": [run["error"] for run in runs if "error" in run]}
        row["peak_rss_mib"] = med([run["peak_rss_mib"] for run in runs if "error" not in run])
        for scenario in scenarios:
            cell: dict[str, list[float]] = {k: [] for k in ("us", "cpu_us", "cps", "ratio", "cpu_ratio", "ratio_oai")}
            for i, run in enumerate(runs):
                if "error" in run or scenario not in run:
                    continue
                m = run[scenario]
                cell["us"].append(m["us_per_chunk"])
                cell["cpu_us"].append(m["cpu_us_per_chunk"])
                cell["cps"].append(m["chunks_per_s"])
                floor = floors[i] if i < len(floors) else {}
                if scenario in floor:
                    cell["ratio"].append(m["us_per_chunk"] / floor[scenario]["us_per_chunk"])
                    cell["cpu_ratio"].append(m["cpu_us_per_chunk"] / floor[scenario]["cpu_us_per_chunk"])
                oai = raw["floor"][i] if i < len(raw["floor"]) else {}
                if scenario in oai:
                    cell["ratio_oai"].append(m["us_per_chunk"] / oai[scenario]["us_per_chunk"])
            row[scenario] = {k: med(v) for k, v in cell.items()}
        table[name] = row
    return {
        "consumers": table,
        "openai": openai_c,
        "anthropic": anthropic_c,
        "gemini": gemini_c,
        "scenarios": scenarios,
    }


def chain(python: str, rounds: int, log: Any) -> dict[str, Any]:
    """The chain's own cost over the mock: 0/1/5/10 pass-throughs and the full first-party stack."""
    from bench.consumers import MIDDLEWARES

    names = ["chain-0", "chain-1", "chain-5", "chain-10", *(f"chain-{m}" for m in MIDDLEWARES), "chain-full"]
    raw: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for r in range(rounds):
        for name in rotate(names, r):
            result = worker(python, name, "", "--scenarios", "text-2000:5,text-20000:1")
            raw[name].append(result)
            log(f"  round {r + 1}/{rounds} {name}: {_short(result)}")
    out: dict[str, Any] = {}
    for name, runs in raw.items():
        ok = [run for run in runs if "error" not in run]
        out[name] = {
            "errors": [run["error"] for run in runs if "error" in run],
            "us_2000": med([run["text-2000"]["us_per_chunk"] for run in ok]),
            "us_20000": med([run["text-20000"]["us_per_chunk"] for run in ok]),
            "cpu_us_20000": med([run["text-20000"]["cpu_us_per_chunk"] for run in ok]),
            "peak_rss_mib": med([run["peak_rss_mib"] for run in ok]),
        }
    return out


AGAINST = (
    *("chain-0", "chain-1", "chain-otel", "chain-usage", "chain-full"),
    *("harness-openai-aiohttp", "harness-anthropic-aiohttp", "harness-gemini-aiohttp"),
)
"""The ``against`` section's consumers: the per-chunk path of the chain over the mock (no
middleware, one pass-through, ``otel`` and ``usage`` alone, the first-party stack) and of each
translator over the loopback server (aiohttp transport: the library's default)."""


def against(python: str, base: str, other: Path, rounds: int, log: Any) -> dict[str, Any]:
    """The per-chunk path of this tree against ``other`` (another checkout with its own
    ``.venv``, e.g. ``git worktree add /tmp/before <commit>`` + ``/tmp/mkvenv.sh /tmp/before``):
    every :data:`AGAINST` consumer on ``text-20000``, both trees one after the other for each
    consumer (the order of the trees and of the consumers rotates every round), so a ratio
    compares the same minutes of a shared machine. Reports per consumer the medians of µs and
    CPU µs per chunk of each tree, the median of the per-round ratios (this ÷ other) and their
    range (the noise)."""
    other_python = str(other / ".venv" / "bin" / "python")
    trees = {"this": (python, None), "other": (other_python, other)}
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {name: {"this": [], "other": []} for name in AGAINST}
    for r in range(rounds):
        for name in rotate(list(AGAINST), r):
            for which in rotate(["this", "other"], r):
                py, tree = trees[which]
                target = "" if name.startswith("chain") else base
                result = worker(py, name, target, "--scenarios", "text-20000:1", tree=tree)
                raw[name][which].append(result)
                log(f"  round {r + 1}/{rounds} {name} [{which}]: {_short(result)}")
    out: dict[str, Any] = {"other": str(other)}
    for name, runs in raw.items():
        row: dict[str, Any] = {}
        pairs = [
            (a, b) for a, b in zip(runs["this"], runs["other"], strict=True) if "error" not in a and "error" not in b
        ]
        for key in ("us_per_chunk", "cpu_us_per_chunk"):
            row[f"this_{key}"] = med([a["text-20000"][key] for a, _ in pairs])
            row[f"other_{key}"] = med([b["text-20000"][key] for _, b in pairs])
            ratios = [a["text-20000"][key] / b["text-20000"][key] for a, b in pairs]
            row[f"ratio_{key}"] = med(ratios)
            row[f"range_{key}"] = (min(ratios), max(ratios)) if ratios else None
        row["errors"] = [run["error"] for which in runs.values() for run in which if "error" in run]
        out[name] = row
    return out


BALANCE = ("request-bare", "request-pass", "request-pool")
"""The ``balance`` section's consumers: the bare mock route, it with one pass-through, a pool of two."""


def balance(python: str, rounds: int, log: Any, reps: int = 2000) -> dict[str, Any]:
    """What balancing adds per request in one process (issue 28: ≤ 2 µs): one-word requests over
    the mock, ``request-pool`` (a pool of two mock members) against ``request-bare`` (the mock
    route alone) and ``request-pass`` (with one pass-through middleware, the hop every middleware
    pays), interleaved round by round; differences are taken within a round, then their median."""
    raw: dict[str, list[dict[str, Any]]] = {n: [] for n in BALANCE}
    for r in range(rounds):
        for name in rotate(list(BALANCE), r):
            result = worker(
                python, name, "", "--task", "requests", "--scenario", "text-1", "--reps", str(reps), "--batches", "5"
            )
            raw[name].append(result)
            shown = f"{result['cpu_us_per_request']:.2f} µs CPU/request" if "error" not in result else result["error"]
            log(f"  round {r + 1}/{rounds} {name}: {shown}")
    out: dict[str, Any] = {"requests_per_batch": reps, "consumers": {}, "raw": raw}
    for name, runs in raw.items():
        ok = [run for run in runs if "error" not in run]
        out["consumers"][name] = {
            "errors": [run["error"] for run in runs if "error" in run],
            "us_per_request": med([run["us_per_request"] for run in ok]),
            "cpu_us_per_request": med([run["cpu_us_per_request"] for run in ok]),
        }
    for label, base in (("pool_over_bare", "request-bare"), ("pool_over_pass", "request-pass")):
        pairs = [
            (pool, other)
            for pool, other in zip(raw["request-pool"], raw[base], strict=True)
            if "error" not in pool and "error" not in other
        ]
        out[label] = {
            "us": med([pool["us_per_request"] - other["us_per_request"] for pool, other in pairs]),
            "cpu_us": med([pool["cpu_us_per_request"] - other["cpu_us_per_request"] for pool, other in pairs]),
        }
    return out


CONCURRENT = ("raw-sockets", "floor", "floor-aiohttp", "harness-openai-3mw", "harness-openai-3mw-aiohttp")
POOL_100 = "floor (pool 100)"
"""The floor at 1,000 streams with httpx's default pool of 100 connections (900 requests queued)."""


def concurrency(
    python: str, base: str, rounds: int, log: Any, consumers: tuple[str, ...] = CONCURRENT
) -> dict[str, Any]:
    """100 / 500 / 1,000 concurrent streams of 200 chunks, one loop, one client per consumer
    (pool size = streams), and at 1,000 the floor with httpx's default pool of 100 too."""
    consumers = tuple(c for c in consumers if "aiohttp" not in c or available("httpx_aiohttp"))
    out: dict[str, Any] = {}
    for streams in (100, 500, 1000):
        labels = [*consumers, POOL_100] if streams == 1000 else list(consumers)
        raw: dict[str, list[dict[str, Any]]] = {c: [] for c in labels}
        for r in range(rounds):
            for label in rotate(labels, r):
                name, pool = ("floor", 100) if label == POOL_100 else (label, streams)
                args = ("--task", "concurrency", "--scenario", "text-200", "--streams", str(streams))
                result = worker(python, name, base, *args, "--max-connections", str(pool))
                raw[label].append(result)
                log(f"  {streams} streams round {r + 1}/{rounds} {label}: {_short_conc(result)}")
        out[str(streams)] = _conc_rows(raw)
    return out


def _short_conc(result: dict[str, Any]) -> str:
    if "error" in result:
        return f"ERROR {result['error']}"
    return (
        f"{result['wall_s']:.2f}s ttfc_max={result['slowest_ttfc_s'] * 1000:.0f}ms rss={result['peak_rss_mib']:.0f}MiB"
    )


def _conc_rows(raw: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    floor = raw.get("floor", [])
    sockets = raw.get("raw-sockets", [])
    for name, runs in raw.items():
        ok = [(i, run) for i, run in enumerate(runs) if "error" not in run]
        ratios = [run["wall_s"] / floor[i]["wall_s"] for i, run in ok if i < len(floor) and "error" not in floor[i]]
        to_raw = [
            (run["wall_s"] / sockets[i]["wall_s"], run["cpu_s"] / sockets[i]["cpu_s"])
            for i, run in ok
            if i < len(sockets) and "error" not in sockets[i]
        ]
        rows[name] = {
            "errors": [run["error"] for run in runs if "error" in run],
            "wall_s": med([run["wall_s"] for _, run in ok]),
            "cpu_s": med([run["cpu_s"] for _, run in ok]),
            "us_per_chunk": med([run["us_per_chunk"] for _, run in ok]),
            "peak_rss_mib": med([run["peak_rss_mib"] for _, run in ok]),
            "slowest_ttfc_ms": med([run["slowest_ttfc_s"] * 1000 for _, run in ok]),
            "ratio": med(ratios),
            "ratio_raw": med([wall for wall, _ in to_raw]),
            "cpu_ratio_raw": med([cpu for _, cpu in to_raw]),
        }
    return rows


def ttfc(python: str, base: str, rounds: int, log: Any) -> dict[str, Any]:
    """Request start → first text delta on a stream that stalls 200 ms after its first delta:
    wall and CPU (``process_time`` of the worker over the same stretch), medians of every sample."""
    names = [
        "floor",
        "harness-openai",
        "harness-openai-3mw",
        "floor-anthropic",
        "harness-anthropic",
        "floor-aiohttp",
        "floor-raw-aiohttp",
        "harness-openai-aiohttp",
        "harness-openai-3mw-aiohttp",
    ]
    raw: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    errors: dict[str, list[str]] = {n: [] for n in names}
    for r in range(rounds):
        for name in rotate(names, r):
            result = worker(python, name, base, "--task", "ttfc", "--scenario", "stall-20", "--reps", "10")
            if "error" in result:
                errors[name].append(result["error"])
            else:
                raw[name].extend(result["samples"])
                cpu[name].extend(result["cpu_samples"])
            log(
                f"  round {r + 1}/{rounds} {name}: {result.get('ttfc_s', 0) * 1000:.2f} ms, "
                f"CPU {result.get('ttfc_cpu_s', 0) * 1000:.2f} ms {result.get('error', '')}"
            )
    return {
        name: {
            "ttfc_ms": (med(v) or 0) * 1000 if v else None,
            "ttfc_cpu_ms": (med(cpu[name]) or 0) * 1000 if cpu[name] else None,
            "errors": errors[name],
        }
        for name, v in raw.items()
    }


def httpx2(python: str, httpx2_python: str | None, base: str, rounds: int, log: Any) -> dict[str, Any]:
    """The OpenAI adapter (and the floor) on httpx 0.28 vs httpx2 (aliased, no code change):
    single 20,000-chunk stream and 1,000 concurrent streams; both in the same environment."""
    py = httpx2_python or python
    probe = subprocess.run(
        [py, "-c", "import httpx2, httpx; print(httpx2.__version__, httpx.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        return {"skipped": "httpx2 is not installed in the bench environment (--httpx2-python)"}
    out: dict[str, Any] = {"versions": probe.stdout.strip()}
    variants = [(c, flag) for c in ("floor", "harness-openai-3mw") for flag in ("", "--httpx2")]
    single: dict[str, list[float]] = {}
    conc: dict[str, list[dict[str, Any]]] = {}
    for r in range(rounds):
        for consumer, flag in [variants[(i + r) % len(variants)] for i in range(len(variants))]:
            label = f"{consumer} on {'httpx2' if flag else 'httpx 0.28'}"
            extra = [flag] if flag else []
            one = worker(py, consumer, base, "--scenarios", "text-20000:1", *extra)
            conc_args = ("--task", "concurrency", "--scenario", "text-200", "--streams", "1000")
            many = worker(py, consumer, base, *conc_args, "--max-connections", "1000", *extra)
            if "error" not in one:
                single.setdefault(label, []).append(one["text-20000"]["us_per_chunk"])
            conc.setdefault(label, []).append(many)
            log(f"  round {r + 1}/{rounds} {label}: single {_short(one)}; 1000 streams {_short_conc(many)}")
    out["single_us_per_chunk"] = {k: med(v) for k, v in single.items()}
    out["concurrent_1000"] = _conc_rows(conc)
    return out


def paced(python: str, base: str, portkey: str, rounds: int, log: Any) -> dict[str, Any]:
    """The gateway section's hold check: ``bench.gateway compare`` on :data:`bench.gateway.PACED`
    (a slow model's stream, one delta every 20 ms) at 1 and 16 clients, 2 streams per client,
    ``direct`` (the measurement's floor), ``harness`` and ``portkey`` (when ``portkey`` names its
    npm install; ``""`` leaves it out): how long each gateway held deltas back and how many
    arrived in bursts (a ``WARNING`` line on stderr when harness's did). Stored under
    ``gateway_paced``; about 7 s per gateway and round (3.2 s per client count)."""
    from bench.gateway import PACED, PORTKEY, compare

    gateways = ("direct", "harness", *(("portkey",) if portkey else ()))
    return compare(
        python,
        base,
        log,
        gateways=gateways,
        scenario=PACED,
        clients=(1, 16),
        per_client=2,
        rounds=rounds,
        portkey=Path(portkey) if portkey else PORTKEY,
    )


def floor(python: str, base: str, portkey: str, rounds: int, log: Any) -> dict[str, Any]:
    """The gateway section's floor rows: ``bench.gateway compare`` of ``direct``, ``floor-bytes``
    and ``floor-json`` (:mod:`bench.floor`: a minimal relay on the gateway's own stack, doing none
    of a gateway's work), ``harness`` and ``portkey`` (when installed), loaded in turn round after
    round, on 200-chunk streams at 1, 16 and 128 clients and on short requests at 128: what the
    stack itself costs beside what harness costs, ratios from one run. Stored under
    ``gateway_floor`` (``streams`` and ``short``)."""
    from bench.gateway import PORTKEY, SCENARIO, SHORT, compare

    gateways = ("direct", "floor-bytes", "floor-json", "harness", *(("portkey",) if portkey else ()))
    where = Path(portkey) if portkey else PORTKEY
    return {
        "streams": compare(python, base, log, gateways=gateways, scenario=SCENARIO, clients=(1, 16, 128),
                           per_client=10, rounds=rounds, portkey=where),
        "short": compare(python, base, log, gateways=gateways, scenario=SHORT, clients=(128,), per_client=10,
                         rounds=rounds, portkey=where),
    }  # fmt: skip


def profile(python: str, base: str, out_dir: Path, log: Any) -> dict[str, str]:
    """pyinstrument and cProfile of harness → harness-llm-openai (3 pass-throughs), 20,000 chunks."""
    files: dict[str, str] = {}
    for consumer in (
        "harness-openai-3mw",
        "harness-openai-3mw-aiohttp",
        "harness-anthropic",
        "harness-gemini",
        "chain-full",
    ):
        for kind in ("pyinstrument", "cprofile"):
            if kind == "pyinstrument" and not available("pyinstrument"):
                continue
            path = out_dir / f"profile-{consumer}-{kind}.txt"
            target = "" if consumer.startswith("chain") else base
            result = worker(
                python, consumer, target, "--scenarios", "text-20000:3", "--profile", kind, "--profile-out", str(path)
            )
            files[f"{consumer} {kind}"] = str(path) if "error" not in result else f"ERROR {result['error']}"
            log(f"  {consumer} {kind}: {files[f'{consumer} {kind}']}")
    return files


# ----------------------------------------------------------------------------- report


def machine() -> dict[str, Any]:
    """nproc, CPU model, Python and package versions."""
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    versions = {}
    for dist in DISTRIBUTIONS:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[dist] = metadata.version(dist)
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "versions": versions,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    }


def main(argv: list[str] | None = None) -> None:
    """Command-line entry (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of interleaved measurements (default 5)")
    parser.add_argument("--peers", action="store_true", help="also measure LiteLLM and llm when installed")
    parser.add_argument("--only", nargs="*", choices=SECTIONS, default=None, help="sections to run (default: all)")
    parser.add_argument("--httpx2-python", default=None, help="python of a venv holding httpx2 and harness")
    parser.add_argument(
        "--litellm-python",
        default=str(_root() / "bench" / ".venv-litellm" / "bin" / "python"),
        help="python of the venv holding litellm[proxy] (the gateway section's peer)",
    )
    parser.add_argument(
        "--portkey",
        default=str(_root() / "bench" / ".portkey"),
        help="folder of Portkey's npm install (the gateway section's Node peer; skipped with a line when absent)",
    )
    parser.add_argument(
        "--against",
        default=None,
        type=Path,
        help="another checkout with its own .venv: compare the per-chunk path with it (section 'against')",
    )
    parser.add_argument("--out", default="bench-results", help="folder for results.md / results.json / profiles")
    parser.add_argument("--quick", action="store_true", help="2 rounds, fewer start-up runs: a smoke run")
    args = parser.parse_args(argv)
    sections = args.only or [*SECTIONS, *(["against"] if args.against else [])]
    if "against" in sections and args.against is None:
        parser.error("section 'against' needs --against TREE")
    rounds = 2 if args.quick else args.rounds
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    python = sys.executable

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    res: dict[str, Any] = {"machine": machine(), "rounds": rounds, "load_before": os.getloadavg()}
    with loopback_server(python) as base:
        for section in sections:
            log(f"== {section}")
            t0 = time.perf_counter()
            if section == "throughput":
                res[section] = throughput(python, base, rounds, args.peers, log)
            elif section == "chain":
                res[section] = chain(python, rounds, log)
            elif section == "balance":
                res[section] = balance(python, rounds, log)
            elif section == "startup":
                from bench.startup import measure

                res[section] = measure(python, rounds=5 if args.quick else 21)
            elif section == "concurrency":
                res[section] = concurrency(python, base, max(1, rounds - 2) if not args.quick else 1, log)
            elif section == "ttfc":
                res[section] = ttfc(python, base, rounds, log)
            elif section == "httpx2":
                res[section] = httpx2(
                    python, args.httpx2_python, base, max(1, rounds - 2) if not args.quick else 1, log
                )
            elif section == "gateway":
                from bench.gateway import measure as measure_gateways

                res[section] = measure_gateways(
                    python, base, log, litellm_python=args.litellm_python, portkey=args.portkey, quick=args.quick
                )
                res["gateway_paced"] = paced(python, base, args.portkey, 1 if args.quick else min(rounds, 3), log)
                res["gateway_floor"] = floor(python, base, args.portkey, 1 if args.quick else min(rounds, 3), log)
            elif section == "hot_key":
                from bench.gateway import hot_key

                res[section] = hot_key(python, base, log, quick=args.quick)
            elif section == "store":
                from bench.store import measure as measure_store

                res[section] = measure_store(rounds)
            elif section == "profile":
                res[section] = profile(python, base, out_dir, log)
            elif section == "against":
                res[section] = against(python, base, args.against, rounds, log)
            log(f"   ({time.perf_counter() - t0:.0f} s)")
    res["load_after"] = os.getloadavg()
    text = markdown(res)
    (out_dir / "results.md").write_text(text + "\n")
    (out_dir / "results.json").write_text(json.dumps(res, indent=1, default=str) + "\n")
    print(text)


if __name__ == "__main__":
    main()
