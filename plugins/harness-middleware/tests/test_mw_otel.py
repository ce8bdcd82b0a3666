"""otel: one GenAI span per stream, first-chunk event, errors, content capture off by default."""

from __future__ import annotations

import hashlib
import json
import secrets
import sys
from collections.abc import AsyncIterator, Iterator
from types import SimpleNamespace
from typing import Any

import anyio
import msgspec
import pytest
from mw_helpers import (
    AdapterPlugin,
    Script,
    ScriptAdapter,
    Stall,
    collect,
    error_finish,
    finish,
    options,
    stop,
    text_chunks,
    tool_chunks,
    usage,
)
from opentelemetry import baggage, context, trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from test_mw_fallback import sse_reply, unavailable

from harness_core import Embeddings, EmbedOptions, Harness, open_record
from harness_core.errors import LlmError
from harness_core.testing import Reply, ScriptedServer
from harness_core.types import (
    FileBlock,
    GenerateOptions,
    Message,
    ReasoningBlock,
    StreamChunk,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from harness_llm_mock import MockConfig, MockPlugin
from harness_llm_openai import OpenAIPlugin
from harness_middleware import otel
from harness_middleware.balance import BalancePlugin, MemoryState
from harness_middleware.fallback import Cooldowns, FallbackPlugin
from harness_middleware.otel import OtelPlugin

pytestmark = pytest.mark.anyio


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.clear()


def plugin(exporter: InMemorySpanExporter, **config: Any) -> OtelPlugin:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OtelPlugin(msgspec.convert(config, OtelPlugin.Config), tracer_provider=provider)


def only_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    [span] = exporter.get_finished_spans()
    return span


async def test_span_follows_genai_conventions(exporter: InMemorySpanExporter) -> None:
    p = plugin(exporter)
    reply = [*text_chunks("hi"), usage(100, 20, cache_read_tokens=40, reasoning_tokens=5), stop()]
    opts = options(max_tokens=64, temperature=0.2, top_p=0.9, system="be brief")
    assert await collect(p.llm_stream(opts, Script(reply))) == reply
    span = only_span(exporter)
    assert span.name == "chat m1"
    assert span.kind == SpanKind.CLIENT
    attrs = dict(span.attributes or {})
    assert attrs == {  # outside a harness: no provider lookup, so no gen_ai.provider.name
        "gen_ai.operation.name": "chat",
        "harness.route": "fake",
        "gen_ai.request.model": "m1",
        "gen_ai.request.max_tokens": 64,
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.top_p": 0.9,
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 20,
        "gen_ai.usage.cache_read.input_tokens": 40,
        "gen_ai.usage.reasoning.output_tokens": 5,
        "gen_ai.response.finish_reasons": ("stop",),
    }
    assert [e.name for e in span.events] == ["gen_ai.first_chunk"]
    assert span.status.status_code == StatusCode.UNSET


async def test_the_first_chunk_event_is_stamped_with_its_arrival(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The event carries the time the first chunk came (the core's record), not the time the
    span ended: with the wall clock frozen at W, the event is W minus the first chunk's age."""
    await collect(plugin(exporter).llm_stream(options(), Script([*text_chunks("a"), stop()])))
    span = only_span(exporter)
    [event] = span.events
    assert event.name == "gen_ai.first_chunk"
    assert span.start_time is not None
    assert span.end_time is not None
    assert span.start_time <= event.timestamp <= span.end_time

    frozen = 10**18
    monkeypatch.setattr(otel, "time", SimpleNamespace(time_ns=lambda: frozen))
    await collect(plugin(exporter).llm_stream(options(), Script([*text_chunks("a"), stop()])))
    stamped = exporter.get_finished_spans()[-1].events[0].timestamp
    assert stamped < frozen  # an age was taken off: the arrival, not the end


async def test_a_stream_of_only_a_finish_has_no_first_chunk_event(exporter: InMemorySpanExporter) -> None:
    await collect(plugin(exporter).llm_stream(options(), Script([error_finish("SERVER", message="503")])))
    assert only_span(exporter).events == ()


async def test_optional_request_attributes_absent(exporter: InMemorySpanExporter) -> None:
    await collect(plugin(exporter).llm_stream(GenerateOptions(), Script([stop()])))
    span = only_span(exporter)
    assert span.name == "chat"
    assert dict(span.attributes or {}) == {"gen_ai.operation.name": "chat", "gen_ai.response.finish_reasons": ("stop",)}


async def test_error_finish_sets_error_status(exporter: InMemorySpanExporter) -> None:
    await collect(plugin(exporter).llm_stream(options(), Script([error_finish("RATE_LIMITED", message="slow down")])))
    span = only_span(exporter)
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description == "slow down"
    assert span.attributes is not None
    assert span.attributes["error.type"] == "RATE_LIMITED"
    assert span.attributes["gen_ai.response.finish_reasons"] == ("error",)


@pytest.mark.parametrize(
    ("raised", "error_type"), [(LlmError("NETWORK", "reset"), "NETWORK"), (KeyError("x"), "KeyError")]
)
async def test_exception_sets_error_status(exporter: InMemorySpanExporter, raised: Exception, error_type: str) -> None:
    with pytest.raises(type(raised)):
        await collect(plugin(exporter).llm_stream(options(), Script([raised])))
    span = only_span(exporter)
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["error.type"] == error_type
    assert [e.name for e in span.events] == ["exception"]


async def test_cancellation_ends_the_span_without_error(exporter: InMemorySpanExporter) -> None:
    inner = Stall()
    with anyio.move_on_after(0.02):
        await collect(plugin(exporter).llm_stream(options(), inner))
    span = only_span(exporter)
    assert span.status.status_code == StatusCode.UNSET
    assert span.events == ()  # no chunk arrived
    assert inner.closed == 1


async def test_consumer_break_ends_the_span(exporter: InMemorySpanExporter) -> None:
    script = Script([*text_chunks("a", "b"), stop()])
    stream = plugin(exporter).llm_stream(options(), script)
    async for _ in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]
    span = only_span(exporter)
    assert span.status.status_code == StatusCode.UNSET
    assert "gen_ai.response.finish_reasons" not in (span.attributes or {})
    assert script.closed == 1


async def test_span_is_current_only_while_reading(exporter: InMemorySpanExporter) -> None:
    seen: list[bool] = []

    def inside() -> None:
        seen.append(trace.get_current_span().is_recording())

    reply: list[Any] = [inside, *text_chunks("a"), stop()]
    async for _ in plugin(exporter).llm_stream(options(), Script(reply)):
        seen.append(trace.get_current_span().is_recording())
    assert seen[0] is True  # the inner stream runs inside the span (HTTP spans nest under it)
    assert not any(seen[1:])  # the consumer never runs inside it


async def test_every_read_sees_the_span_in_the_caller_s_current_context(exporter: InMemorySpanExporter) -> None:
    """The span is current at every read, over what the caller made current since the last one."""
    seen: list[tuple[bool, object]] = []

    def inside() -> None:
        seen.append((trace.get_current_span().is_recording(), baggage.get_baggage("tenant")))

    reply: list[Any] = [inside, *text_chunks("a"), inside, stop()]
    stream = plugin(exporter).llm_stream(options(), Script(reply))
    chunks = [await anext(stream)]
    token = context.attach(baggage.set_baggage("tenant", "t-1"))
    try:
        chunks += [chunk async for chunk in stream]
    finally:
        context.detach(token)
    assert seen == [(True, None), (True, "t-1")]
    assert chunks == [*text_chunks("a"), stop()]
    assert only_span(exporter).name == "chat m1"


async def test_content_capture(exporter: InMemorySpanExporter) -> None:
    history = [
        Message(
            role="user",
            content=[
                TextBlock("hi"),
                FileBlock("image/png", data=b"PNG-BYTES"),
                FileBlock("application/pdf", url="https://h/a.pdf?sig=TOKEN"),
            ],
        ),
        Message(
            role="assistant",
            content=[ReasoningBlock("hmm"), ToolCallBlock(id="c1", name="f", arguments="{}")],
        ),
        Message(role="tool", content=[ToolResultBlock(tool_call_id="c1", content="42")]),
    ]
    reply = [
        *tool_chunks('{"a":1}'),
        finish("tool-calls"),
    ]
    opts = GenerateOptions(route="fake", model="m1", messages=history, system="sys")
    await collect(plugin(exporter, capture_content=True).llm_stream(opts, Script(reply)))
    attrs = only_span(exporter).attributes or {}
    assert json.loads(str(attrs["gen_ai.system_instructions"])) == [{"type": "text", "content": "sys"}]
    assert json.loads(str(attrs["gen_ai.input.messages"])) == [
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "hi"},
                # spans keep media type, size and digest, never the bytes
                {
                    "type": "blob",
                    "mime_type": "image/png",
                    "size": 9,
                    "digest": "sha256:" + hashlib.sha256(b"PNG-BYTES").hexdigest(),
                },
                {"type": "uri", "mime_type": "application/pdf", "uri": "https://h/a.pdf?…"},
            ],
        },
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "hmm"},
                {"type": "tool_call", "id": "c1", "name": "f", "arguments": "{}"},
            ],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "42"}]},
    ]
    assert json.loads(str(attrs["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "call_1", "name": "lookup", "arguments": '{"a":1}'}],
            "finish_reason": "tool-calls",
        }
    ]


async def test_content_capture_without_system_or_finish(exporter: InMemorySpanExporter) -> None:
    async for _ in plugin(exporter, capture_content=True).llm_stream(options(), Script(text_chunks("x"))):
        pass
    attrs = only_span(exporter).attributes or {}
    assert "gen_ai.system_instructions" not in attrs
    assert json.loads(str(attrs["gen_ai.output.messages"]))[0]["finish_reason"] is None


async def test_content_not_captured_by_default(exporter: InMemorySpanExporter) -> None:
    await collect(plugin(exporter).llm_stream(options(system="secret"), Script([*text_chunks("x"), stop()])))
    attrs = only_span(exporter).attributes or {}
    assert not any(
        k in attrs for k in ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions")
    )


def test_global_tracer_provider_by_default() -> None:
    assert OtelPlugin().config.capture_content is False


def test_missing_opentelemetry_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(LlmError, match=r"harness-middleware\[otel\]") as caught:
        OtelPlugin()
    assert caught.value.code == "CONFIG"


KEY = "sk-otel-" + secrets.token_hex(8)  # built at run time: no key-shaped literal in the tree


def _exported(span: ReadableSpan) -> str:
    """Everything the span exports, as one text (attributes, status, events)."""
    events = [(event.name, dict(event.attributes or {})) for event in span.events]
    return repr((span.name, dict(span.attributes or {}), span.status.description, events))


async def test_a_key_in_the_prompt_route_or_model_is_masked_in_every_span_attribute(
    exporter: InMemorySpanExporter,
) -> None:
    from harness_core import Harness, Redactor
    from harness_llm_mock import MockConfig, MockPlugin

    redactor = Redactor()
    redactor.add(KEY)
    otel = plugin(exporter, capture_content=True)
    harness = Harness([("otel", otel), ("mock", MockPlugin(MockConfig(routes=[KEY])))], redact=redactor)
    opts = GenerateOptions(route=KEY, model="echo", system=f"key {KEY}", messages=[Message.user(f"say {KEY}")])
    async with harness:
        assert (await harness.generate(opts)).text == "say **********"
    span = only_span(exporter)
    attributes = dict(span.attributes or {})
    assert attributes["harness.route"] == "**********"
    assert attributes["gen_ai.provider.name"] == "harness.mock"  # the provider, never the (masked) route
    assert json.loads(str(attributes["gen_ai.system_instructions"])) == [{"type": "text", "content": "key **********"}]
    assert "say **********" in str(attributes["gen_ai.input.messages"])
    assert "say **********" in str(attributes["gen_ai.output.messages"])
    assert KEY not in _exported(span)


async def test_failures_and_raised_errors_are_masked_on_the_span(exporter: InMemorySpanExporter) -> None:
    p = plugin(exporter)
    p.use_redactor(lambda text: text.replace(KEY, "**********"))
    await collect(p.llm_stream(options(model=KEY), Script([error_finish("AUTH", message=f"bad key {KEY}")])))
    with pytest.raises(LlmError):
        await collect(p.llm_stream(options(), Script([LlmError("NETWORK", f"cannot reach {KEY}.invalid")])))
    failed, raised = exporter.get_finished_spans()
    assert failed.name == "chat **********"
    assert failed.status.description == "bad key **********"
    assert raised.status.description == "NETWORK: cannot reach **********.invalid"
    [event] = raised.events
    assert "cannot reach **********.invalid" in str(dict(event.attributes or {})["exception.stacktrace"])
    assert KEY not in _exported(failed) + _exported(raised)


# ------------------------------------------------------------------ execute_tool spans


def _picture() -> str:
    """Draws."""
    return "drawn"


async def _answer(result: ToolResultBlock) -> Any:
    async def call_next(call: ToolCallBlock) -> ToolResultBlock:
        return result

    return call_next


async def test_a_tool_result_with_files_records_parts_without_bytes(exporter: InMemorySpanExporter) -> None:
    from harness_core.tools import Tool

    png = FileBlock("image/png", data=b"\x89PNG")
    result = ToolResultBlock("c1", "a picture", files=(png,))
    call = ToolCallBlock("c1", "picture", "{}")
    assert (
        await plugin(exporter, capture_content=True).llm_tool_call(call, Tool(_picture), await _answer(result))
        is result
    )
    attributes = dict(only_span(exporter).attributes or {})
    assert json.loads(str(attributes["gen_ai.tool.call.result"])) == [
        {"type": "text", "content": "a picture"},
        {"type": "blob", "mime_type": "image/png", "size": 4, "digest": png.digest},
    ]


async def test_an_error_result_with_content_capture_shows_its_masked_text(exporter: InMemorySpanExporter) -> None:
    from harness_core.tools import Tool

    p = plugin(exporter, capture_content=True)
    p.use_redactor(lambda text: text.replace(KEY, "**********"))
    failed = ToolResultBlock("c1", f"refused {KEY}", is_error=True)
    await p.llm_tool_call(ToolCallBlock("c1", "picture", "{}"), Tool(_picture, description=""), await _answer(failed))
    span = only_span(exporter)
    assert span.status.description == "refused **********"
    assert "gen_ai.tool.description" not in dict(span.attributes or {})
    assert KEY not in _exported(span)


async def test_a_raised_tool_middleware_error_is_recorded_and_re_raised(exporter: InMemorySpanExporter) -> None:
    from harness_core.tools import Tool

    async def call_next(call: ToolCallBlock) -> ToolResultBlock:
        raise LlmError("PROTOCOL", "inner broke")

    with pytest.raises(LlmError):
        await plugin(exporter).llm_tool_call(ToolCallBlock("c1", "picture", "{}"), Tool(_picture), call_next)
    span = only_span(exporter)
    assert dict(span.attributes or {})["error.type"] == "PROTOCOL"
    assert span.status.status_code == StatusCode.ERROR
    assert [e.name for e in span.events] == ["exception"]


# ------------------------------------------------------------------ gen_ai.provider.name


class StartAttributes(SpanProcessor):
    """Records each span's attributes as they were when it started (what a sampler sees)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def on_start(self, span: Span, parent_context: context.Context | None = None) -> None:
        self.seen.append(dict(span.attributes or {}))


def traced(exporter: InMemorySpanExporter, starts: StartAttributes | None = None) -> tuple[str, OtelPlugin]:
    provider = TracerProvider()
    if starts is not None:
        provider.add_span_processor(starts)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return "otel", OtelPlugin(tracer_provider=provider)


def openai_route(key: str, route: str, server: ScriptedServer, **config: Any) -> tuple[str, Any]:
    """An openai plugin instance serving ``route`` from ``server`` (an OpenAI-compatible host)."""
    return key, OpenAIPlugin(OpenAIPlugin.Config(base_url=f"{server.url}/v1", routes=[route], **config))


def fallback_to(target: str) -> FallbackPlugin:
    """``fallback`` from route ``primary`` to ``target``, with no cooldown (each call tries both)."""
    config = msgspec.convert({"targets": {"primary": [target]}, "cooldown": 0}, FallbackPlugin.Config)
    return FallbackPlugin(config, cooldowns=Cooldowns())


def mock_route(key: str, route: str) -> tuple[str, MockPlugin]:
    return key, MockPlugin(MockConfig(routes=[route]))


def provider_and_route(span: ReadableSpan) -> tuple[Any, ...]:
    attributes = dict(span.attributes or {})
    return tuple(attributes.get(name) for name in ("gen_ai.provider.name", "harness.route", "harness.served_route"))


@pytest.mark.parametrize(
    ("config", "provider"),
    [({}, "harness.openai_compatible"), ({"gen_ai_provider": "vllm"}, "vllm")],
    ids=["unknown-host", "configured"],
)
async def test_an_openai_compatible_base_url_is_not_named_openai(
    exporter: InMemorySpanExporter, config: dict[str, Any], provider: str
) -> None:
    """A route of the openai plugin whose base_url is not OpenAI's host is named by the config's
    ``gen_ai_provider``, else by a value that claims no vendor; the route stays as harness.route,
    and the provider is on the span from its start (samplers decide there)."""
    starts = StartAttributes()
    with ScriptedServer(sse_reply("hello", "local-model")) as server:
        async with Harness([traced(exporter, starts), openai_route("openai:local", "fast", server, **config)]) as h:
            assert (await h.generate(GenerateOptions(route="fast", model="m", messages=[Message.user("hi")]))).text
    assert provider_and_route(only_span(exporter)) == (provider, "fast", None)
    assert [seen["gen_ai.provider.name"] for seen in starts.seen] == [provider]


async def test_each_route_is_named_by_its_own_provider(exporter: InMemorySpanExporter) -> None:
    silent = ("fake", AdapterPlugin(ScriptAdapter(Script([*text_chunks("a"), stop()])), ["plain"]))
    plugins = [traced(exporter), mock_route("mock", "mock"), silent]
    async with Harness(plugins) as harness:
        for route in ("mock", "plain"):
            await harness.generate(GenerateOptions(route=route, model="echo", messages=[Message.user("hi")]))
    mocked, plain = exporter.get_finished_spans()
    assert provider_and_route(mocked) == ("harness.mock", "mock", None)
    assert provider_and_route(plain) == ("fake", "plain", None)  # an adapter that says nothing: its plugin's name


async def test_a_fallback_span_names_the_provider_that_served(exporter: InMemorySpanExporter) -> None:
    """otel outside fallback: the span starts with the requested route's provider and ends with
    the one of the target that served (the record's served_route)."""
    starts = StartAttributes()
    moves = fallback_to("backup")
    with ScriptedServer(unavailable()) as server:
        layers = [traced(exporter, starts), ("fallback", moves)]
        async with Harness([*layers, openai_route("openai", "primary", server), mock_route("mock", "backup")]) as h:
            result = await h.generate(GenerateOptions(route="primary", model="echo", messages=[Message.user("hi")]))
    assert result.message.route == "backup"
    assert provider_and_route(only_span(exporter)) == ("harness.mock", "primary", "backup")
    assert starts.seen[0]["gen_ai.provider.name"] == "harness.openai_compatible"


async def test_inside_fallback_each_attempt_is_a_span_of_its_target(exporter: InMemorySpanExporter) -> None:
    moves = fallback_to("backup")
    with ScriptedServer(unavailable()) as server:
        layers = [("fallback", moves), traced(exporter)]
        async with Harness([*layers, openai_route("openai", "primary", server), mock_route("mock", "backup")]) as h:
            await h.generate(GenerateOptions(route="primary", model="echo", messages=[Message.user("hi")]))
    failed, served = exporter.get_finished_spans()
    assert provider_and_route(failed) == ("harness.openai_compatible", "primary", None)
    assert failed.status.status_code == StatusCode.ERROR
    assert provider_and_route(served) == ("harness.mock", "backup", None)


async def test_a_pool_span_names_the_member_that_served(exporter: InMemorySpanExporter) -> None:
    """A balance pool calls no provider itself: no provider at the start, the member's at the end."""
    starts = StartAttributes()
    pool = BalancePlugin(
        msgspec.convert({"pools": {"pool": [{"target": "one"}]}}, BalancePlugin.Config), state=MemoryState()
    )
    async with Harness([traced(exporter, starts), ("balance", pool), mock_route("mock", "one")]) as harness:
        assert harness.route_provider("pool") is None
        await harness.generate(GenerateOptions(route="pool", model="echo", messages=[Message.user("hi")]))
    assert provider_and_route(only_span(exporter)) == ("harness.mock", "pool", "one")
    assert "gen_ai.provider.name" not in starts.seen[0]


async def test_outside_a_harness_a_served_route_is_named_without_a_provider(exporter: InMemorySpanExporter) -> None:
    opts, record = open_record(options())

    async def moved(current: GenerateOptions) -> AsyncIterator[StreamChunk]:
        record.served_route = "backup"
        for chunk in [*text_chunks("a"), stop()]:
            yield chunk

    await collect(plugin(exporter).llm_stream(opts, moved))
    assert provider_and_route(only_span(exporter)) == (None, "fake", "backup")


def openai_embeddings(model: str) -> Reply:
    return Reply.json(
        200, {"data": [{"index": 0, "embedding": [0.5, 0.5]}], "model": model, "usage": {"prompt_tokens": 2}}
    )


async def test_embeddings_spans_name_the_provider_of_the_embedder(exporter: InMemorySpanExporter) -> None:
    moves = fallback_to("backup")
    with ScriptedServer(openai_embeddings("e1"), unavailable(), unavailable()) as server:
        plugins = [traced(exporter), ("fallback", moves), openai_route("openai", "primary", server)]
        async with Harness([*plugins, mock_route("mock", "backup")]) as harness:
            direct = await harness.embed(["a b"], route="primary", model="e1")
            moved = await harness.embed(["a b"], route="primary")  # 503: served by the mock
            with pytest.raises(LlmError):
                await harness.embed(["a b"], route="primary", model="nope")  # 503, then the mock refuses
    assert (direct.route, moved.route) == ("primary", "backup")
    spans = exporter.get_finished_spans()
    assert [provider_and_route(span) for span in spans] == [
        ("harness.openai_compatible", "primary", None),
        ("harness.mock", "primary", "backup"),
        ("harness.mock", "primary", "backup"),  # failed: the last target tried, from the call's record
    ]
    assert spans[2].status.status_code == StatusCode.ERROR


async def test_an_embeddings_span_outside_a_harness_names_no_provider(exporter: InMemorySpanExporter) -> None:
    async def failing(current: EmbedOptions) -> Embeddings:
        raise LlmError("SERVER", "down")

    with pytest.raises(LlmError):
        await plugin(exporter).llm_embed(EmbedOptions(inputs=["x"], route="vec"), failing)
    assert provider_and_route(only_span(exporter)) == (None, "vec", None)
