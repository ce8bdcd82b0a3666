"""Leases on running ledger rows: a process that dies mid-stream strands no budget (SQLite).

The store-level cases run on explicit clocks (``now=``); the last test really kills a
``harness serve`` process with SIGKILL (PostgreSQL's twin is in test_gw_postgres.py).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import msgspec
import pytest
from gw_helpers import gateway_yaml, killed_mid_stream, open_key, serve_gateway, stored_key, wait_until

from harness_core.types import (
    FileBlock,
    GenerateOptions,
    Message,
    ReasoningBlock,
    ReasoningSignature,
    TextBlock,
    TokenUsage,
    ToolCallBlock,
    ToolResultBlock,
    ToolSpec,
)
from harness_gateway import accounting as gateway_app
from harness_gateway.errors import GatewayError
from harness_gateway.keys import KeySpec
from harness_gateway.spend import estimated_usage
from harness_gateway.sqlite import SQLiteStore
from harness_gateway.store import STALE_RUNNING

T0 = 1_000_000.0  # a fixed clock: every store call below passes now=


def two_stores(tmp_path: Path, lease: float = 2.0) -> tuple[SQLiteStore, SQLiteStore]:
    """Two processes' stores on one file (each its own owner)."""
    return SQLiteStore(tmp_path / "gw.sqlite", lease=lease), SQLiteStore(tmp_path / "gw.sqlite", lease=lease)


async def row(store: SQLiteStore, ticket: str) -> tuple[Any, ...]:
    found = await store.transaction(
        lambda tx: tx.one(
            "SELECT status, owner, lease_until, cost, input_tokens, output_tokens FROM gateway_ledger WHERE id = ?",
            ticket,
        ),
        write=False,
    )
    assert found is not None
    return found


async def spent(store: SQLiteStore) -> float:
    return (await store.list_keys())[0].spent


def test_a_dead_owners_rows_are_settled_as_lost_charging_what_they_recorded(tmp_path: Path) -> None:
    async def main() -> None:
        dead, alive = two_stores(tmp_path)
        await dead.migrate()
        await alive.migrate()
        assert dead.owner != alive.owner  # host:pid:nonce: one process, two owners
        _, key = await dead.create_key(KeySpec(name="k", budget=10.0), now=T0)
        ticket = await dead.admit(key, "mock", "echo", now=T0)
        # keys optional: no key to check or charge, so no row (nor lease) until it ends
        anonymous = await dead.admit(None, "mock", "echo", now=T0)
        assert dead.running == {ticket}
        assert [entry["id"] for entry in await dead.ledger()] == [ticket]
        assert await dead.record(anonymous, TokenUsage(3, 3), 0.0, now=T0 + 1)  # nothing to record: still running
        status, owner, lease_until, *_ = await row(dead, ticket)
        assert (status, owner, lease_until) == ("running", dead.owner, T0 + 2.0)
        assert await dead.record(ticket, TokenUsage(7, 4), 1.5, now=T0 + 1)  # renews its lease too
        assert (await row(dead, ticket))[2:] == (T0 + 3.0, 1.5, 7, 4)
        assert await alive.reap(now=T0 + 2.5) == 0  # its record moved its lease on
        assert (await row(alive, ticket))[0] == "running"
        assert await alive.reap(now=T0 + 3.0) == 1
        assert (await row(alive, ticket))[0] == "lost"
        assert await spent(alive) == 1.5  # exactly the usage last recorded
        assert await alive.reap(now=T0 + 10) == 0
        assert not await dead.record(ticket, TokenUsage(9, 9), 9.0, now=T0 + 11)  # settled: no longer running
        # the owner was only stalled: its own settlement charges the difference, never twice
        await dead.settle(ticket, "complete", TokenUsage(7, 10), 2.0, now=T0 + 12)
        assert await spent(alive) == 2.0
        assert (await row(alive, ticket))[0] == "complete"
        assert not dead.running
        await dead.settle(anonymous, "complete", TokenUsage(3, 5), 0.0, now=T0 + 12)  # its row, as it ended
        assert await row(alive, anonymous) == ("complete", dead.owner, None, 0.0, 3, 5)
        await dead.settle(anonymous, "complete", TokenUsage(3, 5), 0.0, now=T0 + 12)  # settled: nothing more
        assert len(await alive.ledger()) == 2
        await dead.aclose()
        await alive.aclose()

    anyio.run(main)


def test_admission_settles_its_keys_dead_rows_first_and_names_the_real_wait(tmp_path: Path) -> None:
    async def main() -> None:
        dead, alive = two_stores(tmp_path, lease=4.0)
        await dead.migrate()
        _, key = await dead.create_key(KeySpec(name="k", budget=5.0), now=T0)
        ticket = await dead.admit(key, "mock", "echo", now=T0)
        assert await dead.record(ticket, TokenUsage(3, 3), 0.6, now=T0 + 0.5)  # lease until T0 + 4.5
        with pytest.raises(GatewayError) as near:  # nothing settled yet: one request at a time
            await alive.admit(key, "mock", "echo", now=T0 + 1.0)
        assert (near.value.status, near.value.retryable, near.value.retry_after) == (429, True, 3.5)
        assert near.value.headers() == {"retry-after": "4"}
        assert near.value.message == (
            "key 'k' runs one request at a time while the cost of its requests is unknown (its budget of $5"
            " reserves what a request may cost): retry when the running one ends; a request that sets"
            " `max_tokens` (`max_output_tokens` on /v1/responses) has its cost known before it runs and need not"
            " wait"
        )  # (mock/echo is priced here: the cure of an unpriced model is its price, test_gw_bound)
        unrecorded = await alive.admit(key, "mock", "echo", now=T0 + 4.5)  # the lease passed: settled first
        assert (await row(alive, ticket))[0] == "lost"
        assert await spent(alive) == 0.6
        assert await alive.reap(now=T0 + 4.5) == 0  # nothing left for the reaper
        # a row that recorded nothing is settled at 0; a live row the admission saw is not touched
        lose = alive._lose
        assert await alive.transaction(lambda tx: lose(tx, key.id, [unrecorded], T0 + 5)) == 0
        assert await alive.reap(now=T0 + 8.5) == 1
        assert await spent(alive) == 0.6
        await dead.aclose()
        await alive.aclose()

    anyio.run(main)


def test_a_row_of_a_gateway_before_leases_expires_after_an_hour(tmp_path: Path) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "gw.sqlite")
        await store.migrate()
        await store.transaction(
            lambda tx: tx.run(
                "INSERT INTO gateway_ledger (id, key_id, route, model, started_at, status, reserved)"
                " VALUES ('old', NULL, 'mock', 'echo', ?, 'running', 0)",
                T0,
            )
        )
        assert await store.reap(now=T0 + STALE_RUNNING - 1) == 0
        assert await store.reap(now=T0 + STALE_RUNNING) == 1
        await store.aclose()

    anyio.run(main)


def test_renewal_touches_only_this_processes_running_rows(tmp_path: Path) -> None:
    async def main() -> None:
        mine, theirs = two_stores(tmp_path)
        key = await open_key(mine, now=T0)
        assert await mine.renew(now=T0) == 0  # nothing running: no statement
        ticket = await mine.admit(key, "mock", "echo", now=T0)
        other = await theirs.admit(key, "mock", "echo", now=T0)
        assert await mine.renew(now=T0 + 1) == 1
        assert (await row(mine, ticket))[2] == T0 + 3.0
        assert (await row(mine, other))[2] == T0 + 2.0
        await mine.aclose()
        await theirs.aclose()

    anyio.run(main)


def test_maintain_waits_for_the_schema_then_reaps_and_survives_faults(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        store, dead = two_stores(tmp_path, lease=0.5)  # a tick every 0.1 s
        ticket = await dead.admit(await open_key(dead), "mock", "echo")
        calls: list[str] = []
        real = store.reap
        reaped = anyio.Event()

        async def flaky(**kwargs: Any) -> int:
            calls.append("reap")
            if len(calls) == 1:
                raise GatewayError(503, "the database went away")
            if len(calls) == 2:
                raise RuntimeError("a bug in one tick")  # logged with its traceback; the loop goes on
            found = await real(**kwargs)
            if found:
                reaped.set()
            return found

        store.reap = flaky  # type: ignore[method-assign]
        async with anyio.create_task_group() as group:
            await group.start(store.maintain)
            await anyio.lowlevel.checkpoint()  # a tick before migrate: nothing is tried
            assert not calls
            await store.migrate()
            with anyio.fail_after(30):
                await reaped.wait()
            group.cancel_scope.cancel()
        assert (await row(store, ticket))[0] == "lost"
        assert calls[0] == "reap"
        assert len(calls) >= 3  # the fault and the bug were each retried at the next tick
        await store.aclose()
        await dead.aclose()

    with caplog.at_level(logging.WARNING, "harness_gateway"):
        anyio.run(main)
    assert "settled 1 ledger row(s) of gateway processes that died" in caplog.text
    (bug,) = [r for r in caplog.records if "maintenance of leases and settlements failed" in r.getMessage()]
    assert bug.levelno == logging.ERROR
    assert bug.exc_info is not None
    assert "a bug in one tick" in str(bug.exc_info[1])


def test_estimated_usage_counts_text_not_media() -> None:
    image = FileBlock(media_type="image/png", data=b"x" * 4000)
    options = GenerateOptions(system="abcd", messages=[Message(role="user", content=[TextBlock("hi"), image])])
    usage = estimated_usage(options, 9)
    assert usage == TokenUsage(2, 3)  # (4 + 2 characters) / 4; 9 / 4, rounded up: no block framing, no media


def test_estimated_usage_counts_every_kind_of_block_s_text_and_the_tools() -> None:
    signature = ReasoningSignature(provider="p", model=None, value="s" * 17)
    signed = ReasoningBlock(text="why", signed=True, signature=signature)
    tool = ToolSpec(name="get_time", description="now", parameters={"type": "object"})
    history = [
        Message(role="user", content=[TextBlock("a" * 10)]),
        Message(role="assistant", content=[signed, ToolCallBlock(id="c1", name="get_time", arguments="{}")]),
        Message(
            role="tool",
            content=[ToolResultBlock(tool_call_id="c1", content="noon", files=(FileBlock("image/png", b"x" * 8000),))],
        ),
    ]
    plain = estimated_usage(GenerateOptions(messages=history), 0).input_tokens
    assert plain == math.ceil((10 + 3 + 17 + 8 + 2 + 4) / 4)  # a tool result's image counts nothing
    with_tools = estimated_usage(GenerateOptions(messages=history, tools=[tool]), 0).input_tokens
    assert with_tools == math.ceil((44 + len(msgspec.json.encode([tool]))) / 4)  # the definitions are input too


def test_a_stream_records_its_usage_as_it_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(gateway_app, "RECORD_EVERY", 0.01)
    yaml_text = gateway_yaml("", "", db=tmp_path / "gw.sqlite").replace("  mock: {}", "  mock: {delay: 0.05}")
    body = {"model": "mock/echo", "messages": [{"role": "user", "content": "w " * 60}], "stream": True}
    # a key's request has its row from admission on (one without a key only when it ends)
    auth = {"authorization": f"Bearer {stored_key(tmp_path / 'gw.sqlite', 'recorded')}"}
    reader = SQLiteStore(tmp_path / "gw.sqlite")  # this thread's own connection, beside the server's

    def ledger() -> list[dict[str, Any]]:
        async def read() -> list[dict[str, Any]]:
            try:
                return await reader.ledger()
            finally:
                await reader.aclose()

        return anyio.run(read)

    with serve_gateway(tmp_path, yaml_text) as running:
        store = running.gateway.store

        def recorded() -> bool:
            rows = ledger()
            return bool(rows) and rows[0]["status"] == "running" and (rows[0]["output_tokens"] or 0) > 0

        with httpx.stream("POST", running.url + "/v1/chat/completions", json=body, headers=auth, timeout=60) as reply:
            lines = reply.iter_lines()
            next(lines)
            wait_until(recorded)
            for _ in lines:
                pass
        wait_until(lambda: ledger()[0]["status"] == "complete")

        async def refuse(*args: Any, **kwargs: Any) -> bool:
            raise GatewayError(503, "the store went away")

        monkeypatch.setattr(store, "record", refuse)
        with caplog.at_level(logging.WARNING, "harness_gateway"):
            reply = httpx.post(
                running.url + "/v1/chat/completions", json={**body, "stream": False}, headers=auth, timeout=60
            )
            assert reply.status_code == 200  # the stream goes on
            wait_until(lambda: "could not record its usage so far" in caplog.text)


def test_a_killed_gateway_process_strands_no_budget_on_sqlite(tmp_path: Path) -> None:
    database = tmp_path / "gw.sqlite"
    settled = killed_mid_stream(tmp_path, str(database), lambda: SQLiteStore(database), restart=False)
    print(f"SQLite: settled {settled:.2f} s after SIGKILL (lease 2 s)")


def test_the_row_of_a_request_without_a_key_is_written_when_it_ends_and_retried_after_a_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No admission transaction for a request without a key: its row is written once, as it ends;
    a settlement the store refused is kept (deferred) and written by the retry, once."""

    async def main() -> None:
        store = SQLiteStore(tmp_path / "gw.sqlite")
        await store.migrate()
        ticket = await store.admit(None, "mock", "echo", now=T0)
        assert await store.ledger() == []  # nothing written yet
        real = store.transaction

        async def down(*args: Any, **kwargs: Any) -> Any:
            raise GatewayError(503, "the database went away")

        monkeypatch.setattr(store, "transaction", down)
        with pytest.raises(GatewayError):
            await store.settle(ticket, "aborted", TokenUsage(2, 1), 0.0, now=T0 + 1)
        store.defer(ticket, "aborted", TokenUsage(2, 1), 0.0, now=T0 + 1)  # as the gateway does
        monkeypatch.setattr(store, "transaction", real)
        assert await store.settle_deferred(force=True) == 1
        assert await row(store, ticket) == ("aborted", store.owner, None, 0.0, 2, 1)
        assert not store.deferred
        await store.aclose()

    anyio.run(main)
