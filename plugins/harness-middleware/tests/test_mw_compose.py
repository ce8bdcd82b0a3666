"""The middleware composed by the real runtime: order from plugins.yaml, behaviour end to end."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mw_helpers import AdapterPlugin, options
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from harness_core import Harness
from harness_core.errors import LlmError
from harness_core.testing import CheckedStream, FakeAdapter, Raise, Stall, text_reply
from harness_core.types import Finish, StreamChunk, TextBlock, TokenUsage
from harness_middleware.cache import CachePlugin
from harness_middleware.otel import OtelPlugin
from harness_middleware.redact import RedactPlugin
from harness_middleware.retry import RetryPlugin
from harness_middleware.timeout import TimeoutPlugin
from harness_middleware.usage import UsagePlugin

pytestmark = pytest.mark.anyio

KEY = "sk-" + "abcdefghijklmnopqrstuvwxyz012345"  # built at run time: no key-shaped literal in the repo


async def read(harness: Harness, opts: object) -> list[StreamChunk]:
    async with harness.stream(opts) as chunks:  # type: ignore[arg-type]
        return [chunk async for chunk in CheckedStream(chunks)]


async def test_otel_cache_retry_timeout_order_and_behaviour(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await anyio.lowlevel.checkpoint()

    reply = text_reply("hel", "lo", usage=TokenUsage(input_tokens=7, output_tokens=2))
    fake = FakeAdapter(
        [Stall()],  # attempt 1: no first chunk -> timeout -> TIMEOUT (retryable)
        [Raise(LlmError("RATE_LIMITED", "slow down", retry_after=0.25))],  # attempt 2: boundary -> finish{error}
        reply,  # attempt 3: success
    )
    harness = Harness(
        [
            ("otel", OtelPlugin(tracer_provider=provider)),
            ("cache", CachePlugin(CachePlugin.Config(path=str(tmp_path / "cache.sqlite")))),
            ("retry", RetryPlugin(RetryPlugin.Config(max_attempts=4, jitter=False, initial_delay=0.5), sleep=sleep)),
            ("timeout", TimeoutPlugin(TimeoutPlugin.Config(first_chunk=0.02, idle=5))),
            ("fake", AdapterPlugin(fake)),
        ]
    )
    async with harness:
        assert [link.key for link in harness.chain("fake")] == ["otel", "cache", "retry", "timeout", "fake"]
        assert await read(harness, options()) == reply
        assert len(fake.calls) == 3
        assert waits == [0.5, 0.25]  # backoff after the timeout, then the provider's retry_after
        assert await read(harness, options()) == reply  # identical request: a cache hit
        assert len(fake.calls) == 3
    assert fake.started == fake.finalized == 3  # every attempt's generator was closed
    first, second = exporter.get_finished_spans()
    assert first.attributes is not None
    assert first.attributes["gen_ai.usage.input_tokens"] == 7
    assert second.attributes is not None
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)


async def test_retry_gives_up_through_the_runtime(tmp_path: Path) -> None:
    fake = FakeAdapter([Raise(LlmError("OVERLOADED", "busy"))])
    usage = UsagePlugin(UsagePlugin.Config(path=str(tmp_path / "u.sqlite")))
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    harness = Harness(
        [
            ("usage", usage),
            ("retry", RetryPlugin(RetryPlugin.Config(max_attempts=2), sleep=sleep)),
            ("fake", AdapterPlugin(fake)),
        ]
    )
    async with harness:
        chunks = await read(harness, options())
    assert isinstance(chunks[-1], Finish)
    assert chunks[-1].reason.failure is not None
    assert chunks[-1].reason.failure.code == "OVERLOADED"
    assert len(fake.calls) == 2
    assert len(waits) == 1
    [row] = usage.ledger.rows()
    assert (row["status"], row["error_code"]) == ("error", "OVERLOADED")


async def test_usage_and_redact_through_the_runtime(tmp_path: Path) -> None:
    fake = FakeAdapter(text_reply("your key: sk-abc", "defghijklmnopqrstuvwxyz012345 ok"))
    usage = UsagePlugin(UsagePlugin.Config(path=str(tmp_path / "u.sqlite")))
    harness = Harness([("usage", usage), ("redact", RedactPlugin()), ("fake", AdapterPlugin(fake))])
    async with harness:
        result = await harness.generate(options(f"mine is {KEY}"))
        async with harness.stream(options()) as chunks:
            async for _ in chunks:
                break  # the consumer stops early: the row is still written
    assert result.message.content == [TextBlock("your key: [REDACTED:openai-key] ok")]
    assert fake.calls[0].messages[0].content == [TextBlock("mine is [REDACTED:openai-key]")]
    assert [row["status"] for row in usage.ledger.rows()] == ["complete", "aborted"]


async def test_from_config_builds_every_middleware_through_the_loader(tmp_path: Path) -> None:
    config = tmp_path / "plugins.yaml"
    config.write_text(
        f"""
plugins:
  otel: {{capture_content: false}}
  usage: {{path: {tmp_path / "usage.sqlite"}}}
  cache: {{path: {tmp_path / "cache.sqlite"}, ttl: 60}}
  redact: {{presets: [api-keys], patterns: {{ticket: "TICKET-[0-9]{{4}}"}}}}
  retry: {{max_attempts: 2}}
  timeout: {{first_chunk: 30, idle: 30, total: 120}}
  mock: {{}}
defaults: {{route: mock, model: echo}}
""",
        encoding="utf-8",
    )
    harness = Harness.from_config(config)
    async with harness:
        assert [link.key for link in harness.chain()] == ["otel", "usage", "cache", "redact", "retry", "timeout"]
        result = await harness.generate(options("TICKET-1234 please", route=None, model=None))
    assert "TICKET-1234" not in result.text


async def test_readme_example_runs(caplog: pytest.LogCaptureFixture) -> None:
    """The "write your own" example of the README works as printed."""
    import logging
    import re

    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    [code] = re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    plugin_class = namespace["CountPlugin"]
    plugin = plugin_class(plugin_class.Config())  # type: ignore[operator,attr-defined]
    harness = Harness([("count", plugin), ("fake", AdapterPlugin(FakeAdapter(text_reply("a", "b"))))])
    with caplog.at_level(logging.INFO, logger="count"):
        async with harness:
            assert (await harness.generate(options())).text == "ab"
    assert "fake m1: 5 chunks" in caplog.text
