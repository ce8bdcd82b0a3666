"""``otel``: one OpenTelemetry span per stream, following the GenAI semantic conventions.

Span ``chat {model}`` (kind CLIENT) with ``gen_ai.operation.name = "chat"``,
``gen_ai.provider.name`` (the provider serving the route: see below), ``harness.route`` (the
route requested, the plugins.yaml name), ``gen_ai.request.model``, ``gen_ai.request.max_tokens`` /
``temperature`` / ``top_p`` when set, ``gen_ai.response.finish_reasons`` (the harness finish
kind), ``gen_ai.usage.input_tokens`` / ``output_tokens`` (and the cache / reasoning subsets)
when reported; an event ``gen_ai.first_chunk`` stamped with the time the first chunk arrived
(the core's :attr:`~harness_core.record.StreamEnd.first_chunk`: a stream holding only a
``finish`` has none); status ERROR with
``error.type`` (the harness error code, or the exception's class) on ``finish{error}`` or a
raised exception. Cancellation and a consumer that stops early end the span without an error.

Content (``gen_ai.system_instructions``, ``gen_ai.input.messages``, ``gen_ai.output.messages``
as JSON) is captured only with ``capture_content: true``: prompts and replies may hold personal
data. Every string put on a span (the span name, route and model, captured content, the status
description, a recorded exception's message and stack trace) is first masked with the harness's
secret masker (the ``use_redactor`` hook): a key that shows up in a prompt is never exported.

``gen_ai.provider.name`` is the GenAI provider as the conventions name it (``openai``,
``anthropic``, ``gcp.gemini``, ``deepseek``, ``harness.mock`` …), never the route: trace backends
group and price by it. The harness hands the lookup to the plugin when it starts (the
``use_route_providers`` hook: :meth:`Harness.route_provider
<harness_core.runtime.Harness.route_provider>`, resolved once per route); each adapter declares
its value (:meth:`LlmAdapter.gen_ai_provider <harness_core.adapter.LlmAdapter.gen_ai_provider>`),
an adapter that declares none is named by its plugin (``openai:eu`` → ``openai``). It is set when
the span starts (samplers see it) for the route requested at this layer; when the stream was
served by another route (``fallback``/``balance`` listed after ``otel`` moved it:
``StreamRecord.served_route``, for embeddings ``Embeddings.route``), the span ends with
``harness.served_route`` and the served route's provider instead. A ``balance`` pool names no
provider at the start (none is chosen yet): its span gets the served member's at the end. A
``cache`` hit keeps the requested route's. Outside a harness (no lookup handed), the attribute is
not set.

Every tool call the tool loop runs (``llm_tool_call``: Python and MCP tools alike) is a span
``execute_tool {tool name}`` (kind INTERNAL, current while the tool runs) with
``gen_ai.operation.name = "execute_tool"``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
``gen_ai.tool.description`` (when the tool has one), ``gen_ai.tool.type = "function"`` (a tool
the harness executes), and with ``capture_content: true`` ``gen_ai.tool.call.arguments`` (the
raw JSON text) and ``gen_ai.tool.call.result`` (the result text; with files, a JSON list of
parts holding media type, size and digest, never the bytes), masked. An ``is_error`` result is
status ERROR with ``error.type = "tool_error"`` (its text as the description only when content
is captured: an error result may quote the tool's data); a raised exception as for ``chat``.

Every embedding call (``llm_embed``, docs/embeddings.md) is a span ``embeddings {model}`` (kind
CLIENT, current while the call runs, so HTTP client spans nest under it) with
``gen_ai.operation.name = "embeddings"``, ``gen_ai.provider.name`` and ``harness.route`` (as for
``chat``),
``gen_ai.request.model`` (when given), ``gen_ai.embeddings.dimension.count`` (the requested
``dimensions``, else those of the vectors returned), ``gen_ai.response.model``, and
``gen_ai.usage.input_tokens`` when reported; a raised error or exception is status ERROR with
``error.type`` as for ``chat``. The inputs are not recorded, not even with ``capture_content``:
the conventions define no attribute for embedding inputs (``gen_ai.input.messages`` holds chat
messages), and the vectors are not either (large, and derived from the inputs).

Conventions: https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/ (development
status; embeddings: its ``Embeddings`` section). The span is current only while the inner
stream is being read (so HTTP client spans nest under it), never across a ``yield``. Needs
``pip install 'harness-middleware[otel]'``; OpenTelemetry is imported when the plugin is built,
not when this module is imported.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import AsyncIterator, Callable
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from harness_core.middleware import (
    BlockEnd,
    CallNext,
    ContentBlock,
    EmbedCallNext,
    Embeddings,
    EmbedOptions,
    FileBlock,
    Finish,
    GenerateOptions,
    LlmError,
    Message,
    ProviderLookup,
    ReasoningBlock,
    SecretMasking,
    StreamChunk,
    StreamEnd,
    TextBlock,
    TokenUsage,
    ToolCallBlock,
    ToolCallNext,
    ToolResultBlock,
    embed_record,
    hookimpl,
    observe,
    record_of,
)
from harness_middleware._stream import aclose

if TYPE_CHECKING:  # pragma: no cover - typing only
    from opentelemetry.trace import Span, TracerProvider

    from harness_core import Tool

__all__ = ["OtelPlugin"]

_USAGE_ATTRIBUTES = (
    ("input_tokens", "gen_ai.usage.input_tokens"),
    ("output_tokens", "gen_ai.usage.output_tokens"),
    ("cache_read_tokens", "gen_ai.usage.cache_read.input_tokens"),
    ("cache_write_tokens", "gen_ai.usage.cache_creation.input_tokens"),
    ("reasoning_tokens", "gen_ai.usage.reasoning.output_tokens"),
)


def _part(block: ContentBlock) -> dict[str, Any]:
    """A GenAI semconv message part for ``block``."""
    if isinstance(block, TextBlock):
        return {"type": "text", "content": block.text}
    if isinstance(block, ReasoningBlock):
        return {"type": "reasoning", "content": block.text}
    if isinstance(block, ToolCallBlock):
        return {"type": "tool_call", "id": block.id, "name": block.name, "arguments": block.arguments}
    if isinstance(block, FileBlock):
        # a blob/uri part without the bytes: spans keep the media type, size and digest only
        part: dict[str, Any] = {"type": "uri" if block.url is not None else "blob", "mime_type": block.media_type}
        if block.url is not None:
            part["uri"] = block.display_url  # no query: signed URLs carry credentials there
        else:
            part.update(size=block.size, digest=block.digest)
        return part
    return {"type": "tool_call_response", "id": block.tool_call_id, "response": block.content}


def _messages(messages: list[Message]) -> list[dict[str, Any]]:
    return [{"role": m.role, "parts": [_part(b) for b in m.content]} for m in messages]


def _request_attributes(options: GenerateOptions, capture_content: bool, provider: str | None) -> dict[str, Any]:
    """The span's request attributes, unmasked (JSON content as builtins, encoded after masking)."""
    attributes: dict[str, Any] = {"gen_ai.operation.name": "chat"}
    optional = {
        "gen_ai.provider.name": provider,
        "harness.route": options.route,
        "gen_ai.request.model": options.model,
        "gen_ai.request.max_tokens": options.max_tokens,
        "gen_ai.request.temperature": options.temperature,
        "gen_ai.request.top_p": options.top_p,
    }
    attributes.update({k: v for k, v in optional.items() if v is not None})
    if capture_content:
        if options.system is not None:
            attributes["gen_ai.system_instructions"] = [{"type": "text", "content": options.system}]
        attributes["gen_ai.input.messages"] = _messages(options.messages)
    return attributes


def _usage_attributes(usage: TokenUsage) -> dict[str, int]:
    values = {attr: getattr(usage, field) for field, attr in _USAGE_ATTRIBUTES}
    return {k: v for k, v in values.items() if v is not None}


class _SpanScope:
    """The ``observe`` scope making ``span`` current around each read of the inner stream
    (``trace.use_span`` without its context manager): the context holding it is derived from
    the caller's again only when the caller's has changed since the last read. ``exit`` is
    OpenTelemetry's ``context.detach`` itself (one call less per chunk)."""

    __slots__ = ("_attach", "_current", "_get_current", "_parent", "_set_span_in_context", "_span", "exit")

    def __init__(self, context: Any, trace: Any, span: Span) -> None:
        self._get_current, self._attach = context.get_current, context.attach
        self.exit: Callable[[object], None] = context.detach
        self._set_span_in_context = trace.set_span_in_context
        self._span = span
        self._parent = context.get_current()
        self._current = trace.set_span_in_context(span, self._parent)

    def enter(self) -> object:
        if (caller := self._get_current()) is not self._parent:
            self._parent, self._current = caller, self._set_span_in_context(self._span, caller)
        return self._attach(self._current)


class OtelPlugin(SecretMasking):
    """Middleware tracing every stream as an OpenTelemetry span (see module doc).

    Args:
        config: the validated :class:`OtelPlugin.Config`.
        tracer_provider: the provider to use; default: the global one
            (``opentelemetry.trace.set_tracer_provider``), as configured by the application.

    Raises :class:`~harness_core.errors.LlmError` ``CONFIG`` when OpenTelemetry is not installed.
    """

    class Config(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
        """``otel:`` in plugins.yaml.

        Fields:
            capture_content: record prompts and replies on the span (off: they may hold
                personal data).
        """

        capture_content: bool = False

    def __init__(self, config: Config | None = None, *, tracer_provider: TracerProvider | None = None) -> None:
        self.config = config if config is not None else self.Config()
        try:
            from opentelemetry import context, trace
        except ImportError as exc:
            raise LlmError(
                "CONFIG", "the otel middleware needs OpenTelemetry: pip install 'harness-middleware[otel]'"
            ) from exc
        try:
            own_version: str | None = version("harness-middleware")
        except PackageNotFoundError:  # pragma: no cover - running from a source tree without metadata
            own_version = None
        self._trace = trace
        self._context = context
        self._tracer = trace.get_tracer("harness_middleware.otel", own_version, tracer_provider=tracer_provider)
        self._provider_of: ProviderLookup | None = None

    @hookimpl
    def use_route_providers(self, provider_of: ProviderLookup) -> None:
        """Keep the harness's route → GenAI provider lookup (``gen_ai.provider.name``)."""
        self._provider_of = provider_of

    def _provider(self, route: str | None, *, embeddings: bool = False) -> str | None:
        """The GenAI provider of ``route``: ``None`` without a route or outside a harness."""
        provider_of = self._provider_of
        if route is None or provider_of is None:
            return None
        return provider_of(route, embeddings=embeddings)

    def _served(self, span: Span, requested: str | None, served: str | None, *, embeddings: bool = False) -> None:
        """Name on ``span`` the route that served (``served``) when it is not the one
        ``requested``, and its provider (``fallback``/``balance`` moved the call below)."""
        if served is None or served == requested:
            return
        attributes: dict[str, Any] = {"harness.served_route": served}
        provider = self._provider(served, embeddings=embeddings)
        if provider is not None:
            attributes["gen_ai.provider.name"] = provider
        span.set_attributes(self._attributes(attributes))

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        """Pass ``call_next(options)`` on unchanged inside a span (see module doc), through the
        core's :func:`~harness_core.record.observe` (the span current around every read)."""
        trace = self._trace
        capture = self.config.capture_content
        name = f"chat {options.model}" if options.model else "chat"
        provider = self._provider(options.route)
        attributes = self._attributes(_request_attributes(options, capture, provider))
        span = self._tracer.start_span(self.redact(name), kind=trace.SpanKind.CLIENT, attributes=attributes)
        output: list[dict[str, Any]] = []
        record = record_of(options)

        def on_block_end(chunk: StreamChunk) -> None:  # only with capture_content
            if isinstance(chunk, BlockEnd):
                output.append(_part(chunk.block))

        async def on_end(end: StreamEnd) -> None:
            if end.first_chunk is not None:
                # the record's clock is the event loop's: the event's wall time is now minus its age
                age = anyio.current_time() - end.first_chunk
                span.add_event("gen_ai.first_chunk", timestamp=time.time_ns() - round(age * 1e9))
            if end.usage is not None:
                span.set_attributes(_usage_attributes(end.usage))
            if record is not None:
                self._served(span, options.route, record.served_route)
            self._end(span, end.finish, end.raised, output if capture else None)

        scope = _SpanScope(self._context, trace, span)
        stream = observe(call_next(options), on_end, on_block_end if capture else None, scope=scope)
        try:
            async for chunk in stream:
                yield chunk
        finally:
            await aclose(stream)

    @hookimpl
    async def llm_tool_call(self, call: ToolCallBlock, tool: Tool, call_next: ToolCallNext) -> ToolResultBlock:
        """Run ``call_next(call)`` inside an ``execute_tool`` span (see module doc)."""
        trace = self._trace
        capture = self.config.capture_content
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        }
        if tool.description:
            attributes["gen_ai.tool.description"] = tool.description
        if capture:
            attributes["gen_ai.tool.call.arguments"] = call.arguments
        name = self.redact(f"execute_tool {call.name}")
        span = self._tracer.start_span(name, kind=trace.SpanKind.INTERNAL, attributes=self._attributes(attributes))
        raised: BaseException | None = None
        try:
            with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                result = await call_next(call)
        except BaseException as exc:
            raised = exc
            raise
        finally:
            if raised is not None:
                self._end(span, None, raised, None)
        if capture:
            content: str | list[dict[str, Any]] = result.content
            if result.files:
                content = [{"type": "text", "content": result.content}, *(_part(f) for f in result.files)]
            span.set_attributes(self._attributes({"gen_ai.tool.call.result": content}))
        if result.is_error:
            span.set_attribute("error.type", "tool_error")
            description = self.redact(result.content) if capture else "the tool answered with an error"
            span.set_status(trace.StatusCode.ERROR, description)
        span.end()
        return result

    @hookimpl
    async def llm_embed(self, options: EmbedOptions, call_next: EmbedCallNext) -> Embeddings:
        """``await call_next(options)`` inside an ``embeddings`` span (see module doc); errors
        and cancellation are re-raised."""
        trace = self._trace
        requested = {
            "gen_ai.operation.name": "embeddings",
            "gen_ai.provider.name": self._provider(options.route, embeddings=True),
            "harness.route": options.route,
            "gen_ai.request.model": options.model,
            "gen_ai.embeddings.dimension.count": options.dimensions,
        }
        attributes = self._attributes({k: v for k, v in requested.items() if v is not None})
        name = f"embeddings {options.model}" if options.model else "embeddings"
        span = self._tracer.start_span(self.redact(name), kind=trace.SpanKind.CLIENT, attributes=attributes)
        try:
            with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                result = await call_next(options)
        except BaseException as exc:
            record = embed_record()
            if record is not None:
                self._served(span, options.route, record.served_route, embeddings=True)
            self._end(span, None, exc, None)
            raise
        self._served(span, options.route, result.route, embeddings=True)
        answered: dict[str, Any] = {"gen_ai.response.model": result.model}
        if options.dimensions is None:
            answered["gen_ai.embeddings.dimension.count"] = result.dimensions
        if result.usage is not None:
            answered["gen_ai.usage.input_tokens"] = result.usage.input_tokens
        span.set_attributes(self._attributes({k: v for k, v in answered.items() if v is not None}))
        span.end()
        return result

    def _attributes(self, attributes: dict[str, Any]) -> dict[str, Any]:
        """``attributes`` with every string masked; lists and mappings (content) as JSON text."""
        masked = self.mask_data(attributes)
        return {k: json.dumps(v) if isinstance(v, list) else v for k, v in masked.items()}

    def _end(
        self, span: Span, finish: Finish | None, raised: BaseException | None, output: list[dict[str, Any]] | None
    ) -> None:
        status_code = self._trace.StatusCode
        if finish is not None:
            span.set_attribute("gen_ai.response.finish_reasons", [finish.reason.kind])
            failure = finish.reason.failure
            if finish.reason.kind == "error" and failure is not None:
                span.set_attribute("error.type", failure.code)
                span.set_status(status_code.ERROR, self.redact(failure.message))
        if output is not None:
            reason = finish.reason.kind if finish is not None else None
            messages = [{"role": "assistant", "parts": output, "finish_reason": reason}]
            span.set_attributes(self._attributes({"gen_ai.output.messages": messages}))
        if raised is not None and not isinstance(raised, GeneratorExit | anyio.get_cancelled_exc_class()):
            error_type = raised.code if isinstance(raised, LlmError) else type(raised).__qualname__
            span.set_attribute("error.type", error_type)
            stack = "".join(traceback.format_exception(raised))
            # the SDK would record str(raised) and its traceback as they are: given masked instead
            span.record_exception(
                raised,
                attributes={"exception.message": self.redact(str(raised)), "exception.stacktrace": self.redact(stack)},
            )
            span.set_status(status_code.ERROR, self.redact(str(raised)))
        span.end()
