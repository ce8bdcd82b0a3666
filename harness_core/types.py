"""The provider-neutral vocabulary: messages, content blocks, stream chunks, options.

Everything here is a :mod:`msgspec` Struct, so it is JSON-serialisable with exact round-trips.
Tagged unions carry their kind in a ``type`` field whose value is the wire name
(``"text-delta"``, ``"tool-call"`` …); see docs/vocabulary.md for the meaning of every field.

Streams are sequences of :data:`StreamChunk` (seven kinds) obeying the obligations of docs/stream-obligations.md:
``block-start`` → deltas → ``block-end`` for every block, then at most one ``usage``, then
exactly one ``finish``.
"""

from __future__ import annotations

import hashlib
import re
import warnings
from collections.abc import Collection
from typing import Any, Final, Literal, TypeAlias
from urllib.parse import urlsplit, urlunsplit

import msgspec

from harness_core._lazy import moved_names
from harness_core.abort import AbortSignal
from harness_core.errors import Failure as _Failure  # owned by errors; the old path here warns (below)
from harness_core.errors import LlmError

__all__ = [
    "IMAGE_DETAILS",
    "MEDIA_TYPE",
    "BlockEnd",
    "BlockStart",
    "BlockType",
    "CacheMark",
    "ContentBlock",
    "FileBlock",
    "Finish",
    "FinishKind",
    "FinishReason",
    "GenerateOptions",
    "ImageDetail",
    "JsonObjectFormat",
    "JsonSchemaFormat",
    "Message",
    "ModelInfo",
    "NamedToolChoice",
    "ReasoningBlock",
    "ReasoningDelta",
    "ReasoningSignature",
    "ResponseFormat",
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
    "cache_breakpoint",
    "cache_marks",
    "canonical_json",
    "check_cache_ttls",
]

# --------------------------------------------------------------------------- prompt caching


class CacheMark(msgspec.Struct, frozen=True, omit_defaults=True):
    """A prompt-cache breakpoint: the prompt up to and including the marked place may be cached.

    Set as ``cache`` on a content block, a :class:`ToolSpec`, or ``GenerateOptions.system_cache``
    (the end of the system prompt). ``ttl`` is the wished lifetime in **seconds** (``None``: the
    provider's default; Anthropic takes 300 and 3600). Per wire (docs/vocabulary.md#prompt-caching):
    Anthropic sends ``cache_control: {type: ephemeral, ttl}``; OpenAI, DeepSeek and Gemini cache
    implicitly, so a mark without a TTL changes nothing there and a mark with one raises
    ``UNSUPPORTED``. Raises ``ValueError`` on construction for a TTL that is not a positive int.
    """

    ttl: int | None = None

    def __post_init__(self) -> None:
        """Check ``ttl`` (see the class docstring)."""
        if self.ttl is not None and (isinstance(self.ttl, bool) or not isinstance(self.ttl, int) or self.ttl <= 0):
            raise ValueError(f"CacheMark.ttl must be a positive number of seconds or None, got {self.ttl!r}")


# --------------------------------------------------------------------------- content blocks


class TextBlock(msgspec.Struct, tag="text", tag_field="type", frozen=True, omit_defaults=True):
    """Plain text produced by the model or written by the user; ``cache`` marks a prompt-cache
    breakpoint after it (:class:`CacheMark`)."""

    text: str
    cache: CacheMark | None = None


class ReasoningSignature(msgspec.Struct, frozen=True, omit_defaults=True):
    """A thinking signature: opaque provider state bound to the provider and model that made it.

    Fields:
        provider: the entry-point name of the plugin whose adapter produced it (``"anthropic"``;
            the part of a plugins.yaml key before ``:``, so ``anthropic:work`` and
            ``anthropic:personal`` are the same provider).
        model: the model id the request named (``None`` when the adapter did not know it).
        value: the provider's bytes, byte-exact (Anthropic's ``signature``, or with ``redacted``
            the ``data`` of a ``redacted_thinking`` block, i.e. the encrypted thinking itself).
        redacted: the block's thinking was withheld by the provider; its text is then empty.

    The runtime keeps it only for a request to the same provider and model
    (:func:`harness_core.boundary.strip_replay`): Anthropic rejects a signature made by another
    model, and no other wire can use it. Wire source: Anthropic extended thinking,
    https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking (``thinking.signature``,
    ``signature_delta``, ``redacted_thinking.data``).

    What does not fit here, and why: Gemini's ``thoughtSignature`` sits on a *part* (a function
    call, a text part, an empty part carrying nothing else), never on the reasoning summary, which
    Gemini does not sign; it stays in ``finish.replay_state`` with its place. OpenAI Responses'
    ``encrypted_content`` belongs to a reasoning *item* with its own id, which may span several
    summary blocks (or none), so it is not one block's state either; it stays in
    ``finish.replay_state`` too (docs/stream-obligations.md#adapter-refinements).
    """

    provider: str
    model: str | None
    value: str
    redacted: bool = False

    def binds(self, provider: str | None, model: str | None) -> bool:
        """Whether this signature may go with a request to ``provider`` (an entry-point name)
        and ``model``: both equal to the ones that produced it."""
        return provider == self.provider and model == self.model

    def __repr__(self) -> str:
        kind = "redacted, " if self.redacted else ""
        return f"ReasoningSignature({self.provider!r}, {self.model!r}, {kind}{len(self.value)} chars)"


class ReasoningBlock(msgspec.Struct, tag="reasoning", tag_field="type", frozen=True, omit_defaults=True):
    """The model's reasoning ("thinking") text, kept apart from the answer.

    ``signed`` is true when the provider signs this block (Anthropic thinking): its text must
    then reach the provider again unchanged, so middleware never alters it (docs/hooks.md).
    ``signature`` is the signature itself (:class:`ReasoningSignature`), known at ``block-end``
    (the ``block`` of that chunk carries it) and kept on the assistant message; ``None`` when the
    provider sent none or it was dropped for a request to another provider or model. A redacted
    block (``signature.redacted``) has empty text.

    Raises ``TypeError`` on construction for a ``signature`` that is not a
    :class:`ReasoningSignature`, ``ValueError`` for one on a block that is not ``signed``.
    """

    text: str
    signed: bool = False
    signature: ReasoningSignature | None = None

    def __post_init__(self) -> None:
        """Check ``signature`` (see the class docstring)."""
        signature = self.signature
        if signature is not None:
            if not isinstance(signature, ReasoningSignature):
                kind = type(signature).__name__
                raise TypeError(f"ReasoningBlock.signature must be a ReasoningSignature or None, got {kind}")
            if not self.signed:
                raise ValueError("ReasoningBlock.signature is set on a block that is not signed (signed=False)")


class ToolCallBlock(msgspec.Struct, tag="tool-call", tag_field="type", frozen=True, omit_defaults=True):
    """A call of a tool requested by the model.

    ``arguments`` is the raw JSON text exactly as the model produced it; the harness never parses
    and re-serialises it. Whoever executes the tool parses it. A call without arguments has
    ``arguments == "{}"``. ``cache``: a prompt-cache breakpoint (:class:`CacheMark`).
    """

    id: str
    name: str
    arguments: str
    cache: CacheMark | None = None


class ToolResultBlock(msgspec.Struct, tag="tool-result", tag_field="type", frozen=True, omit_defaults=True):
    """The result of executing a tool call, sent back to the model (``role="tool"`` messages).

    ``content`` is the result text; ``files`` the media the tool returned besides it (images,
    audio: an MCP tool's image content), in order, sent where the wire takes them in a tool
    result and refused with ``UNSUPPORTED`` naming the route and media type where it does not
    (docs/vocabulary.md). Omitted from JSON when empty, so a text-only result is unchanged.
    ``cache``: a prompt-cache breakpoint (:class:`CacheMark`).
    """

    tool_call_id: str
    content: str
    is_error: bool = False
    files: tuple[FileBlock, ...] = ()
    cache: CacheMark | None = None


MEDIA_TYPE: Final = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")
"""A media type as :class:`FileBlock` takes it: ``type/subtype`` in the characters RFC 6838 §4.2
allows for IANA names, lower case, no parameters."""
_URL_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


ImageDetail: TypeAlias = Literal["auto", "low", "high"]
"""An image's resolution hint (:attr:`FileBlock.detail`)."""

IMAGE_DETAILS: Final[tuple[ImageDetail, ...]] = ("auto", "low", "high")
"""The values of :data:`ImageDetail`, in the order errors list them."""


class FileBlock(msgspec.Struct, tag="file", tag_field="type", frozen=True, omit_defaults=True):
    """User-supplied media (an image, a PDF or text document, audio …) keyed by its media type.

    The counterpart of the Vercel AI SDK's file part. Exactly one source is set:

    - ``data``: the file's bytes (base64 in JSON, so a :class:`Message` round-trips exactly), or
    - ``url``: an absolute URL (``https://…``, ``gs://…``, a provider's file URI) that the
      *provider* fetches. Harness never downloads it; an adapter whose wire cannot take a URL
      source raises ``UNSUPPORTED``. Put inline content in ``data``, not in a ``data:`` URL.

    Fields:
        media_type: the IANA media type, lower case, without parameters
            (``image/png``, ``application/pdf``, ``text/plain``, ``audio/wav``;
            https://www.iana.org/assignments/media-types). Adapters map what their wire takes and
            raise ``UNSUPPORTED`` naming the media type otherwise.
        data / url: the source (see above).
        filename: the original file name, passed on where the wire has a slot for it.
        cache: a prompt-cache breakpoint after the file (:class:`CacheMark`).
        detail: an image's resolution hint, ``"low"``, ``"high"`` or ``"auto"`` (OpenAI's
            ``detail``: https://platform.openai.com/docs/guides/images-vision#specify-image-input-detail-level);
            ``None`` (the default) and ``"auto"`` let the provider choose. Images only. An
            adapter whose wire has no such hint raises ``UNSUPPORTED`` for ``low`` / ``high``
            (:func:`harness_core.kit.check_file`).

    Raises ``ValueError`` on construction or decoding for a malformed media type, no source,
    both sources, a URL that is not absolute, or a ``detail`` outside :data:`IMAGE_DETAILS` or
    on a file that is not an image. ``repr`` shows the size and SHA-256 digest,
    never the bytes, and a URL without its query (:attr:`display_url`).
    """

    media_type: str
    data: bytes | None = None
    url: str | None = None
    filename: str | None = None
    cache: CacheMark | None = None
    detail: ImageDetail | None = None

    def __post_init__(self) -> None:
        """Check the media type, that exactly one source is set and the ``detail`` (see the
        class docstring)."""
        if not isinstance(self.media_type, str) or not MEDIA_TYPE.fullmatch(self.media_type):
            raise ValueError(
                "FileBlock.media_type must be a lower-case IANA media type such as 'image/png',"
                f" got {self.media_type!r}"
            )
        if (self.data is None) == (self.url is None):
            raise ValueError("FileBlock needs exactly one source: data (bytes) or url")
        if self.data is not None and not isinstance(self.data, bytes):
            raise TypeError(f"FileBlock.data must be bytes, got {type(self.data).__name__}")
        url = self.url
        if url is not None:
            if not isinstance(url, str) or not _URL_SCHEME.match(url):
                raise ValueError(f"FileBlock.url must be an absolute URL, got {url!r}")
            if url[:5].lower() == "data:":
                raise ValueError("FileBlock.url must not be a data: URL; pass the decoded bytes as data")
        if self.filename is not None and not isinstance(self.filename, str):
            raise TypeError(f"FileBlock.filename must be a str or None, got {type(self.filename).__name__}")
        if self.detail is not None:
            if self.detail not in IMAGE_DETAILS:
                allowed = ", ".join(IMAGE_DETAILS)
                raise ValueError(f"FileBlock.detail must be one of {allowed} or None, got {self.detail!r}")
            if not self.media_type.startswith("image/"):
                raise ValueError(f"FileBlock.detail is an image's resolution hint: {self.media_type} is not an image")

    @property
    def size(self) -> int | None:
        """The size of ``data`` in bytes; ``None`` for a URL source."""
        return None if self.data is None else len(self.data)

    @property
    def digest(self) -> str | None:
        """``"sha256:<hex>"`` of ``data``; ``None`` for a URL source. What logs and traces keep."""
        return None if self.data is None else "sha256:" + hashlib.sha256(self.data).hexdigest()

    @property
    def display_url(self) -> str | None:
        """``url`` as logs, errors and traces show it: without user info, query and fragment
        (where signed URLs carry their credentials; a dropped query shows as ``?…``)."""
        url = self.url
        if url is None:
            return None
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, host, parts.path, "", "")) + ("?…" if parts.query else "")

    @property
    def source_kind(self) -> Literal["data", "url"]:
        """``"data"`` (inline bytes) or ``"url"``: what an ``UNSUPPORTED`` error names."""
        return "data" if self.data is not None else "url"

    def describe(self) -> str:
        """A short, byte-free description: media type, filename, and size or URL."""
        name = f" {self.filename!r}" if self.filename else ""
        where = f"{self.size} bytes" if self.data is not None else f"url {self.display_url}"
        return f"{self.media_type}{name} ({where})"

    def __repr__(self) -> str:
        source = f"size={self.size}, digest={self.digest!r}" if self.data is not None else f"url={self.display_url!r}"
        name = f", filename={self.filename!r}" if self.filename is not None else ""
        cache = f", cache={self.cache!r}" if self.cache is not None else ""
        detail = f", detail={self.detail!r}" if self.detail is not None else ""
        return f"FileBlock(media_type={self.media_type!r}, {source}{name}{cache}{detail})"

    def __rich_repr__(self) -> list[tuple[str, Any]]:
        """What ``rich`` pretty-prints: the fields of :meth:`__repr__`, never the bytes."""
        source = (
            [("size", self.size), ("digest", self.digest)] if self.data is not None else [("url", self.display_url)]
        )
        cache = [("cache", self.cache)] if self.cache is not None else []
        detail = [("detail", self.detail)] if self.detail is not None else []
        return [("media_type", self.media_type), *source, ("filename", self.filename), *cache, *detail]


ContentBlock: TypeAlias = TextBlock | ReasoningBlock | ToolCallBlock | ToolResultBlock | FileBlock
"""Any content block of a :class:`Message`. :class:`FileBlock` belongs in user messages."""

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]


def cache_breakpoint(block: ContentBlock, ttl: int | None = None) -> ContentBlock:
    """A copy of ``block`` marked as a prompt-cache breakpoint (``ttl`` in seconds, ``None``: the
    provider's default); a :class:`ReasoningBlock` cannot carry one (no wire caches at thinking),
    so it is returned unchanged. Raises ``ValueError`` for a bad ``ttl`` (:class:`CacheMark`)."""
    if isinstance(block, ReasoningBlock):
        return block
    return msgspec.structs.replace(block, cache=CacheMark(ttl))


class Message(msgspec.Struct, frozen=True, omit_defaults=True):
    """One turn of a conversation.

    Assistant messages produced by harness also record ``route`` and ``model`` (the route and
    model that produced them, after any fallback), ``source`` (the plugins.yaml key of the
    plugin instance owning that route, e.g. ``"openai:work"``) and ``replay_state``
    (provider-native state such as response ids, opaque JSON). The runtime hands
    ``replay_state`` back to an adapter only when the target route is owned by that same
    ``source`` (docs/stream-obligations.md#9-replay-state); thinking signatures have their own
    typed place on the blocks (:class:`ReasoningSignature`).
    """

    role: Role
    content: list[ContentBlock]
    route: str | None = None
    source: str | None = None
    replay_state: Any = None
    model: str | None = None

    @classmethod
    def user(cls, text: str, *files: FileBlock) -> Message:
        """A user message holding one :class:`TextBlock`, then the given :class:`FileBlock` s."""
        return cls(role="user", content=[TextBlock(text), *files])

    def cached(self, ttl: int | None = None) -> Message:
        """A copy whose last block that can carry one holds a prompt-cache breakpoint
        (:func:`cache_breakpoint`), other marks removed: what an agent loop puts on its latest
        turn. A message without such a block is returned unchanged."""
        content = [b if isinstance(b, ReasoningBlock) else msgspec.structs.replace(b, cache=None) for b in self.content]
        for position in range(len(content) - 1, -1, -1):
            if not isinstance(content[position], ReasoningBlock):
                content[position] = cache_breakpoint(content[position], ttl)
                return msgspec.structs.replace(self, content=content)
        return self

    @property
    def files(self) -> list[FileBlock]:
        """The :class:`FileBlock` s of this message, in order."""
        return [b for b in self.content if isinstance(b, FileBlock)]

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
    ``cache_write_1h_tokens`` is the part of ``cache_write_tokens`` written with a one-hour TTL
    (Anthropic's ``cache_creation.ephemeral_1h_input_tokens``; priced at its own rate), the rest
    of the writes having the provider's default lifetime.
    ``None`` means the provider did not report that number (never a guessed zero).
    """

    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_write_1h_tokens: int | None = None


FinishKind: TypeAlias = Literal["stop", "tool-calls", "length", "content-filter", "other", "error", "aborted"]


class FinishReason(msgspec.Struct, frozen=True, omit_defaults=True):
    """Why a generation ended.

    ``kind`` is provider-neutral; ``raw`` keeps the provider's own reason string
    (``"end_turn"``, ``"tool_calls"`` …) or ``None`` when it sent none. ``failure`` is set for
    ``error`` and ``aborted``.
    """

    kind: FinishKind
    raw: str | None = None
    failure: _Failure | None = None


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
    """A tool the model may call: ``parameters`` is a JSON Schema object (draft 2020-12 subset);
    ``cache`` marks a prompt-cache breakpoint after the tool definitions up to this one
    (:class:`CacheMark`).

    ``strict``: the provider must make every call's arguments valid against ``parameters``
    (constrained decoding: OpenAI's strict function calling, ``function.strict`` in Chat and
    ``strict`` in Responses, https://platform.openai.com/docs/guides/function-calling; Anthropic's
    strict tool use, ``strict`` on the tool, https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/strict-tool-use).
    Such providers restrict the schema (OpenAI: every property required,
    ``additionalProperties: false``) and refuse one outside it. An adapter whose wire has no such
    mode raises ``UNSUPPORTED`` naming the tool; it never drops the request for it."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(default_factory=lambda: {"type": "object", "properties": {}})
    cache: CacheMark | None = None
    strict: bool = False


class NamedToolChoice(msgspec.Struct, frozen=True):
    """Force the model to call the tool called ``name``."""

    name: str


ToolChoice: TypeAlias = Literal["auto", "none", "required"] | NamedToolChoice
"""``"auto"`` (model decides), ``"none"`` (no tool), ``"required"`` (some tool), or a named tool."""


_SCHEMA_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


class JsonSchemaFormat(msgspec.Struct, tag="json-schema", tag_field="type", frozen=True, omit_defaults=True):
    """Structured output: the reply is one JSON value valid against ``schema``.

    Fields:
        name: identifies the schema to the provider; 1-64 characters of ``A-Z a-z 0-9 _ -``
            (OpenAI's rule, the strictest of the wires).
        schema: a JSON Schema (draft 2020-12) as a dict, usually ``{"type": "object", …}``.
        strict: ask the provider to *guarantee* conformance (constrained decoding). Strict
            modes restrict the schema (OpenAI: every property required,
            ``additionalProperties: false``); a wire without a strict mode raises
            ``UNSUPPORTED`` for ``strict=True``.
        description: optional guidance for the model, where the wire has a slot for it.

    Mapping per wire: docs/vocabulary.md#media-and-structured-output-per-wire. The model's JSON arrives as
    ordinary text deltas; :meth:`harness_core.Harness.generate_object` validates it.
    Raises ``ValueError`` / ``TypeError`` on construction for a bad name or a non-dict schema.
    """

    name: str
    schema: dict[str, Any]
    strict: bool = False
    description: str | None = None

    def __post_init__(self) -> None:
        """Check the name and the schema's type (see the class docstring)."""
        if not isinstance(self.name, str) or not _SCHEMA_NAME.fullmatch(self.name):
            raise ValueError(f"JsonSchemaFormat.name must be 1-64 characters of A-Z a-z 0-9 _ -, got {self.name!r}")
        if not isinstance(self.schema, dict):
            raise TypeError(f"JsonSchemaFormat.schema must be a dict (a JSON Schema), got {type(self.schema).__name__}")
        if not isinstance(self.strict, bool):
            raise TypeError(f"JsonSchemaFormat.strict must be a bool, got {type(self.strict).__name__}")
        if self.description is not None and not isinstance(self.description, str):
            kind = type(self.description).__name__
            raise TypeError(f"JsonSchemaFormat.description must be a str or None, got {kind}")


class JsonObjectFormat(msgspec.Struct, tag="json-object", tag_field="type", frozen=True):
    """Plain JSON mode: the reply is one JSON object, no schema (OpenAI's ``json_object``).

    Most wires that have it require the prompt itself to ask for JSON; a wire without a JSON
    mode raises ``UNSUPPORTED``.
    """


ResponseFormat: TypeAlias = JsonSchemaFormat | JsonObjectFormat
"""``GenerateOptions.response_format``: a JSON schema, or plain JSON mode."""


class _RouteKeyword(msgspec.StructMeta):
    """Metaclass of the structs whose ``route`` field used to be called ``provider``
    (:class:`GenerateOptions`, :class:`~harness_core.embedding.EmbedOptions`,
    :class:`~harness_core.plugininfo.Defaults`, :class:`~harness_core.conversation.ConversationState`).
    Constructing one costs a Python-level call more (a few microseconds, once per request).

    ``Options(provider="x")`` still works: it warns (a :class:`DeprecationWarning` naming
    ``route``, attributed to the calling line) and builds ``Options(route="x")``. Only the
    constructor keyword is folded: ``msgspec.structs.replace(options, provider=...)`` raises
    (it never runs the constructor), and a decoded mapping's ``provider`` key is an unknown field.

    Raises (on construction):
        TypeError: both ``provider=`` and ``route=`` are given (one value, two names).
    """

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        """Build the struct, folding the deprecated ``provider=`` keyword into ``route=``."""
        _fold_provider(cls.__name__, kwargs)
        return super().__call__(*args, **kwargs)


def _fold_provider(owner: str, kwargs: dict[str, Any], stacklevel: int = 3) -> None:
    """Move a deprecated ``provider=`` keyword of ``owner`` (a callable's name) to ``route=`` in
    ``kwargs``, with a :class:`DeprecationWarning` naming ``route`` attributed ``stacklevel``
    frames up (the caller of ``owner``).

    Raises:
        TypeError: both ``provider`` and ``route`` are in ``kwargs`` (one value, two names).
    """
    if "provider" not in kwargs:
        return
    if "route" in kwargs:
        raise TypeError(f"{owner}: give route= only (provider= is its deprecated old name)")
    warnings.warn(
        f"{owner}(provider=...) is deprecated: pass route= (the plugins.yaml entry to use)",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    kwargs["route"] = kwargs.pop("provider")


def _deprecated_provider(options: Any) -> str | None:
    """``options.route`` after a :class:`DeprecationWarning` naming ``route``: the body of the
    deprecated ``provider`` attribute of the option structs (attributed to the reading line)."""
    name = type(options).__name__
    warnings.warn(f"{name}.provider is deprecated: read {name}.route", DeprecationWarning, stacklevel=3)
    route: str | None = options.route
    return route


class GenerateOptions(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, metaclass=_RouteKeyword):
    """Everything one generation needs. Frozen: derive variants with ``msgspec.structs.replace``.

    Fields:
        route: the route to use: the name of a plugins.yaml entry (``"mock"``, ``"openai"`` …);
            ``None`` = the configured default. The serialised form and the cache key
            (:func:`canonical_json`) carry it as ``route``. ``provider=`` / ``.provider`` are its
            deprecated old names (a ``DeprecationWarning``; see :class:`_RouteKeyword`);
            "provider" now means only the vendor/plugin serving a route (``LlmError.provider``).
        model: the provider's model id; ``None`` = the configured default.
        messages: the conversation so far.
        system: the system prompt, kept apart from ``messages`` for providers that need that.
        system_cache: a prompt-cache breakpoint at the end of ``system`` (:class:`CacheMark`);
            blocks and tools carry their own ``cache``.
        tools / tool_choice: tools offered to the model and how it must use them; no two tools
            of one name (a ``ValueError`` naming the second one: ``tools[1].name``).
        max_tokens: upper bound on output tokens (1 … :data:`MAX_TOKENS_LIMIT`).
        temperature / top_p / seed / stop: sampling.
        reasoning_effort: an effort id from ``ModelInfo.reasoning_efforts`` (e.g. ``"low"``,
            ``"off"``); an id the adapter does not list raises ``UNSUPPORTED``.
        response_format: constrain the reply to JSON (:class:`JsonSchemaFormat` or
            :class:`JsonObjectFormat`); ``None`` = free text.
        provider_options: extra wire fields keyed by plugin name (``{"openai": {"top_k": 5}}``),
            passed through as given: the escape hatch for features the vocabulary lacks.
        abort: an :class:`~harness_core.abort.AbortSignal`; never serialised.
        metadata: free-form data for middleware (tags, user ids); not part of the cache key.

    An option the target provider cannot honour raises ``LlmError("UNSUPPORTED")`` naming it.
    """

    route: str | None = None
    model: str | None = None
    messages: list[Message] = msgspec.field(default_factory=list)
    system: str | None = None
    system_cache: CacheMark | None = None
    tools: list[ToolSpec] = msgspec.field(default_factory=list)
    tool_choice: ToolChoice | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: list[str] | None = None
    reasoning_effort: str | None = None
    response_format: ResponseFormat | None = None
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
        _check_tool_names(self.tools)
        for name in ("route", "model", "system", "reasoning_effort"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"GenerateOptions.{name} must be a str or None, got {type(value).__name__}")
        _check_number(self.max_tokens, "max_tokens", int, minimum=1)
        if self.max_tokens is not None and self.max_tokens > MAX_TOKENS_LIMIT:
            raise ValueError(
                f"GenerateOptions.max_tokens must be an integer in range (at most {MAX_TOKENS_LIMIT}), "
                f"got {self.max_tokens}"
            )
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
        if self.response_format is not None and not isinstance(
            self.response_format, JsonSchemaFormat | JsonObjectFormat
        ):
            raise TypeError(
                "GenerateOptions.response_format must be a JsonSchemaFormat, a JsonObjectFormat or None,"
                f" got {type(self.response_format).__name__}"
            )
        if not isinstance(self.provider_options, dict) or not all(
            isinstance(v, dict) for v in self.provider_options.values()
        ):
            raise TypeError("GenerateOptions.provider_options must be a dict of dicts keyed by plugin name")
        if not isinstance(self.metadata, dict):
            raise TypeError(f"GenerateOptions.metadata must be a dict, got {type(self.metadata).__name__}")
        if self.system_cache is not None and not isinstance(self.system_cache, CacheMark):
            kind = type(self.system_cache).__name__
            raise TypeError(f"GenerateOptions.system_cache must be a CacheMark or None, got {kind}")
        if self.abort is not None and not isinstance(self.abort, AbortSignal):
            raise TypeError(f"GenerateOptions.abort must be an AbortSignal or None, got {type(self.abort).__name__}")

    def unoffered_tool_choice(self) -> str | None:
        """The tool name :attr:`tool_choice` forces when :attr:`tools` holds no tool of that name
        (a request no provider can honour: the gateway answers 400 naming ``tool_choice``), else
        ``None`` (``auto``, ``none``, ``required``, no choice, or an offered name)."""
        choice = self.tool_choice
        if isinstance(choice, NamedToolChoice) and all(tool.name != choice.name for tool in self.tools):
            return choice.name
        return None

    @property
    def provider(self) -> str | None:
        """Deprecated: the old name of :attr:`route`. Reading it warns (``DeprecationWarning``)."""
        return _deprecated_provider(self)


def _check_list(value: object, item_type: type | tuple[type, ...], name: str) -> None:
    if not isinstance(value, list):
        raise TypeError(f"GenerateOptions.{name} must be a list, got {type(value).__name__}")
    for position, item in enumerate(value):
        if not isinstance(item, item_type):
            raise TypeError(f"GenerateOptions.{name}[{position}] has the wrong type: {type(item).__name__}")


def _check_tool_names(tools: list[ToolSpec]) -> None:
    """Refuse a tool name offered twice: a call names its tool, so two tools of one name make
    its target ambiguous (every provider refuses such a request: OpenAI, Anthropic, Gemini)."""
    seen: set[str] = set()
    for position, tool in enumerate(tools):
        if tool.name in seen:
            raise ValueError(
                f"GenerateOptions.tools[{position}].name {tool.name[:80]!r} is offered more than once:"
                " tool names must be unique"
            )
        seen.add(tool.name)


MAX_TOKENS_LIMIT: Final = 2**31 - 1
"""The largest ``max_tokens`` accepted (a signed 32-bit integer, what providers' APIs take; a
larger one is a mistake, refused before it reaches an adapter)."""


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
    and ``metadata``. Equal requests give equal bytes, so it serves as a cache key.

    A :class:`FileBlock` with ``data`` appears as its media type, filename, size and SHA-256
    digest instead of its bytes, so the key stays small whatever the attachments weigh.
    """
    stripped = msgspec.structs.replace(options, abort=None, metadata={})
    if not any(isinstance(b, FileBlock) for m in options.messages for b in m.content):
        return _canonical_encoder.encode(stripped)
    tree = msgspec.to_builtins(stripped, builtin_types=(bytes,))  # bytes stay as they are: no copy
    for message in tree["messages"]:
        for block in message["content"]:
            data = block.pop("data", None) if block["type"] == "file" else None
            if data is not None:
                block["digest"] = "sha256:" + hashlib.sha256(data).hexdigest()
                block["size"] = len(data)
    return _canonical_encoder.encode(tree)


def cache_marks(options: GenerateOptions) -> list[tuple[str, CacheMark]]:
    """Every prompt-cache breakpoint of ``options`` with the place it stands (``system``,
    ``tools[1]``, ``messages[2].content[0]``), in request order: what an adapter checks before
    it serializes (:func:`check_cache_ttls`)."""
    found: list[tuple[str, CacheMark]] = []
    if options.system_cache is not None:
        found.append(("system", options.system_cache))
    found += [(f"tools[{i}]", tool.cache) for i, tool in enumerate(options.tools) if tool.cache is not None]
    for m, message in enumerate(options.messages):
        for b, block in enumerate(message.content):
            mark = getattr(block, "cache", None)
            if mark is not None:
                found.append((f"messages[{m}].content[{b}]", mark))
    return found


def check_cache_ttls(
    provider: str, options: GenerateOptions, ttls: Collection[int] = (), *, why: str | None = None
) -> None:
    """Refuse a cache breakpoint whose TTL the wire of ``provider`` cannot honour.

    ``ttls`` are the lifetimes (seconds) the wire takes; ``()`` for a wire that caches
    implicitly (OpenAI, Gemini): there a mark without a TTL is accepted and changes nothing.
    ``why`` replaces the message's reason for such a wire (``"it caches implicitly"``), e.g. for
    one that carries no breakpoint at all (Bedrock through any-llm).

    Raises:
        LlmError: ``UNSUPPORTED`` naming the place of the first mark with another TTL.
    """
    for where, mark in cache_marks(options):
        if mark.ttl is not None and mark.ttl not in ttls:
            takes = f"it takes {', '.join(f'{t} s' for t in sorted(ttls))}" if ttls else why or "it caches implicitly"
            raise LlmError(
                "UNSUPPORTED",
                f"{where}: a prompt-cache TTL of {mark.ttl} s is not supported by {provider} ({takes})",
                provider=provider,
            )


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


__getattr__ = moved_names(__name__, {"Failure": "harness_core.errors"})
"""``harness_core.types.Failure`` moved to :mod:`harness_core.errors` (its owner; the faces re-export it)."""
