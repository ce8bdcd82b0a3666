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
    """(target, limit, measured, met) for every target of issue 17 that was measured."""
    return [
        *_per_chunk_targets(res),
        *_balance_targets(res),
        *_startup_targets(res),
        *_concurrency_targets(res),
        *_gateway_targets(res),
        *_paced_targets(res),
    ]


def _paced_targets(res: dict[str, Any]) -> list[Target]:
    """Issue 25's streaming check on ``gateway_paced``: no delta of harness in a burst, and the
    hold it adds to direct's at p50 (one client) under a millisecond."""
    gws = res.get("gateway_paced", {}).get("gateways", {})
    ours, floor = gws.get("harness", {}).get("1", {}).get("hold"), gws.get("direct", {}).get("1", {}).get("hold")
    if not ours:
        return []
    bursts = sum(cell.get("hold", {}).get("burst_events", 0) for cell in gws["harness"].values())
    added = ours["hold_p50_ms"] - floor["hold_p50_ms"] if floor and floor["hold_p50_ms"] is not None else None
    scenario = res["gateway_paced"]["scenario"]
    return [
        (f"gateway deltas delivered in bursts (`{scenario}`)", "0", str(bursts), bursts == 0),
        ("gateway hold added to direct's, p50, 1 client", "< 1 ms", _f(added, "{:.2f} ms"), _le(added, 1.0)),
    ]


def _balance_targets(res: dict[str, Any]) -> list[Target]:
    added = res.get("balance", {}).get("pool_over_bare", {}).get("cpu_us")
    if added is None:
        return []
    return [("balancing (a pool of two mock members), CPU µs per request over the bare route", "≤ 2 µs",
             _f(added, "{:.2f} µs"), _le(added, 2.0))]  # fmt: skip


def _per_chunk_targets(res: dict[str, Any]) -> list[Target]:
    rows: list[Target] = []
    tp = res.get("throughput", {}).get("consumers", {})
    for name, floor, limit in (
        ("harness-openai-3mw", "floor", 0.6),
        ("harness-openai-3mw-aiohttp", "floor", 0.6),
        ("harness-anthropic", "floor-anthropic", 0.7),
        ("harness-anthropic-aiohttp", "floor-anthropic", 0.7),
        ("harness-gemini", "floor-gemini", 0.7),
        ("harness-gemini-aiohttp", "floor-gemini", 0.7),
    ):
        cell = tp.get(name, {}).get("text-20000", {})
        if cell:
            r, cpu = cell.get("ratio"), cell.get("cpu_ratio")
            what = f"`{name}` per chunk (20,000; wall, CPU in brackets)"
            rows.append((what, f"≤ {limit}× `{floor}`", f"{_x(r)} ({_x(cpu)})", _le(r, limit)))
    ch = res.get("chain", {})
    base = ch.get("chain-0", {}).get("cpu_us_20000")
    if base is not None:
        for name, limit, what in (
            ("chain-timeout", 1.0, "timeout middleware, CPU µs per chunk over the mock"),
            ("chain-full", 5.0, "all six first-party middlewares, CPU µs per chunk over the mock"),
        ):
            value = ch.get(name, {}).get("cpu_us_20000")
            extra = None if value is None else value - base
            rows.append((what, f"≤ {limit:g} µs", _f(extra, "{:.2f} µs"), _le(extra, limit)))
    return rows


def _startup_targets(res: dict[str, Any]) -> list[Target]:
    rows: list[Target] = []
    startup = res.get("startup", {})
    limits = {"harness --help": 0.8, "harness plugins (10 extra installed)": 1.2, "harness run (mock)": 1.5}
    for label, limit in limits.items():
        value = startup.get("ratio", {}).get(label)
        cpu = startup.get("cpu_ratio", {}).get(label)
        if value is not None:
            what = f"`{label}` wall time (CPU in brackets)"
            rows.append((what, f'≤ {limit}× `python -c "import httpx"`', f"{_x(value)} ({_x(cpu)})", value <= limit))
    cpu_s = startup.get("median_cpu_s", {})
    one, many = (
        cpu_s.get("harness run (mock, 1 openai instances)"),
        cpu_s.get("harness run (mock, 30 openai instances)"),
    )
    if one is not None and many is not None:
        per = (many - one) / 29 * 1000
        what = "start-up independent of configured instances (CPU per extra instance)"
        rows.append(
            (what, "≤ 1 ms per instance", f"{per:.2f} ms ({one * 1000:.0f} → {many * 1000:.0f} ms)", per <= 1.0)
        )
    for label, modules in startup.get("forbidden", {}).items():
        rows.append((f"`{label}` imports no httpx / provider", "none", ", ".join(modules) or "none", not modules))
    return rows


def _concurrency_targets(res: dict[str, Any]) -> list[Target]:
    rows: list[Target] = []
    at = res.get("concurrency", {}).get("1000", {})
    for name in ("harness-openai-3mw", "harness-openai-3mw-aiohttp"):
        h = at.get(name, {})
        if h:
            r, cpu = h.get("ratio_raw"), h.get("cpu_ratio_raw")
            what = f"1,000 concurrent streams, `{name}`, total time (CPU in brackets)"
            rows.append((what, "≤ 2× raw asyncio sockets", f"{_x(r)} ({_x(cpu)})", _le(r, 2.0)))
            rss = h.get("peak_rss_mib")
            rows.append(
                (f"1,000 concurrent streams, `{name}`, peak RSS", "≤ 150 MiB", _f(rss, "{:.0f} MiB"), _le(rss, 150))
            )
    return rows


def _gateway_targets(res: dict[str, Any]) -> list[Target]:
    gw = res.get("gateway", {})
    h, lite, direct, two = (gw.get(k, {}) for k in ("harness", "litellm", "direct", "harness-2w"))
    if not h or "error" in h:
        return []
    rows: list[Target] = []

    def rate(table: dict[str, Any], clients: str) -> float | None:
        return table.get(clients, {}).get("streams_per_s") if "error" not in table else None

    for clients in ("16", "128"):
        ours, theirs = rate(h, clients), rate(lite, clients)
        ratio = ours / theirs if ours and theirs else None
        what = f"gateway streams/s at {clients} clients vs LiteLLM's proxy"
        rows.append(
            (what, "≥ 25×", _x(ratio) if ratio else "n/a (no LiteLLM run)", None if ratio is None else ratio >= 25)
        )
    portkey = gw.get("portkey", {})
    for clients in ("16", "128"):  # issue 25: a Node gateway on the same upstream
        ours, theirs = rate(h, clients), rate(portkey, clients)
        ratio = ours / theirs if ours and theirs else None
        what = f"gateway streams/s at {clients} clients vs Portkey's gateway"
        rows.append(
            (what, "≥ 2×", _x(ratio) if ratio else "n/a (no Portkey run)", None if ratio is None else ratio >= 2)
        )
    cpu = med_of([row.get("cpu_us_per_chunk") for row in h.values()])
    rows.append(("gateway CPU per chunk relayed", "≤ 15 µs (issue 25)", _f(cpu, "{:.1f} µs"), _le(cpu, 15)))
    theirs_pk = med_of([row.get("cpu_us_per_chunk") for row in portkey.values()]) if "error" not in portkey else None
    if cpu and theirs_pk:
        rows.append(("(Portkey's CPU per chunk ÷ the gateway's)", "", _x(theirs_pk / cpu), None))
    theirs_cpu = med_of([row.get("cpu_us_per_chunk") for row in lite.values()]) if "error" not in lite else None
    if cpu and theirs_cpu:  # the streams/s ratio of two CPU-bound gateways, whatever else runs on the machine
        rows.append(("(LiteLLM's CPU per chunk ÷ the gateway's)", "(≥ 25×)", _x(theirs_cpu / cpu), None))
    one, base = h.get("1", {}).get("ttft_p50_ms"), direct.get("1", {}).get("ttft_p50_ms")
    added = one - base if one is not None and base is not None else None
    rows.append(
        (
            "added time to first token, p50, 1 client (vs direct, same run)",
            "≤ 0.5 ms on an idle machine (issue 25)",
            _f(added, "{:.2f} ms"),
            _le(added, 0.5),
        )
    )
    p99, base99 = h.get("128", {}).get("ttft_p99_ms"), direct.get("128", {}).get("ttft_p99_ms")
    ratio99 = p99 / base99 if p99 is not None and base99 else None
    rows.append(("p99 time to first token at 128 clients", "≤ 3× direct p99", _x(ratio99), _le(ratio99, 3.0)))
    rss = max((row.get("peak_rss_mib") or 0 for row in h.values()), default=None)
    most = max((int(clients) for clients in h), default=0)
    rows.append((f"gateway peak RSS per worker (at {most} streams)", "≤ 200 MiB", _f(rss, "{:.0f} MiB"), _le(rss, 200)))
    scale = rate(two, "128") / rate(h, "128") if rate(two, "128") and rate(h, "128") else None  # type: ignore[operator]
    rows.append(
        ("two workers vs one, streams/s at 128 clients", "≥ 1.8×", _x(scale), None if scale is None else scale >= 1.8)
    )
    return rows


def med_of(values: list[float | None]) -> float | None:
    """Median of the values that are not ``None``."""
    import statistics

    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def _throughput(tp: dict[str, Any]) -> list[str]:
    lines = ["### Throughput per chunk (loopback server, one stream at a time)", ""]
    groups = (
        ("OpenAI", tp["openai"], "floor"),
        ("Anthropic", tp["anthropic"], "floor-anthropic"),
        ("Gemini", tp.get("gemini", []), "floor-gemini"),
    )
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
    base = ch.get("chain-0", {}).get("cpu_us_20000")
    rows = []
    for name, row in ch.items():
        n = {"chain-1": 1, "chain-5": 5, "chain-10": 10}.get(name, 1)
        cpu = row.get("cpu_us_20000")
        per = (cpu - base) / n if name != "chain-0" and base is not None and cpu is not None else None
        err = f" (errors: {row['errors'][0]})" if row["errors"] else ""
        cells = [_f(row["us_2000"], "{:.2f}"), _f(row["us_20000"], "{:.2f}"), _f(cpu, "{:.2f}"), _f(per, "{:.2f}")]
        rows.append([name + err, *cells])
    header = ["chain", "µs/chunk (2,000)", "µs/chunk (20,000)", "CPU µs/chunk (20,000)", "CPU µs over chain-0 (per mw)"]
    lines += _table(header, rows)
    lines += [
        "`chain-<name>`: that first-party middleware alone, default config; `chain-full`: otel, retry, timeout,",
        "usage (sqlite ledger), redact, cache (sqlite; every request a miss).",
        "",
    ]
    return lines


def _balance(ba: dict[str, Any]) -> list[str]:
    lines = [f"### Balancing per request (one-word requests over the mock, {ba['requests_per_batch']} per batch)", ""]
    rows = []
    for name, row in ba["consumers"].items():
        err = f" (errors: {row['errors'][0]})" if row["errors"] else ""
        rows.append([name + err, _f(row["us_per_request"], "{:.2f}"), _f(row["cpu_us_per_request"], "{:.2f}")])
    for label, title in (("pool_over_bare", "pool − bare"), ("pool_over_pass", "pool − one pass-through")):
        diff = ba.get(label, {})
        rows.append([title, _f(diff.get("us"), "{:.2f}"), _f(diff.get("cpu_us"), "{:.2f}")])
    lines += _table(["consumer", "µs/request", "CPU µs/request"], rows)
    lines += [
        "Differences are per round (the consumers of a round run back to back), then the median over rounds.",
        "",
    ]
    return lines


def _startup(st: dict[str, Any]) -> list[str]:
    lines = ["### Start-up (whole process, median)", ""]
    cpu, cpu_ratio = st.get("median_cpu_s", {}), st.get("cpu_ratio", {})
    rows = [
        [
            f"`{label}`",
            f"{value * 1000:.1f}",
            _x(st["ratio"][label]),
            _f(cpu.get(label), "{:.3f}") if label in cpu else "n/a",
            _x(cpu_ratio.get(label)),
        ]
        for label, value in st["median_s"].items()
    ]
    header = ["command", "wall ms", "wall ratio to `import httpx`", "CPU s", "CPU ratio"]
    lines += _table(header, rows)
    for label, summary in st["importtime"].items():
        top = ", ".join(f"{k} {v:.1f}" for k, v in summary["by_package_ms"].items())
        lines.append(
            f'- `python -X importtime -c "{label}"`: {summary["total_ms"]:.1f} ms over {summary["modules"]} modules; '
            f"self-time by package (ms): {top}."
        )
    return [*lines, ""]


def _concurrency(co: dict[str, Any]) -> list[str]:
    lines = ["### Concurrency (streams of 200 chunks, one event loop, one client; pool size = streams)", ""]
    lines += ["`floor (pool 100)`: the floor with httpx's default pool of 100 connections (900 requests wait).", ""]
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
                    f"{_x(row.get('ratio_raw'))} ({_x(row.get('cpu_ratio_raw'))})",
                    _f(row["us_per_chunk"]),
                    _f(row["cpu_s"], "{:.2f}"),
                    _f(row["peak_rss_mib"], "{:.0f}"),
                    _f(row["slowest_ttfc_ms"], "{:.0f}"),
                ]
            )
    header = ["streams", "consumer", "total s", "ratio to floor", "to raw sockets (CPU)", "µs/chunk", "CPU s"]
    header += ["peak RSS MiB", "slowest TTFC ms"]
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


def _gateway(gw: dict[str, Any]) -> list[str]:
    lines = ["### Gateway (loopback upstream, 200-chunk streams; each gateway measured alone)", ""]
    rows = []
    for name, table in gw.items():
        if "error" in table:
            rows.append([name, "n/a", f"error: {table['error']}", "", "", "", "", ""])
            continue
        for clients, row in table.items():
            if "error" in row:
                rows.append([name, clients, f"error: {row['error']}", "", "", "", "", ""])
                continue
            rows.append(
                [
                    name,
                    clients,
                    f"{row['streams']}",
                    _f(row["streams_per_s"]),
                    _f(row["ttft_p50_ms"], "{:.1f}"),
                    _f(row["ttft_p99_ms"], "{:.1f}"),
                    _f(row.get("cpu_us_per_chunk")),
                    _f(row.get("peak_rss_mib"), "{:.0f}"),
                ]
            )
    header = [
        "gateway",
        "clients",
        "streams",
        "streams/s",
        "TTFT p50 ms",
        "TTFT p99 ms",
        "CPU µs/chunk",
        "peak RSS MiB",
    ]
    return lines + _table(header, rows)


def _paced(cmp: dict[str, Any]) -> list[str]:
    """A ``compare`` result on a ``paced-NxMms`` scenario: per gateway and client count, streams/s
    and the hold of the deltas (pooled over the rounds), the deltas that came in bursts."""
    lines = [
        f"### Gateway on a slow model's stream (`{cmp['scenario']}`, rounds: {cmp['rounds']}): hold of each delta",
        "",
        "Hold: a delta's arrival beyond the upstream's schedule, from the stream's least delayed delta "
        "(`bench.gateway.hold`); direct's is the floor (the server's timers, the client's reads). "
        "Bursts: deltas that reached the client in one read with another, sent ≥ the gap apart.",
        "",
    ]
    rows = []
    for name, table in cmp["gateways"].items():
        if "error" in table:
            rows.append([name, "n/a", f"error: {table['error']}", *[""] * 7])
            continue
        for clients, cell in table.items():
            held = cell.get("hold", {})
            rows.append(
                [
                    name,
                    clients,
                    _f(cell["median"].get("streams_per_s"), "{:.2f}"),
                    str(held.get("events", 0)),
                    _f(held.get("hold_p50_ms"), "{:.2f}"),
                    _f(held.get("hold_p99_ms"), "{:.2f}"),
                    _f(held.get("hold_max_ms"), "{:.1f}"),
                    str(held.get("burst_events", "n/a")),
                    str(held.get("bursts", "n/a")),
                    str(held.get("largest_read", "n/a")),
                ]
            )
    header = ["gateway", "clients", "streams/s", "deltas", "hold p50 ms", "hold p99 ms", "hold max ms"]
    return lines + _table([*header, "deltas in bursts", "bursts", "largest read"], rows)


def _floor(fl: dict[str, Any]) -> list[str]:
    """``gateway_floor``: per scenario, gateway and client count, streams/s, its ratio to direct,
    gateway CPU per request and per chunk, and the first-token latency added to direct's."""
    lines = [
        "### Gateway beside the floor of its stack (`bench/floor.py`: uvicorn + aiohttp, no gateway work)",
        "",
        "`floor-bytes` relays each upstream read as it came; `floor-json` decodes and encodes each event's "
        "JSON. Loaded in turn round after round (medians); CPU is the gateway process's own.",
        "",
    ]
    rows = []
    for part in ("streams", "short"):
        cmp = fl.get(part)
        if not cmp:
            continue
        for name, table in cmp["gateways"].items():
            if "error" in table:
                rows.append([cmp["scenario"], name, "n/a", f"error: {table['error']}", "", "", "", ""])
                continue
            for clients, cell in table.items():
                median = cell["median"]
                rows.append(
                    [
                        cmp["scenario"],
                        name,
                        clients,
                        _f(median.get("streams_per_s"), "{:.0f}"),
                        _x(cell.get("x_direct")),
                        _f(median.get("cpu_ms_per_request"), "{:.2f}"),
                        _f(median.get("cpu_us_per_chunk"), "{:.1f}"),
                        _f(cell.get("added_ttft_p50_ms"), "{:.2f}"),
                    ]
                )
    header = ["scenario", "gateway", "clients", "streams/s", "x direct", "CPU ms/request", "CPU µs/chunk"]
    return lines + _table([*header, "added TTFT p50 ms"], rows)


def _hot_key(hk: dict[str, Any]) -> list[str]:
    """Short requests per round: requests/s and the ratio to direct's median (the floor)."""
    lines = ["### Short requests with one hot key (5 events, 128 clients; per round)", ""]
    direct = med_of([row.get("streams_per_s") for row in hk.get("direct", [])])
    rows = []
    for name, rounds in hk.items():
        if any("error" in row for row in rounds):
            rows.append([name, f"error: {next(row['error'] for row in rounds if 'error' in row)}", "", "", ""])
            continue
        rates = [row["streams_per_s"] for row in rounds]
        cpu = med_of([row.get("cpu_ms_per_request") for row in rounds])
        rows.append(
            [
                name,
                " ".join(f"{rate:.0f}" for rate in rates),
                _x(med_of(rates) / direct if direct else None),
                _x(rates[-1] / rates[0] if rates[0] else None),
                _f(cpu, "{:.2f}"),
            ]
        )
    return lines + _table(["gateway", "requests/s per round", "x direct", "last/first round", "CPU ms/request"], rows)


def _store(store: dict[str, Any]) -> list[str]:
    """SQLite's group commit against one commit per write transaction (:mod:`bench.store`)."""
    lines = [
        f"### State store on SQLite: CPU per request, {store['clients']} concurrent clients (admission + settlement)",
        "",
    ]
    rows = [
        [name, _f(cell["alone"], "{:.1f}"), _f(cell["grouped"], "{:.1f}"), _x(cell["x"])]
        for name, cell in store.items()
        if isinstance(cell, dict)
    ]
    return lines + _table(["key", "one commit each, µs", "group commit, µs", "x"], rows)


def markdown(res: dict[str, Any]) -> str:
    """The results as markdown: machine, targets, then one table per section."""
    m = res["machine"]
    lines = [f"Run {m['date']}: {m['nproc']} CPUs ({m['cpu']}), Python {m['python']}, {m['platform']}.", ""]
    lines += ["Versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()) + ".", ""]
    lines += [
        f"Rounds: {res.get('rounds', 1)}; medians over rounds; ratios are per-round ratios to that round's floor.",
        "",
    ]
    if "load_before" in res:
        before, after = res["load_before"], res.get("load_after", res["load_before"])
        lines += [
            f"Load average (1/5/15 min) before: {before[0]:.1f}/{before[1]:.1f}/{before[2]:.1f}; "
            f"after: {after[0]:.1f}/{after[1]:.1f}/{after[2]:.1f} (2-core machine shared with other work).",
            "",
        ]
    tgt = targets(res)
    if tgt:
        lines += ["### Targets (issue 17)", ""]
        lines += _table(["target", "limit", "measured", ""], [[a, b, c, _mark(d)] for a, b, c, d in tgt])
    if res.get("throughput"):
        lines += _throughput(res["throughput"])
    if res.get("chain"):
        lines += _chain(res["chain"])
    if res.get("against"):
        lines += _against(res["against"])
    if res.get("balance"):
        lines += _balance(res["balance"])
    if res.get("startup"):
        lines += _startup(res["startup"])
    if res.get("concurrency"):
        lines += _concurrency(res["concurrency"])
    if res.get("ttfc"):
        lines += ["### Time to first chunk (first delta at once, then a 200 ms stall)", ""]
        lines += _table(
            ["consumer", "median ms", "CPU ms"],
            [[k, _f(v["ttfc_ms"], "{:.2f}"), _f(v.get("ttfc_cpu_ms"), "{:.2f}")] for k, v in res["ttfc"].items()],
        )
    if res.get("httpx2"):
        lines += _httpx2(res["httpx2"])
    if res.get("gateway"):
        lines += _gateway(res["gateway"])
    if res.get("gateway_paced"):
        lines += _paced(res["gateway_paced"])
    if res.get("gateway_floor"):
        lines += _floor(res["gateway_floor"])
    if res.get("compare", {}).get("scenario", "").startswith("paced-"):  # python -m bench.gateway compare output
        lines += _paced(res["compare"])
    if res.get("hot_key"):
        lines += _hot_key(res["hot_key"])
    if res.get("store"):
        lines += _store(res["store"])
    if res.get("profile"):
        lines += ["### Profiles", "", *(f"- {k}: `{v}`" for k, v in res["profile"].items()), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.report RESULTS.json``: print the markdown of a saved run."""
    import json
    import sys
    from pathlib import Path

    paths = sys.argv[1:] if argv is None else argv
    print(markdown(json.loads(Path(paths[0]).read_text())))


if __name__ == "__main__":
    main()


def _against(res: dict[str, Any]) -> list[str]:
    """The ``against`` section: µs per chunk of this tree and the other, per-round ratio and its range."""
    lines = [f"### Per chunk against `{res['other']}` (text-20000; this ÷ other, median of rounds [range])", ""]
    rows = []
    for name, row in res.items():
        if name == "other":
            continue
        cells = [name]
        for key in ("us_per_chunk", "cpu_us_per_chunk"):
            span = row.get(f"range_{key}")
            ratio = row.get(f"ratio_{key}")
            cells += [
                _f(row.get(f"other_{key}"), "{:.2f}"),
                _f(row.get(f"this_{key}"), "{:.2f}"),
                (f"{ratio:.3f} [{span[0]:.3f}–{span[1]:.3f}]" if ratio is not None and span else "n/a"),
            ]
        cells.append("; ".join(row.get("errors") or []) or "")
        rows.append(cells)
    header = ["consumer", "other µs", "this µs", "ratio", "other CPU µs", "this CPU µs", "CPU ratio", "errors"]
    return lines + _table(header, rows)
