"""The provider-neutral vocabulary: messages, content blocks, stream chunks, options.

Everything here is a :mod:`msgspec` Struct, so it is JSON-serialisable with exact round-trips.
Tagged unions carry their kind in a ``type`` field whose value is the wire name
(``"text-delta"``, ``"tool-call"`` …); see docs/vocabulary.md for the meaning of every field.

Streams are sequences of :data:`StreamChunk` (seven kinds) obeying the obligations of docs/stream-obligations.md:
``block-start`` → deltas → ``block-end`` for every block, then at most one ``usage``, then
exactly one ``finish``.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

from harness_core.abort import AbortSignal
from harness_core.errors import Failure

__all__ = [
    "BlockEnd",
    "BlockStart",
    "BlockType",
    "ContentBlock",
    "Failure",
    "Finish",
    "FinishKind",
    "FinishReason",
    "GenerateOptions",
    "Message",
    "ModelInfo",
    "NamedToolChoice",
    "ReasoningBlock",
    "ReasoningDelta",
    "Role",
    "StreamChunk",
    "TextBlock",
    "TextDelta",
    "TokenUsage",
    "ToolCallBlock",
    "ToolCallDelta",
    "ToolChoice",
    "ToolResultBlock",
    "ToolSpec",
    "Usage",
    "canonical_json",
]

# --------------------------------------------------------------------------- content blocks


class TextBlock(msgspec.Struct, tag="text", tag_field="type", frozen=True):
    """Plain text produced by the model or written by the user."""

    text: str


class ReasoningBlock(msgspec.Struct, tag="reasoning", tag_field="type", frozen=True, omit_defaults=True):
    """The model's reasoning ("thinking") text, kept apart from the answer.

    ``signed`` is true when the provider signs this block (Anthropic thinking): its text must
    then reach the provider again unchanged, so middleware never alters it (docs/hooks.md). The
    signature itself travels in ``finish.replay_state``, not here.
    """

    text: str
    signed: bool = False


class ToolCallBlock(msgspec.Struct, tag="tool-call", tag_field="type", frozen=True):
    """A call of a tool requested by the model.

    ``arguments`` is the raw JSON text exactly as the model produced it; the harness never parses
    and re-serialises it. Whoever executes the tool parses it. A call without arguments has
    ``arguments == "{}"``.
    """

    id: str
    name: str
    arguments: str


class ToolResultBlock(msgspec.Struct, tag="tool-result", tag_field="type", frozen=True, omit_defaults=True):
    """The result of executing a tool call, sent back to the model (``role="tool"`` messages)."""

    tool_call_id: str
    content: str
    is_error: bool = False


ContentBlock: TypeAlias = TextBlock | ReasoningBlock | ToolCallBlock | ToolResultBlock
"""Any content block of a :class:`Message`."""

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]


class Message(msgspec.Struct, frozen=True, omit_defaults=True):
    """One turn of a conversation.

    Assistant messages produced by harness also record ``route`` (the route that produced
    them), ``source`` (the plugins.yaml key of the plugin instance owning that route, e.g.
    ``"openai:work"``) and ``replay_state`` (provider-native state such as thinking signatures,
    opaque JSON). The runtime hands ``replay_state`` back to an adapter only when the target
    route is owned by that same ``source`` (docs/stream-obligations.md#9-replay-state).
    """

    role: Role
    content: list[ContentBlock]
    route: str | None = None
    source: str | None = None
    replay_state: Any = None

    @classmethod
    def user(cls, text: str) -> Message:
        """A user message holding one :class:`TextBlock`."""
        return cls(role="user", content=[TextBlock(text)])

    @property
    def text(self) -> str:
        """The concatenated text of every :class:`TextBlock` (reasoning excluded)."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_calls(self) -> list[ToolCallBlock]:
        """The tool-call blocks of this message, in order."""
        return [b for b in self.content if isinstance(b, ToolCallBlock)]


# --------------------------------------------------------------------------- usage and finish


class TokenUsage(msgspec.Struct, frozen=True, omit_defaults=True):
    """Token counts of one generation, with the same meaning for every provider (docs/vocabulary.md).

    ``input_tokens`` counts every prompt token including cache reads and writes;
    ``output_tokens`` includes reasoning tokens; the optional counts are subsets of those.
    ``None`` means the provider did not report that number (never a guessed zero).
    """

    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None


FinishKind: TypeAlias = Literal["stop", "tool-calls", "length", "content-filter", "other", "error", "aborted"]


class FinishReason(msgspec.Struct, frozen=True, omit_defaults=True):
    """Why a generation ended.

    ``kind`` is provider-neutral; ``raw`` keeps the provider's own reason string
    (``"end_turn"``, ``"tool_calls"`` …) or ``None`` when it sent none. ``failure`` is set for
    ``error`` and ``aborted``.
    """

    kind: FinishKind
    raw: str | None = None
    failure: Failure | None = None


# --------------------------------------------------------------------------- stream chunks

BlockType: TypeAlias = Literal["text", "reasoning", "tool-call"]


class BlockStart(msgspec.Struct, tag="block-start", tag_field="type", frozen=True, omit_defaults=True):
    """A block opens at ``index`` (0, 1, 2 … in order of first appearance, never reused).

    For a tool call, ``id`` and ``name`` are set when known. ``signed`` marks a reasoning block
    the provider signs (see :class:`ReasoningBlock`).
    """

    index: int
    block_type: BlockType
    id: str | None = None
    name: str | None = None
    signed: bool = False


class TextDelta(msgspec.Struct, tag="text-delta", tag_field="type", frozen=True):
    """A non-empty piece of text for the text block at ``index``."""

    index: int
    text: str


class ReasoningDelta(msgspec.Struct, tag="reasoning-delta", tag_field="type", frozen=True):
    """A non-empty piece of reasoning text for the reasoning block at ``index``."""

    index: int
    text: str


class ToolCallDelta(msgspec.Struct, tag="tool-call-delta", tag_field="type", frozen=True, omit_defaults=True):
    """A piece of a tool call's raw JSON arguments (``arguments_delta``) for the block at ``index``."""

    index: int
    id: str
    arguments_delta: str
    name: str | None = None


class BlockEnd(msgspec.Struct, tag="block-end", tag_field="type", frozen=True):
    """The block at ``index`` is complete; ``block`` holds all of it (deltas concatenated)."""

    index: int
    block: TextBlock | ReasoningBlock | ToolCallBlock


class Usage(msgspec.Struct, tag="usage", tag_field="type", frozen=True):
    """Token usage, at most once per stream, after every block ended, before ``finish``."""

    usage: TokenUsage


class Finish(msgspec.Struct, tag="finish", tag_field="type", frozen=True, omit_defaults=True):
    """The last chunk of every stream, exactly once.

    ``replay_state`` is minimal, lossless JSON the adapter needs on a later turn (response ids,
    thinking signatures); the runtime stores it on the assistant message.
    """

    reason: FinishReason
    replay_state: Any = None


StreamChunk: TypeAlias = BlockStart | TextDelta | ReasoningDelta | ToolCallDelta | BlockEnd | Usage | Finish
"""The seven chunk kinds of the stream protocol (docs/vocabulary.md), a tagged union on ``type``."""

# --------------------------------------------------------------------------- request


class ToolSpec(msgspec.Struct, frozen=True, omit_defaults=True):
    """A tool the model may call: ``parameters`` is a JSON Schema object (draft 2020-12 subset)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(default_factory=lambda: {"type": "object", "properties": {}})


class NamedToolChoice(msgspec.Struct, frozen=True):
    """Force the model to call the tool called ``name``."""

    name: str


ToolChoice: TypeAlias = Literal["auto", "none", "required"] | NamedToolChoice
"""``"auto"`` (model decides), ``"none"`` (no tool), ``"required"`` (some tool), or a named tool."""


class GenerateOptions(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Everything one generation needs. Frozen: derive variants with ``msgspec.structs.replace``.

    Fields:
        provider: the route to use (``"mock"``, ``"openai"`` …); ``None`` = the configured default.
        model: the provider's model id; ``None`` = the configured default.
        messages: the conversation so far.
        system: the system prompt, kept apart from ``messages`` for providers that need that.
        tools / tool_choice: tools offered to the model and how it must use them.
        max_tokens: upper bound on output tokens. temperature / top_p / seed / stop: sampling.
        reasoning_effort: an effort id from ``ModelInfo.reasoning_efforts`` (e.g. ``"low"``,
            ``"off"``); an id the adapter does not list raises ``UNSUPPORTED``.
        provider_options: extra wire fields keyed by plugin name (``{"openai": {"top_k": 5}}``),
            passed through as given: the escape hatch for features the vocabulary lacks.
        abort: an :class:`~harness_core.abort.AbortSignal`; never serialised.
        metadata: free-form data for middleware (tags, user ids); not part of the cache key.

    An option the target provider cannot honour raises ``LlmError("UNSUPPORTED")`` naming it.
    """

    provider: str | None = None
    model: str | None = None
    messages: list[Message] = msgspec.field(default_factory=list)
    system: str | None = None
    tools: list[ToolSpec] = msgspec.field(default_factory=list)
    tool_choice: ToolChoice | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: list[str] | None = None
    reasoning_effort: str | None = None
    provider_options: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    abort: AbortSignal | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        """Check the shapes msgspec does not check on construction, naming the field.

        Raises ``TypeError`` for a wrong type and ``ValueError`` for an out-of-range number, so a
        mistake surfaces here and not as an ``INTERNAL`` error deep inside an adapter.
        """
        _check_list(self.messages, Message, "messages")
        _check_list(self.tools, ToolSpec, "tools")
        for name in ("provider", "model", "system", "reasoning_effort"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"GenerateOptions.{name} must be a str or None, got {type(value).__name__}")
        _check_number(self.max_tokens, "max_tokens", int, minimum=1)
        _check_number(self.seed, "seed", int)
        _check_number(self.temperature, "temperature", (int, float), minimum=0)
        _check_number(self.top_p, "top_p", (int, float), minimum=0, maximum=1)
        if self.stop is not None:
            _check_list(self.stop, str, "stop")
        choice = self.tool_choice
        if (
            choice is not None
            and choice not in ("auto", "none", "required")
            and not isinstance(choice, NamedToolChoice)
        ):
            raise TypeError(
                f"GenerateOptions.tool_choice must be 'auto', 'none', 'required' or a NamedToolChoice, got {choice!r}"
            )
        if not isinstance(self.provider_options, dict) or not all(
            isinstance(v, dict) for v in self.provider_options.values()
        ):
            raise TypeError("GenerateOptions.provider_options must be a dict of dicts keyed by plugin name")
        if not isinstance(self.metadata, dict):
            raise TypeError(f"GenerateOptions.metadata must be a dict, got {type(self.metadata).__name__}")
        if self.abort is not None and not isinstance(self.abort, AbortSignal):
            raise TypeError(f"GenerateOptions.abort must be an AbortSignal or None, got {type(self.abort).__name__}")


def _check_list(value: object, item_type: type | tuple[type, ...], name: str) -> None:
    if not isinstance(value, list):
        raise TypeError(f"GenerateOptions.{name} must be a list, got {type(value).__name__}")
    for position, item in enumerate(value):
        if not isinstance(item, item_type):
            raise TypeError(f"GenerateOptions.{name}[{position}] has the wrong type: {type(item).__name__}")


def _check_number(
    value: object,
    name: str,
    kinds: type | tuple[type, ...],
    *,
    minimum: float | None = None,
    maximum: float | None = None,
) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise TypeError(f"GenerateOptions.{name} must be a number or None, got {type(value).__name__}")
    assert isinstance(value, int | float)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        bounds = f"at least {minimum}" if maximum is None else f"between {minimum} and {maximum}"
        raise ValueError(f"GenerateOptions.{name} must be {bounds}, got {value}")


_canonical_encoder = msgspec.json.Encoder(order="sorted")


def canonical_json(options: GenerateOptions) -> bytes:
    """The canonical JSON form of ``options``: sorted keys, defaults omitted, without ``abort``
    and ``metadata``. Equal requests give equal bytes, so it serves as a cache key."""
    stripped = msgspec.structs.replace(options, abort=None, metadata={})
    return _canonical_encoder.encode(stripped)


# --------------------------------------------------------------------------- capabilities


class ModelInfo(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What a route's adapter knows about one model (``adapter.resolve_model``).

    ``reasoning_efforts`` lists the opaque effort ids the adapter accepts, in order of increasing
    effort, including ``"off"`` where thinking can be disabled; ``None`` means the model has no
    reasoning control. ``default_effort`` is set only when configured. Token counts are tokens.
    """

    model: str
    route: str | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None
    reasoning_efforts: list[str] | None = None
    default_effort: str | None = None
