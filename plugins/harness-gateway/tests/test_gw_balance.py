"""The balance middleware's state in the gateway's store: limits, in-flight counts and cooldowns
shared by every process of one store; a pool served through the gateway (chat, models)."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from gw_helpers import ledger_rows, serve_gateway

from harness_core.errors import LlmError
from harness_gateway.balance_state import FLIGHT_LEASE, StoreBalanceState
from harness_gateway.errors import GatewayError
from harness_gateway.sqlite import SQLiteStore
from harness_gateway.store import SqlStore
from harness_middleware.balance import Limits, shared_state

NOW = 1_000_000.0


def sqlite_state(tmp_path: Path) -> StoreBalanceState:
    return StoreBalanceState(SQLiteStore(tmp_path / "state.sqlite"))


def test_rpm_tpm_and_in_flight_limits_in_the_store(tmp_path: Path) -> None:
    async def main() -> None:
        state = sqlite_state(tmp_path)
        try:
            assert await state.migrate() == 1
            limits = Limits(rpm=2, max_in_flight=1)
            first = await state.acquire("a/m", limits, NOW)
            assert isinstance(first, str)
            assert await state.acquire("a/m", limits, NOW + 1) == pytest.approx(0.05)  # one in flight
            await state.release("a/m", first, 15, NOW + 2)
            second = await state.acquire("a/m", limits, NOW + 3)
            assert isinstance(second, str)
            await state.release("a/m", second, 10, NOW + 4)
            assert await state.acquire("a/m", limits, NOW + 5) == pytest.approx(55.0)  # rpm: 2 started
            assert await state.acquire("a/m", Limits(tpm=25), NOW + 5) == pytest.approx(57.0)  # 25 tokens
            (load, other) = await state.loads(["a/m", "b"], NOW + 5)
            assert (load.requests, load.tokens, load.in_flight, load.cooling_until) == (2, 25, 0, 0.0)
            assert (other.requests, other.tokens, other.in_flight) == (0, 0, 0)
            # the window moves on: old rows stop counting and are deleted
            third = await state.acquire("a/m", limits, NOW + 61)
            assert isinstance(third, str)
            (load,) = await state.loads(["a/m"], NOW + 61)
            assert (load.requests, load.in_flight) == (2, 1)  # started at NOW + 3 and NOW + 61
        finally:
            await state.store.aclose()

    anyio.run(main)


def test_a_dead_process_stream_stops_counting_after_the_lease(tmp_path: Path) -> None:
    async def main() -> None:
        state = sqlite_state(tmp_path)
        try:
            assert isinstance(await state.acquire("a", Limits(max_in_flight=1), NOW), str)  # never released
            wait = await state.acquire("a", Limits(max_in_flight=1), NOW + 1)
            assert isinstance(wait, float)
            assert wait > 0
            assert isinstance(await state.acquire("a", Limits(max_in_flight=1), NOW + FLIGHT_LEASE + 1), str)
        finally:
            await state.store.aclose()

    anyio.run(main)


def test_cooldowns_are_shared_and_never_shortened(tmp_path: Path) -> None:
    async def main() -> None:
        state = sqlite_state(tmp_path)
        other = StoreBalanceState(state.store)  # another process's view of the same store
        try:
            await state.cool("a", NOW + 30)
            await other.cool("a", NOW + 10)
            assert [load.cooling_until for load in await other.loads(["a"], NOW)] == [NOW + 30]
            await other.cool("a", NOW + 40)
            assert [load.cooling_until for load in await state.loads(["a"], NOW)] == [NOW + 40]
        finally:
            await state.store.aclose()

    anyio.run(main)


class DownStore(SqlStore):
    async def transaction(self, work: Any, *, write: bool = True) -> Any:
        raise GatewayError(503, "the gateway's state store is unavailable (OSError)", retry_after=1.0)


def test_a_store_fault_is_an_overloaded_llm_error() -> None:
    async def main() -> None:
        with pytest.raises(LlmError) as caught:
            await StoreBalanceState(DownStore()).acquire("a", Limits(), NOW)
        assert caught.value.code == "OVERLOADED"
        assert caught.value.retry_after == 1.0
        assert "balance: the gateway's state store is unavailable" in caught.value.message

    anyio.run(main)


def pool_config(database: Path, rpm: int) -> str:
    return f"""\
plugins:
  gateway:
    database: {database}
    prices: {{east/echo: {{input: 1000000, output: 1000000}}, west/echo: {{input: 2000000, output: 2000000}}}}
  balance:
    wait: 0
    pools:
      pool:
        - {{target: east/echo, rpm: {rpm}}}
        - {{target: west/echo, rpm: {rpm}}}
  mock:east: {{routes: [east]}}
  mock:west: {{routes: [west]}}
"""


def chat(url: str, model: str = "pool/whatever") -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(timeout=30) as client:
        return client.post(url + "/v1/chat/completions", json=body)


def test_a_pool_through_the_gateway_shares_by_member_and_limits_exactly(tmp_path: Path) -> None:
    before = shared_state()
    with serve_gateway(tmp_path, pool_config(tmp_path / "gw.sqlite", 3)) as running:
        assert isinstance(shared_state(), StoreBalanceState)
        with httpx.Client(timeout=30) as client:
            ids = [m["id"] for m in client.get(running.url + "/v1/models").json()["data"]]
        assert "pool/echo" in ids
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            responses = list(pool.map(lambda _: chat(running.url), range(10)))
        with httpx.Client(timeout=30) as client:
            metrics = client.get(running.url + "/metrics").text
    assert shared_state() is before  # restored when the server stopped
    statuses = [r.status_code for r in responses]
    assert statuses.count(200) == 6  # 2 members x 3 rpm
    assert statuses.count(429) == 4
    limited = next(r for r in responses if r.status_code == 429)
    assert "every member of pool 'pool' is at its limits" in limited.json()["error"]["message"]
    assert int(limited.headers["retry-after"]) >= 1
    assert {msgspec.json.decode(r.content)["model"] for r in responses if r.status_code == 200} == {"pool/whatever"}
    # /metrics by member: each served 3; the 429s name no member (none served them)
    for member in ("east/echo", "west/echo"):
        line = f'harness_gateway_member_requests_total{{member="{member}",route="pool",status="complete"}} 3.0'
        assert line in metrics

    costs = sorted(row["cost"] for row in ledger_rows(tmp_path / "gw.sqlite") if row["status"] == "complete")
    assert costs == [2.0] * 3 + [4.0] * 3  # priced by the member that served (1 + 1 tokens)


def test_a_failing_member_sheds_its_traffic_without_client_errors_in_every_dialect(tmp_path: Path) -> None:
    """One member answers OVERLOADED before any content: OpenAI Chat, Responses and Anthropic
    Messages clients all get 200 from the other member, and the pool's traffic is counted by it."""
    config = f"""\
plugins:
  gateway:
    database: {tmp_path / "gw.sqlite"}
  balance:
    seed: 1
    pools:  # east is picked first (by weight), fails, cools down: west serves every request
      pool: [{{target: east/echo, weight: 1000}}, {{target: west/echo}}]
  mock:east: {{routes: [east], error: OVERLOADED}}
  mock:west: {{routes: [west]}}
"""
    hi = [{"role": "user", "content": "hi"}]
    calls = [
        ("/v1/chat/completions", {"model": "pool/echo", "messages": hi}),
        ("/v1/responses", {"model": "pool/echo", "input": "hi"}),
        ("/v1/messages", {"model": "pool/echo", "max_tokens": 20, "messages": hi}),
    ]
    with serve_gateway(tmp_path, config) as running, httpx.Client(base_url=running.url, timeout=30) as client:
        responses = [client.post(path, json=body) for _ in range(4) for path, body in calls]
        metrics = client.get("/metrics").text
    assert [r.status_code for r in responses] == [200] * 12, [r.text for r in responses if r.status_code != 200]
    assert all("hi" in r.text for r in responses)  # the mock echoes the prompt: content, not an error
    line = 'harness_gateway_member_requests_total{member="west/echo",route="pool",status="complete"} 12.0'
    assert line in metrics
    assert 'member="east/echo"' not in metrics  # it never served one
