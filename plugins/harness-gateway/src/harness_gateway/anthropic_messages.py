"""Anthropic Messages (``POST /v1/messages``) ⇄ the harness vocabulary.

Wire format: https://docs.anthropic.com/en/api/messages (request and ``message`` object) and
https://docs.anthropic.com/en/docs/build-with-claude/streaming (the event sequence
``message_start``, ``content_block_start`` / ``content_block_delta`` / ``content_block_stop``,
``message_delta``, ``message_stop``, ``ping``, and ``error``).

Request: ``system`` (a string or text blocks), ``text``, ``tool_use`` (``input`` serialised as
the tool call's raw JSON arguments), ``tool_result`` (a string, or ``text``, ``image`` and
``document`` blocks: the result's text and files, :func:`_tool_result`) and ``thinking`` blocks;
``max_tokens``, ``temperature``, ``top_p``, ``stop_sequences``, ``tools``, ``tool_choice``
(``auto`` / ``any`` / ``tool`` / ``none``) and ``thinking`` (``disabled`` → effort ``off``;
``enabled`` → ``low`` up to 4,096 budget tokens, ``medium`` up to 16,384, else ``high``).
``image`` and ``document`` blocks (``source`` of type ``base64``, ``url`` or ``text``) become
:class:`~harness_core.types.FileBlock` s (:mod:`harness_gateway.files`). ``cache_control`` on a
system block, a content block or a tool becomes a :class:`~harness_core.types.CacheMark`
(``ttl`` kept); a system prompt holding one becomes a leading ``system`` message, one text block
per system block, so every breakpoint keeps its place. ``output_config.format`` (and the beta's
top-level ``output_format``) of type ``json_schema`` becomes a
:class:`~harness_core.types.JsonSchemaFormat` named ``output``.

Any other top-level field reaches a route speaking this wire (the Anthropic plugin) unchanged
and is a 400 naming it elsewhere (:func:`harness_gateway.request.pass_through`); ignored on
other wires: :data:`IGNORED`. ``parse_messages_request(..., counting=True)`` reads a
``count_tokens`` body (no ``max_tokens``).

Thinking signatures have a typed place, :class:`~harness_core.types.ReasoningSignature` on the
:class:`~harness_core.types.ReasoningBlock` (docs/vocabulary.md). A ``thinking`` block's
``signature`` and a ``redacted_thinking`` block's ``data`` sent by the client become one, bound to
the target route's plugin and the provider's model id (the runtime drops it for another provider
or model, :func:`harness_core.boundary.strip_replay`). Replies read it from the ``block-end``
chunk: a signed block's ``content_block_start`` waits for its first delta or its end, so a
redacted block goes out as ``redacted_thinking`` with its ``data``, and a thinking block's
``signature_delta`` comes just before its ``content_block_stop``, as Anthropic sends it.
"""

from __future__ import annotations

import base64
import re
from types import MappingProxyType
from typing import Any, Final

import msgspec
from starlette.responses import JSONResponse

from harness_core import (
    BlockEnd,
    BlockStart,
    CacheMark,
    FileBlock,
    Finish,
    FinishReason,
    JsonSchemaFormat,
    Message,
    NamedToolChoice,
    ReasoningBlock,
    ReasoningDelta,
    ReasoningSignature,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    ToolSpec,
    Usage,
    plugin_name,
)
from harness_gateway.dialect import Dialect, StreamEncoder
from harness_gateway.errors import GatewayError, finish_error
from harness_gateway.files import file_block
from harness_gateway.request import (
    ANTHROPIC_TOOL_NAME,
    Body,
    ParsedRequest,
    Target,
    bad_request,
    build_options,
    cache_mark,
    pass_through,
    tool_name,
    tool_result_text,
)
from harness_gateway.sse import sse_event

__all__ = [
    "ANTHROPIC_MESSAGES",
    "IGNORED",
    "MAPPED",
    "AnthropicMessages",
    "MessagesStreamEncoder",
    "messages_response",
    "parse_messages_request",
]

WIRE: Final = "anthropic-messages"
MAPPED: Final = frozenset(
    {
        "model",
        "messages",
        "system",
        "tools",
        "tool_choice",
        "max_tokens",
        "temperature",
        "top_p",
        "stop_sequences",
        "thinking",
        "stream",
        "output_config",
        "output_format",
    }
)
"""Top-level fields read into the vocabulary."""
IGNORED: Final = frozenset({"metadata"})
"""Fields that change no output (``metadata.user_id``), dropped on a route of another wire."""

_STOP: Final = {"tool-calls": "tool_use", "length": "max_tokens", "content-filter": "refusal"}
_EFFORT_BUDGETS: Final = ((4096, "low"), (16384, "medium"))

_THINKING_AS: Final = MappingProxyType(
    {
        "off": "thinking (type disabled, taken as reasoning effort 'off')",
        "low": "thinking.budget_tokens up to 4096 (taken as reasoning effort 'low')",
        "medium": "thinking.budget_tokens from 4097 to 16384 (taken as reasoning effort 'medium')",
        "high": "thinking.budget_tokens above 16384 (taken as reasoning effort 'high')",
    }
)
"""A ``thinking`` the client sent, by the reasoning effort :func:`_effort` made of it: how a
route's refusal of that effort names it (:func:`thinking_refusal`)."""
_QUOTED_EFFORT: Final = re.compile(r"reasoning_effort '([a-z]+)'")
_THINKING_SCALE: Final = (
    "the gateway passes thinking on as a reasoning effort: budget_tokens up to 4096 is 'low', up to 16384"
    " 'medium', more 'high', and type disabled is 'off'"
)

_encode = msgspec.json.Encoder().encode


def parse_messages_request(
    raw: Any,
    owner: str | None = None,
    upstream_model: str | None = None,
    *,
    target: Target | None = None,
    counting: bool = False,
) -> ParsedRequest:
    """Read a Messages body into a :class:`~harness_gateway.request.ParsedRequest`.

    ``owner`` is the plugins.yaml key serving the requested model and ``upstream_model`` the
    provider's model id; thinking signatures are bound to that plugin (``target.options_key``,
    else the key's entry-point name) and model. Without either no signature is kept (no route
    could take it). ``target`` is the route (for the field rule, module docstring); ``counting`` reads a
    ``count_tokens`` body (``max_tokens`` optional). Raises a 400 :class:`GatewayError` naming
    the field at fault.
    """
    body = Body(raw)
    model = body.get("model", str, required=True)
    provider = target.options_key if target is not None else plugin_name(owner) if owner is not None else None
    given = body.items("messages", required=True)
    messages = [
        _read_message(Body(item, where), provider, upstream_model or model, last=position == len(given) - 1)
        for position, (where, item) in enumerate(given)
    ]
    system, system_blocks = _system(body)
    fmt, output_extra = _output(body, target)
    extra = pass_through(body, MAPPED, IGNORED, wire=WIRE, target=target) | output_extra
    options: dict[str, Any] = {
        "messages": [Message(role="system", content=list(system_blocks)), *messages] if system_blocks else messages,
        "system": system,
        "tools": [_read_tool(Body(item, where)) for where, item in body.items("tools")],
        "tool_choice": _tool_choice(body),
        "max_tokens": body.get("max_tokens", int, required=not counting),
        "temperature": body.number("temperature", 0, 1),  # Anthropic's ranges
        "top_p": body.number("top_p", 0, 1),
        "stop": [_string(where, item) for where, item in body.items("stop_sequences")] or None,
        "reasoning_effort": _effort(body),
        "response_format": fmt,
        "provider_options": {target.options_key: extra} if extra and target is not None else None,
    }
    generate = build_options(options, {"stop": "stop_sequences"})
    return ParsedRequest(model=model, options=generate, stream=body.get("stream", bool, False))


def _string(where: str, value: Any) -> str:
    if not isinstance(value, str):
        raise bad_request(where, "expected a string")
    return value


_TEXT_BLOCK: Final = frozenset({"type", "text", "cache_control"})


def _text_block(block: Body) -> TextBlock:
    """A ``text`` block (of ``messages``, ``system`` or a ``tool_result``'s content) with its
    cache mark; another field is a 400 naming it (its ``citations``, echoed from a reply, change
    no output and are dropped)."""
    block.only(_TEXT_BLOCK, ("citations",), what="text block")
    return TextBlock(block.get("text", str, required=True), cache=cache_mark(block))


def _system(body: Body) -> tuple[str | None, list[TextBlock]]:
    """``(system, [])`` for a system prompt without cache marks, else ``(None, its blocks)``."""
    value = body.get("system", (str, list))
    if not isinstance(value, list):
        return value or None, []
    blocks: list[TextBlock] = []
    for where, item in body.items("system"):
        block = Body(item, where)
        if block.get("type", str, required=True) != "text":
            raise bad_request(block.path("type"), "system may hold text blocks only")
        blocks.append(_text_block(block))
    if any(block.cache is not None for block in blocks):
        return None, blocks
    return "\n\n".join(block.text for block in blocks) or None, []


def _output(body: Body, target: Target | None) -> tuple[JsonSchemaFormat | None, dict[str, Any]]:
    """``output_config.format`` / ``output_format`` as a schema format, and ``output_config``
    itself to pass through when it holds more than ``format`` (a route of this wire only)."""
    config = body.obj("output_config")
    passed: dict[str, Any] = {}
    form = body.obj("output_format")
    if config is not None:
        if pass_through(config, ("format",), (), wire=WIRE, target=target):
            passed = {"output_config": config.value}
        form = config.obj("format") or form
    if form is None:
        return None, passed
    kind = form.get("type", str, required=True)
    if kind != "json_schema":
        raise bad_request(form.path("type"), f"expected json_schema, got {kind!r}")
    return JsonSchemaFormat(name="output", schema=form.get("schema", dict, required=True)), passed


def _signature(
    provider: str | None, model: str, value: str | None, *, redacted: bool = False
) -> ReasoningSignature | None:
    """A client-sent signature bound to the target's ``provider`` and ``model`` (none without a provider)."""
    if not value or provider is None:
        return None
    return ReasoningSignature(provider, model, value, redacted=redacted)


_EMPTY_TEXT: Final = "text content blocks must be non-empty"
"""Anthropic's words for an empty text (a ``content: ""`` is one text block)."""


def _read_message(message: Body, provider: str | None, model: str, *, last: bool) -> Message:
    """One ``messages`` entry; ``last``: it ends the conversation (an assistant prefill there may
    have no content).

    Raises:
        GatewayError: 400 naming the field at fault; as Anthropic answers, an empty text
            (``content: ""``, a text block's ``text: ""``) and an empty ``content`` list but in a
            last assistant message.
    """
    role = message.get("role", str, required=True)
    if role not in ("user", "assistant"):
        raise bad_request(message.path("role"), f"expected user or assistant, got {role!r}")
    message.only(("role", "content"), what=f"{role} message")
    content = message.get("content", (str, list), required=True)
    if isinstance(content, str):
        if not content:
            raise bad_request(message.path("content"), _EMPTY_TEXT)
        return Message(role=role, content=[TextBlock(content)])
    if not content and not (last and role == "assistant"):
        raise bad_request(
            message.path("content"),
            "all messages must have non-empty content except for the optional final assistant message",
        )
    blocks: list[Any] = []
    results: list[ToolResultBlock] = []
    for where, item in message.items("content"):
        block = Body(item, where)
        kind = block.get("type", str, required=True)
        mark = cache_mark(block)
        fields = _BLOCK_FIELDS.get(kind)
        if fields is not None:
            block.only(fields, what=f"{kind} block")
        if kind == "text":
            blocks.append(_text_block(block))
            if not blocks[-1].text:
                raise bad_request(block.path("text"), _EMPTY_TEXT)
        elif kind == "thinking":
            value = block.get("signature", str)
            text = block.get("thinking", str, required=True)
            blocks.append(ReasoningBlock(text, signed=bool(value), signature=_signature(provider, model, value)))
        elif kind == "redacted_thinking":
            data = block.get("data", str, required=True)
            blocks.append(ReasoningBlock("", signed=True, signature=_signature(provider, model, data, redacted=True)))
        elif kind == "tool_use":
            arguments = _encode(block.get("input", dict, {})).decode()
            blocks.append(
                ToolCallBlock(
                    id=block.get("id", str, required=True),
                    name=block.get("name", str, required=True),
                    arguments=arguments,
                    cache=mark,
                )
            )
        elif kind in ("image", "document"):
            blocks.append(_cached(_media(block), mark))
        elif kind == "tool_result":
            results.append(_tool_result(block, mark))
        else:
            raise bad_request(block.path("type"), f"unknown content block type {kind!r}")
    if results:
        if blocks:
            raise bad_request(
                message.path("content"), "tool_result blocks cannot be mixed with other blocks in one message"
            )
        return Message(role="tool", content=list(results))
    return Message(role=role, content=blocks)


_BLOCK_FIELDS: Final = {
    "thinking": frozenset({"type", "thinking", "signature"}),
    "redacted_thinking": frozenset({"type", "data"}),
    "tool_use": frozenset({"type", "id", "name", "input", "cache_control"}),
    "image": frozenset({"type", "source", "cache_control"}),
    "document": frozenset({"type", "source", "cache_control"}),
    "tool_result": frozenset({"type", "tool_use_id", "content", "is_error", "cache_control"}),
}
"""The fields of a content block the dialect reads, by type (a ``text`` block's: :func:`_text_block`):
any other (a document's ``title``, ``context`` or ``citations`` …) is a 400 naming it."""

_SOURCE_FIELDS: Final = {
    "base64": frozenset({"type", "media_type", "data"}),
    "url": frozenset({"type", "url"}),
    "text": frozenset({"type", "media_type", "data"}),
}


def _cached(block: Any, mark: CacheMark | None) -> Any:
    return block if mark is None else msgspec.structs.replace(block, cache=mark)


def _media(block: Body) -> Any:
    """An ``image`` / ``document`` block's ``source``: ``base64`` data, a ``url``, or plain ``text``."""
    source = block.obj("source", required=True)
    assert source is not None
    kind = source.get("type", str, required=True)
    fields = _SOURCE_FIELDS.get(kind)
    if fields is not None:
        source.only(fields, what=f"{kind} source")
    where = source.path("data")
    if kind == "url":
        return file_block(source.path("url"), url=source.get("url", str, required=True))
    if kind == "text":
        text = source.get("data", str, required=True)
        return file_block(where, data=base64.b64encode(text.encode()).decode(), media_type="text/plain")
    if kind != "base64":
        raise bad_request(source.path("type"), f"expected base64, url or text, got {kind!r}")
    return file_block(
        where, data=source.get("data", str, required=True), media_type=source.get("media_type", str, required=True)
    )


_RESULT_BLOCKS: Final = ("text", "image", "document")
"""The block types a ``tool_result``'s ``content`` list holds here (the API's others, such as
``search_result``, are 400s naming them)."""


def _tool_result(block: Body, mark: CacheMark | None) -> ToolResultBlock:
    """A ``tool_result`` block (``mark``: its own ``cache_control``) as a :class:`ToolResultBlock`.

    ``content`` is a string or a list of ``text``, ``image`` and ``document`` blocks
    (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use, PROTOCOLS.md
    §2, §10.1): the texts, one a line (:func:`~harness_gateway.request.tool_result_text`), become
    the result's content, the media its ``files`` in order,
    read as a user message's media are (:func:`_media`: base64, url and text sources, the same
    fields and errors). The vocabulary's tool result holds one text and its files, so a route
    sends the text first, then the files. A ``cache_control`` inside the list marks the whole
    result (the last one given, unless the block has its own): the breakpoint stays at the end
    of the result rather than being dropped.

    Raises:
        GatewayError: 400 naming the field at fault (``messages[2].content[0].content[1].type``
            for another block type, ``….source.data`` for data that is not base64 …).
    """
    content = block.get("content", (str, list), "")
    texts: list[str] = [content] if isinstance(content, str) else []
    files: list[FileBlock] = []
    marks: list[CacheMark] = []
    for where, item in () if isinstance(content, str) else block.items("content"):
        inner = Body(item, where)
        kind = inner.get("type", str, required=True)
        if kind not in _RESULT_BLOCKS:
            raise bad_request(
                inner.path("type"), f"a tool_result holds text, image and document blocks only, got {kind[:40]!r}"
            )
        if kind == "text":
            text = _text_block(inner)
            texts.append(text.text)
            inner_mark = text.cache
        else:
            inner.only(_BLOCK_FIELDS[kind], what=f"{kind} block")
            files.append(_media(inner))
            inner_mark = cache_mark(inner)
        if inner_mark is not None:
            marks.append(inner_mark)
    return ToolResultBlock(
        tool_call_id=block.get("tool_use_id", str, required=True),
        content=tool_result_text(texts),
        is_error=block.get("is_error", bool, False),
        files=tuple(files),
        cache=mark if mark is not None else marks[-1] if marks else None,
    )


def _read_tool(tool: Body) -> ToolSpec:
    """A ``tools`` entry, a client tool: ``{type?: custom, name, description, input_schema,
    cache_control, strict}`` (https://docs.anthropic.com/en/api/messages#body-tools); a server
    tool (``web_search_20250305`` …), a missing ``input_schema``, a name outside Anthropic's rule
    (:func:`~harness_gateway.request.tool_name`), or a field the dialect does not read, is a 400
    naming it."""
    kind = tool.get("type", str, "custom")
    if kind != "custom":
        raise bad_request(
            tool.path("type"), f"server tool {kind!r} is not supported by the gateway: only custom (client) tools are"
        )
    tool.only(_TOOL_FIELDS, what="tool")
    schema = tool.get("input_schema", dict, required=True)  # required by the API, as a client tool's shape
    return ToolSpec(
        name=tool_name(tool, ANTHROPIC_TOOL_NAME),
        description=tool.get("description", str, ""),
        parameters=schema,
        cache=cache_mark(tool),
        strict=tool.get("strict", bool, False) or False,
    )


_TOOL_FIELDS: Final = frozenset({"type", "name", "description", "input_schema", "cache_control", "strict"})


def _tool_choice(body: Body) -> Any:
    choice = body.obj("tool_choice")
    if choice is None:
        return None
    kind = choice.get("type", str, required=True)
    if kind == "tool":
        return NamedToolChoice(choice.get("name", str, required=True))
    mapped = {"auto": "auto", "any": "required", "none": "none"}.get(kind)
    if mapped is None:
        raise bad_request(choice.path("type"), f"expected auto, any, tool or none, got {kind!r}")
    return mapped


def _effort(body: Body) -> str | None:
    thinking = body.obj("thinking")
    if thinking is None:
        return None
    kind = thinking.get("type", str, required=True)
    if kind == "disabled":
        return "off"
    if kind != "enabled":
        raise bad_request(thinking.path("type"), f"expected enabled or disabled, got {kind!r}")
    budget = thinking.get("budget_tokens", int, required=True)
    return next((effort for limit, effort in _EFFORT_BUDGETS if budget <= limit), "high")


def thinking_refusal(message: str) -> str:
    """A route's refusal of a request's reasoning effort (``message``, naming the vocabulary's
    ``reasoning_effort``) in a Messages client's terms: the ``thinking`` it sent (``thinking``
    for ``type: disabled``, ``thinking.budget_tokens`` and its range for ``enabled``), and how
    the gateway turns a budget into an effort, so the client can pick a budget the route takes
    (``reasoning_effort 'medium' is not supported by model 'gpt-x' (supported: ['low', 'high'])``
    names ``thinking.budget_tokens from 4097 to 16384``)."""
    shown, found = _QUOTED_EFFORT.subn(lambda match: _THINKING_AS.get(match[1], "thinking"), message, count=1)
    if not found:
        shown = message.replace("reasoning_effort", "thinking", 1)
    return f"{shown}; {_THINKING_SCALE}"


def stop_reason(reason: FinishReason) -> str:
    """Anthropic's ``stop_reason`` for a harness finish."""
    if reason.raw == "stop_sequence":
        return "stop_sequence"
    return _STOP.get(reason.kind, "end_turn")


def usage_body(usage: TokenUsage | None) -> dict[str, Any]:
    """Anthropic's ``usage`` (``input_tokens`` excludes cache reads and writes there), with
    ``cache_creation`` splitting the writes by TTL when the route reported the one-hour part
    (https://docs.anthropic.com/en/api/messages#response-usage)."""
    if usage is None:
        return {"input_tokens": 0, "output_tokens": 0}
    read = usage.cache_read_tokens or 0
    write = usage.cache_write_tokens or 0
    body: dict[str, Any] = {
        "input_tokens": max(0, (usage.input_tokens or 0) - read - write),
        "output_tokens": usage.output_tokens or 0,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
    }
    hour = usage.cache_write_1h_tokens
    if hour is not None:
        body["cache_creation"] = {"ephemeral_5m_input_tokens": max(0, write - hour), "ephemeral_1h_input_tokens": hour}
    return body


_DELTA_HEAD: Final = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":'
_TEXT: Final = b',"delta":{"type":"text_delta","text":'
_THINKING: Final = b',"delta":{"type":"thinking_delta","thinking":'
_JSON: Final = b',"delta":{"type":"input_json_delta","partial_json":'
_THINKING_START: Final[dict[str, Any]] = {"type": "thinking", "thinking": "", "signature": ""}


def _delta_event(index: int, kind: bytes, text: str) -> bytes:
    """A ``content_block_delta`` event of one string field, written without a dict per delta
    (the same bytes as encoding ``{"type": …, "index": …, "delta": {"type": …, field: text}}``)."""
    return b"".join((_DELTA_HEAD, str(index).encode(), kind, _encode(text), b"}}\n\n"))


class MessagesStreamEncoder:
    """Turns harness stream chunks into the Anthropic streaming event sequence.

    A signed reasoning block's ``content_block_start`` is held until its first delta or its
    ``block-end`` (module docstring): only the end says whether it was redacted.
    """

    def __init__(self, message_id: str, model: str) -> None:
        self.id = message_id
        self.model = model
        self.usage: TokenUsage | None = None
        self.failure: GatewayError | None = None
        self._held: set[int] = set()  # signed reasoning blocks whose content_block_start waits

    def start(self) -> bytes:
        """``message_start`` (empty content, zero usage: the counts come in ``message_delta``) and a ``ping``."""
        message: dict[str, Any] = {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return sse_event("message_start", _encode({"type": "message_start", "message": message})) + sse_event(
            "ping", b'{"type": "ping"}'
        )

    def _delta(self, index: int, delta: dict[str, Any]) -> bytes:
        return sse_event(
            "content_block_delta", _encode({"type": "content_block_delta", "index": index, "delta": delta})
        )

    @staticmethod
    def _block_start(index: int, block: dict[str, Any]) -> bytes:
        event = {"type": "content_block_start", "index": index, "content_block": block}
        return sse_event("content_block_start", _encode(event))

    def feed(self, chunk: StreamChunk) -> bytes:
        """The SSE bytes for ``chunk`` (``b""`` when it adds nothing on this wire)."""
        if isinstance(chunk, TextDelta):
            return _delta_event(chunk.index, _TEXT, chunk.text)
        if isinstance(chunk, ReasoningDelta):
            event = _delta_event(chunk.index, _THINKING, chunk.text)
            if self._held and chunk.index in self._held:
                self._held.discard(chunk.index)
                return self._block_start(chunk.index, _THINKING_START) + event
            return event
        if isinstance(chunk, ToolCallDelta):
            return _delta_event(chunk.index, _JSON, chunk.arguments_delta)
        if isinstance(chunk, BlockStart):
            block: dict[str, Any]
            if chunk.block_type == "text":
                block = {"type": "text", "text": ""}
            elif chunk.block_type == "reasoning":
                if chunk.signed:
                    self._held.add(chunk.index)
                    return b""
                block = _THINKING_START
            else:
                block = {"type": "tool_use", "id": chunk.id, "name": chunk.name, "input": {}}
            return self._block_start(chunk.index, block)
        if isinstance(chunk, BlockEnd):
            return self._block_end(chunk)
        if isinstance(chunk, Usage):
            self.usage = chunk.usage
            return b""
        if isinstance(chunk, Finish):
            return self.finish(chunk)
        return b""

    def _block_end(self, chunk: BlockEnd) -> bytes:
        """``content_block_stop``, after a held block's start and a thinking block's ``signature_delta``."""
        index, block = chunk.index, chunk.block
        out = b""
        signature = block.signature if isinstance(block, ReasoningBlock) else None
        if index in self._held:
            self._held.discard(index)
            if signature is not None and signature.redacted:
                out = self._block_start(index, {"type": "redacted_thinking", "data": signature.value})
                signature = None
            else:
                out = self._block_start(index, _THINKING_START)
        if signature is not None and not signature.redacted:
            out += self._delta(index, {"type": "signature_delta", "signature": signature.value})
        return out + sse_event("content_block_stop", _encode({"type": "content_block_stop", "index": index}))

    def finish(self, finish: Finish) -> bytes:
        """``message_delta`` and ``message_stop``, or ``event: error`` alone for a failure or an
        abort (:func:`~harness_gateway.errors.finish_error`: an aborted stream claims no
        ``end_turn``)."""
        reason = finish.reason
        failed = finish_error(reason)
        if failed is not None:
            self.failure = failed
            return self.error(failed)
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(reason), "stop_sequence": None},
            "usage": usage_body(self.usage),
        }
        return sse_event("message_delta", _encode(delta)) + sse_event("message_stop", b'{"type": "message_stop"}')

    def error(self, error: GatewayError) -> bytes:
        """An ``event: error`` with the Anthropic error body."""
        return sse_event("error", _encode(error.anthropic_body()))


def _reasoning_body(block: ReasoningBlock) -> dict[str, Any]:
    """A reply's ``thinking`` block with its signature (``""`` without one), or ``redacted_thinking``."""
    signature = block.signature
    if signature is not None and signature.redacted:
        return {"type": "redacted_thinking", "data": signature.value}
    return {"type": "thinking", "thinking": block.text, "signature": signature.value if signature is not None else ""}


def messages_response(
    message_id: str, model: str, message: Message, usage: TokenUsage | None, finish: Finish
) -> dict[str, Any]:
    """The non-streaming ``message`` object.

    Raises:
        GatewayError: 502 when the model produced tool arguments that are not a JSON object
            (Anthropic's ``input`` must be one).
    """
    content: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            content.append({"type": "text", "text": block.text})
        elif isinstance(block, ReasoningBlock):
            content.append(_reasoning_body(block))
        else:
            assert isinstance(block, ToolCallBlock), "an assistant reply holds text, reasoning and tool calls only"
            try:
                arguments = msgspec.json.decode(block.arguments or "{}")
            except msgspec.DecodeError:
                arguments = None
            if not isinstance(arguments, dict):
                raise GatewayError(
                    502, f"the model's arguments for tool {block.name!r} are not a JSON object", code="PROTOCOL"
                )
            content.append({"type": "tool_use", "id": block.id, "name": block.name, "input": arguments})
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(finish.reason),
        "stop_sequence": None,
        "usage": usage_body(usage),
    }


class AnthropicMessages(Dialect):
    """The Messages dialect (this module's functions behind :class:`~harness_gateway.dialect.Dialect`):
    Anthropic's error body, and a quota failure is its 402 ``billing_error``."""

    name = "anthropic"
    path = "/v1/messages"
    id_prefix = "msg_"
    option_fields = MappingProxyType({"response_format": "output_config.format"})

    def parse(self, raw: Any, owner: str | None, upstream_model: str, *, target: Target | None = None) -> ParsedRequest:
        """:func:`parse_messages_request` (signed thinking becomes ``owner``'s replay state)."""
        return parse_messages_request(raw, owner, upstream_model, target=target)

    def encoder(self, public_id: str, model: str, parsed: ParsedRequest) -> StreamEncoder:
        """A :class:`MessagesStreamEncoder`."""
        return MessagesStreamEncoder(public_id, model)

    def response(
        self, public_id: str, parsed: ParsedRequest, message: Message, usage: TokenUsage | None, finish: Finish
    ) -> dict[str, Any]:
        """:func:`messages_response`."""
        return messages_response(public_id, parsed.model, message, usage, finish)

    def error_response(self, error: GatewayError) -> JSONResponse:
        """:meth:`Dialect.error_response`, a route's refusal of the reasoning effort naming the
        request's ``thinking`` instead (:func:`thinking_refusal`): a Messages client never sent
        a ``reasoning_effort``."""
        if error.field == "reasoning_effort" and error.param is None:
            error.message = thinking_refusal(error.message)
            error.field = None  # (named: not renamed again)
        return super().error_response(error)

    def error_body(self, error: GatewayError) -> dict[str, Any]:
        """:meth:`GatewayError.anthropic_body`."""
        return error.anthropic_body()

    def error_status(self, error: GatewayError) -> int:
        """The error's status, but 402 for a quota failure (Anthropic's ``billing_error``)."""
        return 402 if error.quota else error.status


ANTHROPIC_MESSAGES: Final = AnthropicMessages()
"""The Messages dialect."""
