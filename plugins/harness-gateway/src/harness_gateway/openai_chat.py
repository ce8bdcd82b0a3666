"""OpenAI Chat Completions (``POST /v1/chat/completions``) ⇄ the harness vocabulary.

Wire format: https://platform.openai.com/docs/api-reference/chat (request, the
``chat.completion`` object, and the streamed ``chat.completion.chunk`` objects as Server-Sent
Events ending with ``data: [DONE]``).

Request: ``system`` / ``developer`` messages become ``options.system`` (joined by blank lines);
``user`` text, ``image_url``, ``input_audio`` and ``file`` parts (media become
:class:`~harness_core.types.FileBlock` s, see :mod:`harness_gateway.files`), ``assistant`` text,
``reasoning_content`` and ``tool_calls``, and ``tool`` results map to
:class:`~harness_core.Message` blocks. ``max_completion_tokens`` (or the older ``max_tokens``),
``temperature``, ``top_p``, ``seed``, ``stop``, ``reasoning_effort``, ``tools``, ``tool_choice``
and ``response_format`` (``json_object`` / ``json_schema``) map to
:class:`~harness_core.GenerateOptions`. ``n`` > 1 and uploaded ``file_id`` s are refused with a
400 naming the field. ``cache_control`` on a content part (the convention LiteLLM and
OpenRouter accept: ``{"type": "ephemeral", "ttl": "1h"}``) becomes a
:class:`~harness_core.types.CacheMark` on its block (text parts of a system, assistant or tool
message are joined: the mark goes on the joined block); a system prompt holding one becomes a
leading ``system`` message, one text block per part.

Any other top-level field (``logprobs``, ``frequency_penalty``, ``parallel_tool_calls``,
``prompt_cache_key``, ``service_tier`` …) reaches a route speaking this wire (the OpenAI Chat
Completions and DeepSeek plugins) unchanged and is a 400 naming it elsewhere
(:func:`harness_gateway.request.pass_through`); ignored on other wires: :data:`IGNORED`.

Stream: a first chunk with ``delta.role``, then ``delta.content`` / ``delta.reasoning_content``
(the DeepSeek-style field OpenAI-compatible clients read) / ``delta.tool_calls`` pieces, a chunk
with ``finish_reason``, with ``stream_options.include_usage`` a last chunk with empty
``choices`` and ``usage``, then ``[DONE]``. A failure after the stream started, and a stream
the gateway or its upstream aborted (:func:`~harness_gateway.errors.finish_error`), ends with an
error chunk ``data: {"error": {...}}`` (what the ``openai`` SDK raises as ``APIError``) and no
``[DONE]`` (:meth:`ChatStreamEncoder.error`).
"""

from __future__ import annotations

import time
from types import MappingProxyType
from typing import Any, Final

import msgspec

from harness_core import (
    BlockStart,
    CacheMark,
    Finish,
    FinishReason,
    JsonObjectFormat,
    JsonSchemaFormat,
    Message,
    NamedToolChoice,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    ToolSpec,
    Usage,
)
from harness_gateway.dialect import Dialect
from harness_gateway.errors import GatewayError, finish_error
from harness_gateway.files import file_block, image_detail
from harness_gateway.request import (
    OPENAI_TOOL_NAME,
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
from harness_gateway.sse import sse_data

__all__ = [
    "IGNORED",
    "MAPPED",
    "MAX_STOP",
    "MESSAGE_FIELDS",
    "MESSAGE_IGNORED",
    "OPENAI_CHAT",
    "OPENAI_EFFORTS",
    "ChatStreamEncoder",
    "OpenAIChat",
    "chat_response",
    "parse_chat_request",
]

WIRE: Final = "openai-chat"
MAPPED: Final = frozenset(
    {
        "model",
        "messages",
        "n",
        "tools",
        "tool_choice",
        "max_completion_tokens",
        "max_tokens",
        "temperature",
        "top_p",
        "seed",
        "stop",
        "reasoning_effort",
        "response_format",
        "stream",
        "stream_options",
    }
)
"""Top-level fields read into the vocabulary."""
IGNORED: Final = frozenset({"user", "safety_identifier", "metadata", "store", "prompt_cache_key"})
"""Fields that change no output (end-user ids, stored-completion tags, a cache routing hint),
dropped on a route of another wire."""

MESSAGE_FIELDS: Final = {
    "system": frozenset({"role", "content"}),
    "developer": frozenset({"role", "content"}),
    "user": frozenset({"role", "content"}),
    "assistant": frozenset({"role", "content", "tool_calls", "reasoning_content"}),
    "tool": frozenset({"role", "content", "tool_call_id"}),
}
"""The fields of a message the dialect reads, by role; any other (``function_call``, ``audio``)
is a 400 naming it (:meth:`~harness_gateway.request.Body.only`)."""
MESSAGE_IGNORED: Final = frozenset({"name", "refusal", "annotations"})
"""Message fields dropped: a participant ``name`` (no vocabulary field; few providers read it),
and what clients echo of an earlier reply beside its content (its ``refusal`` text, its URL
citation ``annotations``)."""

_FINISH: Final = {
    "stop": "stop",
    "tool-calls": "tool_calls",
    "length": "length",
    "content-filter": "content_filter",
    "other": "stop",
}

_encode = msgspec.json.Encoder().encode


def parse_chat_request(raw: Any, *, target: Target | None = None) -> ParsedRequest:
    """Read a Chat Completions body into a :class:`~harness_gateway.request.ParsedRequest`.

    ``target`` is the route (for the field rule, module docstring). Raises a 400
    :class:`GatewayError` naming the field at fault.
    """
    body = Body(raw)
    model = body.get("model", str, required=True)
    if body.get("n", int, 1) != 1:
        raise bad_request("n", "only n=1 is supported")
    system: list[TextBlock] = []
    messages: list[Message] = []
    for where, item in body.items("messages", required=True):
        _read_message(Body(item, where), system, messages)
    tools = [_read_tool(Body(item, where)) for where, item in body.items("tools")]
    extra = pass_through(body, MAPPED, IGNORED, wire=WIRE, target=target)
    marked = any(block.cache is not None for block in system)
    if marked:
        messages.insert(0, Message(role="system", content=list(system)))
    options: dict[str, Any] = {
        "messages": messages,
        "system": "\n\n".join(block.text for block in system) if system and not marked else None,
        "provider_options": {target.options_key: extra} if extra and target is not None else None,
        "tools": tools,
        "tool_choice": _tool_choice(body),
        "max_tokens": _max_tokens(body),
        "temperature": body.number("temperature", 0, 2),  # OpenAI's ranges
        "top_p": body.number("top_p", 0, 1),
        "seed": body.get("seed", int),
        "stop": _stop(body),
        "reasoning_effort": reasoning_effort(body.get("reasoning_effort", str)),
    }
    options["response_format"] = _response_format(body)
    stream = body.get("stream", bool, False)
    stream_options = body.obj("stream_options")
    if stream_options is not None:  # include_obfuscation: OpenAI's padding of deltas, which the gateway never adds
        stream_options.only(_STREAM_OPTIONS, what="stream options")
        stream_options.get("include_obfuscation", bool)
        if not stream:  # OpenAI's 400, in its words
            raise bad_request("stream_options", "this parameter is only allowed when 'stream' is enabled")
    max_tokens = "max_completion_tokens" if "max_completion_tokens" in body.value else "max_tokens"
    generate = build_options(options, {"max_tokens": max_tokens, "tools[].name": "tools[].function.name"})
    return ParsedRequest(
        model=model,
        options=generate,
        stream=stream,
        include_usage=bool(stream_options and stream_options.get("include_usage", bool, False)),
    )


_STREAM_OPTIONS: Final = frozenset({"include_usage", "include_obfuscation"})


def _max_tokens(body: Body) -> int | None:
    """``max_completion_tokens``, else the older ``max_tokens`` (a 0 is kept, and refused by name).

    Raises:
        GatewayError: 400 naming ``max_tokens`` when both are given with different values (one
            of them would be dropped)."""
    newer: int | None = body.get("max_completion_tokens", int)
    older: int | None = body.get("max_tokens", int)
    if newer is not None and older is not None and newer != older:
        raise bad_request("max_tokens", f"is {older}, but max_completion_tokens is {newer}: send one of them")
    return newer if newer is not None else older


def _read_message(message: Body, system: list[TextBlock], messages: list[Message]) -> None:
    role = message.get("role", str, required=True)
    if role in MESSAGE_FIELDS:
        message.only(MESSAGE_FIELDS[role], MESSAGE_IGNORED, what=f"{role} message")
    if role in ("system", "developer"):
        parts = _parts(message)
        if any(part.cache is not None for part in parts):
            system += parts
        else:  # unmarked: the parts joined, as one text
            system.append(TextBlock("".join(part.text for part in parts)))
    elif role == "user":
        messages.append(Message(role="user", content=_user_content(message)))
    elif role == "assistant":
        content: list[Any] = []
        reasoning = message.get("reasoning_content", str)
        if reasoning:
            content.append(ReasoningBlock(reasoning))
        text, mark = _marked_text(message, "content")
        if text:
            content.append(TextBlock(text, cache=mark))
        for where, item in message.items("tool_calls"):
            call = Body(item, where)
            function = call.obj("function", required=True)
            assert function is not None
            content.append(
                ToolCallBlock(
                    id=call.get("id", str, required=True),
                    name=function.get("name", str, required=True),
                    arguments=function.get("arguments", str, "{}"),
                )
            )
        messages.append(Message(role="assistant", content=content))
    elif role == "tool":
        text, mark = _marked_text(message, "content", tool=True)
        result = ToolResultBlock(tool_call_id=message.get("tool_call_id", str, required=True), content=text, cache=mark)
        messages.append(Message(role="tool", content=[result]))
    else:
        raise bad_request(
            message.path("role"), f"unknown role {role!r}; expected system, developer, user, assistant or tool"
        )


def _parts(message: Body, key: str = "content", *, required: bool = True, tool: bool = False) -> list[TextBlock]:
    """A ``content`` field of text only: a string, or ``{"type": "text"}`` parts (each with its
    ``cache_control``). ``tool``: the content of a ``tool`` message, which OpenAI's API takes as a
    string or text parts only (``ChatCompletionToolMessageParam``): another part, an image a tool
    returned, is a 400 naming it and the endpoints whose tool results take media.

    Raises:
        GatewayError: 400 naming the part's ``type`` for a part that is not text."""
    value = message.get(key, (str, list), required=required)
    if value is None or isinstance(value, str):
        return [TextBlock(value)] if value else []
    blocks: list[TextBlock] = []
    for where, item in message.items(key):
        part = Body(item, where)
        kind = part.get("type", str, required=True)
        if kind not in ("text", "input_text"):
            if tool:
                raise bad_request(
                    part.path("type"),
                    f"a Chat Completions tool message takes text parts only, as OpenAI's API does, got {kind[:40]!r}: "
                    "send a tool's media in a function_call_output on /v1/responses or a tool_result on /v1/messages",
                )
            raise bad_request(
                part.path("type"),
                f"only text parts are allowed in system and assistant messages, got {kind!r}",
            )
        part.only(_PART_FIELDS["text"], what="text part")
        blocks.append(TextBlock(part.get("text", str, required=True), cache=cache_mark(part)))
    return blocks


def _marked_text(message: Body, key: str, *, tool: bool = False) -> tuple[str, CacheMark | None]:
    """The parts of ``key`` joined, with the last cache mark among them (``tool``: as :func:`_parts`,
    and the parts of a tool result are joined one a line, as every dialect joins them:
    :func:`~harness_gateway.request.tool_result_text`)."""
    blocks = _parts(message, key, required=False, tool=tool)
    marks = [block.cache for block in blocks if block.cache is not None]
    texts = [block.text for block in blocks]
    return tool_result_text(texts) if tool else "".join(texts), (marks[-1] if marks else None)


_AUDIO: Final = {"wav": "audio/wav", "mp3": "audio/mpeg"}
_PART_FIELDS: Final = {
    "text": frozenset({"type", "text", "cache_control"}),
    "image_url": frozenset({"type", "image_url", "cache_control"}),
    "input_audio": frozenset({"type", "input_audio", "cache_control"}),
    "file": frozenset({"type", "file", "cache_control"}),
}
"""The fields of a content part the dialect reads, by part type: any other is a 400 naming it."""


def _user_content(message: Body) -> list[Any]:
    """A user ``content``: a string, or text, ``image_url``, ``input_audio`` and ``file`` parts."""
    value = message.get("content", (str, list), required=True)
    if isinstance(value, str):
        return [TextBlock(value)]
    blocks: list[Any] = []
    for where, item in message.items("content"):
        part = Body(item, where)
        kind = part.get("type", str, required=True)
        mark = cache_mark(part)
        fields = _PART_FIELDS.get("text" if kind == "input_text" else kind)
        if fields is not None:
            part.only(fields, what=f"{kind} part")
        if kind in ("text", "input_text"):
            blocks.append(TextBlock(part.get("text", str, required=True), cache=mark))
            continue
        elif kind == "image_url":
            image = part.obj("image_url", required=True)
            assert image is not None
            image.only(("url", "detail"), what="image_url")
            url = image.get("url", str, required=True)
            blocks.append(file_block(image.path("url"), url=url, detail=image_detail(image)))
        elif kind == "input_audio":
            audio = part.obj("input_audio", required=True)
            assert audio is not None
            audio.only(("data", "format"), what="input_audio")
            form = audio.get("format", str, required=True)
            blocks.append(
                file_block(
                    audio.path("data"),
                    data=audio.get("data", str, required=True),
                    media_type=_AUDIO.get(form, f"audio/{form}"),
                )
            )
        elif kind == "file":
            file = part.obj("file", required=True)
            assert file is not None
            file.only(("file_data", "file_id", "filename"), what="file")
            if file.get("file_id", str) is not None:
                raise bad_request(file.path("file_id"), "uploaded file ids are not supported: send file_data")
            url = file.get("file_data", str, required=True)
            if not url.startswith("data:"):
                raise bad_request(file.path("file_data"), "expected a data: URL (data:<media type>;base64,<data>)")
            blocks.append(file_block(file.path("file_data"), url=url, filename=file.get("filename", str)))
        else:
            raise bad_request(part.path("type"), f"unknown content part type {kind!r}")
        if mark is not None:
            blocks[-1] = msgspec.structs.replace(blocks[-1], cache=mark)
    return blocks


_FORMAT_FIELDS: Final = {
    "text": frozenset({"type"}),
    "json_object": frozenset({"type"}),
    "json_schema": frozenset({"type", "json_schema"}),
}
_SCHEMA_FIELDS: Final = frozenset({"name", "schema", "strict", "description"})


def _response_format(body: Body) -> JsonObjectFormat | JsonSchemaFormat | None:
    """``response_format``: ``text`` (none), ``json_object`` or ``json_schema`` (``{name, schema,
    strict, description}``: https://platform.openai.com/docs/api-reference/chat/create#chat-create-response_format);
    another type, or a field the dialect does not read, is a 400 naming it."""
    form = body.obj("response_format")
    if form is None:
        return None
    kind = form.get("type", str, required=True)
    fields = _FORMAT_FIELDS.get(kind)
    if fields is None:
        raise bad_request(form.path("type"), f"expected text, json_object or json_schema, got {kind!r}")
    form.only(fields, what=f"{kind} response format")
    if kind == "text":
        return None
    if kind == "json_object":
        return JsonObjectFormat()
    spec = form.obj("json_schema", required=True)
    assert spec is not None
    spec.only(_SCHEMA_FIELDS, what="json_schema")
    try:
        return JsonSchemaFormat(
            name=spec.get("name", str, required=True),
            schema=spec.get("schema", dict, {"type": "object"}),
            strict=spec.get("strict", bool, False),
            description=spec.get("description", str),
        )
    except ValueError as exc:
        raise bad_request(spec.path("name"), str(exc)) from None


def _read_tool(tool: Body) -> ToolSpec:
    """A ``tools`` entry: ``{type: function, function: {name, description, parameters, strict}}``
    (https://platform.openai.com/docs/api-reference/chat/create#chat-create-tools); another tool
    type, a missing ``type``, a name outside OpenAI's rule (:func:`~harness_gateway.request.tool_name`),
    or a field the dialect does not read, is a 400 naming it."""
    kind = tool.get("type", str, required=True)
    if kind != "function":
        raise bad_request(tool.path("type"), f"only function tools are supported, got {kind!r}")
    tool.only(_TOOL_FIELDS, what="tool")
    function = tool.obj("function", required=True)
    assert function is not None
    function.only(_FUNCTION_FIELDS, what="function")
    parameters = function.get("parameters", dict) or {"type": "object", "properties": {}}
    return ToolSpec(
        name=tool_name(function, OPENAI_TOOL_NAME),
        description=function.get("description", str, ""),
        parameters=parameters,
        strict=function.get("strict", bool, False) or False,
    )


_TOOL_FIELDS: Final = frozenset({"type", "function"})
_FUNCTION_FIELDS: Final = frozenset({"name", "description", "parameters", "strict"})


def _tool_choice(body: Body) -> Any:
    choice = body.get("tool_choice", (str, dict))
    if choice is None:
        return None
    if isinstance(choice, str):
        if choice not in ("auto", "none", "required"):
            raise bad_request("tool_choice", f"expected auto, none, required or a function, got {choice!r}")
        return choice
    function = Body(choice, "tool_choice").obj("function", required=True)
    assert function is not None
    return NamedToolChoice(function.get("name", str, required=True))


OPENAI_EFFORTS: Final = MappingProxyType({"off": "none"})
"""The vocabulary's reasoning efforts OpenAI spells otherwise, with OpenAI's word: ``"off"`` is
``"none"`` (reasoning off, https://platform.openai.com/docs/api-reference/chat/create). Read the
other way by :func:`reasoning_effort`; the Chat and Responses dialects quote OpenAI's word in a
route's refusal (:attr:`~harness_gateway.dialect.Dialect.option_values`)."""
_FROM_OPENAI: Final = {written: word for word, written in OPENAI_EFFORTS.items()}


def reasoning_effort(effort: str | None) -> str | None:
    """An OpenAI reasoning effort (``reasoning_effort`` on chat completions, ``reasoning.effort``
    on the Responses API) as the vocabulary's ``GenerateOptions.reasoning_effort``: OpenAI's
    ``"none"`` is the vocabulary's ``"off"`` (:data:`OPENAI_EFFORTS`), as the OpenAI adapters
    send ``"off"`` back as ``"none"``; any other id passes as it is (the route's adapter checks it)."""
    return effort if effort is None else _FROM_OPENAI.get(effort, effort)


MAX_STOP: Final = 4
"""The most ``stop`` sequences Chat Completions takes (OpenAI: "Up to 4 sequences"; Messages'
``stop_sequences`` has no such bound, and Responses no ``stop`` field)."""


def _stop(body: Body) -> list[str] | None:
    """``stop``: a string, or a list of at most :data:`MAX_STOP` strings.

    Raises:
        GatewayError: 400 naming ``stop`` for a longer list (OpenAI refuses it), ``stop[i]`` for
            an entry that is not a string."""
    stop = body.get("stop", (str, list))
    if isinstance(stop, str):
        return [stop]
    if stop is not None:
        for where, item in body.items("stop"):
            if not isinstance(item, str):
                raise bad_request(where, "expected a string")
        if len(stop) > MAX_STOP:
            raise bad_request("stop", f"expected at most {MAX_STOP} sequences, got {len(stop)}")
    return list(stop) if stop is not None else None


def usage_body(usage: TokenUsage | None) -> dict[str, Any] | None:
    """OpenAI's ``usage`` object (``prompt_tokens`` … with cached and reasoning details)."""
    if usage is None:
        return None
    prompt = usage.input_tokens or 0
    completion = usage.output_tokens or 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": _prompt_details(usage),
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens or 0},
    }


def _prompt_details(usage: TokenUsage) -> dict[str, int]:
    """``cached_tokens`` (cache reads), and ``cache_write_tokens`` when the provider reported
    writes (the field LiteLLM and OpenRouter use; OpenAI has none)."""
    details = {"cached_tokens": usage.cache_read_tokens or 0}
    if usage.cache_write_tokens:
        details["cache_write_tokens"] = usage.cache_write_tokens
    return details


def finish_reason(reason: FinishReason) -> str:
    """OpenAI's ``finish_reason`` for a harness finish that did not fail (``other`` maps to
    ``stop``; an ``error`` or ``aborted`` one ends in an error instead, never with a
    ``finish_reason``: :func:`~harness_gateway.errors.finish_error`)."""
    return _FINISH.get(reason.kind, "stop")


class ChatStreamEncoder:
    """Turns harness stream chunks into ``chat.completion.chunk`` SSE events.

    Feed every chunk to :meth:`feed` (bytes to send, possibly empty); a failure in the stream
    (a ``finish{error}``, or ``finish{aborted}``) yields the error chunk, and nothing after it.
    """

    def __init__(self, completion_id: str, model: str, include_usage: bool) -> None:
        self.id = completion_id
        self.model = model
        self.include_usage = include_usage
        self.created = int(time.time())
        self.usage: TokenUsage | None = None
        self.tool_index: dict[int, int] = {}
        self.failure: GatewayError | None = None
        self._text = self._template("content")
        self._reasoning = self._template("reasoning_content")

    def _template(self, field: str) -> tuple[bytes, bytes]:
        """The bytes around the string of a one-field delta event (``{field: text}``): the
        event of a text delta is ``head + JSON string + tail``, the same bytes as
        :meth:`_chunk` makes, without building and encoding the whole chunk per delta."""
        marker = "\x00harness\x00"  # encoded as an escape: cannot occur in the rest of the event
        head, tail = self._chunk({field: marker}).split(_encode(marker))
        return head, tail

    def _chunk(self, delta: dict[str, Any] | None, finish: str | None = None, usage: Any = None) -> bytes:
        body: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": []
            if delta is None
            else [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        if self.include_usage:
            body["usage"] = usage
        return sse_data(_encode(body))

    def start(self) -> bytes:
        """The first event: the assistant role with empty content."""
        return self._chunk({"role": "assistant", "content": ""})

    def feed(self, chunk: StreamChunk) -> bytes:
        """The SSE bytes for ``chunk`` (``b""`` when it adds nothing on this wire)."""
        if isinstance(chunk, TextDelta):
            head, tail = self._text
            return head + _encode(chunk.text) + tail
        if isinstance(chunk, ReasoningDelta):
            head, tail = self._reasoning
            return head + _encode(chunk.text) + tail
        if isinstance(chunk, BlockStart) and chunk.block_type == "tool-call":
            position = self.tool_index.setdefault(chunk.index, len(self.tool_index))
            call = {
                "index": position,
                "id": chunk.id,
                "type": "function",
                "function": {"name": chunk.name, "arguments": ""},
            }
            return self._chunk({"tool_calls": [call]})
        if isinstance(chunk, ToolCallDelta):
            position = self.tool_index.setdefault(chunk.index, len(self.tool_index))
            return self._chunk({"tool_calls": [{"index": position, "function": {"arguments": chunk.arguments_delta}}]})
        if isinstance(chunk, Usage):
            self.usage = chunk.usage
            return b""
        if isinstance(chunk, Finish):
            return self.finish(chunk.reason)
        return b""

    def finish(self, reason: FinishReason) -> bytes:
        """The closing events for ``reason``: finish chunk, usage chunk, ``[DONE]`` (or the error
        chunk of a failed or aborted stream, :func:`~harness_gateway.errors.finish_error`)."""
        failed = finish_error(reason)
        if failed is not None:
            self.failure = failed
            return self.error(failed)
        out = self._chunk({}, finish_reason(reason))
        if self.include_usage:
            out += self._chunk(None, usage=usage_body(self.usage))
        return out + sse_data(b"[DONE]")

    def error(self, error: GatewayError) -> bytes:
        """An in-stream error chunk (``data: {"error": …}``), the last event of the body.

        No ``[DONE]`` follows: OpenAI closes the body after an in-band error without one (the
        trace of ``/work/shared/wire/PROTOCOLS.md`` §1.3), and so does LiteLLM's proxy; the
        ``openai`` SDK raises ``APIError`` on the error chunk and reads nothing after it, while a
        hand-rolled client that takes ``[DONE]`` for "the answer is complete" would be misled by
        one (the end of a partial answer must not look like the end of a whole one)."""
        return sse_data(_encode(error.openai_body()))


def chat_response(
    completion_id: str, model: str, message: Message, usage: TokenUsage | None, reason: FinishReason
) -> dict[str, Any]:
    """The non-streaming ``chat.completion`` object."""
    reply: dict[str, Any] = {"role": "assistant", "content": message.text or None}
    reasoning = "".join(b.text for b in message.content if isinstance(b, ReasoningBlock))
    if reasoning:
        reply["reasoning_content"] = reasoning
    calls = message.tool_calls
    if calls:
        reply["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
        ]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": reply, "finish_reason": finish_reason(reason), "logprobs": None}],
        "usage": usage_body(usage),
    }


class OpenAIChat(Dialect):
    """The Chat Completions dialect (this module's functions behind :class:`~harness_gateway.dialect.Dialect`)."""

    name = "openai"
    path = "/v1/chat/completions"
    id_prefix = "chatcmpl-"
    option_fields = MappingProxyType({"reasoning_effort": "reasoning_effort", "response_format": "response_format"})
    option_values = MappingProxyType({"reasoning_effort": OPENAI_EFFORTS})

    def parse(self, raw: Any, owner: str | None, upstream_model: str, *, target: Target | None = None) -> ParsedRequest:
        """:func:`parse_chat_request` (the route's plugin and model play no part here)."""
        return parse_chat_request(raw, target=target)

    def encoder(self, public_id: str, model: str, parsed: ParsedRequest) -> ChatStreamEncoder:
        """A :class:`ChatStreamEncoder` (a usage chunk with ``stream_options.include_usage``)."""
        return ChatStreamEncoder(public_id, model, parsed.include_usage)

    def response(
        self, public_id: str, parsed: ParsedRequest, message: Message, usage: TokenUsage | None, finish: Finish
    ) -> dict[str, Any]:
        """:func:`chat_response`."""
        return chat_response(public_id, parsed.model, message, usage, finish.reason)


OPENAI_CHAT: Final = OpenAIChat()
"""The Chat Completions dialect."""
