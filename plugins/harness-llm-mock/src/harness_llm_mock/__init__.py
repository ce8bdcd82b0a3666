"""harness-llm-mock: a deterministic provider for demos and tests (entry point ``mock``).

Route ``mock``, model ``echo``. The reply echoes the last user message, split into several
deltas (one per word, whitespace kept). Tools: the plugin registers a tool ``echo``
(``text: str`` → the text) through the ``register_tools`` hook. When the request offers a tool
named ``echo``, the last user text contains "echo" and no tool result follows the last user
message, the mock first calls ``echo`` with ``{"text": <last user text>}`` and finishes
``tool-calls``; once a tool result follows the last user message it answers quoting the last
one. Files (``FileBlock``) of the last user message, and of that tool result, are acknowledged
after the echo as ``[image/png 'a.png' (1234 bytes)]`` (or the URL); they add no input tokens. With a
``response_format`` the reply is the last user text verbatim, with nothing added, so a prompt
holding JSON comes back as the structured output (the mock never validates it: the caller
does). ``max_tokens`` is honoured (finish ``length``), ``stop`` strings cut the reply (finish raw
``stop_sequence``), ``options.abort`` ends the stream with ``finish{aborted}`` keeping what was
produced.

Embeddings (``register_embedder``, same routes): model ``hash``; each input's vector is the
SHAKE-256 digest of the text, one byte per dimension mapped to ``[-1, 1]`` and scaled to unit
length (deterministic, offline; equal texts give equal vectors). ``embedding_dimensions`` (default
8) unless the request asks for ``dimensions``; usage counts whitespace-separated words;
``embed_batch`` inputs per call (default 16); ``error`` raises there too.

Token estimate (documented, deterministic): input tokens = whitespace-separated words of the
system prompt and of every message (text, tool arguments, tool results); output tokens = the
number of deltas emitted (one word each), reasoning deltas included and also counted in
``reasoning_tokens``. Usage is reported on every stream that does not raise. ``count_tokens``
returns that input estimate (``NOT_FOUND`` for another model). Cache marks change nothing.

Config (``plugins.yaml``)::

    mock:
      routes: [mock]        # routes served
      delay: 0.0            # seconds to wait before every delta (abortable)
      reasoning: null       # a reasoning block emitted first (skipped with reasoning_effort "off")
      error: null           # an error code (e.g. RATE_LIMITED): raise LlmError(error) ...
      error_after: 0        # ... after this many deltas (at the end when the reply is shorter)
      embedding_dimensions: 8
      embed_batch: 16
"""

from __future__ import annotations

import hashlib
import math
import re
from array import array
from collections.abc import AsyncIterator
from typing import Annotated, Final

import anyio
import msgspec

from harness_core import (
    AbortSignal,
    BlockEnd,
    BlockStart,
    BlockType,
    EmbeddingAdapter,
    Embeddings,
    EmbedOptions,
    ErrorCode,
    Finish,
    FinishReason,
    GenerateOptions,
    LlmAdapter,
    LlmError,
    Message,
    ModelInfo,
    ReasoningBlock,
    ReasoningDelta,
    RegisterTool,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    Usage,
    hookimpl,
)
from harness_core.kit import RegisterAdapter, RegisterEmbedder, race

__all__ = ["MockAdapter", "MockConfig", "MockPlugin", "echo"]

__version__ = "0.1.0"
"""The distribution's version (the single source: ``pyproject.toml`` reads it)."""

MODEL: Final = "echo"
EMBED_MODEL: Final = "hash"
EFFORTS: Final = ("off", "low", "medium", "high")
_PIECE = re.compile(r"\S+\s*|\s+")
_WORD = re.compile(r"\S+")
_Planned = tuple[BlockType, str, tuple[str, str] | None]
"""A planned block: (kind, full text, (call id, tool name) for a tool call)."""


class MockConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Config of the mock plugin (see the module docstring)."""

    routes: list[str] = msgspec.field(default_factory=lambda: ["mock"])
    delay: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    reasoning: str | None = None
    error: ErrorCode | None = None
    error_after: Annotated[int, msgspec.Meta(ge=0)] = 0
    embedding_dimensions: Annotated[int, msgspec.Meta(ge=1, le=4096)] = 8
    embed_batch: Annotated[int, msgspec.Meta(ge=1)] = 16


GEN_AI_PROVIDER: Final = "harness.mock"
"""The mock's ``gen_ai.provider.name`` (:meth:`MockAdapter.gen_ai_provider`)."""


class MockAdapter(LlmAdapter, EmbeddingAdapter):
    """The mock adapter: deterministic replies and vectors built from the request (module docstring)."""

    default_model = MODEL  # a request without a model is served (and recorded) as `echo`
    takes_provider_options = False  # no wire to merge them into: `harness run -o` is refused, not dropped

    def __init__(self, config: MockConfig) -> None:
        self.config = config
        self.max_batch = config.embed_batch

    def gen_ai_provider(self, plugin: str) -> str | None:
        """``harness.mock`` (``gen_ai.provider.name``): a custom value in the harness namespace,
        so a trace backend never groups or prices the mock's spans as a real vendor's."""
        return GEN_AI_PROVIDER

    async def embed(self, options: EmbedOptions) -> Embeddings:
        """Hash vectors (module docstring); ``NOT_FOUND`` for a model other than ``hash``,
        ``BAD_REQUEST`` for ``dimensions`` outside 1…4096, the scripted ``error``."""
        model = options.model or EMBED_MODEL
        if model != EMBED_MODEL:
            raise LlmError(
                "NOT_FOUND", f"the mock has no embedding model {model!r}; it serves {EMBED_MODEL!r}", provider="mock"
            )
        dimensions = options.dimensions or self.config.embedding_dimensions
        if not 1 <= dimensions <= 4096:
            raise LlmError(
                "BAD_REQUEST", f"dimensions must be 1…4096, got {dimensions}", provider="mock", field="dimensions"
            )
        self._maybe_fail(0, end=True)
        data = array("f")
        for text in options.inputs:
            data.extend(_hash_vector(text, dimensions))
        usage = TokenUsage(sum(len(_WORD.findall(text)) for text in options.inputs), None)
        return Embeddings(data, dimensions, model=model, usage=usage)

    async def list_embedding_models(self) -> list[ModelInfo]:
        """``[hash]``."""
        return [ModelInfo(model=EMBED_MODEL, route=self.config.routes[0] if self.config.routes else None)]

    def resolve_model(self, model: str) -> ModelInfo:
        """Only ``echo`` exists; any other id raises ``LlmError("NOT_FOUND")``."""
        if model != MODEL:
            raise LlmError("NOT_FOUND", f"the mock has no model {model!r}; it serves {MODEL!r}", provider="mock")
        return ModelInfo(
            model=MODEL,
            route=self.config.routes[0] if self.config.routes else None,
            context_window=1_000_000,
            max_output_tokens=100_000,
            reasoning_efforts=list(EFFORTS),
        )

    async def list_models(self) -> list[ModelInfo]:
        """``[echo]``."""
        return [self.resolve_model(MODEL)]

    async def count_tokens(self, options: GenerateOptions) -> int:
        """The input tokens of the estimate (module docstring); ``NOT_FOUND`` for a model other than ``echo``."""
        self.resolve_model(options.model or MODEL)
        return _count_input(options)

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """Stream the deterministic reply; raises ``NOT_FOUND`` (model), ``UNSUPPORTED``
        (reasoning effort not in ``off/low/medium/high``) and the scripted ``error``."""
        self.resolve_model(options.model or MODEL)
        effort = options.reasoning_effort
        if effort is not None and effort not in EFFORTS:
            raise LlmError(
                "UNSUPPORTED",
                f"reasoning_effort {effort!r} is not one of {list(EFFORTS)}",
                provider="mock",
                field="reasoning_effort",
            )
        blocks, finish = self._plan(options, effort)
        input_tokens = _count_input(options)
        emitted = reasoning = 0
        index = 0
        for kind, text, call in blocks:
            acc = ""
            for piece in _split(text, kind):
                self._maybe_fail(emitted)
                stop = await self._stop_reason(options.abort, emitted, options.max_tokens)
                if stop is not None:
                    if acc:
                        yield BlockEnd(index=index, block=_block(kind, acc, call))
                    yield Usage(usage=TokenUsage(input_tokens, emitted, reasoning_tokens=reasoning or None))
                    yield Finish(reason=stop)
                    return
                if not acc:
                    yield BlockStart(
                        index=index,
                        block_type=kind,
                        id=call[0] if call else None,
                        name=call[1] if call else None,
                    )
                yield _delta(kind, index, piece, call)
                acc += piece
                emitted += 1
                reasoning += kind == "reasoning"
            if acc:
                yield BlockEnd(index=index, block=_block(kind, acc, call))
                index += 1
        self._maybe_fail(emitted, end=True)
        yield Usage(usage=TokenUsage(input_tokens, emitted, reasoning_tokens=reasoning or None))
        yield Finish(reason=finish)

    def _maybe_fail(self, emitted: int, *, end: bool = False) -> None:
        if self.config.error is not None and (end or emitted >= self.config.error_after):
            raise LlmError(self.config.error, f"scripted mock error after {emitted} deltas", provider="mock")

    async def _stop_reason(
        self, abort: AbortSignal | None, emitted: int, max_tokens: int | None
    ) -> FinishReason | None:
        if self.config.delay > 0:
            await race(abort, lambda: anyio.sleep(self.config.delay))
        if abort is not None and abort.fired:
            failure = LlmError("ABORTED", abort.reason or "aborted", provider="mock").to_failure()
            return FinishReason(kind="aborted", failure=failure)
        if max_tokens is not None and emitted >= max_tokens:
            return FinishReason(kind="length", raw="max_tokens")
        return None

    def _plan(self, options: GenerateOptions, effort: str | None) -> tuple[list[_Planned], FinishReason]:
        """The blocks to emit as (kind, full text, (call id, tool name) | None), and the finish."""
        blocks: list[_Planned] = []
        if self.config.reasoning and effort != "off":
            blocks.append(("reasoning", self.config.reasoning, None))
        last_user = max((i for i, m in enumerate(options.messages) if m.role == "user"), default=-1)
        user_text = options.messages[last_user].text if last_user >= 0 else ""
        results = [b for m in options.messages[last_user + 1 :] for b in m.content if isinstance(b, ToolResultBlock)]
        if results:
            last = results[-1]  # its files acknowledged as a user message's are
            acknowledged = "".join(f" [{file.describe()}]" for file in last.files)
            blocks.append(("text", f"The echo tool returned: {last.content}{acknowledged}", None))
            return blocks, FinishReason(kind="stop", raw="stop")
        if _wants_echo_tool(options, user_text):
            calls = sum(len(m.tool_calls) for m in options.messages)
            arguments = msgspec.json.encode({"text": user_text}).decode()
            blocks.append(("tool-call", arguments, (f"call_mock_{calls + 1}", "echo")))
            return blocks, FinishReason(kind="tool-calls", raw="tool_calls")
        for stop in options.stop or ():
            if stop and stop in user_text:
                blocks.append(("text", user_text[: user_text.index(stop)], None))
                return blocks, FinishReason(kind="stop", raw="stop_sequence")
        if options.response_format is None and last_user >= 0:
            # attachments are acknowledged by description (media type, name, size or URL)
            user_text += "".join(f" [{file.describe()}]" for file in options.messages[last_user].files)
        blocks.append(("text", user_text, None))
        return blocks, FinishReason(kind="stop", raw="stop")


class MockPlugin:
    """The ``mock`` plugin: registers one :class:`MockAdapter` for ``config.routes``."""

    Config = MockConfig

    def __init__(self, config: MockConfig) -> None:
        self.config = config
        self._adapter = MockAdapter(config)  # one object streams and embeds (closed once)

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        """Register the mock adapter for the configured routes."""
        register(self.config.routes, self._adapter)

    @hookimpl
    def register_embedder(self, register: RegisterEmbedder) -> None:
        """Embed for the same routes with the same adapter object."""
        register(self.config.routes, self._adapter)

    @hookimpl
    def register_tools(self, register: RegisterTool) -> None:
        """Register the ``echo`` tool the mock model calls (see the module docstring)."""
        register(echo)


def echo(text: Annotated[str, msgspec.Meta(description="The text to return")]) -> str:
    """Return the given text unchanged."""
    return text


def _hash_vector(text: str, dimensions: int) -> list[float]:
    """A unit vector from the SHAKE-256 digest of ``text`` (one byte per dimension)."""
    raw = [(byte - 127.5) / 127.5 for byte in hashlib.shake_256(text.encode()).digest(dimensions)]
    norm = math.sqrt(sum(x * x for x in raw))
    return [x / norm for x in raw]


def _wants_echo_tool(options: GenerateOptions, user_text: str) -> bool:
    if options.tool_choice == "none" or not any(tool.name == "echo" for tool in options.tools):
        return False
    return "echo" in user_text.lower() or (options.tool_choice is not None and options.tool_choice != "auto")


def _split(text: str, kind: BlockType) -> list[str]:
    """Delta pieces: words (trailing whitespace kept) for text; two halves for tool arguments."""
    if kind == "tool-call":
        half = len(text) // 2
        return [text[:half], text[half:]]
    return _PIECE.findall(text)


def _delta(kind: BlockType, index: int, piece: str, call: tuple[str, str] | None) -> StreamChunk:
    if kind == "reasoning":
        return ReasoningDelta(index=index, text=piece)
    if call is not None:
        return ToolCallDelta(index=index, id=call[0], arguments_delta=piece)
    return TextDelta(index=index, text=piece)


def _block(kind: BlockType, text: str, call: tuple[str, str] | None) -> TextBlock | ReasoningBlock | ToolCallBlock:
    if kind == "reasoning":
        return ReasoningBlock(text)
    if call is not None:
        return ToolCallBlock(id=call[0], name=call[1], arguments=text)
    return TextBlock(text)


def _count_input(options: GenerateOptions) -> int:
    """Whitespace-separated words of the system prompt and every message (the documented estimate)."""
    parts = [options.system or ""]
    for message in options.messages:
        parts.extend(_message_texts(message))
    return sum(len(_WORD.findall(part)) for part in parts)


def _message_texts(message: Message) -> list[str]:
    texts: list[str] = []
    for block in message.content:
        if isinstance(block, TextBlock | ReasoningBlock):
            texts.append(block.text)
        elif isinstance(block, ToolCallBlock):
            texts.append(block.arguments)
        elif isinstance(block, ToolResultBlock):
            texts.append(block.content)
    return texts
