"""One measurement in a fresh process, printed as one JSON object on stdout.

The driver (:mod:`bench.__main__`) starts one worker per consumer per round, so that imports,
peak RSS and garbage of one consumer never affect another::

    python -m bench.worker --consumer floor --base http://127.0.0.1:PORT \\
        --task throughput --scenarios text-2000:5,text-20000:2
    python -m bench.worker --consumer harness-openai --base … --task ttfc --scenario stall-20 --reps 10
    python -m bench.worker --consumer floor --base … --task concurrency --streams 1000 --scenario text-200
    python -m bench.worker --consumer request-pool --task requests --scenario text-1 --reps 2000 --batches 5

Timings: wall = ``time.perf_counter`` around the reads; CPU = ``time.process_time`` (user + system
of the whole process); peak RSS = ``ru_maxrss`` at the end (Linux: KiB). Each timed read is
preceded by one untimed warm-up read of a small stream of the same kind, and by ``gc.collect()``.
``--httpx2`` makes ``import httpx`` resolve to httpx2 (``httpx2.alias_httpx()``) before anything
imports it, so unmodified code (the adapters, the floor) runs on httpx2.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import statistics
import sys
import time
from typing import Any

__all__ = ["main"]


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _check(consumer: Any, scenario: str, read: Any) -> None:
    want = consumer.expected(scenario)
    extra = read.deltas - want[0]  # a masking consumer may end a block with its held-back tail
    if read.chars != want[1] or not 0 <= extra <= consumer.extra_deltas:
        raise SystemExit(f"{type(consumer).__name__} read {(read.deltas, read.chars)} from {scenario}, expected {want}")


def _warm_name(scenario: str) -> str:
    kind, _, _ = scenario.partition("-")
    return f"{kind}-100" if kind != "stall" else "text-100"


async def _throughput(consumer: Any, specs: list[tuple[str, int]], profile: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    profiler: Any = None
    for scenario, reps in specs:
        if not consumer.supports(scenario):
            continue
        _check(consumer, _warm_name(scenario), await consumer.read(_warm_name(scenario)))
        walls, cpus = [], []
        deltas = 0
        for _ in range(reps):
            gc.collect()
            if profile == "pyinstrument" and profiler is None:
                from pyinstrument import Profiler

                profiler = Profiler(interval=0.0005)
                profiler.start()
            elif profile == "cprofile" and profiler is None:
                import cProfile

                profiler = cProfile.Profile()
                profiler.enable()
            c0, t0 = time.process_time(), time.perf_counter()
            read = await consumer.read(scenario)
            t1, c1 = time.perf_counter(), time.process_time()
            _check(consumer, scenario, read)
            walls.append(t1 - t0)
            cpus.append(c1 - c0)
            deltas = read.deltas
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        out[scenario] = {
            "deltas": deltas,
            "wall_s": wall,
            "cpu_s": cpu,
            "us_per_chunk": wall / deltas * 1e6,
            "cpu_us_per_chunk": cpu / deltas * 1e6,
            "chunks_per_s": deltas / wall,
            "walls": walls,
        }
    if profiler is not None:
        out["_profiler"] = profiler
    return out


async def _ttfc(consumer: Any, scenario: str, reps: int, profile: str | None) -> dict[str, Any]:
    from bench.consumers import FirstChunk

    _check(consumer, "text-100", await consumer.read("text-100"))
    samples = []
    FirstChunk.cpu_samples.clear()
    if profile == "cprofile":  # only start → first delta of each read (FirstChunk turns it on and off)
        import cProfile

        FirstChunk.profiler = cProfile.Profile()
    for _ in range(reps):
        gc.collect()
        read = await consumer.read(scenario)
        _check(consumer, scenario, read)
        samples.append(read.ttfc)
    out: dict[str, Any] = {
        "ttfc_s": statistics.median(samples),
        "samples": samples,
        "ttfc_cpu_s": statistics.median(FirstChunk.cpu_samples),
        "cpu_samples": list(FirstChunk.cpu_samples),
    }
    if FirstChunk.profiler is not None:
        out["_profiler"] = FirstChunk.profiler
    return out


async def _concurrency(consumer: Any, scenario: str, streams: int) -> dict[str, Any]:
    _check(consumer, scenario, await consumer.read(scenario))
    gc.collect()
    firsts: list[float] = []

    async def one() -> None:
        began = time.perf_counter()
        read = await consumer.read(scenario)
        _check(consumer, scenario, read)
        firsts.append(began + read.ttfc)

    c0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one() for _ in range(streams)))
    t1, c1 = time.perf_counter(), time.process_time()
    deltas = consumer.expected(scenario)[0] * streams
    return {
        "streams": streams,
        "wall_s": t1 - t0,
        "cpu_s": c1 - c0,
        "us_per_chunk": (t1 - t0) / deltas * 1e6,
        "slowest_ttfc_s": max(firsts) - t0,
        "median_ttfc_s": statistics.median(firsts) - t0,
    }


async def _requests(consumer: Any, scenario: str, reps: int, batches: int) -> dict[str, Any]:
    """``batches`` batches of ``reps`` requests one after the other: the median per request (µs, wall
    and CPU) over the batches, after ``reps`` untimed warm-up requests."""
    for _ in range(reps):
        _check(consumer, scenario, await consumer.read(scenario))
    walls, cpus = [], []
    for _ in range(batches):
        gc.collect()
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(reps):
            read = await consumer.read(scenario)
        t1, c1 = time.perf_counter(), time.process_time()
        _check(consumer, scenario, read)
        walls.append((t1 - t0) / reps * 1e6)
        cpus.append((c1 - c0) / reps * 1e6)
    return {
        "requests": reps,
        "batches": batches,
        "us_per_request": statistics.median(walls),
        "cpu_us_per_request": statistics.median(cpus),
        "walls_us": walls,
        "cpus_us": cpus,
    }


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    from bench.consumers import make

    consumer = make(args.consumer, args.base, args.max_connections)
    await consumer.start()
    rss_ready = _rss_mib()
    try:
        if args.task == "throughput":
            specs = []
            for item in args.scenarios.split(","):
                name, _, reps = item.partition(":")
                specs.append((name, int(reps or 1)))
            result = await _throughput(consumer, specs, args.profile)
        elif args.task == "ttfc":
            result = await _ttfc(consumer, args.scenario, args.reps, args.profile)
        elif args.task == "requests":
            result = await _requests(consumer, args.scenario, args.reps, args.batches)
        else:
            result = await _concurrency(consumer, args.scenario, args.streams)
    finally:
        await consumer.aclose()
    result["rss_ready_mib"] = rss_ready
    result["peak_rss_mib"] = _rss_mib()
    return result


def main(argv: list[str] | None = None) -> None:
    """Command-line entry (see the module docstring)."""
    parser = argparse.ArgumentParser(description="one benchmark measurement")
    parser.add_argument("--consumer", required=True)
    parser.add_argument("--base", default="")
    parser.add_argument("--task", choices=["throughput", "ttfc", "concurrency", "requests"], default="throughput")
    parser.add_argument("--scenarios", default="text-2000:3")
    parser.add_argument("--scenario", default="stall-20")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--batches", type=int, default=5, help="timed batches of --reps requests (task requests)")
    parser.add_argument("--max-connections", type=int, default=100)
    parser.add_argument("--httpx2", action="store_true")
    parser.add_argument("--profile", choices=["pyinstrument", "cprofile"])
    parser.add_argument("--profile-out", default="")
    args = parser.parse_args(argv)
    if args.httpx2:
        import httpx2

        httpx2.alias_httpx()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    result = asyncio.run(_run(args))
    profiler = result.pop("_profiler", None)
    if profiler is not None:
        _write_profile(profiler, args.profile, args.profile_out)
    result["consumer"] = args.consumer
    result["httpx"] = _httpx_version()
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


def _write_profile(profiler: Any, kind: str, path: str) -> None:
    if kind == "pyinstrument":
        profiler.stop()
        text = profiler.output_text(unicode=True, color=False, show_all=False)
    else:
        import io
        import pstats

        profiler.disable()
        buffer = io.StringIO()
        stats = pstats.Stats(profiler, stream=buffer)
        stats.sort_stats("tottime").print_stats(45)
        stats.print_callers(20)  # who calls the 20 costliest functions (the hops per chunk)
        text = buffer.getvalue()
    if path:
        with open(path, "w") as f:
            f.write(text)
    else:
        sys.stderr.write(text)


def _httpx_version() -> str:
    module = sys.modules.get("httpx")
    if module is None:
        return ""
    return f"{module.__name__} {getattr(module, '__version__', '?')}"


if __name__ == "__main__":
    main()
