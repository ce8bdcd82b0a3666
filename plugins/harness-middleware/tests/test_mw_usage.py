"""usage: one ledger row per stream, however it ends; unknown usage stays NULL; cost semantics."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from mw_helpers import (
    Script,
    Stall,
    aborted_finish,
    collect,
    error_finish,
    options,
    stop,
    text_chunks,
    usage,
)

from harness_core.errors import LlmError
from harness_core.types import TextDelta, TokenUsage
from harness_middleware.usage import UsagePlugin, default_usage_path

pytestmark = pytest.mark.anyio


def plugin(tmp_path: Path, **config: Any) -> UsagePlugin:
    config.setdefault("path", str(tmp_path / "usage.sqlite"))
    return UsagePlugin(msgspec.convert(config, UsagePlugin.Config))


def rows(p: UsagePlugin) -> list[dict[str, Any]]:
    return p.ledger.rows()


async def test_complete_stream_is_recorded_with_cost(tmp_path: Path) -> None:
    p = plugin(tmp_path, prices={"fake/m1": {"input": 2.0, "output": 10.0, "cache_read": 0.5}})
    script = Script([*text_chunks("hi"), usage(1000, 200, cache_read_tokens=400, reasoning_tokens=50), stop()])
    await collect(p.llm_stream(options(), script))
    [row] = rows(p)
    assert row["route"] == "fake"
    assert row["model"] == "m1"
    assert (row["input_tokens"], row["output_tokens"], row["cache_read_tokens"]) == (1000, 200, 400)
    assert row["cache_write_tokens"] is None
    assert row["reasoning_tokens"] == 50
    assert (row["status"], row["error_code"], row["finish_reason"]) == ("complete", None, "stop")
    assert row["latency_ms"] >= 0
    assert row["first_chunk_ms"] is not None
    assert row["first_chunk_ms"] <= row["latency_ms"]
    assert row["cost"] == pytest.approx((600 * 2.0 + 400 * 0.5 + 200 * 10.0) / 1e6)
    assert abs(row["ts"] - time.time()) < 3600


async def test_stream_without_usage_is_unknown_not_zero(tmp_path: Path) -> None:
    p = plugin(tmp_path, prices={"fake/*": {"input": 1, "output": 1}})
    await collect(p.llm_stream(options(), Script([*text_chunks("hi"), stop()])))
    [row] = rows(p)
    assert row["input_tokens"] is None
    assert row["output_tokens"] is None
    assert row["cost"] is None
    assert row["status"] == "complete"


@pytest.mark.parametrize(
    ("final", "status", "code", "reason"),
    [
        (error_finish("RATE_LIMITED"), "error", "RATE_LIMITED", "error"),
        (aborted_finish(), "aborted", "ABORTED", "aborted"),
    ],
)
async def test_error_and_aborted_finish(tmp_path: Path, final: Any, status: str, code: str, reason: str) -> None:
    p = plugin(tmp_path)
    await collect(p.llm_stream(options(), Script([final])))
    [row] = rows(p)
    assert (row["status"], row["error_code"], row["finish_reason"]) == (status, code, reason)
    assert row["first_chunk_ms"] is None  # it ended before any chunk: no time to a first one


async def test_error_finish_without_failure(tmp_path: Path) -> None:
    from mw_helpers import finish

    p = plugin(tmp_path)
    async for _ in p.llm_stream(options(), Script([finish("error")])):
        pass
    assert rows(p)[0]["status"] == "error"
    assert rows(p)[0]["error_code"] is None


@pytest.mark.parametrize(
    ("raised", "code"),
    [(LlmError("NETWORK", "reset"), "NETWORK"), (RuntimeError("bug"), "INTERNAL")],
)
async def test_raised_errors_are_recorded(tmp_path: Path, raised: BaseException, code: str) -> None:
    p = plugin(tmp_path)
    with pytest.raises(type(raised)):
        await collect(p.llm_stream(options(), Script([*text_chunks("a"), raised])))
    [row] = rows(p)
    assert (row["status"], row["error_code"], row["finish_reason"]) == ("error", code, None)


async def test_stream_without_finish_is_a_protocol_error(tmp_path: Path) -> None:
    p = plugin(tmp_path)
    async for _ in p.llm_stream(options(), Script(text_chunks("a"))):
        pass
    assert rows(p)[0]["error_code"] == "PROTOCOL"


async def test_consumer_breaking_early_is_recorded(tmp_path: Path) -> None:
    p = plugin(tmp_path)
    script = Script([*text_chunks("a", "b"), usage(), stop()])
    stream = p.llm_stream(options(), script)
    async for _ in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]
    [row] = rows(p)
    assert (row["status"], row["error_code"], row["input_tokens"]) == ("aborted", None, None)
    assert script.closed == 1


async def test_cancelled_stream_is_recorded(tmp_path: Path) -> None:
    p = plugin(tmp_path)
    inner = Stall(*text_chunks("a")[:2])
    stream = p.llm_stream(options(), inner)
    with anyio.CancelScope() as scope:
        async for chunk in stream:
            if isinstance(chunk, TextDelta):
                scope.cancel()  # delivered while the inner stream stalls after its second chunk
    await stream.aclose()  # type: ignore[attr-defined]
    assert scope.cancelled_caught
    [row] = rows(p)
    assert row["status"] == "aborted"
    assert row["first_chunk_ms"] is not None
    assert inner.closed == 1


async def test_database_fault_is_logged_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    p = plugin(tmp_path, path=str(tmp_path / "dir.sqlite"))
    (tmp_path / "dir.sqlite").mkdir()  # the file's place is taken after start: the write fails
    with caplog.at_level(logging.ERROR, logger="harness_middleware.usage"):
        chunks = await collect(p.llm_stream(options(), Script([*text_chunks("a"), stop()])))
    assert chunks[-1] == stop()
    assert "usage: recording the stream in" in caplog.text
    assert "OperationalError" in caplog.text


async def test_a_file_system_fault_is_logged_once_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "sub"
    p = plugin(tmp_path, path=str(folder / "usage.sqlite"))
    folder.write_text("x")  # the folder's place is taken by a file after start: mkdir raises OSError
    reply = [*text_chunks("a"), stop()]
    with caplog.at_level(logging.DEBUG, logger="harness_middleware.usage"):
        for _ in range(3):
            assert await collect(p.llm_stream(options(), Script(reply))) == reply  # never raised
        folder.unlink()
        assert await collect(p.llm_stream(options(), Script(reply))) == reply
    levels = [(r.levelname, r.getMessage().split(" failed")[0].split(" works")[0]) for r in caplog.records]
    what = f"usage: recording the stream in {folder / 'usage.sqlite'}"
    assert levels == [("ERROR", what), ("DEBUG", what), ("DEBUG", what), ("WARNING", what)]
    assert "FileExistsError" in caplog.records[0].getMessage()
    assert "after 3 failed writes" in caplog.records[-1].getMessage()
    assert len(rows(p)) == 1


async def test_slow_write_is_bounded(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    p = plugin(tmp_path, write_timeout=0.01)
    release = threading.Event()
    finished = threading.Event()

    def slow_insert(record: object) -> None:
        release.wait()  # blocks until the test has seen the bound: no write can beat the timeout
        finished.set()

    p.ledger.insert = slow_insert  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger="harness_middleware.usage"):
        await collect(p.llm_stream(options(), Script([stop()])))
    assert "took over" in caplog.text
    release.set()  # the abandoned worker thread ends; its late result is dropped by the backend
    assert await anyio.to_thread.run_sync(finished.wait)  # no fixed wait: pytest-timeout bounds a hang


async def test_summary_groups_by_day_route_model(tmp_path: Path) -> None:
    p = plugin(tmp_path, prices={"fake/m1": {"input": 1.0, "output": 1.0}})
    await collect(p.llm_stream(options(), Script([*text_chunks("a"), usage(10, 5), stop()])))
    await collect(p.llm_stream(options(), Script([*text_chunks("a"), usage(20, 5), stop()])))
    await collect(p.llm_stream(options(model="m2"), Script([error_finish("SERVER")])))
    summary = p.ledger.summary()
    assert [(r["route"], r["model"], r["requests"]) for r in summary] == [("fake", "m1", 2), ("fake", "m2", 1)]
    m1, m2 = summary
    assert (m1["input_tokens"], m1["output_tokens"], m1["errors"], m1["unknown_usage"]) == (30, 10, 0, 0)
    assert m1["cost"] == pytest.approx(40 / 1e6)
    assert (m2["input_tokens"], m2["errors"], m2["unknown_usage"], m2["cost"], m2["unpriced"]) == (None, 1, 1, None, 1)
    assert p.ledger.summary(since=time.time() + 3600) == []


def test_price_lookup_order(tmp_path: Path) -> None:
    p = plugin(
        tmp_path,
        prices={"r/m": {"input": 1, "output": 1}, "r/*": {"input": 2, "output": 2}, "*/x": {"input": 3, "output": 3}},
    )
    million = TokenUsage(input_tokens=1_000_000, output_tokens=0)
    assert [p.prices.cost(r, m, million).total for r, m in (("r", "m"), ("r", "other"), ("q", "x"))] == [1, 2, 3]  # type: ignore[union-attr]
    assert p.prices.cost("q", "y", million) is None


async def test_table_prices_a_listed_model(tmp_path: Path) -> None:
    p = plugin(tmp_path)
    reply = Script([*text_chunks("a"), usage(1_000_000, 1_000_000, cache_read_tokens=400_000), stop()])
    await collect(p.llm_stream(options(route="openai", model="gpt-4o-mini"), reply))
    await collect(p.llm_stream(options(route="mock", model="echo"), Script([usage(5, 5), stop()])))
    listed, unknown = rows(p)
    expected = p.prices.cost("openai", "gpt-4o-mini", TokenUsage(1_000_000, 1_000_000, cache_read_tokens=400_000))
    assert expected is not None
    assert listed["cost"] == pytest.approx(float(expected.total))
    assert listed["cost"] < 0.6 * 0.15 + 0.6 + 0.4 * 0.15  # the cache reads were cheaper than input
    assert (listed["price_source"], listed["price_id"]) == (expected.source, "openai/gpt-4o-mini")
    assert listed["price_source"].startswith("genai-prices ")
    assert (unknown["cost"], unknown["price_source"], unknown["price_id"]) == (None, None, None)


async def test_cache_hit_is_recorded_as_cached_not_spent(tmp_path: Path) -> None:
    from harness_middleware.cache import CachePlugin

    p = plugin(tmp_path, prices={"fake/*": {"input": 1, "output": 1}})
    cache = CachePlugin(CachePlugin.Config(path=str(tmp_path / "cache.sqlite")))
    inner = Script([*text_chunks("a"), usage(100, 10), stop()])

    def cached_chain(options: Any) -> Any:
        return cache.llm_stream(options, inner)

    first = await collect(p.llm_stream(options(), cached_chain))
    second = await collect(p.llm_stream(options(), cached_chain))
    assert first == second
    assert len(inner.calls) == 1
    miss, hit = rows(p)
    assert (miss["cached"], miss["cost"], miss["price_source"]) == (0, pytest.approx(110 / 1e6), "config")
    assert (hit["cached"], hit["cost"], hit["price_source"], hit["price_id"]) == (1, 0.0, "cache", None)
    [total] = p.ledger.summary(by=())
    assert (total["requests"], total["cached"], total["input_tokens"], total["output_tokens"]) == (2, 1, 100, 10)
    assert total["unknown_usage"] == 0


async def test_served_route_and_model_from_the_record(tmp_path: Path) -> None:
    from harness_core.record import record_of

    p = plugin(tmp_path)

    async def fell_back(options: Any) -> Any:
        notes = record_of(options)
        assert notes is not None
        notes.served_route, notes.served_model = "anthropic", "claude-sonnet-4-20250514"
        for chunk in [usage(1000, 100), stop()]:
            yield chunk

    caller = options()
    await collect(p.llm_stream(caller, fell_back))
    assert caller.metadata == {}  # the caller's metadata is not modified
    [row] = rows(p)
    assert (row["route"], row["model"]) == ("anthropic", "claude-sonnet-4-20250514")
    assert (row["requested_route"], row["requested_model"]) == ("fake", "m1")  # what the caller asked for
    assert row["price_id"] == "anthropic/claude-sonnet-4-0"


def test_old_ledger_is_migrated(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE usage (id INTEGER PRIMARY KEY, ts REAL NOT NULL, route TEXT, model TEXT,"
            " input_tokens INTEGER, output_tokens INTEGER, cache_read_tokens INTEGER, cache_write_tokens INTEGER,"
            " reasoning_tokens INTEGER, status TEXT NOT NULL, error_code TEXT, finish_reason TEXT,"
            " latency_ms REAL NOT NULL, first_chunk_ms REAL, cost REAL)"
        )
        conn.execute(
            "INSERT INTO usage (ts, route, model, input_tokens, output_tokens, status, latency_ms, cost)"
            " VALUES (1.0, 'r', 'm', 3, 4, 'complete', 1.0, 0.5)"
        )
    conn.close()
    from harness_middleware.usage import UsageLedger

    [row] = UsageLedger(path).rows()
    assert (row["route"], row["input_tokens"], row["cost"]) == ("r", 3, 0.5)
    assert (row["price_source"], row["price_id"], row["cached"]) == (None, None, 0)
    assert row["operation"] == "chat"  # rows before embeddings were recorded are streams
    assert (row["requested_route"], row["requested_model"]) == (None, None)  # unknown for older rows
    [again] = UsageLedger(path).rows()  # a second open finds the columns present
    assert again == row


def test_summary_groupings(tmp_path: Path) -> None:
    from mw_helpers import usage_record

    from harness_middleware.usage import UsageLedger

    ledger = UsageLedger(tmp_path / "u.sqlite")
    assert ledger.summary(by=()) == []
    common: dict[str, Any] = {"ts": 86400.0 * 2, "output_tokens": 1}
    ledger.insert(usage_record(route="a", model="x", input_tokens=1, cost=1.0, **common))
    ledger.insert(usage_record(route="b", model="x", input_tokens=2, cost=None, **common))
    by_model = ledger.summary(by=["model"])
    assert [(r["model"], r["requests"], r["input_tokens"], r["cost"], r["unpriced"]) for r in by_model] == [
        ("x", 2, 3, 1.0, 1)
    ]
    assert "route" not in by_model[0]
    assert [r["route"] for r in ledger.summary(by=["route", "day"])] == ["a", "b"]
    assert ledger.summary(by=["route", "day"])[0]["day"] == "1970-01-03"
    with pytest.raises(ValueError, match="cannot group usage by 'user'; choose among day, requested, route"):
        ledger.summary(by=["user"])


def test_default_path() -> None:
    assert UsagePlugin().ledger.path == default_usage_path()
    assert default_usage_path().name == "usage.sqlite"


def test_config_rejects_unknown_fields() -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"pth": "x"}, UsagePlugin.Config)


def test_record_is_shared_by_nested_layers() -> None:
    from harness_core.record import open_record, record_of

    outer_options, outer = open_record(options())
    inner_options, inner = open_record(outer_options)
    assert inner is outer
    assert inner_options is outer_options
    assert record_of(options()) is None


async def test_a_pool_is_recorded_by_the_member_that_served_it(tmp_path: Path) -> None:
    """``usage`` outside ``balance``: each row names the pool asked for and the member that served
    (priced by the member), and the summary breaks the pool's spend down by member."""
    from harness_core import Harness
    from harness_core.types import GenerateOptions, Message
    from harness_llm_mock import MockConfig, MockPlugin
    from harness_middleware.balance import BalancePlugin, MemoryState

    p = plugin(
        tmp_path,
        prices={"east/echo": {"input": 1e6, "output": 1e6}, "west/echo": {"input": 2e6, "output": 2e6}},
    )
    pools = {"pool": [{"target": "east/echo", "weight": 1}, {"target": "west", "weight": 1}]}
    balance = BalancePlugin(msgspec.convert({"pools": pools, "seed": 3}, BalancePlugin.Config), state=MemoryState())
    harness = Harness(
        [
            ("usage", p),
            ("balance", balance),
            ("mock:east", MockPlugin(MockConfig(routes=["east"]))),
            ("mock:west", MockPlugin(MockConfig(routes=["west"]))),
        ]
    )
    async with harness:
        for _ in range(20):
            await harness.generate(GenerateOptions(route="pool", model="echo", messages=[Message.user("hi")]))
    recorded = rows(p)
    assert {(r["requested_route"], r["requested_model"]) for r in recorded} == {("pool", "echo")}
    served = {(r["route"], r["model"]) for r in recorded}
    assert served == {("east", "echo"), ("west", "echo")}  # a member without a model keeps the requested one
    by_member = {(r["requested"], r["member"]): r for r in p.ledger.summary(by=("member", "requested"))}
    assert set(by_member) == {("pool", "east/echo"), ("pool", "west/echo")}
    assert sum(r["requests"] for r in by_member.values()) == 20
    for member, rate in (("east/echo", 1.0), ("west/echo", 2.0)):
        row = by_member["pool", member]
        tokens = row["input_tokens"] + row["output_tokens"]
        assert row["cost"] == pytest.approx(tokens * rate)  # priced by the member that served
    [total] = p.ledger.summary(by=("requested",))
    assert (total["requested"], total["requests"]) == ("pool", 20)
