"""The gateway's per-request and per-chunk paths: SQLite transactions on the event loop and their
fallback to a worker thread, the key-record cache, the price-miss cache, the delta templates, the
provider pool size, the console's live wake-ups and uvicorn's loop and parser settings."""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import msgspec
import pytest
import uvicorn
from anyio.abc import TaskStatus
from gw_helpers import open_key

from harness_core.abort import AbortSignal
from harness_core.errors import Failure
from harness_core.loader import load_config
from harness_core.types import (
    BlockStart,
    Finish,
    FinishReason,
    GenerateOptions,
    ReasoningDelta,
    TextDelta,
    TokenUsage,
    ToolCallDelta,
    Usage,
)
from harness_gateway import server as server_module
from harness_gateway import spend as spend_module
from harness_gateway import store as store_module
from harness_gateway.anthropic_messages import MessagesStreamEncoder
from harness_gateway.config import ConnectionLimits, GatewayConfig
from harness_gateway.console.live import ConsoleObserver
from harness_gateway.console.timeline import Timeline
from harness_gateway.errors import GatewayError
from harness_gateway.keys import KeyRecord, KeySpec
from harness_gateway.limits import guarded_protocol
from harness_gateway.observe import RunInfo
from harness_gateway.openai_chat import ChatStreamEncoder
from harness_gateway.runtime import POOL_SIZE, load_runtime, provider_defaults
from harness_gateway.spend import request_cost
from harness_gateway.sqlite import SQLiteStore
from harness_gateway.store import Tx
from harness_middleware.pricing import Price, PriceBook

pytestmark = pytest.mark.anyio

# ---------------------------------------------------------------------------------- SQLite


async def _store(tmp_path: Path) -> SQLiteStore:
    store = SQLiteStore(tmp_path / "gw.sqlite", timeout=30)
    await store.migrate()
    return store


async def _write(store: SQLiteStore) -> str:
    """One write transaction: the ledger row of a request without a key, written as it ends."""
    ticket = await store.admit(None, "mock", "echo")
    await store.settle(ticket, "complete", TokenUsage(1, 1), 0.0)
    return ticket


def _hold_write_lock(path: Path) -> sqlite3.Connection:
    """Another process's connection holding the write lock (as a second worker admitting)."""
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    return other


async def _locked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, group_commit: bool = True
) -> tuple[SQLiteStore, KeyRecord, threading.Event, sqlite3.Connection]:
    """A store, a key of it, an event set when a write goes to the worker thread to wait (it found
    the write lock taken: a whole group, ``_commit_waiting``, or without group commit one
    transaction alone, ``_waiting``), and the other connection that holds that lock."""
    store = await _store(tmp_path)
    key = await open_key(store)
    store.group_commit = group_commit
    await store.ledger()  # the event loop's connection is open: only a busy write takes the lock
    entered = threading.Event()
    name = "_commit_waiting" if group_commit else "_waiting"
    waiting = getattr(store, name)

    async def group_spy(entries: Any) -> None:
        entered.set()
        await waiting(entries)

    def alone_spy(*args: Any) -> Any:
        entered.set()
        return waiting(*args)

    monkeypatch.setattr(store, name, group_spy if group_commit else alone_spy)
    return store, key, entered, _hold_write_lock(store.path)


@pytest.mark.parametrize("group_commit", [True, False])
async def test_a_transaction_waits_in_a_thread_while_another_process_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, group_commit: bool
) -> None:
    store, key, entered, other = await _locked(tmp_path, monkeypatch, group_commit)
    tickets: list[str] = []

    async def admit() -> None:
        tickets.append(await store.admit(key, "mock", "echo"))

    async with anyio.create_task_group() as group:
        group.start_soon(admit)
        await anyio.to_thread.run_sync(entered.wait)  # the event loop's attempt was refused at once
        assert not tickets
        other.execute("COMMIT")
    [row] = await store.ledger()
    assert (row["id"], row["status"]) == (tickets[0], "running")
    other.close()
    await store.aclose()


async def test_a_lone_request_cancelled_while_its_group_waits_commits_and_takes_it_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group's leader commits its work (shielded: a follower may wait on it) and returns
    its ticket; the cancellation reaches its caller at the next checkpoint, whose own cleanup
    settles the row (the relay's shielded settlement)."""
    store, key, entered, other = await _locked(tmp_path, monkeypatch)
    tickets: list[str] = []
    after: list[str] = []

    async def admit() -> None:
        tickets.append(await store.admit(key, "mock", "echo"))
        try:
            await anyio.lowlevel.checkpoint()
        except anyio.get_cancelled_exc_class():
            after.append("cancelled")
            raise

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(admit)
            await anyio.to_thread.run_sync(entered.wait)
            scope.cancel()
            other.execute("COMMIT")
    assert scope.cancelled_caught
    assert after == ["cancelled"]
    assert store.running == set(tickets)
    [row] = await store.ledger()
    assert (row["id"], row["status"]) == (tickets[0], "running")
    other.close()
    await store.aclose()


async def test_without_group_commit_a_request_cancelled_while_its_transaction_waits_commits_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, key, entered, other = await _locked(tmp_path, monkeypatch, group_commit=False)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(store.admit, key, "mock", "echo")
            await anyio.to_thread.run_sync(entered.wait)
            scope.cancel()  # delivered when the thread returns: after the lock, before COMMIT
            other.execute("COMMIT")
    assert scope.cancelled_caught
    assert await store.ledger(key.id) == []
    other.close()
    await store.aclose()


async def test_a_transaction_may_only_await_its_statements(tmp_path: Path) -> None:
    store = await _store(tmp_path)

    async def suspends(tx: Tx) -> None:
        await tx.run("INSERT INTO gateway_ledger (id, route, model, started_at, status, reserved)"
                     " VALUES ('x', 'r', 'm', 0, 'running', 0)")  # fmt: skip
        await anyio.lowlevel.checkpoint()

    with pytest.raises(RuntimeError, match="may only await its own statements"):
        await store.transaction(suspends)
    assert await store.ledger() == []  # rolled back
    with pytest.raises(GatewayError) as caught:  # any other SQLite fault is a 503
        await store.transaction(lambda tx: tx.one("SELECT * FROM no_such_table"))
    assert caught.value.status == 503
    await store.aclose()
    await store.aclose()  # closing twice is harmless


async def test_checkpoints_run_off_the_event_loop_and_their_faults_are_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = await _store(tmp_path)
    store.checkpoint_every = 2
    threads: list[str] = []
    checkpoint = store._checkpoint

    def spy(mode: str) -> int | None:
        threads.append(threading.current_thread().name)
        return checkpoint(mode)

    monkeypatch.setattr(store, "_checkpoint", spy)
    await _write(store)  # the migration was write 1: this is write 2
    assert len(threads) == 1  # a passive one: the WAL is short
    assert threads[0] != threading.main_thread().name
    assert (checkpoint("PASSIVE") or 0) > 0  # again, on the connection the first one opened: the WAL's frames

    def broken(wait: bool) -> sqlite3.Connection:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store, "_connect", broken)
    with caplog.at_level(logging.WARNING, logger="harness_gateway.sqlite"):
        assert checkpoint("PASSIVE") is None
    assert "WAL checkpoint failed: disk I/O error" in caplog.text
    await store.aclose()


async def test_a_wal_the_passive_checkpoint_leaves_long_is_emptied(tmp_path: Path) -> None:
    """Under steady traffic a passive checkpoint never lets the WAL restart (the file grew without
    end: 1 GB after 25,000 requests): one longer than ``wal_limit`` frames is truncated."""
    store = await _store(tmp_path)
    store.checkpoint_every, store.wal_limit = store._writes + 40, 20  # (the migration's writes count)
    wal = tmp_path / "gw.sqlite-wal"
    for _ in range(39):
        await _write(store)
    assert wal.stat().st_size > 0
    await _write(store)  # the 40th: it checkpoints
    assert wal.stat().st_size == 0  # truncated: a passive checkpoint leaves the file as it is
    assert len(await store.ledger()) == 40  # every row is in the database
    store.wal_limit = 10**6  # a WAL within the limit: only the passive checkpoint runs
    for _ in range(40):
        await _write(store)
    assert wal.stat().st_size > 0
    await store.aclose()


async def test_transactions_wait_for_a_truncating_checkpoint_on_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """While the truncating checkpoint holds the file, this process's transactions wait for it
    without trying the file (no busy error, no worker thread each), then run as usual."""
    store = await _store(tmp_path)
    store.checkpoint_every, store.wal_limit = store._writes + 2, 0
    checkpoint = store._checkpoint
    entered, release = threading.Event(), threading.Event()

    def held(mode: str) -> int | None:
        if mode == "TRUNCATE":
            entered.set()
            release.wait()
        return checkpoint(mode)

    def no_worker(work: Any, write: bool) -> Any:
        raise AssertionError("a transaction went to a worker thread")

    monkeypatch.setattr(store, "_checkpoint", held)
    monkeypatch.setattr(store, "_waiting", no_worker)
    await _write(store)
    tickets: list[str] = []

    async def admit() -> None:
        tickets.append(await _write(store))

    async with anyio.create_task_group() as group:
        group.start_soon(admit)  # the second write: it checkpoints, and waits for it
        await anyio.to_thread.run_sync(entered.wait)
        group.start_soon(admit)  # waits for the checkpoint
        await anyio.wait_all_tasks_blocked()
        assert store._truncating is not None
        assert len(await _rows(tmp_path)) == 2  # the second has not run
        release.set()
    assert store._truncating is None
    assert len(tickets) == 2
    assert len(await store.ledger()) == 3

    other = sqlite3.connect(tmp_path / "gw.sqlite", isolation_level=None)  # another process's reader
    other.execute("BEGIN")
    other.execute("SELECT count(*) FROM gateway_ledger").fetchone()
    store.timeout = 0.05
    store._conns.pop(True).close()  # reopened with the short wait
    with caplog.at_level(logging.INFO, logger="harness_gateway.sqlite"):
        assert checkpoint("TRUNCATE") is not None
    assert "TRUNCATE WAL checkpoint not completed (the file is busy)" in caplog.text
    other.close()
    await store.aclose()


async def _rows(tmp_path: Path) -> list[Any]:
    """The ledger's rows read by a connection of its own (as another process would)."""
    with sqlite3.connect(tmp_path / "gw.sqlite") as db:
        return db.execute("SELECT id FROM gateway_ledger").fetchall()


# ---------------------------------------------------------------------------------- keys


async def test_key_records_are_reused_for_a_short_while(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = await _store(tmp_path)
    plain, record = await store.create_key(KeySpec(name="team"))
    reads: list[int] = []
    transaction = store.transaction

    async def counted(work: Any, *, write: bool = True) -> Any:
        reads.append(1)
        return await transaction(work, write=write)

    monkeypatch.setattr(store, "transaction", counted)
    assert (await store.authenticate(plain)) == record
    assert (await store.authenticate(plain)) == record
    assert len(reads) == 1  # the second came from the cache
    assert await store.authenticate(plain + "x") is None
    assert await store.authenticate(plain + "x") is None
    assert len(reads) == 3  # an unknown key is never cached: a key created elsewhere works at once
    for digest, (_, cached) in list(store._key_cache.items()):
        store._key_cache[digest] = (0.0, cached)  # expired
    assert (await store.authenticate(plain)) == record
    assert len(reads) == 4
    await store.revoke("team")
    assert store._key_cache == {}  # a revocation here is seen here at once
    revoked = await store.authenticate(plain)
    assert revoked is not None
    assert revoked.revoked_at is not None
    monkeypatch.setattr(store_module, "_KEY_CACHE_MAX", 1)
    second, _ = await store.create_key(KeySpec(name="other"))
    await store.authenticate(second)
    assert len(store._key_cache) == 1  # full: emptied before the new record went in
    await store.aclose()


async def test_a_cached_key_revoked_elsewhere_is_refused_at_admission(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    plain, _ = await store.create_key(KeySpec(name="team"))
    key = await store.authenticate(plain)
    assert key is not None
    elsewhere = SQLiteStore(store.path)  # another worker revokes it
    await elsewhere.revoke("team")
    await elsewhere.aclose()
    cached = await store.authenticate(plain)
    assert cached is not None
    assert cached.revoked_at is None  # this process has not looked again yet
    with pytest.raises(GatewayError) as caught:
        await store.admit(cached, "mock", "echo")
    assert (caught.value.status, caught.value.code) == (401, "invalid_api_key")
    await store.aclose()


# ---------------------------------------------------------------------------------- spend


def test_an_unpriced_model_is_looked_up_once(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    book = PriceBook({"local/known": Price(input=1.0, output=2.0)}, {"local": None})
    looked: list[str | None] = []
    cost = book.cost

    def counted(route: str | None, model: str | None, usage: TokenUsage | None, **kw: Any) -> Any:
        looked.append(model)
        return cost(route, model, usage, **kw)

    monkeypatch.setattr(book, "cost", counted)
    used = TokenUsage(input_tokens=1_000_000, output_tokens=1_000_000)
    with caplog.at_level(logging.WARNING, logger="harness_gateway.spend"):
        assert request_cost(book, "local", "known", used) == pytest.approx(3.0)
        assert request_cost(book, "local", "unknown", used) == 0.0
        assert request_cost(book, "local", "unknown", used) == 0.0
        assert request_cost(book, "local", "known", None) == 0.0
        assert request_cost(book, "local", "known", None, completed=False) == 0.0  # refused: quietly nothing
        assert request_cost(book, "local", "known", TokenUsage(input_tokens=1, output_tokens=None)) == 0.0
    assert looked == ["known", "unknown", "unknown", "known", "known"]  # the miss: one lookup + one probe
    assert spend_module._UNPRICED[book] == {("local", "unknown")}
    messages = [r.getMessage() for r in caplog.records]
    assert messages[:2] == [
        "charging 0 USD for local/unknown requests: no price is known (add one to `prices`)",
        "charging 0 USD for a request to local/known: no usage was reported",
    ]
    assert messages[2].startswith("charging 0 USD for a request to local/known: its usage cannot be priced (")
    assert len(messages) == 3


# ---------------------------------------------------------------------------------- encoders


TEXTS = ["hi", "", 'quote " backslash \\ newline \n nul \x00harness\x00 é 🎉']


@pytest.mark.parametrize("include_usage", [True, False])
def test_openai_delta_events_are_the_bytes_of_the_whole_chunk(include_usage: bool) -> None:
    encoder = ChatStreamEncoder("chatcmpl-1", "mock/echo", include_usage)
    for text in TEXTS:
        assert encoder.feed(TextDelta(index=0, text=text)) == encoder._chunk({"content": text})
        assert encoder.feed(ReasoningDelta(index=0, text=text)) == encoder._chunk({"reasoning_content": text})


def test_anthropic_delta_events_are_the_bytes_of_the_whole_event() -> None:
    encoder = MessagesStreamEncoder("msg_1", "mock/echo")
    for text in TEXTS:
        for index in (0, 7, 12):
            assert encoder.feed(TextDelta(index=index, text=text)) == encoder._delta(
                index, {"type": "text_delta", "text": text}
            )
            assert encoder.feed(ReasoningDelta(index=index, text=text)) == encoder._delta(
                index, {"type": "thinking_delta", "thinking": text}
            )
            assert encoder.feed(ToolCallDelta(index=index, id="c", arguments_delta=text)) == encoder._delta(
                index, {"type": "input_json_delta", "partial_json": text}
            )


# ---------------------------------------------------------------------------------- pools, console, server


def test_providers_get_a_gateway_sized_pool_and_read_timeout_unless_configured(tmp_path: Path) -> None:
    config = tmp_path / "plugins.yaml"
    config.write_text(
        "plugins:\n"
        "  openai: {base_url: 'http://127.0.0.1:9/v1', api_key: null, routes: [a]}\n"
        "  openai:small: {base_url: 'http://127.0.0.1:9/v1', api_key: null, routes: [b], max_connections: 5,\n"
        "                 timeout: {read: 7}}\n"
        "  mock: {}\n"
    )
    loaded = load_config(config, configure=provider_defaults)
    configs = {p.key: getattr(p.instance, "config", None) for p in loaded.plugins}
    sizes = {key: getattr(c, "max_connections", None) for key, c in configs.items()}
    assert sizes == {"openai": POOL_SIZE, "openai:small": 5, "mock": None}
    reads = {p.key: p.instance.config.timeout.read for p in loaded.plugins if p.key != "mock"}  # type: ignore[attr-defined]
    assert reads == {"openai": 120.0, "openai:small": 7}  # the gateway's default; the entry's own wins
    plain = load_config(config)  # another load (the CLI) has its own instances, built with the adapters' defaults
    assert plain.plugins[0].instance.config.timeout.read == 600.0  # type: ignore[attr-defined]
    assert plain.plugins[0].instance.config.max_connections == 20  # type: ignore[attr-defined]
    config.write_text(config.read_text() + "  gateway: {upstream_read_timeout: null}\n")
    unbounded = load_config(config, configure=provider_defaults)
    assert unbounded.plugins[0].instance.config.timeout.read == 600.0  # type: ignore[attr-defined]
    assert unbounded.plugins[0].instance.config.max_connections == POOL_SIZE  # type: ignore[attr-defined]


async def test_two_runtimes_of_one_process_do_not_see_each_others_settings(tmp_path: Path) -> None:
    entry = "  openai: {base_url: 'http://127.0.0.1:9/v1', api_key: null, routes: [a]}\n"
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text("plugins:\n" + entry + "  gateway: {upstream_read_timeout: 30}\n")
    second.write_text("plugins:\n" + entry.replace("routes: [a]", "routes: [a], max_connections: 3"))
    one, two = await load_runtime(first), await load_runtime(second)
    try:
        settings = [
            next(p.instance.config for p in runtime.harness.plugins if p.key == "openai")  # type: ignore[attr-defined]
            for runtime in (one, two)
        ]
        assert [(s.max_connections, s.timeout.read) for s in settings] == [(POOL_SIZE, 30.0), (3, 120.0)]
        again = await load_runtime(first)  # a reload of the first file: equal settings, its own instances
        try:
            plugin = next(p for p in again.harness.plugins if p.key == "openai")
            assert plugin.instance.config == settings[0]  # type: ignore[attr-defined]
            assert plugin.instance is not next(p for p in one.harness.plugins if p.key == "openai").instance
        finally:
            await again.aclose()
    finally:
        await one.aclose()
        await two.aclose()


async def test_the_live_page_is_woken_only_while_someone_watches() -> None:
    observer = ConsoleObserver(records=None, redact=lambda: str)  # type: ignore[arg-type]
    info = RunInfo("t1", "r1", "openai", None, None, "mock", "echo", GenerateOptions(), AbortSignal(), 1.0)
    stream = observer.started(info)
    idle = observer._changed
    observer.changed()
    stream.chunk(TextDelta(index=0, text="a"))
    assert observer._changed is idle  # nobody waits: nothing is allocated per delta
    assert observer.streams["t1"].deltas == 1
    woken = anyio.Event()

    async def watch(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()  # the starter resumes once this task waits (no checkpoint before)
        await observer.wait_change()
        woken.set()

    async with anyio.create_task_group() as group:
        await group.start(watch)
        assert observer._waiting == 1
        stream.chunk(TextDelta(index=0, text="b"))  # a delta wakes the Live page that waits
        await woken.wait()
    assert observer._waiting == 0
    assert observer._changed is not idle
    assert observer.streams["t1"].deltas == 2


def test_the_console_counts_every_kind_of_delta_in_its_rates() -> None:
    observer = ConsoleObserver(records=None, redact=lambda: str)  # type: ignore[arg-type]
    info = RunInfo("t1", "r1", "openai", None, None, "mock", "echo", GenerateOptions(), AbortSignal(), 1.0)
    stream = observer.started(info)
    stream.chunk(BlockStart(index=0, block_type="reasoning"))
    stream.chunk(ReasoningDelta(index=0, text="hmm"))
    stream.chunk(TextDelta(index=1, text="ab"))
    stream.chunk(ToolCallDelta(index=2, id="c1", arguments_delta='{"a"'))
    stream.chunk(Usage(usage=TokenUsage(input_tokens=1, output_tokens=7)))
    live = observer.streams["t1"]
    assert (live.deltas, live.output_tokens) == (3, 7)
    [rates] = live.timeline.detail(GenerateOptions(), str)["rates"]
    assert rates == {"second": 0, "reasoning": 1, "chars": 9, "text": 1, "tool-call": 1}


def test_a_stream_that_failed_first_has_no_first_chunk_time() -> None:
    failed = Timeline()
    failure = Failure(code="SERVER", message="boom")
    failed.feed(Finish(reason=FinishReason(kind="error", failure=failure)))
    assert failed.first_chunk_ms is None
    streamed = Timeline()
    streamed.feed(BlockStart(index=0, block_type="text"))
    assert streamed.first_chunk_ms is not None


def test_uvicorn_gets_the_loop_and_parser_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []

    def run(server: uvicorn.Server, sockets: object = None) -> None:  # what serve() hands uvicorn, not run
        config = server.config
        calls.append(
            {
                "loop": config.loop,
                "http": config.http,
                "timeout_keep_alive": config.timeout_keep_alive,
                "freeze_heap": getattr(config.app, "freeze_heap", None),
            }
        )

    monkeypatch.setattr(uvicorn.Server, "run", run)
    monkeypatch.setattr(server_module, "_long_lived_process", lambda: None)
    server_module.serve(None, "127.0.0.1", 0, 1, watch=False, drain_timeout=1, log_level="info")
    server_module.serve(
        None, "127.0.0.1", 0, 1, watch=False, drain_timeout=1, log_level="info", loop="asyncio", http="h11"
    )
    assert [(c["loop"], c["http"].keywords["http"]) for c in calls] == [("auto", "auto"), ("asyncio", "h11")]
    assert calls[0]["freeze_heap"]  # harness serve's process settles its heap after startup (server.settle_heap)
    assert calls[0]["http"].func is guarded_protocol  # uvicorn's parser under the connection limits
    assert calls[0]["http"].keywords["limits"] == ConnectionLimits()
    assert calls[0]["timeout_keep_alive"] == ConnectionLimits().idle
    assert msgspec.convert({"loop": "uvloop", "http": "httptools"}, GatewayConfig).loop == "uvloop"
