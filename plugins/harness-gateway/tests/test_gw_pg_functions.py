"""PostgreSQL's one-statement admission and settlement (``gateway_admit``, ``gateway_settle``) and
Redis's admission script (:data:`harness_gateway.redis_limits.ADMIT_LUA`) against the Python owners
of the rule: :func:`harness_gateway.store.decide` (with the request's bound, and PostgreSQL's
signature of older gateways without one) and SQLite's transactions.

Hypothesis generates key rows (limits, counters, per-second windows around the clock) and ledger rows;
each case runs on a real PostgreSQL (``gw_postgres.Cluster``) and its outcome, its 429 and every counter
written must equal what the Python rule and the SQLite store do with the same rows.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from gw_postgres import Cluster
from gw_redis import running_redis
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from harness_core.types import TokenUsage
from harness_gateway import store as store_module
from harness_gateway.errors import GatewayError
from harness_gateway.keys import KeyRecord, KeySpec
from harness_gateway.postgres import FUNCTIONS_POSTGRES, PostgresStore
from harness_gateway.redis_limits import RedisLimits
from harness_gateway.sqlite import SQLiteStore
from harness_gateway.store import SqlStore, decide, key_record

NOW = 1_000_000.25  # a quarter into second 1000000
KEY_ROW = "budget = ?, rpm = ?, tpm = ?, spent = ?, max_cost = ?, running = ?, reserved = ?, windows = ?"
COUNTERS = "SELECT spent, max_cost, running, reserved, windows FROM gateway_keys WHERE id = ?"


@pytest.fixture(scope="module")
def dsn() -> Iterator[str]:
    # a directory of its own under /tmp: the postgres user cannot enter pytest's root-only tmp_path
    root = Path(tempfile.mkdtemp(prefix="harness-pg-"))
    try:
        pg = Cluster(root)
        pg.start()
        try:
            yield pg.dsn
        finally:
            pg.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with running_redis() as url:
        yield url


BOUNDS = st.none() | st.sampled_from([0.0, 0.05, 0.25, 0.3])
"""A request's bound (:func:`harness_gateway.spend.request_bound`): unknown, unpriced (0) or a cost."""
FLOORS = st.sampled_from([0.0, 0.05, 0.4])
"""A request's floor (:func:`harness_gateway.spend.generation_floor`): none, or its input's cost."""


def windows_of(draw: Any) -> str | None:
    """A ``windows`` column: ascending seconds from well before the window to a little after now."""
    seconds = sorted(draw(st.sets(st.integers(999_930, 1_000_002), max_size=6)))
    entries = [[second, draw(st.integers(0, 3)), draw(st.integers(-5, 40))] for second in seconds]
    return draw(st.sampled_from([None, ""])) if not entries else str(entries).replace(" ", "")


@st.composite
def key_rows(draw: Any) -> tuple[Any, ...]:
    """``(budget, rpm, tpm, spent, max_cost, running, reserved, windows)`` of a key."""
    money = st.sampled_from([0.0, 0.1, 0.2, 0.3, 0.3 - 1e-10, 0.7, 1.0])
    return (
        draw(st.none() | st.sampled_from([0.0, 0.3, 1.0]) | st.floats(0, 2)),
        draw(st.none() | st.integers(1, 6)),
        draw(st.none() | st.integers(1, 60)),
        draw(money | st.floats(0, 2)),
        draw(st.sampled_from([0.0, 0.1, 0.25])),
        draw(st.integers(0, 3)),
        draw(money),
        windows_of(draw),
    )


async def set_key(store: SqlStore, key_id: str, row: tuple[Any, ...]) -> None:
    await store.transaction(lambda tx: tx.run(f"UPDATE gateway_keys SET {KEY_ROW} WHERE id = ?", *row, key_id))


async def counters(store: SqlStore, key_id: str) -> tuple[Any, ...]:
    found = await store.transaction(lambda tx: tx.one(COUNTERS, key_id), write=False)
    assert found is not None
    return found


def test_gateway_admit_decides_as_decide_does_over_generated_keys(dsn: str) -> None:
    async def start() -> str:
        store = PostgresStore(dsn)
        await store.migrate()
        _, key = await store.create_key(KeySpec(name=f"k-{uuid.uuid4().hex[:8]}"), now=NOW - 100)
        await store.aclose()
        return key.id

    key_id = anyio.run(start)

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(row=key_rows(), offset=st.floats(0, 1.7), bound=BOUNDS, floor=FLOORS, arguments=st.sampled_from([7, 8, 9]))
    @example(row=(0.3, None, None, 0.3 - 1e-10, 0.1, 0, 0.0, None), offset=0.0, bound=None, floor=0.0, arguments=9)
    @example(row=(1.0, 2, None, 0.0, 0.0, 1, 0.0, "[[1000000,1,0]]"), offset=0.0, bound=None, floor=0.0, arguments=7)
    @example(row=(1.0, None, None, 0.0, 0.0, 1, 0.0, None), offset=0.0, bound=0.0, floor=0.0, arguments=9)  # runs
    @example(row=(1.0, None, None, 0.0, 0.1, 1, 0.1, None), offset=0.0, bound=0.3, floor=0.0, arguments=8)  # larger
    @example(row=(1.0, None, None, 0.0, 0.1, 1, 0.1, None), offset=0.0, bound=None, floor=0.4, arguments=9)  # floor
    @example(row=(1.0, None, None, 0.0, 0.0, 1, 0.0, None), offset=0.0, bound=None, floor=0.4, arguments=9)  # waits
    @example(row=(1.0, None, None, 0.7, 0.1, 0, 0.0, None), offset=0.0, bound=0.3, floor=0.0, arguments=9)  # fits
    @example(row=(1.0, None, None, 0.7, 0.1, 1, 0.1, None), offset=0.0, bound=0.3, floor=0.0, arguments=8)  # not now
    @example(row=(1.0, None, None, 0.7, 0.1, 0, 0.0, None), offset=0.0, bound=None, floor=0.4, arguments=9)  # never
    @example(row=(1.0, None, None, 0.7, 0.1, 1, 0.3, None), offset=0.0, bound=0.0, floor=0.0, arguments=8)  # free
    def case(row: tuple[Any, ...], offset: float, bound: float | None, floor: float, arguments: int) -> None:
        now = NOW + offset
        # the signatures of older gateways (no floor; no bound either) answer too
        arguments = 7 if arguments == 7 and bound is None else 8 if arguments <= 8 else 9
        floor = floor if arguments == 9 else 0.0

        async def main() -> None:
            store = PostgresStore(dsn)  # a pool per event loop (one per example)
            await set_key(store, key_id, row)
            found = await store.transaction(
                lambda tx: tx.one(f"SELECT {store_module._KEY_COLUMNS} FROM gateway_keys WHERE id = ?", key_id)
            )
            assert found is not None
            key = key_record(found)
            _, rpm, _, spent, max_cost, running, reserved, windows = row
            entries = store_module._slide(windows, now)
            window = (*store_module._totals(entries), running, reserved, max_cost, None)
            expected = decide(key, window, now, bound, floor)
            ticket = uuid.uuid4().hex
            given = ", ".join(f"${number}" for number in range(5, arguments - 2))
            call = f"SELECT * FROM gateway_admit($1, $2, 'mock', 'echo', $3, 'owner', $4{', ' if given else ''}{given})"
            args: tuple[Any, ...] = (ticket, key_id, now, now + 5, bound, floor)[: arguments - 3]
            answer = await store._connected(lambda conn: conn.fetchrow(call, *args))
            outcome, reserve = answer[0], answer[1]
            after = await counters(store, key_id)
            if isinstance(expected, GatewayError):
                assert outcome == "refused"
                again = decide(key_record(tuple(answer)[9:]), (*tuple(answer)[2:9], None), now, bound, floor)
                assert isinstance(again, GatewayError)
                assert vars(again) == vars(expected)  # the same 429: code, message, retry_after
                assert after == (spent, max_cost, running, reserved, windows)  # nothing written
            else:
                assert outcome == "admitted"
                assert reserve == expected
                moved = store_module._add(entries, now, 1, 0) if rpm is not None else windows
                assert after == (spent, max_cost, running + 1, reserved + expected, moved)
                assert ticket in [entry["id"] for entry in await store.ledger(key_id)]
            await store.aclose()

        anyio.run(main)

    case()


@st.composite
def settlements(draw: Any) -> tuple[Any, ...]:
    """A key row, its ledger row (running, or lost: a reaper charged what it recorded) and a
    settlement: ``(key row, (status, cost, reserved, input, output), (status, input, output, cost))``."""
    key = draw(key_rows())
    ledger = (
        draw(st.sampled_from(["running", "lost"])),
        draw(st.none() | st.sampled_from([0.0, 0.05, 0.3])),
        draw(st.sampled_from([0.0, 0.1, 0.25])),
        draw(st.none() | st.integers(0, 30)),
        draw(st.none() | st.integers(0, 30)),
    )
    usage = draw(st.none() | st.tuples(st.integers(0, 40), st.integers(0, 40)))
    return key, ledger, (draw(st.sampled_from(["complete", "aborted", "error"])), usage, draw(st.floats(0, 0.5)))


def test_gateway_settle_writes_what_the_sqlite_transaction_writes(dsn: str, tmp_path: Path) -> None:
    def stores() -> list[SqlStore]:  # a pool per event loop (one per example)
        return [PostgresStore(dsn), SQLiteStore(tmp_path / "gw.sqlite")]

    async def start() -> list[str]:
        ids = []
        for store in stores():
            await store.migrate()
            ids.append((await store.create_key(KeySpec(name=f"k-{uuid.uuid4().hex[:8]}"), now=NOW - 100))[1].id)
            await store.aclose()
        return ids

    ids = anyio.run(start)

    @settings(max_examples=200, deadline=None)
    @given(case=settlements(), offset=st.floats(0, 1.7))
    def case(case: tuple[Any, ...], offset: float) -> None:
        key, ledger, (status, usage, cost) = case
        now = NOW + offset

        async def main() -> list[tuple[Any, ...]]:
            results = []
            ticket = uuid.uuid4().hex
            for store, key_id in zip(stores(), ids, strict=True):
                await set_key(store, key_id, key)
                insert = (
                    "INSERT INTO gateway_ledger (id, key_id, route, model, started_at, status, cost, reserved,"
                    " input_tokens, output_tokens) VALUES (?, ?, 'mock', 'echo', ?, ?, ?, ?, ?, ?)"
                )
                args = (ticket, key_id, NOW - 1, *ledger)
                await store.transaction(lambda tx: tx.run(insert, *args))  # noqa: B023  # awaited at once
                await store.settle(ticket, status, TokenUsage(*usage) if usage else None, cost, now=now)
                row = await store.transaction(
                    lambda tx: tx.one(
                        "SELECT status, ended_at, input_tokens, output_tokens, cost FROM gateway_ledger WHERE id = ?",
                        ticket,
                    )
                )
                results.append((await counters(store, key_id), row))
                await store.aclose()
            return results

        postgres, sqlite = anyio.run(main)
        assert postgres == sqlite

    case()


def test_one_statement_paths_anonymous_revoked_and_near_the_budget(dsn: str) -> None:
    async def main() -> None:
        store = PostgresStore(dsn)
        await store.migrate()
        await store.migrate()  # a second start reinstalls the functions in place
        anonymous = await store.admit(None, "mock", "echo", now=NOW)
        await store.settle(anonymous, "complete", TokenUsage(1, 1), 0.0, now=NOW + 1)
        assert [row["status"] for row in await store.ledger() if row["id"] == anonymous] == ["complete"]
        await store.settle("no-such-ticket", "complete", None, 0.0, now=NOW + 1)  # nothing to settle

        _, key = await store.create_key(KeySpec(name="rpm", rpm=1), now=NOW)
        await store.admit(key, "mock", "echo", now=NOW)
        with pytest.raises(GatewayError) as over:
            await store.admit(key, "mock", "echo", now=NOW + 1)
        assert (over.value.status, over.value.code) == (429, "rate_limit_exceeded")
        await store.revoke(key.id)
        with pytest.raises(GatewayError) as gone:
            await store.admit(key, "mock", "echo", now=NOW + 2)
        assert (gone.value.status, gone.value.code) == (401, "invalid_api_key")

        # near the budget: a dead process's reservation is settled by the recounting fallback
        _, tight = await store.create_key(KeySpec(name="tight", budget=1.2), now=NOW)
        first = await store.admit(tight, "mock", "echo", now=NOW)
        await store.settle(first, "complete", TokenUsage(1, 1), 0.4, now=NOW + 1)
        dead = await store.admit(tight, "mock", "echo", now=NOW + 2)  # reserves 0.4
        store.running.discard(dead)  # its owner dies: the lease (5 s) runs out unrenewed
        await store.admit(tight, "mock", "echo", now=NOW + 3)  # 0.4 + 0.4 + 0.4 fill 1.2 until the dead row goes
        with pytest.raises(GatewayError) as near:
            await store.admit(tight, "mock", "echo", now=NOW + 4)
        assert near.value.code == "budget_exceeded"
        assert near.value.retry_after == pytest.approx(3.0)  # the dead row's lease ends at NOW + 7
        await store.admit(tight, "mock", "echo", now=NOW + 8)  # recounted: the dead row settled as lost
        assert [row["status"] for row in await store.ledger(tight.id) if row["id"] == dead] == ["lost"]
        await store.aclose()

    anyio.run(main)


LEGACY_ADMIT = "SELECT o_outcome, o_reserve FROM gateway_admit($1, $2, 'mock', 'echo', $3, 'owner', $4)"


def test_a_database_of_an_older_gateway_is_upgraded_and_both_signatures_answer(dsn: str) -> None:
    """An older gateway installed ``gateway_admit`` without the request's bound (7 arguments); the
    new one adds its own (8) and turns the old into a call of it, so the old gateway's processes
    still running on the database (a rolling upgrade) admit by the same rule, and one of them
    restarting (reinstalling its old function) leaves the new gateway's working."""
    seven = "text, text, text, text, double precision, text, double precision"
    older = (
        FUNCTIONS_POSTGRES[2]
        .replace(", p_bound DOUBLE PRECISION", "")
        .replace("p_bound", "NULL::double precision")
        .replace(", p_floor DOUBLE PRECISION", "")
        .replace("p_floor", "0::double precision")
    )

    async def install_older(store: PostgresStore) -> None:
        await store.transaction(lambda tx: tx.run(older))

    async def main() -> None:
        store = PostgresStore(dsn)
        await store.migrate()
        drop = f"DROP FUNCTION gateway_admit({seven}, double precision, double precision); "
        drop += f"DROP FUNCTION gateway_admit({seven}, double precision)"
        await store.transaction(lambda tx: tx.run(drop))
        await install_older(store)  # the database as the older gateway left it
        _, key = await store.create_key(KeySpec(name=f"k-{uuid.uuid4().hex[:8]}", budget=1.0), now=NOW - 100)
        old = await store._connected(lambda conn: conn.fetchrow(LEGACY_ADMIT, uuid.uuid4().hex, key.id, NOW, NOW + 5))
        assert tuple(old) == ("admitted", 0.0)
        with pytest.raises(GatewayError) as before:  # the new gateway before its migration: its function is missing
            await store.admit(key, "mock", "echo", now=NOW, bound=0.25)
        assert before.value.status == 503
        await store.migrate()  # the upgrade
        await store.admit(key, "mock", "echo", now=NOW, bound=0.25)  # bounded: need not wait for the running one
        waits = await store._connected(lambda conn: conn.fetchrow(LEGACY_ADMIT, uuid.uuid4().hex, key.id, NOW, NOW + 5))
        assert tuple(waits) == ("refused", 0.0)  # the old signature: no bound, nothing settled, two run
        await install_older(store)  # an older gateway's process restarts
        await store.admit(key, "mock", "echo", now=NOW, bound=0.0)
        await store.migrate()
        await store.aclose()

    anyio.run(main)


def test_a_database_of_the_gateway_before_the_floor_is_upgraded(dsn: str) -> None:
    """The previous release installed ``gateway_admit`` of 8 arguments (with the bound, without
    the floor) as the rule itself; the upgrade adds the one of 9 and turns the 8 into a call of
    it: both answer, and the new gateway's admissions reserve the floor."""
    nine = "text, text, text, text, double precision, text, double precision, double precision, double precision"
    previous = FUNCTIONS_POSTGRES[2].replace(", p_floor DOUBLE PRECISION", "").replace("p_floor", "0::double precision")
    eight = "SELECT o_outcome, o_reserve FROM gateway_admit($1, $2, 'mock', 'echo', $3, 'owner', $4, $5)"

    async def main() -> None:
        store = PostgresStore(dsn)
        await store.migrate()
        await store.transaction(lambda tx: tx.run(f"DROP FUNCTION gateway_admit({nine})"))
        await store.transaction(lambda tx: tx.run(previous))  # the database as the previous release left it
        _, key = await store.create_key(KeySpec(name=f"k-{uuid.uuid4().hex[:8]}", budget=1.0), now=NOW - 100)
        first = uuid.uuid4().hex
        old = await store._connected(lambda conn: conn.fetchrow(eight, first, key.id, NOW, NOW + 5, 0.25))
        assert tuple(old) == ("admitted", 0.25)
        await store.settle(first, "complete", TokenUsage(1, 1), 0.05, now=NOW + 1)  # the key's cost learnt: 0.05
        await store.migrate()  # the upgrade
        await store.admit(key, "mock", "echo", now=NOW + 2, floor=0.2)  # the new signature: the floor reserved
        again = await store._connected(
            lambda conn: conn.fetchrow(eight, uuid.uuid4().hex, key.id, NOW + 2, NOW + 7, 0.25)
        )
        assert tuple(again) == ("admitted", 0.25)  # the previous release's processes still admit
        rows = await store.transaction(
            lambda tx: tx.all(
                "SELECT reserved FROM gateway_ledger WHERE key_id = ? AND status = 'running' ORDER BY reserved", key.id
            ),
            write=False,
        )
        assert [row[0] for row in rows] == [0.2, 0.25]
        await store.aclose()

    anyio.run(main)


def live(entries: list[list[int]], now: float) -> dict[int, tuple[int, int]]:
    """Window entries as what they count: ``{second: (requests, tokens)}`` inside the window at
    ``now``, empty seconds left out (SQL keeps ``[s, 0, 0]`` entries, Redis has no such field)."""
    first = math.floor(now) - 60
    found: dict[int, tuple[int, int]] = {}
    for second, requests, tokens in entries:
        if second >= first and (requests, tokens) != (0, 0):
            found[second] = (requests, tokens)
    return found


def test_the_redis_admission_script_decides_as_decide_does_over_generated_keys(redis_url: str) -> None:
    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(row=key_rows(), offset=st.floats(0, 1.7), bound=BOUNDS, floor=FLOORS)
    @example(row=(1.0, None, None, 0.0, 0.1, 1, 0.1, None), offset=0.0, bound=None, floor=0.4)  # the floor
    @example(row=(1.0, None, None, 0.0, 0.0, 1, 0.0, None), offset=0.0, bound=None, floor=0.4)  # cost unknown: waits
    @example(row=(1.0, None, None, 0.7, 0.1, 0, 0.0, None), offset=0.0, bound=0.3, floor=0.0)  # fits exactly
    @example(row=(1.0, None, None, 0.7, 0.1, 1, 0.1, None), offset=0.0, bound=0.3, floor=0.0)  # not while one runs
    @example(row=(1.0, None, None, 0.7, 0.1, 0, 0.0, None), offset=0.0, bound=None, floor=0.4)  # never fits
    @example(row=(1.0, None, None, 0.7, 0.1, 1, 0.3, None), offset=0.0, bound=0.0, floor=0.0)  # free: room full
    @example(
        row=(0.3, None, None, 0.3 - 1e-10, 0.1, 0, 0.0, None), offset=0.0, bound=None, floor=0.0
    )  # within epsilon: spent
    @example(
        row=(1.0, 2, None, 0.0, 0.0, 1, 0.0, "[[1000000,1,0]]"), offset=0.0, bound=None, floor=0.0
    )  # cost unknown, one runs
    @example(
        row=(None, 3, None, 0.0, 0.0, 0, 0.0, "[[1000000,1,0],[1000002,1,0]]"), offset=0.0, bound=None, floor=0.0
    )  # clock ahead
    @example(
        row=(1.0, None, None, 1.0 - 1e-9, 0.1, 0, 0.0, None), offset=0.0, bound=None, floor=0.0
    )  # at the epsilon exactly
    @example(row=(1.0, None, None, 0.0, 0.0, 1, 0.0, None), offset=0.0, bound=0.0, floor=0.0)  # unpriced: runs
    @example(row=(1.0, None, None, 0.0, 0.1, 1, 0.1, None), offset=0.0, bound=0.3, floor=0.0)  # the larger
    def case(row: tuple[Any, ...], offset: float, bound: float | None, floor: float) -> None:
        now = NOW + offset
        budget, rpm, tpm, spent, max_cost, running, reserved, windows = row
        key = KeyRecord(
            id=uuid.uuid4().hex[:12], name="k", routes=None, budget=budget, rpm=rpm, tpm=tpm,
            expires_at=None, created_at=NOW - 100, revoked_at=None, spent=spent,
        )  # fmt: skip
        entries = store_module._slide(windows, now)
        expected = decide(key, (*store_module._totals(entries), running, reserved, max_cost, None), now, bound, floor)
        tag = f"hg:{{{key.id}}}"

        async def main() -> None:
            limits = RedisLimits(redis_url)
            client = limits._connect()
            state0 = {"spent": repr(spent), "max_cost": repr(max_cost), "running": running, "reserved": repr(reserved)}
            await client.hset(f"{tag}:s", mapping=state0)
            for second, requests, tokens in msgspec.json.decode(windows or "[]", type=list[list[int]]):
                await client.hset(f"{tag}:r", str(second), requests)
                await client.hset(f"{tag}:t", str(second), tokens)
            ticket = uuid.uuid4().hex
            try:
                reserve: float | GatewayError = await limits.admit(
                    key, 99.0, ticket, now, now + 5, bound, floor
                )  # set: no seed
            except GatewayError as exc:
                reserve = exc
            state = await client.hgetall(f"{tag}:s")
            found_r = {int(s): int(c) for s, c in (await client.hgetall(f"{tag}:r")).items()}
            found_t = {int(s): int(c) for s, c in (await client.hgetall(f"{tag}:t")).items()}
            after = [[s, found_r.get(s, 0), found_t.get(s, 0)] for s in sorted({*found_r, *found_t})]
            await client.delete(*(f"{tag}:{part}" for part in "srtlx"))
            await limits.aclose()
            if isinstance(expected, GatewayError):
                assert isinstance(reserve, GatewayError)
                assert vars(reserve) == vars(expected)  # the same 429: code, message, retry_after
                assert (float(state["reserved"]), int(state["running"])) == (reserved, running)
                assert live(after, now) == live(entries, now)
            else:
                assert reserve == expected
                assert (float(state["reserved"]), int(state["running"])) == (reserved + expected, running + 1)
                moved = store_module._add(entries, now, 1, 0) if rpm is not None else str(entries)
                assert live(after, now) == live(msgspec.json.decode(moved, type=list[list[int]]), now)
            assert (float(state["spent"]), float(state["max_cost"])) == (spent, max_cost)

        anyio.run(main)

    case()
