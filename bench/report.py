"""Markdown tables and the issue-7 targets (met / not met) from the driver's results.

Targets are reported, never asserted: a benchmark is not a test.
"""

from __future__ import annotations

from typing import Any

__all__ = ["markdown", "targets"]

Target = tuple[str, str, str, bool | None]


def _f(value: float | None, fmt: str = "{:.1f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def _x(value: float | None) -> str:
    return _f(value, "{:.2f}×")


def _mark(ok: bool | None) -> str:
    return "n/a" if ok is None else ("**met**" if ok else "**not met**")


def _le(value: float | None, limit: float) -> bool | None:
    return None if value is None else value <= limit


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return [*out, ""]


def targets(res: dict[str, Any]) -> list[Target]:
    """(target, limit, measured, met) for every target of issue 7 that was measured."""
    rows: list[Target] = []
    tp = res.get("throughput", {}).get("consumers", {})
    if tp:
        r = tp.get("harness-openai-3mw", {}).get("text-20000", {}).get("ratio")
        rows.append(
            ("openai adapter + 3 pass-through middlewares, per chunk (20,000)", "≤ 0.85× floor", _x(r), _le(r, 0.85))
        )
        r = tp.get("harness-anthropic", {}).get("text-20000", {}).get("ratio")
        what = "anthropic adapter, per chunk (20,000; floor = same Anthropic body)"
        rows.append((what, "≤ 1.0× floor", _x(r), _le(r, 1.0)))
    startup = res.get("startup", {})
    limits = {"harness --help": 0.8, "harness plugins (10 extra installed)": 1.2, "harness run (mock)": 2.0}
    for label, limit in limits.items():
        value = startup.get("ratio", {}).get(label)
        if value is not None:
            rows.append((f"`{label}` wall time", f'≤ {limit}× `python -c "import httpx"`', _x(value), value <= limit))
    for label, modules in startup.get("forbidden", {}).items():
        rows.append((f"`{label}` imports no httpx / provider", "none", ", ".join(modules) or "none", not modules))
    h = res.get("concurrency", {}).get("1000", {}).get("harness-openai-3mw", {})
    if h:
        rows.append(
            ("1,000 concurrent streams, total time", "≤ 1.1× floor", _x(h.get("ratio")), _le(h.get("ratio"), 1.1))
        )
        rss = h.get("peak_rss_mib")
        rows.append(("1,000 concurrent streams, peak RSS", "≤ 150 MiB", _f(rss, "{:.0f} MiB"), _le(rss, 150)))
    t = res.get("ttfc", {})
    floor = t.get("floor", {}).get("ttfc_ms")
    if floor is not None:
        for name in ("harness-openai", "harness-openai-3mw"):
            v = t.get(name, {}).get("ttfc_ms")
            if v is not None:
                rows.append(
                    (
                        f"time to first chunk, {name}",
                        f"≤ floor + 1 ms ({floor + 1:.2f} ms)",
                        f"{v:.2f} ms",
                        v <= floor + 1,
                    )
                )
    return rows


def _throughput(tp: dict[str, Any]) -> list[str]:
    lines = ["### Throughput per chunk (loopback server, one stream at a time)", ""]
    groups = (("OpenAI", tp["openai"], "floor"), ("Anthropic", tp["anthropic"], "floor-anthropic"))
    for fmt, names, floor in groups:
        lines += [f"{fmt}-format streams; ratio = µs/chunk ÷ `{floor}` of the same round (median of rounds).", ""]
        header = ["consumer", *(f"{s} µs/chunk (ratio)" for s in tp["scenarios"])]
        header += ["chunks/s (text-20000)", "CPU µs/chunk (text-20000)", "peak RSS MiB"]
        rows = []
        for name in names:
            row = tp["consumers"][name]
            cells = [f"{_f(row.get(s, {}).get('us'))} ({_x(row.get(s, {}).get('ratio'))})" for s in tp["scenarios"]]
            big = row.get("text-20000", {})
            err = f" (errors: {row['errors'][0]})" if row["errors"] else ""
            cpu = f"{_f(big.get('cpu_us'))} ({_x(big.get('cpu_ratio'))})"
            rows.append([name + err, *cells, _f(big.get("cps"), "{:,.0f}"), cpu, _f(row["peak_rss_mib"], "{:.0f}")])
        lines += _table(header, rows)
    lines += [
        "`paced-500` waits ~1 ms before every event: its µs/chunk is bounded by the pacing (CPU: results.json).",
        "",
    ]
    return lines


def _chain(ch: dict[str, Any]) -> list[str]:
    lines = ["### Chain cost over the mock (no HTTP)", ""]
    base = ch.get("chain-0", {}).get("us_20000")
    rows = []
    for name, row in ch.items():
        n = {"chain-1": 1, "chain-5": 5, "chain-10": 10}.get(name)
        per = (row["us_20000"] - base) / n if n and base is not None and row["us_20000"] is not None else None
        err = f" (errors: {row['errors'][0]})" if row["errors"] else ""
        rows.append([name + err, _f(row["us_2000"], "{:.2f}"), _f(row["us_20000"], "{:.2f}"), _f(per, "{:.2f}")])
    lines += _table(["chain", "µs/chunk (2,000)", "µs/chunk (20,000)", "µs per middleware per chunk"], rows)
    lines += [
        "`chain-full`: otel, retry, timeout, usage (sqlite ledger), redact, cache (sqlite; every request a miss).",
        "",
    ]
    return lines


def _startup(st: dict[str, Any]) -> list[str]:
    lines = ["### Start-up (whole process, median)", ""]
    rows = [[f"`{label}`", f"{value * 1000:.1f}", _x(st["ratio"][label])] for label, value in st["median_s"].items()]
    lines += _table(["command", "wall ms", 'ratio to `python -c "import httpx"`'], rows)
    for label, summary in st["importtime"].items():
        top = ", ".join(f"{k} {v:.1f}" for k, v in summary["by_package_ms"].items())
        lines.append(
            f'- `python -X importtime -c "{label}"`: {summary["total_ms"]:.1f} ms over {summary["modules"]} modules; '
            f"self-time by package (ms): {top}."
        )
    return [*lines, ""]


def _concurrency(co: dict[str, Any]) -> list[str]:
    lines = ["### Concurrency (streams of 200 chunks, one event loop, one client; pool size = streams)", ""]
    rows = []
    for streams, by_consumer in co.items():
        for name, row in by_consumer.items():
            err = f" (errors: {row['errors'][0]})" if row["errors"] else ""
            rows.append(
                [
                    streams,
                    name + err,
                    _f(row["wall_s"], "{:.2f}"),
                    _x(row["ratio"]),
                    _f(row["us_per_chunk"]),
                    _f(row["cpu_s"], "{:.2f}"),
                    _f(row["peak_rss_mib"], "{:.0f}"),
                    _f(row["slowest_ttfc_ms"], "{:.0f}"),
                ]
            )
    header = ["streams", "consumer", "total s", "ratio", "µs/chunk", "CPU s", "peak RSS MiB", "slowest TTFC ms"]
    return lines + _table(header, rows)


def _httpx2(hx: dict[str, Any]) -> list[str]:
    lines = ["### httpx 0.28 vs httpx2", ""]
    if "skipped" in hx:
        return [*lines, hx["skipped"], ""]
    lines += [f"httpx2, httpx: {hx['versions']}; httpx2 through `httpx2.alias_httpx()`, the adapter unchanged.", ""]
    rows = []
    for label, us in hx["single_us_per_chunk"].items():
        c = hx["concurrent_1000"].get(label, {})
        rows.append(
            [
                label,
                _f(us),
                _f(c.get("wall_s"), "{:.2f}"),
                _f(c.get("us_per_chunk")),
                _f(c.get("cpu_s"), "{:.2f}"),
                _f(c.get("peak_rss_mib"), "{:.0f}"),
            ]
        )
    header = ["consumer", "1 stream µs/chunk (20,000)", "1,000 streams total s", "µs/chunk", "CPU s", "peak RSS MiB"]
    return lines + _table(header, rows)


def markdown(res: dict[str, Any]) -> str:
    """The results as markdown: machine, targets, then one table per section."""
    m = res["machine"]
    lines = [f"Run {m['date']}: {m['nproc']} CPUs ({m['cpu']}), Python {m['python']}, {m['platform']}.", ""]
    lines += ["Versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()) + ".", ""]
    lines += [f"Rounds: {res['rounds']}; medians over rounds; ratios are per-round ratios to that round's floor.", ""]
    tgt = targets(res)
    if tgt:
        lines += ["### Targets (issue 7)", ""]
        lines += _table(["target", "limit", "measured", ""], [[a, b, c, _mark(d)] for a, b, c, d in tgt])
    if res.get("throughput"):
        lines += _throughput(res["throughput"])
    if res.get("chain"):
        lines += _chain(res["chain"])
    if res.get("startup"):
        lines += _startup(res["startup"])
    if res.get("concurrency"):
        lines += _concurrency(res["concurrency"])
    if res.get("ttfc"):
        lines += ["### Time to first chunk (first delta at once, then a 200 ms stall)", ""]
        lines += _table(["consumer", "median ms"], [[k, _f(v["ttfc_ms"], "{:.2f}")] for k, v in res["ttfc"].items()])
    if res.get("httpx2"):
        lines += _httpx2(res["httpx2"])
    if res.get("profile"):
        lines += ["### Profiles", "", *(f"- {k}: `{v}`" for k, v in res["profile"].items()), ""]
    return "\n".join(lines)
