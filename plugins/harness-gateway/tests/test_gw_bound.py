"""A request's bound at admission (docs/gateway.md#budgets-and-what-a-request-reserves), on every
admission backend: SQLite, a real PostgreSQL (``gateway_admit``), and Redis admission (the Lua
script) over SQLite and over PostgreSQL, each as two stores ("hosts") on one state.

A budgeted key whose requests bring their bound (priced, with ``max_tokens``) or cost nothing (a
route/model without a price) admits them concurrently from its first request on; a priced request
without a bound keeps the key at one request at a time until one has been settled."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from gw_helpers import GatedUpstream, burst, gateway_yaml, ledger_rows, serve_gateway, stored_key
from gw_postgres import running_postgres
from gw_redis import running_redis

from harness_core.types import GenerateOptions, Message, TextBlock, TokenUsage
from harness_gateway.database import store_from_spec
from harness_gateway.errors import GatewayError
from harness_gateway.keys import KeyRecord, KeySpec
from harness_gateway.spend import (
    embedding_bound,
    estimated_usage,
    generation_bound,
    generation_floor,
    request_bound,
    request_cost,
)
from harness_gateway.store import SqlStore
from harness_middleware.pricing import Price, PriceBook

NOW = 1_000_000.25
BACKENDS = ("sqlite", "postgres", "redis-sqlite", "redis-postgres")


@pytest.fixture(scope="module")
def dsn() -> Iterator[str]:
    with running_postgres() as found:
        yield found


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with running_redis() as url:
        yield url


@pytest.fixture(params=BACKENDS)
def hosts(request: pytest.FixtureRequest, tmp_path: Path) -> list[SqlStore]:
    """Two stores on one state of the backend ``request.param``."""
    backend: str = request.param
    spec = request.getfixturevalue("dsn") if backend.endswith("postgres") else str(tmp_path / "gw.sqlite")
    limits = request.getfixturevalue("redis_url") if backend.startswith("redis") else None
    return [store_from_spec(spec, tmp_path / "gw.sqlite", limits=limits) for _ in range(2)]


async def new_key(store: SqlStore, budget: float) -> KeyRecord:
    await store.migrate()
    return (await store.create_key(KeySpec(name=f"k-{uuid.uuid4().hex[:8]}", budget=budget), now=NOW - 100))[1]


def tickets(results: list[Any]) -> list[str]:
    return [result for result in results if isinstance(result, str)]


def refusals(results: list[Any]) -> set[tuple[int, str | None]]:
    return {(error.status, error.code) for error in results if isinstance(error, GatewayError)}


async def reserved(store: SqlStore, key: KeyRecord) -> list[float]:
    rows = await store.transaction(
        lambda tx: tx.all("SELECT reserved FROM gateway_ledger WHERE key_id = ? AND status = 'running'", key.id),
        write=False,
    )
    return sorted(row[0] for row in rows)


def test_a_new_budgeted_key_admits_bounded_requests_at_once_up_to_its_budget(hosts: list[SqlStore]) -> None:
    async def main() -> None:
        key = await new_key(hosts[0], budget=10.0)
        results = await burst(hosts, key, 10, NOW, bound=0.5)  # nothing settled yet: the bound is known
        assert len(tickets(results)) == 10
        assert await reserved(hosts[1], key) == [0.5] * 10
        # 5 reserved of 10: exactly 10 more fit at 0.5 each, then the budget refuses (never overrun)
        more = await burst(hosts, key, 14, NOW + 1, bound=0.5)
        assert len(tickets(more)) == 10
        assert refusals(more) == {(429, "budget_exceeded")}
        refused = next(error for error in more if isinstance(error, GatewayError))
        assert refused.message == (
            f"key {key.name!r} is near its budget of $10: $10 is unspent, its running requests reserve $10 and "
            "this request may cost $0.5 (its bound: its estimated input plus its output limit at its route's "
            "prices): wait for them to finish"
        )
        assert refused.retry_after == pytest.approx(4.0)  # the oldest running one's lease (NOW + 5)

        learnt = await new_key(hosts[0], budget=10.0)
        (first,) = tickets(await burst(hosts, learnt, 1, NOW, bound=None))
        await hosts[1].settle(first, "complete", TokenUsage(3, 4), 0.8, now=NOW + 1)  # max_cost 0.8
        # a bounded request reserves its bound, whatever the key's requests have cost
        assert len(tickets(await burst(hosts, learnt, 2, NOW + 2, bound=0.5))) == 2
        assert len(tickets(await burst(hosts, learnt, 1, NOW + 2, bound=1.5))) == 1
        assert await reserved(hosts[0], learnt) == [0.5, 0.5, 1.5]
        # 0.8 spent, 2.5 reserved: a bound of 6.7 fits exactly, one of 6.8 only once the running end
        assert refusals(await burst(hosts, learnt, 1, NOW + 2, bound=6.8)) == {(429, "budget_exceeded")}
        assert len(tickets(await burst(hosts, learnt, 1, NOW + 2, bound=6.7))) == 1
        # a bound above what the spend leaves never fits: not retryable, naming the room and the cure
        (never,) = await burst(hosts, learnt, 1, NOW + 2, bound=9.5)
        assert isinstance(never, GatewayError)
        assert (never.status, never.code, never.retryable) == (429, "insufficient_quota", False)
        assert never.retry_after is None
        assert never.message == (
            f"key {learnt.name!r} has $9.2 left of its budget of $10 and this request may cost $9.5 (its bound: its "
            "estimated input plus its output limit at its route's prices): not retryable as sent; lower the "
            "output limit or shorten the input, or have an admin raise the key's budget "
            f"(`harness keys update {learnt.name} --budget <USD>`, or `PATCH /admin/keys/{learnt.name}` with "
            '`{"budget": <USD>}`)'
        )  # what helps: the request's own cure, or a raised budget (keys' budgets can be changed)
        assert await reserved(hosts[1], learnt) == [0.5, 0.5, 1.5, 6.7]
        # the room is wholly reserved: a request priced at 0 still never waits for the running ones
        assert len(tickets(await burst(hosts, learnt, 3, NOW + 2, bound=0.0))) == 3
        for store in hosts:
            await store.aclose()

    anyio.run(main)


def test_a_budgeted_key_admits_requests_priced_at_zero_concurrently_and_reserves_nothing(hosts: list[SqlStore]) -> None:
    async def main() -> None:
        key = await new_key(hosts[0], budget=1.0)
        results = await burst(hosts, key, 10, NOW, bound=0.0)  # priced at 0: charged 0, never serialised
        assert len(tickets(results)) == 10
        assert await reserved(hosts[0], key) == [0.0] * 10
        for number, ticket in enumerate(tickets(results)):
            await hosts[number % 2].settle(ticket, "complete", TokenUsage(5, 5), 0.0, now=NOW + 1)
        again = await burst(hosts, key, 10, NOW + 2, bound=0.0)  # still no cost learnt: still concurrent
        assert len(tickets(again)) == 10
        # a priced request of the key (another route) without a bound waits while any of the key's run
        assert refusals(await burst(hosts, key, 1, NOW + 3, bound=None)) == {(429, "budget_exceeded")}
        for number, ticket in enumerate(tickets(again)):
            await hosts[number % 2].settle(ticket, "complete", TokenUsage(5, 5), 0.0, now=NOW + 3)
        (priced,) = tickets(await burst(hosts, key, 1, NOW + 3, bound=None))
        await hosts[0].settle(priced, "complete", TokenUsage(1, 1), 1.0, now=NOW + 4)  # the budget is spent
        spent = await burst(hosts, key, 3, NOW + 5, bound=0.0)
        assert refusals(spent) == {(429, "insufficient_quota")}  # a spent key is refused even a free request
        for store in hosts:
            await store.aclose()

    anyio.run(main)


def test_a_priced_request_without_a_bound_still_runs_one_at_a_time_until_one_settled(hosts: list[SqlStore]) -> None:
    async def main() -> None:
        key = await new_key(hosts[0], budget=1.0)
        first = await burst(hosts, key, 10, NOW, bound=None)
        assert len(tickets(first)) == 1
        assert refusals(first) == {(429, "budget_exceeded")}
        waiting = next(error for error in first if isinstance(error, GatewayError))
        assert "runs one request at a time while the cost of its requests is unknown" in waiting.message
        assert "request that sets `max_tokens`" in waiting.message
        assert waiting.retry_after == pytest.approx(5.0)  # the running one's lease
        (ticket,) = tickets(first)
        assert tickets(await burst(hosts, key, 1, NOW, bound=0.25)) != []  # a bounded one need not wait
        await hosts[1].settle(ticket, "complete", TokenUsage(3, 4), 0.25, now=NOW + 1)
        # 0.25 learnt: 0.25 running, the rest reserve 0.25 each: two more fit in 1.0
        second = await burst(hosts, key, 6, NOW + 2, bound=None)
        assert len(tickets(second)) == 2
        for store in hosts:
            await store.aclose()

    anyio.run(main)


def test_a_request_without_a_bound_reserves_at_least_its_input_s_cost(hosts: list[SqlStore]) -> None:
    """Once a cheap request of the key settled (0.002 learnt), requests without a bound whose
    input alone costs 0.1 (their floor) reserve 0.1 each, not 0.002: at most what the budget holds
    is admitted at once (it was every one of them, spending many times the budget)."""

    async def main() -> None:
        key = await new_key(hosts[0], budget=1.0)
        (cheap,) = tickets(await burst(hosts, key, 1, NOW, bound=None, floor=0.001))
        await hosts[1].settle(cheap, "complete", TokenUsage(2, 2), 0.002, now=NOW + 1)
        results = await burst(hosts, key, 40, NOW + 2, bound=None, floor=0.1)
        assert len(tickets(results)) == 9  # 0.002 spent + 9 x 0.1 reserved: a tenth 0.1 no longer fits
        assert refusals(results) == {(429, "budget_exceeded")}
        assert await reserved(hosts[0], key) == [pytest.approx(0.1)] * 9
        small = await burst(hosts, key, 1, NOW + 2, bound=None, floor=0.0)  # 0.002 learnt: fits in the 0.098 left
        assert len(tickets(small)) == 1
        # an input alone costing more than the spend leaves is never admitted (it was, once: 1.5 of 1.0)
        (never,) = await burst(hosts, key, 1, NOW + 2, bound=None, floor=1.5)
        assert isinstance(never, GatewayError)
        assert (never.code, never.retryable) == ("insufficient_quota", False)
        assert "has $0.998 left of its budget of $1 and this request may cost $1.5 (its estimated" in never.message
        assert "not retryable as sent; shorten the input, or have an admin raise the key's budget (" in never.message
        # an unbounded request reserving the key's costliest: the cure is max_tokens
        costly = await new_key(hosts[0], budget=1.0)
        (one,) = tickets(await burst(hosts, costly, 1, NOW, bound=None))
        await hosts[0].settle(one, "complete", TokenUsage(2, 2), 0.6, now=NOW + 1)
        (never,) = await burst(hosts, costly, 1, NOW + 2, bound=None, floor=0.01)
        assert isinstance(never, GatewayError)
        assert never.code == "insufficient_quota"
        assert "may cost $0.6 (the most a request of this key has cost, reserved for a request without" in never.message
        assert "set `max_tokens` (`max_output_tokens` on /v1/responses) so its cost is known" in never.message
        assert len(tickets(await burst(hosts, costly, 1, NOW + 2, bound=0.3))) == 1  # with a bound it fits
        fresh = await new_key(hosts[0], budget=1.0)  # nothing learnt: one at a time, whatever the floor
        first = await burst(hosts, fresh, 5, NOW, bound=None, floor=0.1)
        assert len(tickets(first)) == 1
        assert await reserved(hosts[1], fresh) == [pytest.approx(0.1)]
        for store in hosts:
            await store.aclose()

    anyio.run(main)


def test_the_floor_is_the_input_s_cost_alone() -> None:
    book = PriceBook({"r/m": Price(input=1_000_000.0, output=2_000_000.0)}, use_table=False)  # 1 and 2 USD a token
    asked = options("x" * 30, max_tokens=None)
    tokens = estimated_usage(asked, 0).input_tokens
    assert generation_floor(book, "r", "m", asked) == pytest.approx(tokens)
    assert generation_floor(book, "none", "m", asked) == 0.0  # no price: nothing known (and remembered)
    assert generation_floor(book, "none", "m", asked) == 0.0


# ------------------------------------------------------------------ the bound from the price book


def options(text: str, max_tokens: int | None) -> GenerateOptions:
    return GenerateOptions(messages=[Message(role="user", content=[TextBlock(text=text)])], max_tokens=max_tokens)


def test_the_bound_is_the_estimated_input_plus_max_tokens_at_the_books_prices(caplog: pytest.LogCaptureFixture) -> None:
    book = PriceBook({"r/m": Price(input=1_000_000.0, output=2_000_000.0)}, use_table=False)  # 1 and 2 USD a token
    asked = options("x" * 30, max_tokens=10)
    tokens = estimated_usage(asked, 0).input_tokens  # 4 characters a token, rounded up
    assert tokens == 8
    assert generation_bound(book, "r", "m", asked) == pytest.approx(tokens + 2 * 10)
    assert generation_bound(book, "r", "m", options("hi", max_tokens=None)) is None  # priced, no bound: unknown
    assert embedding_bound(book, "r", "m", ["abcd", "efgh"]) == pytest.approx(2.0)  # input only: 2 tokens
    with caplog.at_level(logging.WARNING, logger="harness_gateway.spend"):
        # no price: no bound (a balance pool or fallback may serve it at a price), looked up once
        assert generation_bound(book, "free", "m", options("hi", max_tokens=None)) is None
        assert generation_bound(book, "free", "m", options("hi", max_tokens=5)) is None
        assert generation_bound(book, "free", "m", options("hi", max_tokens=5)) is None
        assert request_cost(book, "free", "m", TokenUsage(1, 1)) == 0.0
    assert [record.getMessage() for record in caplog.records] == [
        "charging 0 USD for free/m requests: no price is known (add one to `prices`)"  # once per model
    ]


def test_a_model_whose_output_costs_nothing_is_bounded_without_max_tokens() -> None:
    """Priced at 0 (a self-hosted model), with ``max_tokens`` or not: bound 0; free output but a
    priced input: the input's cost; output or reasoning tokens priced at any rate: no bound."""
    book = PriceBook(
        {
            "local/m": Price(input=0.0, output=0.0),
            "half/m": Price(input=1_000_000.0, output=0.0),  # 1 USD an input token, output free
            "cheap/m": Price(input=0.0, output=0.000001),  # a millionth of a cent per million output tokens
            "think/m": Price(input=0.0, output=0.0, reasoning=1.0),  # only reasoning is priced
        },
        use_table=False,
    )
    asked = options("x" * 30, max_tokens=None)
    tokens = estimated_usage(asked, 0).input_tokens
    assert generation_bound(book, "local", "m", asked) == 0.0
    assert generation_bound(book, "local", "m", options("hi", max_tokens=64)) == 0.0
    assert generation_bound(book, "half", "m", asked) == pytest.approx(tokens)
    assert generation_bound(book, "cheap", "m", asked) is None
    assert generation_bound(book, "think", "m", asked) is None
    assert generation_bound(book, "cheap", "m", options("hi", max_tokens=64)) is not None  # bounded by max_tokens


def test_a_usage_the_book_cannot_price_gives_no_bound() -> None:
    book = PriceBook({"r/m": Price(input=1.0, output=1.0)}, use_table=False)
    assert request_bound(book, "r", "m", TokenUsage(-1, 3)) is None  # priced, but not this usage: unknown


# ------------------------------------------------------------------ through the gateway


def test_the_gateway_admits_a_keys_bounded_and_free_requests_while_an_unbounded_one_runs(tmp_path: Path) -> None:
    """A budgeted key's first request (priced, no ``max_tokens``) streams, held by its upstream;
    meanwhile the key's request with ``max_tokens``, its request to a route priced at 0 and its
    embedding call are served, and another request without a bound waits: a priced one without
    ``max_tokens``, and one to a route with no price at all (a pool or fallback could price it)."""
    rate = "{input: 1000, output: 1000}"  # USD per million tokens
    priced = f"slow/m: {rate}, mock/echo: {rate}, mock/hash: {rate}, free/echo: {{input: 0, output: 0}}"
    settings = f"    require_keys: true\n    prices: {{{priced}}}\n"
    with GatedUpstream(["first ", "second "]) as upstream:
        extra = (
            f"  openai:slow: {{base_url: '{upstream.url}/v1', api_key: provider-test-credential, routes: [slow]}}\n"
            "  mock:free: {routes: [free, unpriced]}\n"  # free/echo priced at 0; unpriced/echo has no price
        )
        db = tmp_path / "gw.sqlite"
        with serve_gateway(tmp_path, gateway_yaml(settings, extra, db=db)) as running:
            auth = {"authorization": f"Bearer {stored_key(db, 'team', budget=100.0)}"}
            chat = running.url + "/v1/chat/completions"
            hi = [{"role": "user", "content": "hi"}]
            held = {"model": "slow/m", "messages": hi, "stream": True}
            with httpx.Client(timeout=30) as client, client.stream("POST", chat, json=held, headers=auth) as reply:
                assert reply.status_code == 200
                lines = reply.iter_lines()
                assert any("first " in line for line in lines)  # it runs, held by its upstream, nothing settled

                unbounded = client.post(chat, json={"model": "mock/echo", "messages": hi}, headers=auth)
                assert unbounded.status_code == 429, unbounded.text
                message = unbounded.json()["error"]["message"]
                assert "runs one request at a time while the cost of its requests is unknown" in message
                unpriced = {"model": "unpriced/echo", "messages": hi, "max_tokens": 16}  # no price: no bound
                refused = client.post(chat, json=unpriced, headers=auth)
                assert refused.status_code == 429
                cure = refused.json()["error"]["message"].split("retry when the running one ends; ")[1]
                assert cure == (  # the cure: its price (it told a request that set max_tokens to set max_tokens)
                    "unpriced/echo has no price, so no request to it has a cost known before it runs (`max_tokens`"
                    " cannot bound it): give it one in the gateway's `prices` (plugins.yaml `gateway: {prices:"
                    " {unpriced/echo: {input: <USD>, output: <USD>}}}`, per million tokens; 0 for a self-hosted model)"
                )
                bounded = {"model": "mock/echo", "messages": hi, "max_tokens": 16}
                assert client.post(chat, json=bounded, headers=auth).status_code == 200
                free = {"model": "free/echo", "messages": hi}
                assert client.post(chat, json=free, headers=auth).status_code == 200
                embedding = {"model": "mock/hash", "input": ["a b"]}
                assert client.post(running.url + "/v1/embeddings", json=embedding, headers=auth).status_code == 200

                upstream.release(1)
                assert any("second " in line for line in lines)
    assert upstream.held == []
    costs = {(row["route"], row["status"]): row["cost"] for row in ledger_rows(db)}
    assert costs[("free", "complete")] == 0.0
    assert costs[("mock", "complete")] > 0


def test_a_key_that_only_uses_models_priced_at_zero_never_waits_without_max_tokens(tmp_path: Path) -> None:
    """A budgeted key whose requests all go to self-hosted models priced at 0 and set no
    ``max_tokens``: its first request streams, held by its upstream, none of its requests has
    settled (no cost learnt), and its next requests are served meanwhile (they used to wait, one
    at a time, as if their cost were unknown)."""
    settings = "    require_keys: true\n    prices: {slow/m: {input: 0, output: 0}, free/echo: {input: 0, output: 0}}\n"
    with GatedUpstream(["first ", "second "]) as upstream:
        extra = (
            f"  openai:slow: {{base_url: '{upstream.url}/v1', api_key: provider-test-credential, routes: [slow]}}\n"
            "  mock:free: {routes: [free]}\n"
        )
        db = tmp_path / "gw.sqlite"
        with serve_gateway(tmp_path, gateway_yaml(settings, extra, db=db)) as running:
            auth = {"authorization": f"Bearer {stored_key(db, 'local', budget=5.0)}"}
            chat = running.url + "/v1/chat/completions"
            hi = [{"role": "user", "content": "hi"}]
            held = {"model": "slow/m", "messages": hi, "stream": True}
            with httpx.Client(timeout=30) as client, client.stream("POST", chat, json=held, headers=auth) as reply:
                assert reply.status_code == 200
                lines = reply.iter_lines()
                assert any("first " in line for line in lines)  # running, nothing of the key settled
                for _ in range(3):
                    served = client.post(chat, json={"model": "free/echo", "messages": hi}, headers=auth)
                    assert served.status_code == 200, served.text
                upstream.release(1)
                assert any("second " in line for line in lines)
    rows = ledger_rows(db)
    assert sorted(row["status"] for row in rows) == ["complete"] * 4
    assert {row["cost"] for row in rows} == {0.0}


def test_a_model_whose_output_is_priced_is_priced_once_without_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    book = PriceBook({"r/*": Price(input=1.0, output=1.0)}, use_table=False)
    looked: list[str | None] = []
    cost = book.cost

    def counted(route: str | None, model: str | None, usage: TokenUsage | None, **kwargs: Any) -> Any:
        looked.append(model)
        return cost(route, model, usage, **kwargs)

    monkeypatch.setattr(book, "cost", counted)
    for model in ("a", "a", "b", "b"):
        assert generation_bound(book, "r", model, options("hi", max_tokens=None)) is None
    assert looked == ["a", "a", "b", "b"]  # output priced: learnt once per model (no output, some output)
    looked.clear()
    assert generation_bound(book, "r", "a", options("hi", max_tokens=4)) is not None
    assert looked == ["a"]  # one lookup for a bounded request
