"""balance: a pool name served by its members: weights, strategies, limits, cooldowns, the fallback
rule (move on only before content), one error naming every attempt; over HTTP with scripted
providers; the pool as a route (models, chain)."""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import msgspec
import pytest
from mw_helpers import Script, Stall, collect, error_finish, options, stop, text_chunks, usage

from harness_core import Harness
from harness_core.abort import AbortSignal
from harness_core.errors import LlmError
from harness_core.record import open_record
from harness_core.testing import Reply, ScriptedServer
from harness_core.types import Finish, GenerateOptions, StreamChunk
from harness_middleware.balance import (
    BalancePlugin,
    Limits,
    MemberLoad,
    MemoryState,
    PoolAdapter,
    share_state,
    shared_state,
)

pytestmark = pytest.mark.anyio

REPLY = [*text_chunks("hi"), usage(), stop()]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Routes:
    """A ``call_next`` sending each route to its own :class:`Script`/:class:`Stall`."""

    def __init__(self, **scripts: Any) -> None:
        self.scripts = scripts
        self.calls: list[tuple[str | None, str | None]] = []

    def __call__(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        self.calls.append((options.route, options.model))
        return self.scripts[options.route or ""](options)  # type: ignore[no-any-return]


def balance(pools: dict[str, Any], clock: Clock | None = None, **config: Any) -> BalancePlugin:
    config.setdefault("seed", 7)
    plugin_config = msgspec.convert({"pools": pools, **config}, BalancePlugin.Config)
    return BalancePlugin(plugin_config, state=MemoryState(), clock=clock or Clock())


def pool_options(**fields: Any) -> GenerateOptions:
    return options(route="pool", **fields)


def failure_of(chunks: Sequence[StreamChunk]) -> Any:
    final = chunks[-1]
    assert isinstance(final, Finish)
    return final.reason.failure


# ---------------------------------------------------------------------------- weights


async def test_weights_hold_over_a_thousand_requests_within_a_binomial_bound() -> None:
    plugin = balance({"pool": [{"target": "a", "weight": 3}, {"target": "b/m2", "weight": 1}]})
    routes = Routes(a=Script(REPLY), b=Script(REPLY))
    for _ in range(1000):
        assert await collect(plugin.llm_stream(pool_options(), routes)) == REPLY
    counts = Counter(route for route, _ in routes.calls)
    n, p = 1000, 0.75
    assert abs(counts["a"] - n * p) <= 4 * math.sqrt(n * p * (1 - p))  # 4 standard deviations
    assert set(routes.calls) == {("a", "m1"), ("b", "m2")}  # a member without a model keeps the requested one


async def test_a_route_that_is_not_a_pool_passes_through() -> None:
    plugin = balance({"pool": [{"target": "a"}]})
    routes = Routes(fake=Script(REPLY))
    assert await collect(plugin.llm_stream(options(), routes)) == REPLY
    assert routes.calls == [("fake", "m1")]


async def test_served_member_is_noted_for_outer_layers() -> None:
    plugin = balance({"pool": [{"target": "a/x"}]})
    opts, notes = open_record(pool_options())
    await collect(plugin.llm_stream(opts, Routes(a=Script(REPLY))))
    assert (notes.served_route, notes.served_model) == ("a", "x")
    assert [(a.route, a.model, a.failure) for a in notes.attempts] == [("a", "x", None)]


# ---------------------------------------------------------------------------- failing members


async def test_a_member_answering_503_sheds_its_traffic_and_cools_down() -> None:
    clock = Clock()
    plugin = balance({"pool": [{"target": "a"}, {"target": "b"}]}, clock, cooldown=30)
    routes = Routes(a=Script([error_finish("SERVER", message="HTTP 503 busy")]), b=Script(REPLY))
    for _ in range(20):
        assert await collect(plugin.llm_stream(pool_options(), routes)) == REPLY
    assert routes.calls.count(("a", "m1")) == 1  # tried once, then cooling down
    assert routes.calls.count(("b", "m1")) == 20
    clock.now += 31  # the cooldown ran out: a is tried again
    for _ in range(20):
        await collect(plugin.llm_stream(pool_options(), routes))
    assert routes.calls.count(("a", "m1")) == 2


async def test_a_failure_raised_before_content_moves_on_too() -> None:
    plugin = balance({"pool": [{"target": "a", "weight": 100}, {"target": "b", "weight": 0.01}]}, cooldown=0)
    routes = Routes(a=Script([LlmError("RATE_LIMITED", "429 slow down")]), b=Script(REPLY))
    assert await collect(plugin.llm_stream(pool_options(), routes)) == REPLY
    assert await collect(plugin.llm_stream(pool_options(), routes)) == REPLY
    assert routes.calls.count(("a", "m1")) == 2  # no cooldown: a is picked again


async def test_all_members_failing_give_one_error_naming_every_attempt() -> None:
    plugin = balance({"pool": [{"target": "a/x"}, {"target": "b/y"}]})
    routes = Routes(
        a=Script([error_finish("SERVER", message="HTTP 503 busy")]),
        b=Script([error_finish("RATE_LIMITED", message="HTTP 429 slow")]),
    )
    chunks = await collect(plugin.llm_stream(pool_options(), routes))
    assert len(chunks) == 1
    message = failure_of(chunks).message
    assert "balance attempts:" in message
    assert "a/x: SERVER 'HTTP 503 busy'" in message
    assert "b/y: RATE_LIMITED 'HTTP 429 slow'" in message
    # both cool down: the next stream tries every member anyway, in the strategy's order
    again = await collect(plugin.llm_stream(pool_options(), routes))
    assert "a/x" in failure_of(again).message
    assert "b/y" in failure_of(again).message


async def test_a_failure_after_content_ends_the_stream_and_nothing_is_replayed() -> None:
    clock = Clock()
    plugin = balance({"pool": [{"target": "a", "weight": 100}, {"target": "b", "weight": 0.01}]}, clock)
    broken = [*text_chunks("par")[:2], error_finish("NETWORK", message="reset")]
    routes = Routes(a=Script(broken), b=Script(REPLY))
    chunks = await collect(plugin.llm_stream(pool_options(), routes))
    assert routes.calls == [("a", "m1")]
    assert "a/m1: failed after content was sent: NETWORK 'reset'" in failure_of(chunks).message
    await collect(plugin.llm_stream(pool_options(), routes))
    assert routes.calls[-1] == ("b", "m1")  # a cools down after its mid-stream failure


async def test_a_failure_that_does_not_move_on_ends_the_stream() -> None:
    plugin = balance({"pool": [{"target": "a"}, {"target": "b"}]})
    routes = Routes(a=Script([error_finish("AUTH", message="bad key")]), b=Script([error_finish("AUTH")]))
    chunks = await collect(plugin.llm_stream(pool_options(), routes))
    assert len(routes.calls) == 1
    assert failure_of(chunks).code == "AUTH"


async def test_listed_status_moves_on_and_an_abort_stops_at_the_failed_member() -> None:
    plugin = balance({"pool": [{"target": "a", "weight": 100}, {"target": "b", "weight": 0.01}]}, statuses=[401])
    assert plugin.moves_on(LlmError("AUTH", "no", status=401).to_failure())
    abort = AbortSignal()
    routes = Routes(a=Script([abort.fire, error_finish("SERVER")]), b=Script(REPLY))
    chunks = await collect(plugin.llm_stream(pool_options(abort=abort), routes))
    assert routes.calls == [("a", "m1")]
    assert failure_of(chunks).code == "SERVER"


# ---------------------------------------------------------------------------- strategies


async def test_least_busy_prefers_the_member_with_fewer_streams_in_flight() -> None:
    plugin = balance({"pool": {"members": [{"target": "slow"}, {"target": "fast"}], "strategy": "least-busy"}})
    routes = Routes(slow=Stall(*text_chunks("s")[:2]), fast=Script(REPLY))
    held: list[AsyncIterator[StreamChunk]] = []
    async with anyio.create_task_group():
        # streams are picked one by one: each new one goes where the fewest run; the slow one never ends
        while routes.calls.count(("slow", "m1")) == 0:
            stream = plugin.llm_stream(pool_options(), routes)
            first = await stream.__anext__()
            if routes.calls[-1][0] == "slow":
                held.append(stream)
            else:
                assert first == REPLY[0]
                await stream.aclose()  # type: ignore[attr-defined]
        for _ in range(20):
            assert await collect(plugin.llm_stream(pool_options(), routes)) == REPLY
    assert routes.calls[-20:] == [("fast", "m1")] * 20
    for stream in held:
        await stream.aclose()  # type: ignore[attr-defined]
    assert (await plugin.state.loads(["slow"], 0))[0].in_flight == 0  # type: ignore[union-attr]


async def test_latency_prefers_the_member_with_the_lower_time_to_first_token() -> None:
    clock = Clock()

    def after(seconds: float) -> Any:
        def advance() -> None:
            clock.now += seconds

        return advance

    plugin = balance({"pool": [{"target": "slow"}, {"target": "fast"}]}, clock, strategy="latency", explore=0)
    routes = Routes(slow=Script([after(2.0), *REPLY]), fast=Script([after(0.1), *REPLY]))
    for _ in range(22):
        await collect(plugin.llm_stream(pool_options(), routes))
    assert routes.calls[:2].count(("slow", "m1")) == 1  # each member is measured once first
    assert routes.calls[2:] == [("fast", "m1")] * 20


async def test_latency_explores_by_weight() -> None:
    clock = Clock()
    plugin = balance({"pool": [{"target": "slow"}, {"target": "fast"}]}, clock, strategy="latency", explore=1)
    plugin.pools["pool"].members[0].latency = 5.0
    plugin.pools["pool"].members[1].latency = 0.1
    routes = Routes(slow=Script(REPLY), fast=Script(REPLY))
    for _ in range(100):
        await collect(plugin.llm_stream(pool_options(), routes))
    assert 20 < routes.calls.count(("slow", "m1")) < 80  # exploring everything: by weight, 1:1


async def test_usage_prefers_the_member_with_the_most_headroom() -> None:
    plugin = balance(
        {"pool": [{"target": "a", "rpm": 10}, {"target": "b", "rpm": 100, "tpm": 10_000, "max_in_flight": 5}]},
        strategy="usage",
    )
    routes = Routes(a=Script(REPLY), b=Script(REPLY))
    for _ in range(40):
        await collect(plugin.llm_stream(pool_options(), routes))
    counts = Counter(route for route, _ in routes.calls)
    assert counts["a"] <= 5
    assert counts["b"] >= 35


# ---------------------------------------------------------------------------- limits


async def test_rpm_limits_every_member_then_rate_limited_with_the_soonest_retry() -> None:
    clock = Clock()
    plugin = balance({"pool": [{"target": "a", "rpm": 3}, {"target": "b", "rpm": 2}]}, clock, wait=0)
    routes = Routes(a=Script(REPLY), b=Script(REPLY))
    for _ in range(5):
        assert await collect(plugin.llm_stream(pool_options(), routes)) == REPLY
        clock.now += 1
    assert Counter(r for r, _ in routes.calls) == {"a": 3, "b": 2}
    chunks = await collect(plugin.llm_stream(pool_options(), routes))
    failure = failure_of(chunks)
    assert failure.code == "RATE_LIMITED"
    assert failure.retry_after == pytest.approx(55.0)  # the first request started 5 s ago
    assert "pool 'pool'" in failure.message
    assert "a, b" in failure.message
    clock.now += 55
    assert await collect(plugin.llm_stream(pool_options(), routes)) == REPLY


async def test_tpm_counts_the_tokens_of_ended_streams() -> None:
    clock = Clock()
    plugin = balance({"pool": [{"target": "a", "tpm": 20}]}, clock, wait=0)
    routes = Routes(a=Script(REPLY))  # 15 tokens each
    await collect(plugin.llm_stream(pool_options(), routes))
    await collect(plugin.llm_stream(pool_options(), routes))
    clock.now += 10
    failure = failure_of(await collect(plugin.llm_stream(pool_options(), routes)))
    assert (failure.code, failure.retry_after) == ("RATE_LIMITED", pytest.approx(50.0))


async def test_max_in_flight_waits_for_a_stream_to_end() -> None:
    plugin = BalancePlugin(
        msgspec.convert({"pools": {"pool": [{"target": "a", "max_in_flight": 1}]}, "wait": 60}, BalancePlugin.Config),
        state=MemoryState(),
    )
    routes = Routes(a=Script(REPLY))
    first = plugin.llm_stream(pool_options(), routes)  # holds the slot while suspended after its first chunk
    assert await first.__anext__() == REPLY[0]
    waiting: list[StreamChunk] = []

    async def second() -> None:
        waiting.extend(await collect(plugin.llm_stream(pool_options(), routes)))

    async with anyio.create_task_group() as group:
        group.start_soon(second)
        await anyio.wait_all_tasks_blocked()
        assert len(routes.calls) == 1  # the second stream waits for the slot
        await first.aclose()  # type: ignore[attr-defined]
    assert waiting == REPLY
    assert len(routes.calls) == 2


async def test_max_in_flight_without_wait_fails_at_once() -> None:
    plugin = balance({"pool": [{"target": "a", "max_in_flight": 1}]}, wait=0)
    routes = Routes(a=Stall(*text_chunks("x")[:2]))
    first = plugin.llm_stream(pool_options(), routes)
    await first.__anext__()
    failure = failure_of(await collect(plugin.llm_stream(pool_options(), routes)))
    assert failure.code == "RATE_LIMITED"
    assert failure.retry_after > 0
    await first.aclose()  # type: ignore[attr-defined]


async def test_waiting_past_the_bound_fails_rate_limited() -> None:
    clock = Clock()
    plugin = balance({"pool": [{"target": "a", "rpm": 1}]}, clock, wait=10)
    routes = Routes(a=Script(REPLY))
    await collect(plugin.llm_stream(pool_options(), routes))
    failure = failure_of(await collect(plugin.llm_stream(pool_options(), routes)))  # frees in 60 s > 10 s
    assert failure.code == "RATE_LIMITED"


async def test_memory_state_windows() -> None:
    state = MemoryState()
    limits = Limits(rpm=1)
    assert await state.acquire("m", limits, 1000.0) == ""
    assert await state.acquire("m", limits, 1030.0) == pytest.approx(30.0)
    await state.release("m", "", 0, 1031.0)
    await state.cool("m", 1100.0)
    await state.cool("m", 1050.0)  # never shortens
    (load,) = await state.loads(["m"], 1061.0)
    assert (load.in_flight, load.requests, load.tokens, load.cooling_until) == (0, 0, 0, 1100.0)
    assert repr(load) == "MemberLoad(in_flight=0, requests=0, tokens=0, cooling_until=1100.0)"
    assert repr(MemberLoad()) == "MemberLoad(in_flight=0, requests=0, tokens=0, cooling_until=0.0)"


def test_share_state_registers_and_restores() -> None:
    before = shared_state()
    state = MemoryState()
    restore = share_state(state)
    assert shared_state() is state
    restore()
    restore()  # idempotent
    assert shared_state() is before


async def test_the_plugin_uses_the_shared_state_by_default() -> None:
    state = MemoryState()
    restore = share_state(state)
    try:
        config = msgspec.convert({"pools": {"pool": [{"target": "a", "rpm": 5}]}}, BalancePlugin.Config)
        await collect(BalancePlugin(config).llm_stream(pool_options(), Routes(a=Script(REPLY))))
        assert (await state.loads(["a"], time.time()))[0].requests == 1  # counted in the shared state
    finally:
        restore()


# ---------------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("pools", "problem"),
    [
        ({"p": []}, "pool 'p' has no members"),
        ({"p": [{"target": "a/"}]}, "(a member of pool 'p')"),
        ({"p": [{"target": "q"}], "q": [{"target": "a"}]}, "pools do not nest"),
        ({"p": [{"target": "a"}, {"target": "a"}]}, "lists member 'a' twice"),
    ],
)
def test_bad_pools_are_named(pools: dict[str, Any], problem: str) -> None:
    with pytest.raises(msgspec.ValidationError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        msgspec.convert({"pools": pools}, BalancePlugin.Config)


def test_describe_chain() -> None:
    plugin = balance({"pool": {"members": [{"target": "a", "weight": 2}, {"target": "b/m"}], "strategy": "usage"}})
    assert plugin.describe_chain("pool") == "pool pool: usage over a (weight 2), b/m (weight 1); cooldown 30s"
    assert plugin.describe_chain(None) == "pools pool"
    assert BalancePlugin().describe_chain("x") == "pools none"


async def test_pool_adapter_lists_fixed_models_and_refuses_streams() -> None:
    adapter = PoolAdapter("pool", ["a/x", "b", "c/x", "d/y"])
    assert [info.model for info in await adapter.list_models()] == ["x", "y"]
    assert repr(adapter) == "PoolAdapter(pool='pool', members=['a/x', 'b', 'c/x', 'd/y'])"
    with pytest.raises(LlmError, match="UNSUPPORTED"):
        await PoolAdapter("pool", ["a"]).list_models()
    with pytest.raises(LlmError, match="only the balance middleware serves it"):
        await PoolAdapter("pool", ["a"]).stream(pool_options()).__anext__()


# ---------------------------------------------------------------------------- over the wire


def sse_reply(text: str, model: str) -> Reply:
    def event(delta: dict[str, object], finish: str | None = None, **extra: object) -> str:
        body = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": model}
        body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
        body.update(extra)
        return f"data: {json.dumps(body)}\n\n"

    final = event({}, "stop", usage={"prompt_tokens": 12, "completion_tokens": 3})
    return Reply(reads=[(event({"role": "assistant", "content": text}) + final + "data: [DONE]\n\n").encode()])


openai = pytest.importorskip("harness_llm_openai")


def adapter(key: str, route: str, server: ScriptedServer) -> tuple[str, Any]:
    config = openai.OpenAIPlugin.Config(base_url=f"{server.url}/v1", routes=[route])
    return key, openai.OpenAIPlugin(config)


async def test_a_pool_over_http_sheds_a_429_member_without_client_errors() -> None:
    overloaded = Reply.json(429, {"error": {"message": "slow down", "type": "rate_limit_error"}})
    with (
        ScriptedServer(overloaded) as first,
        ScriptedServer(*[sse_reply("from b", "gpt-4o") for _ in range(10)]) as second,
    ):
        plugin = balance({"pool": [{"target": "east/gpt-4o"}, {"target": "west"}]}, Clock())
        harness = Harness(
            [("balance", plugin), adapter("openai:a", "east", first), adapter("openai:b", "west", second)]
        )
        async with harness:
            assert harness.routes()["pool"] == "balance"
            assert [(info.route, info.model) for info in await harness.list_models("pool")] == [("pool", "gpt-4o")]
            assert harness.chain("pool")[-1].key == "balance"
            results = [
                await harness.generate(msgspec.structs.replace(options(), route="pool", model="gpt-4o"))
                for _ in range(10)
            ]
        assert {r.text for r in results} == {"from b"}
        assert {(r.message.route, r.message.source, r.message.model) for r in results} == {
            ("west", "openai:b", "gpt-4o")
        }
        assert len(first.requests) == 1
        assert len(second.requests) == 10


def test_headroom_is_the_smallest_fraction_left() -> None:
    plugin = balance({"pool": [{"target": "free"}, {"target": "capped", "tpm": 100, "max_in_flight": 4}]})
    free, capped = plugin.pools["pool"].members
    assert free.headroom(MemberLoad(in_flight=9, requests=9, tokens=9)) == 1.0
    assert capped.headroom(MemberLoad(in_flight=1, tokens=50)) == 0.5


class Unreachable(MemoryState):
    """A shared state whose database is gone: admission or release raises."""

    def __init__(self, *, admit: bool) -> None:
        super().__init__()
        self.admit = admit

    async def loads(self, members: Sequence[str], now: float) -> Sequence[MemberLoad]:
        if not self.admit:
            raise LlmError("OVERLOADED", "balance state unavailable")
        return await super().loads(members, now)

    async def release(self, member: str, ticket: str, tokens: int, now: float) -> None:
        raise LlmError("OVERLOADED", "balance state unavailable")


async def test_an_unreachable_state_fails_the_stream_and_a_failed_release_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = msgspec.convert({"pools": {"pool": [{"target": "a"}]}}, BalancePlugin.Config)
    down = BalancePlugin(config, state=Unreachable(admit=False))
    failure = failure_of(await collect(down.llm_stream(pool_options(), Routes(a=Script(REPLY)))))
    assert failure.code == "OVERLOADED"
    assert "balance state unavailable" in failure.message
    late = BalancePlugin(config, state=Unreachable(admit=True))
    assert await collect(late.llm_stream(pool_options(), Routes(a=Script(REPLY)))) == REPLY
    assert "could not release member 'a'" in caplog.text
