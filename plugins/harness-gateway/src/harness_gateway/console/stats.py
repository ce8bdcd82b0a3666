"""What the Spend and Traffic pages show, computed from request records (pure functions).

Rows are the summary dicts of :class:`~harness_gateway.console.records.RecordStore` (times in
unix seconds and milliseconds, money in USD). Buckets are UTC hours or days. Percentiles use the
nearest-rank method (p95 of 20 values is the 19th smallest).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Final, Literal

__all__ = ["BUCKETS", "GROUPS", "TOKEN_KINDS", "Bucket", "Group", "percentile", "spend", "traffic"]

Bucket = Literal["hour", "day"]
Group = Literal["key", "route", "model", "member"]
BUCKETS: Final[dict[str, int]] = {"hour": 3600, "day": 86400}
GROUPS: Final = ("key", "route", "model", "member")
TOKEN_KINDS: Final = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")


def percentile(values: Sequence[float], p: float) -> float | None:
    """The ``p``-th percentile (0 < p <= 100) of ``values`` by nearest rank; ``None`` when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def group_of(row: dict[str, Any], by: Group) -> str:
    """The label of ``row`` in grouping ``by``: the key's name, the route asked for, ``route/model``
    asked for, or the ``member``: the ``route/model`` that served (a ``balance`` pool's member or a
    ``fallback`` target; the one asked for when nothing else served it). Spend is priced by the
    member (:func:`harness_gateway.spend.request_cost` of the served route and model)."""
    if by == "key":
        return str(row["key_name"] or "(no key)")
    if by == "route":
        return str(row["route"])
    if by == "member":
        return f"{row['served_route'] or row['route']}/{row['served_model'] or row['model'] or '-'}"
    return f"{row['route']}/{row['model'] or '-'}"


def bucket_label(start: float, bucket: Bucket) -> str:
    """``2026-12-01 15:00`` (hours) or ``2026-12-01`` (days), UTC."""
    moment = datetime.fromtimestamp(start, UTC)
    return moment.strftime("%Y-%m-%d %H:00" if bucket == "hour" else "%Y-%m-%d")


def _buckets(since: float, now: float, bucket: Bucket) -> list[float]:
    size = BUCKETS[bucket]
    first = since // size * size
    return [first + i * size for i in range(int((now - first) // size) + 1)]


def spend(rows: Iterable[dict[str, Any]], *, since: float, now: float, bucket: Bucket, by: Group) -> dict[str, Any]:
    """Cost and tokens per bucket and group.

    Returns ``{"labels": [bucket label], "cost": [{"name", "values"}], "tokens": [...],
    "table": [{"group", "requests", <each token kind>, "cost"}]}``; series and table rows are
    sorted by cost, highest first.
    """
    starts = _buckets(since, now, bucket)
    size = BUCKETS[bucket]
    index = {start: i for i, start in enumerate(starts)}
    cost: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(starts))
    tokens: dict[str, list[int]] = defaultdict(lambda: [0] * len(starts))
    totals: dict[str, dict[str, Any]] = {}
    for row in rows:
        name = group_of(row, by)
        i = index.get(row["started_at"] // size * size)
        if i is None:
            continue
        cost[name][i] += row["cost"] or 0.0
        tokens[name][i] += (row["input_tokens"] or 0) + (row["output_tokens"] or 0)
        total = totals.setdefault(name, {"group": name, "requests": 0, "cost": 0.0, **dict.fromkeys(TOKEN_KINDS, 0)})
        total["requests"] += 1
        total["cost"] += row["cost"] or 0.0
        for kind in TOKEN_KINDS:
            total[kind] += row[kind] or 0
    order = sorted(totals, key=lambda name: (-totals[name]["cost"], name))
    return {
        "labels": [bucket_label(start, bucket) for start in starts],
        "cost": [{"name": name, "values": [round(v, 6) for v in cost[name]]} for name in order],
        "tokens": [{"name": name, "values": tokens[name]} for name in order],
        "table": [totals[name] for name in order],
    }


def traffic(rows: Iterable[dict[str, Any]], *, since: float, now: float) -> dict[str, Any]:
    """Requests, errors, latency and time-to-first-token percentiles, fallbacks.

    Returns ``{"labels": [hour], "status": [{"name": status, "values": [count per hour]}],
    "routes": [{"group": "route/model", "requests", "errors", "aborted", "fallbacks",
    "latency_p50/p95/p99", "ttft_p50/p95/p99" (ms or None)}], "errors": [{"code", "count"}],
    "fallbacks": [{"id", "route", "served", "attempts"}]}``.
    """
    starts = _buckets(since, now, "hour")
    index = {start: i for i, start in enumerate(starts)}
    status: dict[str, list[int]] = {name: [0] * len(starts) for name in ("complete", "error", "aborted")}
    latency: dict[str, list[float]] = defaultdict(list)
    ttft: dict[str, list[float]] = defaultdict(list)
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    errors: Counter[str] = Counter()
    fallbacks: list[dict[str, Any]] = []
    for row in rows:
        i = index.get(row["started_at"] // 3600 * 3600)
        if i is None:
            continue
        name = group_of(row, "model")
        status.setdefault(row["status"], [0] * len(starts))[i] += 1
        counts[name]["requests"] += 1
        counts[name][row["status"]] += 1
        latency[name].append(row["latency_ms"])
        if row["first_token_ms"] is not None:
            ttft[name].append(row["first_token_ms"])
        if row["status"] == "error":
            errors[row["error_code"] or "(no code)"] += 1
        served = f"{row['served_route']}/{row['served_model']}"
        if row["attempts"] or served != name:
            counts[name]["fallbacks"] += 1
            fallbacks.append({"id": row["id"], "route": name, "served": served, "attempts": row["attempts"]})
    table = []
    for name in sorted(counts):
        entry: dict[str, Any] = {
            "group": name,
            "requests": counts[name]["requests"],
            "errors": counts[name]["error"],
            "aborted": counts[name]["aborted"],
            "fallbacks": counts[name]["fallbacks"],
        }
        for p in (50, 95, 99):
            entry[f"latency_p{p}"] = percentile(latency[name], p)
            entry[f"ttft_p{p}"] = percentile(ttft[name], p)
        table.append(entry)
    return {
        "labels": [bucket_label(start, "hour") for start in starts],
        "status": [{"name": name, "values": values} for name, values in status.items()],
        "routes": table,
        "errors": [{"code": code, "count": count} for code, count in errors.most_common()],
        "fallbacks": fallbacks[-50:],
    }
