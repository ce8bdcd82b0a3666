"""Middleware on embedding calls (``llm_embed``): retry, timeout, usage, cache, fallback, otel, redact.

Every test runs the middleware inside a real :class:`Harness` over a scripted embedding provider
(:class:`Embedder`, registered through ``register_embedder``): the provider is scripted, the
harness (chain, boundary, batching, error scrubbing) is the real one.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

import anyio
import msgspec
import pytest
from click.testing import CliRunner
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from harness_core import Harness, hookimpl
from harness_core.embedding import EmbeddingAdapter, Embeddings, EmbedOptions
from harness_core.errors import LlmError
from harness_core.hookspecs import RegisterEmbedder
from harness_core.record import embed_record, open_embed_record
from harness_core.types import GenerateOptions, Message, TokenUsage
from harness_llm_mock import MockConfig, MockPlugin
from harness_middleware.balance import BalancePlugin, MemoryState
from harness_middleware.cache import CachePlugin, embed_cache_key
from harness_middleware.cli import usage_command
from harness_middleware.fallback import Cooldowns, FallbackPlugin
from harness_middleware.otel import OtelPlugin
from harness_middleware.pricing import PriceBook
from harness_middleware.redact import RedactPlugin
from harness_middleware.retry import RetryPlugin
from harness_middleware.timeout import TimeoutPlugin
from harness_middleware.usage import UsagePlugin

pytestmark = pytest.mark.anyio

MODEL: Final = "text-embedding-3-small"


class _Hang:
    """A script step: the provider call waits until it is cancelled."""


HANG: Final = _Hang()
Step = LlmError | _Hang | None
"""A scripted provider call: raise this error, hang until cancelled, or answer (``None``)."""


def row(text: str, dimensions: int) -> list[float]:
    """The scripted provider's vector of ``text``: its length, its code-point sum, then 0.25s."""
    return [float(len(text)), float(sum(map(ord, text)) % 1000), *([0.25] * (dimensions - 2))][:dimensions]


class Embedder(EmbeddingAdapter):
    """A scripted embedding provider: call ``n`` takes step ``n`` (the last one repeats).

    An answer has one :func:`row` per input (``dimensions`` or 3 columns), the requested model
    (else :data:`MODEL`) and one input token per word. ``calls`` holds every request;
    ``cancelled`` counts calls that were cancelled while hanging.
    """

    def __init__(self, *steps: Step) -> None:
        self.steps: list[Step] = list(steps) or [None]
        self.calls: list[EmbedOptions] = []
        self.cancelled = 0

    async def embed(self, options: EmbedOptions) -> Embeddings:
        step = self.steps[min(len(self.calls), len(self.steps) - 1)]
        self.calls.append(options)
        if isinstance(step, LlmError):
            raise step
        if step is HANG:
            try:
                await anyio.sleep_forever()
            finally:
                self.cancelled += 1
        dimensions = options.dimensions or 3
        usage = TokenUsage(sum(len(text.split()) for text in options.inputs), None)
        rows = [row(text, dimensions) for text in options.inputs]
        return Embeddings.from_rows(rows, model=options.model or MODEL, usage=usage)


class EmbedderPlugin:
    """Registers an :class:`Embedder` for ``routes``."""

    def __init__(self, adapter: EmbeddingAdapter, routes: Sequence[str] = ("openai",)) -> None:
        self.adapter = adapter
        self.routes = list(routes)

    @hookimpl
    def register_embedder(self, register: RegisterEmbedder) -> None:
        register(self.routes, self.adapter)


def error(code: Any, message: str = "boom", **fields: Any) -> LlmError:
    return LlmError(code, message, provider="openai", **fields)


async def embed(layers: Sequence[tuple[str, object]], adapter: Embedder, *inputs: str, **fields: Any) -> Embeddings:
    """Embed ``inputs`` on route ``openai`` through ``layers`` (outermost first) and ``adapter``."""
    fields.setdefault("route", "openai")
    async with Harness([*layers, ("openai", EmbedderPlugin(adapter))]) as harness:
        return await harness.embed(list(inputs), **fields)


class Sleeps:
    """A retry sleep recording the waits instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        await anyio.lowlevel.checkpoint()


def retry(sleeps: Sleeps, **config: Any) -> tuple[str, RetryPlugin]:
    return "retry", RetryPlugin(msgspec.convert(config, RetryPlugin.Config), sleep=sleeps)


# ------------------------------------------------------------------ the call record


def test_embed_record_is_shared_by_nested_layers_and_reset_after() -> None:
    assert embed_record() is None
    with open_embed_record() as outer:
        assert embed_record() is outer
        with open_embed_record() as inner:
            assert inner is outer
        assert embed_record() is outer
    assert embed_record() is None


# ------------------------------------------------------------------ retry


async def test_retry_retries_retryable_errors_with_the_stream_backoff() -> None:
    sleeps = Sleeps()
    adapter = Embedder(error("SERVER"), error("OVERLOADED"), None)
    result = await embed([retry(sleeps, max_attempts=5, jitter=False, initial_delay=0.25)], adapter, "a b", "c")
    assert result.tolist() == [row("a b", 3), row("c", 3)]
    assert len(adapter.calls) == 3
    assert sleeps.waits == [0.25, 0.5]  # exponential without jitter, as for streams


async def test_retry_gives_up_with_the_last_error_and_honours_retry_after() -> None:
    sleeps = Sleeps()
    adapter = Embedder(error("RATE_LIMITED", "first", retry_after=2.5), error("SERVER", "last"))
    with pytest.raises(LlmError) as caught:
        await embed([retry(sleeps, max_attempts=2)], adapter, "x")
    assert (caught.value.code, caught.value.message) == ("SERVER", "last")
    assert len(adapter.calls) == 2
    assert sleeps.waits == [2.5]


async def test_retry_passes_other_errors_at_once() -> None:
    sleeps = Sleeps()
    adapter = Embedder(error("BAD_REQUEST", "dimensions too large"))
    with pytest.raises(LlmError, match="dimensions too large"):
        await embed([retry(sleeps)], adapter, "x")
    assert len(adapter.calls) == 1
    assert sleeps.waits == []


async def test_retry_codes_limit_what_is_retried() -> None:
    adapter = Embedder(error("NETWORK"), None)
    with pytest.raises(LlmError, match="NETWORK"):
        await embed([retry(Sleeps(), codes=["SERVER"])], adapter, "x")
    assert len(adapter.calls) == 1


# ------------------------------------------------------------------ timeout


def timeout(**config: Any) -> tuple[str, TimeoutPlugin]:
    return "timeout", TimeoutPlugin(msgspec.convert(config, TimeoutPlugin.Config))


async def test_timeout_total_bounds_the_call_and_cancels_the_provider() -> None:
    adapter = Embedder(HANG)
    with pytest.raises(LlmError) as caught:
        await embed([timeout(total=0.05)], adapter, "x")
    assert caught.value.code == "TIMEOUT"
    assert caught.value.retryable
    assert caught.value.message == "the total timeout of 0.05s ran out for an embedding call to route 'openai'"
    assert adapter.cancelled == 1


async def test_timeout_without_total_leaves_the_call_alone() -> None:
    # first_chunk and idle have no chunks to time: an answer is passed on whatever they are
    adapter = Embedder(None)
    result = await embed([timeout(first_chunk=0.001, idle=0.001)], adapter, "x")
    assert result.tolist() == [row("x", 3)]


async def test_timeout_inside_retry_is_retried() -> None:
    sleeps = Sleeps()
    adapter = Embedder(HANG, None)
    result = await embed([retry(sleeps, jitter=False), timeout(total=0.05)], adapter, "x")
    assert len(result) == 1
    assert len(adapter.calls) == 2
    assert adapter.cancelled == 1
    assert sleeps.waits == [0.5]


async def test_timeout_total_is_not_raised_when_the_call_answers_in_time() -> None:
    result = await embed([timeout(total=60)], Embedder(None), "x")
    assert len(result) == 1


# ------------------------------------------------------------------ usage


def usage(tmp_path: Path, **config: Any) -> tuple[str, UsagePlugin]:
    config.setdefault("path", str(tmp_path / "usage.sqlite"))
    return "usage", UsagePlugin(msgspec.convert(config, UsagePlugin.Config))


async def test_usage_records_a_priced_embeddings_row(tmp_path: Path) -> None:
    layer = usage(tmp_path)
    result = await embed([layer], Embedder(), "one two three", "four", dimensions=4)
    assert result.usage == TokenUsage(4, None)
    [row_] = layer[1].ledger.rows()
    expected = PriceBook().cost("openai", MODEL, TokenUsage(input_tokens=4, output_tokens=0))
    assert expected is not None
    assert expected.total == Decimal(4) * Decimal("0.02") / 1_000_000  # genai-prices: $0.02 per million
    assert row_ | {"ts": 0, "latency_ms": 0} == {
        "ts": 0,
        "route": "openai",
        "model": MODEL,
        "input_tokens": 4,
        "output_tokens": 0,
        "cache_read_tokens": None,
        "cache_write_tokens": None,
        "reasoning_tokens": None,
        "status": "complete",
        "error_code": None,
        "finish_reason": None,
        "latency_ms": 0,
        "first_chunk_ms": None,
        "cost": float(expected.total),
        "price_source": expected.source,
        "price_id": "openai/text-embedding-3-small",
        "cached": 0,
        "operation": "embeddings",
        "requested_route": "openai",  # what the call asked for (a pool's name behind balance)
        "requested_model": None,
    }
    assert row_["latency_ms"] >= 0


async def test_usage_records_failed_and_unpriced_calls(tmp_path: Path) -> None:
    layer = usage(tmp_path)
    with pytest.raises(LlmError):
        await embed([layer], Embedder(error("RATE_LIMITED")), "x", model="custom-embedder")
    async with Harness([layer, ("mock", MockPlugin(MockConfig()))]) as harness:
        await harness.embed(["mock words"], route="mock")
    failed, mock = layer[1].ledger.rows()
    assert (failed["status"], failed["error_code"], failed["route"], failed["model"]) == (
        "error",
        "RATE_LIMITED",
        "openai",
        "custom-embedder",
    )
    assert (failed["input_tokens"], failed["output_tokens"], failed["cost"]) == (None, None, None)
    assert (mock["route"], mock["model"], mock["input_tokens"], mock["cost"]) == ("mock", "hash", 2, None)
    assert mock["operation"] == "embeddings"


async def test_usage_records_a_cancelled_call_as_aborted(tmp_path: Path) -> None:
    layer = usage(tmp_path)
    adapter = Embedder(HANG)
    async with Harness([layer, ("openai", EmbedderPlugin(adapter))]) as harness:
        with anyio.move_on_after(0.05):
            await harness.embed(["x"], route="openai")
    [row_] = layer[1].ledger.rows()
    assert (row_["status"], row_["error_code"], row_["operation"]) == ("aborted", None, "embeddings")
    assert adapter.cancelled == 1


async def test_usage_masks_route_and_model(tmp_path: Path) -> None:
    layer = usage(tmp_path)
    secret = "sk-" + "embedmodel" * 3
    plugins = [layer, ("openai", EmbedderPlugin(Embedder()))]
    async with Harness(plugins, redact=lambda text: text.replace(secret, "[secret]")) as harness:
        await harness.embed(["x"], route="openai", model=secret)
    [row_] = layer[1].ledger.rows()
    assert (row_["model"], row_["requested_model"]) == ("[secret]", "[secret]")


async def test_harness_usage_splits_streams_and_embeddings(tmp_path: Path) -> None:
    layer = usage(tmp_path)
    await embed([layer], Embedder(), "a b c")
    async with Harness([layer, ("mock", MockPlugin(MockConfig()))]) as harness:
        await harness.generate(GenerateOptions(messages=[Message.user("hello")], route="mock"))
    db = str(tmp_path / "usage.sqlite")
    result = CliRunner().invoke(usage_command, ["--db", db, "--by", "operation", "--json"])
    assert result.exit_code == 0, result.output
    rows = msgspec.json.decode(result.output)["rows"]
    assert [(r["operation"], r["requests"]) for r in rows] == [("chat", 1), ("embeddings", 1)]
    assert rows[1]["input_tokens"] == 3
    text = CliRunner().invoke(usage_command, ["--db", db, "--by", "route,operation"])
    assert "operation" in text.output.splitlines()[1]
    bad = CliRunner().invoke(usage_command, ["--db", db, "--by", "kind"])
    assert bad.exit_code == 2
    assert "choose among day, requested, route, model, member, operation" in bad.output


# ------------------------------------------------------------------ cache


def cache(tmp_path: Path, **config: Any) -> tuple[str, CachePlugin]:
    config.setdefault("path", str(tmp_path / "cache.sqlite"))
    return "cache", CachePlugin(msgspec.convert(config, CachePlugin.Config))


async def test_cache_hit_calls_the_provider_once(tmp_path: Path) -> None:
    layer = cache(tmp_path)
    adapter = Embedder()
    async with Harness([layer, ("openai", EmbedderPlugin(adapter))]) as harness:
        first = await harness.embed(["alpha beta", "gamma"], route="openai", dimensions=4)
        second = await harness.embed(["alpha beta", "gamma"], route="openai", dimensions=4)
        assert len(adapter.calls) == 1
        assert second == first
        assert second.data is not first.data  # a fresh buffer: the caller may change it
        assert second.data.typecode == "f"
        assert (second.route, second.source, second.model) == ("openai", "openai", MODEL)
        # other dimensions, another model, other inputs, another order, an input type: misses
        await harness.embed(["alpha beta", "gamma"], route="openai", dimensions=3)
        await harness.embed(["alpha beta", "gamma"], route="openai", dimensions=4, model="other")
        await harness.embed(["alpha beta"], route="openai", dimensions=4)
        await harness.embed(["gamma", "alpha beta"], route="openai", dimensions=4)
        await harness.embed(["gamma", "alpha beta"], route="openai", dimensions=4, input_type="query")
        assert len(adapter.calls) == 6
    stats = layer[1].store.stats()
    assert (stats["entries"], stats["embeddings"], stats["hits"]) == (6, 6, 1)

    async def never(options: EmbedOptions) -> Embeddings:  # pragma: no cover - a hit calls nothing
        raise AssertionError("a hit calls nothing")

    # called outside a harness (no call record open) a hit is still served
    hit = await layer[1].llm_embed(EmbedOptions(inputs=["alpha beta"], route="openai", dimensions=4), never)
    assert embed_record() is None
    assert hit.route == "openai"
    assert stats["bytes"] == 4 * (2 * 4 + 2 * 3 + 2 * 4 + 1 * 4 + 2 * 4 + 2 * 4)
    assert layer[1].store.clear() == 6
    assert layer[1].store.stats()["entries"] == 0


def test_embed_cache_key_is_canonical() -> None:
    one = EmbedOptions(inputs=["a"], route="openai", model=MODEL, dimensions=8)
    assert embed_cache_key(one) == embed_cache_key(msgspec.convert(msgspec.to_builtins(one), EmbedOptions))
    assert embed_cache_key(one) != embed_cache_key(msgspec.structs.replace(one, dimensions=None))


async def test_cache_hit_is_a_cached_usage_row_and_errors_are_not_stored(tmp_path: Path) -> None:
    ledger = usage(tmp_path)
    adapter = Embedder(error("SERVER"), None)
    async with Harness([ledger, cache(tmp_path), ("openai", EmbedderPlugin(adapter))]) as harness:
        with pytest.raises(LlmError):
            await harness.embed(["x y"], route="openai")
        await harness.embed(["x y"], route="openai")  # the error was not stored: a miss
        await harness.embed(["x y"], route="openai")  # a hit
    assert len(adapter.calls) == 2
    failed, spent, hit = ledger[1].ledger.rows()
    assert failed["status"] == "error"
    assert (spent["cached"], spent["input_tokens"]) == (0, 2)
    assert spent["cost"] > 0
    assert (hit["cached"], hit["cost"], hit["price_source"], hit["input_tokens"]) == (1, 0.0, "cache", 2)
    [total] = ledger[1].ledger.summary(by=())
    assert (total["requests"], total["cached"], total["input_tokens"]) == (3, 1, 2)  # a hit spends nothing


async def test_cache_entries_expire(tmp_path: Path) -> None:
    now = [1000.0]
    plugin = CachePlugin(CachePlugin.Config(path=str(tmp_path / "c.sqlite"), ttl=60), clock=lambda: now[0])
    adapter = Embedder()
    async with Harness([("cache", plugin), ("openai", EmbedderPlugin(adapter))]) as harness:
        await harness.embed(["x"], route="openai")
        now[0] += 61
        assert plugin.store.stats()["expired"] == 1
        await harness.embed(["x"], route="openai")  # expired: deleted, asked again
        now[0] += 61
        assert plugin.store.clear(expired_only=True) == 1
        await harness.embed(["x"], route="openai")
    assert len(adapter.calls) == 3


async def test_a_broken_cache_never_breaks_an_embedding_call(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    layer = cache(tmp_path)
    store = layer[1].store
    adapter = Embedder()
    options = EmbedOptions(inputs=["x"], route="openai")
    async with Harness([layer, ("openai", EmbedderPlugin(adapter))]) as harness:
        await harness.embed(options)
        with sqlite3.connect(store.path) as conn:  # a damaged entry: 5 bytes are no float32 vector
            conn.execute("UPDATE embeddings SET vectors = x'0102030405'")
        conn.close()
        with caplog.at_level(logging.ERROR, logger="harness_middleware.cache"):
            result = await harness.embed(options)
        assert result.tolist() == [row("x", 3)]
        assert "embedding lookup" in caplog.text
        store.path.unlink()
        store.path.mkdir()  # the database cannot be opened at all: lookups and stores fail
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="harness_middleware.cache"):
            assert len(await harness.embed(options)) == 1
        assert "storing embeddings" in caplog.text
    assert len(adapter.calls) == 3


# ------------------------------------------------------------------ fallback


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def fallback(clock: Clock, **config: Any) -> tuple[str, FallbackPlugin]:
    return "fallback", FallbackPlugin(msgspec.convert(config, FallbackPlugin.Config), cooldowns=Cooldowns(clock))


@pytest.fixture
def routes() -> tuple[Embedder, Embedder]:
    return Embedder(error("SERVER", "primary down", status=503)), Embedder()


async def test_fallback_moves_to_the_next_route(tmp_path: Path, routes: tuple[Embedder, Embedder]) -> None:
    primary, backup = routes
    clock = Clock()
    ledger = usage(tmp_path)
    layers = [ledger, fallback(clock, targets={"primary": ["backup/other-model"]}, cooldown=30)]
    plugins = [("openai:a", EmbedderPlugin(primary, ["primary"])), ("openai:b", EmbedderPlugin(backup, ["backup"]))]
    async with Harness([*layers, *plugins]) as harness:
        result = await harness.embed(["x"], route="primary", model=MODEL)
        again = await harness.embed(["x"], route="primary", model=MODEL)  # primary cools down
        clock.now += 31
        await harness.embed(["x"], route="primary", model=MODEL)  # cooled off: tried again
    assert (result.route, result.source, result.model) == ("backup", "openai:b", "other-model")
    assert again.tolist() == result.tolist()
    assert [c.model for c in primary.calls] == [MODEL, MODEL]
    assert [(c.route, c.model) for c in backup.calls] == [("backup", "other-model")] * 3
    assert [(r["route"], r["model"], r["status"]) for r in ledger[1].ledger.rows()] == [
        ("backup", "other-model", "complete")
    ] * 3


async def test_fallback_names_every_attempt_when_all_fail(tmp_path: Path) -> None:
    primary = Embedder(error("SERVER", "primary down", status=503))
    backup = Embedder(error("RATE_LIMITED", "backup busy", status=429, retry_after=3.0))
    ledger = usage(tmp_path)
    layers = [ledger, fallback(Clock(), targets={"primary": ["backup"]})]
    plugins = [("openai:a", EmbedderPlugin(primary, ["primary"])), ("openai:b", EmbedderPlugin(backup, ["backup"]))]
    async with Harness([*layers, *plugins]) as harness:
        with pytest.raises(LlmError) as caught:
            await harness.embed(["x"], route="primary", model="m")
        with pytest.raises(LlmError) as cooling:  # both cool down: both tried again, in order
            await harness.embed(["x"], route="primary", model="m")
    assert (caught.value.code, caught.value.status, caught.value.retry_after) == ("RATE_LIMITED", 429, 3.0)
    assert caught.value.message == (
        "backup busy (fallback attempts: primary/m: SERVER HTTP 503 'primary down';"
        " backup/m: RATE_LIMITED HTTP 429 'backup busy')"
    )
    assert cooling.value.message == caught.value.message
    assert len(primary.calls) == len(backup.calls) == 2
    rows = ledger[1].ledger.rows()
    assert [(r["route"], r["status"], r["error_code"]) for r in rows] == [("backup", "error", "RATE_LIMITED")] * 2


async def test_fallback_stops_at_an_error_that_does_not_move_on() -> None:
    primary = Embedder(error("BAD_REQUEST", "too many dimensions", status=400))
    backup = Embedder()
    layers = [fallback(Clock(), targets={"primary": ["backup"]})]
    plugins = [("openai:a", EmbedderPlugin(primary, ["primary"])), ("openai:b", EmbedderPlugin(backup, ["backup"]))]
    async with Harness([*layers, *plugins]) as harness:
        with pytest.raises(LlmError) as caught:
            await harness.embed(["x"], route="primary")
    assert caught.value.code == "BAD_REQUEST"
    assert caught.value.message == (
        "too many dimensions (fallback attempts: primary: BAD_REQUEST HTTP 400 'too many dimensions')"
    )
    assert backup.calls == []


async def test_fallback_keeps_the_error_of_a_route_without_targets() -> None:
    adapter = Embedder(error("SERVER", "down"))
    with pytest.raises(LlmError) as caught:
        await embed(
            [fallback(Clock(), targets={"elsewhere": ["openai"]}), *members(elsewhere=Embedder())], adapter, "x"
        )
    assert caught.value.message == "down"


# ------------------------------------------------------------------ otel


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.clear()


def otel(exporter: InMemorySpanExporter) -> tuple[str, OtelPlugin]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return "otel", OtelPlugin(OtelPlugin.Config(capture_content=True), tracer_provider=provider)


async def test_otel_one_embeddings_span_per_call(exporter: InMemorySpanExporter) -> None:
    layer = otel(exporter)
    await embed([layer], Embedder(), "one two", "three", model=MODEL, dimensions=5)
    await embed([layer], Embedder(), "four")
    requested, defaulted = exporter.get_finished_spans()
    assert (requested.name, requested.kind) == (f"embeddings {MODEL}", SpanKind.CLIENT)
    assert dict(requested.attributes or {}) == {
        "gen_ai.operation.name": "embeddings",
        "gen_ai.provider.name": "openai",  # an embedder that says nothing: its plugin's name
        "harness.route": "openai",
        "gen_ai.request.model": MODEL,
        "gen_ai.embeddings.dimension.count": 5,
        "gen_ai.response.model": MODEL,
        "gen_ai.usage.input_tokens": 3,
    }
    assert requested.status.status_code is StatusCode.UNSET
    assert defaulted.name == "embeddings"
    assert dict(defaulted.attributes or {}) == {
        "gen_ai.operation.name": "embeddings",
        "gen_ai.provider.name": "openai",
        "harness.route": "openai",
        "gen_ai.embeddings.dimension.count": 3,  # none requested: those of the vectors
        "gen_ai.response.model": MODEL,
        "gen_ai.usage.input_tokens": 1,
    }
    # inputs are never recorded, not even with capture_content
    assert not any("one two" in str(value) for span in (requested, defaulted) for value in span.attributes.values())  # type: ignore[union-attr]


async def test_otel_span_of_a_failed_call(exporter: InMemorySpanExporter) -> None:
    with pytest.raises(LlmError):
        await embed([otel(exporter)], Embedder(error("SERVER", "upstream down")), "x")
    [span] = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["error.type"] == "SERVER"
    assert "gen_ai.response.model" not in span.attributes
    assert [event.name for event in span.events] == ["exception"]


async def test_otel_span_of_a_call_without_usage_and_of_a_cancelled_call(exporter: InMemorySpanExporter) -> None:
    class NoUsage(Embedder):
        async def embed(self, options: EmbedOptions) -> Embeddings:
            result = await super().embed(options)
            result.usage = None
            return result

    layer = otel(exporter)
    await embed([layer], NoUsage(), "x")
    async with Harness([layer, ("openai", EmbedderPlugin(Embedder(HANG)))]) as harness:
        with anyio.move_on_after(0.05):
            await harness.embed(["x"], route="openai")
    plain, cancelled = exporter.get_finished_spans()
    assert plain.attributes is not None
    assert "gen_ai.usage.input_tokens" not in plain.attributes
    assert cancelled.status.status_code is StatusCode.UNSET  # cancellation is no error
    assert cancelled.end_time is not None


# ------------------------------------------------------------------ redact


async def test_redact_masks_embedding_inputs_before_the_provider() -> None:
    adapter = Embedder()
    key = "sk-" + "a1" * 12
    layer = ("redact", RedactPlugin())
    result = await embed([layer], adapter, f"mail me at jo@example.com, key {key}", "plain")
    assert adapter.calls[0].inputs == [
        "mail me at [REDACTED:email], key [REDACTED:openai-key]",
        "plain",
    ]
    assert result.tolist()[0] == row(adapter.calls[0].inputs[0], 3)  # the vector of the masked text


async def test_redact_requests_false_sends_inputs_as_they_are() -> None:
    adapter = Embedder()
    await embed([("redact", RedactPlugin(RedactPlugin.Config(requests=False)))], adapter, "jo@example.com")
    assert adapter.calls[0].inputs == ["jo@example.com"]


# ------------------------------------------------------------------ the chain


async def test_embed_chain_lists_the_embedding_middleware(tmp_path: Path) -> None:
    layers = [usage(tmp_path), cache(tmp_path), retry(Sleeps()), timeout(total=5), fallback(Clock())]
    async with Harness([*layers, ("redact", RedactPlugin()), ("openai", EmbedderPlugin(Embedder()))]) as harness:
        assert [link.key for link in harness.embed_chain()] == [
            "usage",
            "cache",
            "retry",
            "timeout",
            "fallback",
            "redact",
        ]


# ------------------------------------------------------------------ balance


def balance(pools: dict[str, Any], clock: Clock | None = None, **config: Any) -> tuple[str, BalancePlugin]:
    config.setdefault("seed", 7)
    plugin_config = msgspec.convert({"pools": pools, **config}, BalancePlugin.Config)
    return "balance", BalancePlugin(plugin_config, state=MemoryState(), clock=clock or Clock())


def members(**adapters: Embedder) -> list[tuple[str, object]]:
    return [(f"openai:{route}", EmbedderPlugin(adapter, [route])) for route, adapter in adapters.items()]


async def test_balance_serves_a_pool_from_its_members_and_counts_tokens(tmp_path: Path) -> None:
    one, two = Embedder(), Embedder()
    layer = balance({"pool": [{"target": "one/m1", "tpm": 1000}, {"target": "two/m2"}]}, strategy="least-busy")
    ledger = usage(tmp_path)
    async with Harness([ledger, layer, *members(one=one, two=two)]) as harness:
        results = [await harness.embed(["a b c"], route="pool") for _ in range(4)]
        assert "balance" in [link.key for link in harness.embed_chain()]
    assert {(r.route, r.model) for r in results} == {("one", "m1"), ("two", "m2")}
    assert len(one.calls) + len(two.calls) == 4
    assert all(c.route == "one" and c.model == "m1" for c in one.calls)
    state = layer[1].state
    assert state is not None
    [load_one, load_two] = await state.loads(["one/m1", "two/m2"], layer[1].clock())
    assert (load_one.in_flight, load_two.in_flight) == (0, 0)  # every call released its member
    assert load_one.tokens == 3 * len(one.calls)  # the input tokens count against tpm
    assert [r["route"] for r in ledger[1].ledger.rows()] == [r.route for r in results]


async def test_balance_moves_to_another_member_on_a_retryable_failure() -> None:
    down, up = Embedder(error("OVERLOADED", "busy", status=529)), Embedder()
    layer = balance({"pool": [{"target": "down", "weight": 1000}, {"target": "up", "weight": 0.001}]})
    async with Harness([layer, *members(down=down, up=up)]) as harness:
        result = await harness.embed(["x"], route="pool", model="m")
        again = await harness.embed(["x"], route="pool", model="m")  # down cools: up at once
    assert (result.route, again.route) == ("up", "up")
    assert len(down.calls) == 1
    assert len(up.calls) == 2


async def test_balance_names_every_attempt_when_all_members_fail() -> None:
    first = Embedder(error("SERVER", "first down", status=503))
    second = Embedder(error("BAD_REQUEST", "bad input", status=400))
    layer = balance({"pool": [{"target": "first", "weight": 1000}, {"target": "second", "weight": 0.001}]})
    async with Harness([layer, *members(first=first, second=second)]) as harness:
        with pytest.raises(LlmError) as stopped:  # first moves on, second's BAD_REQUEST does not
            await harness.embed(["x"], route="pool")
    assert stopped.value.code == "BAD_REQUEST"
    assert stopped.value.message == (
        "bad input (balance attempts: first: SERVER HTTP 503 'first down'; second: BAD_REQUEST HTTP 400 'bad input')"
    )
    both_down = balance({"pool": [{"target": "first"}, {"target": "third"}]}, cooldown=0)
    third = Embedder(error("SERVER", "third down", status=503))
    async with Harness([both_down, *members(first=first, third=third)]) as harness:
        with pytest.raises(LlmError) as caught:
            await harness.embed(["x"], route="pool")
    assert caught.value.code == "SERVER"
    assert caught.value.message == (
        "third down (balance attempts: first: SERVER HTTP 503 'first down'; third: SERVER HTTP 503 'third down')"
    )


async def test_balance_fails_rate_limited_when_every_member_stays_at_its_limits() -> None:
    clock = Clock()
    clock.now = 1_000_000.0
    adapter = Embedder()
    layer = balance({"pool": [{"target": "a", "rpm": 1}]}, clock, wait=10)
    async with Harness([layer, *members(a=adapter)]) as harness:
        await harness.embed(["x"], route="pool")
        with pytest.raises(LlmError) as caught:  # the next start frees in 60 s > wait 10 s
            await harness.embed(["x"], route="pool")
    assert caught.value.code == "RATE_LIMITED"
    assert caught.value.retry_after == pytest.approx(60.0)
    assert "every member of pool 'pool' is at its limits (a)" in caught.value.message
    assert len(adapter.calls) == 1


async def test_balance_leaves_other_routes_alone() -> None:
    adapter = Embedder()
    result = await embed([balance({"pool": [{"target": "elsewhere"}]}), *members(elsewhere=Embedder())], adapter, "x")
    assert result.route == "openai"
    assert len(adapter.calls) == 1
