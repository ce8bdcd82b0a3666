"""otel: one GenAI span per stream, first-chunk event, errors, content capture off by default."""

from __future__ import annotations

import hashlib
import json
import secrets
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import anyio
import msgspec
import pytest
from mw_helpers import Script, Stall, collect, error_finish, finish, options, stop, text_chunks, tool_chunks, usage
from opentelemetry import baggage, context, trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from harness_core.errors import LlmError
from harness_core.types import (
    FileBlock,
    GenerateOptions,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from harness_middleware import otel
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
    assert attrs == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "fake",
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
    assert attributes["gen_ai.provider.name"] == "**********"
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
