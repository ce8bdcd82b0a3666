"""OpenAI Responses (``POST /v1/responses``) ⇄ the harness vocabulary.

Wire format: https://platform.openai.com/docs/api-reference/responses (request and the
``response`` object) and https://platform.openai.com/docs/api-reference/responses-streaming (the
events; the reference order is in ``/work/shared/wire/PROTOCOLS.md`` §9).

Request: ``input`` (a string, or items: ``message`` with ``input_text`` / ``output_text`` /
``refusal`` / ``input_image`` / ``input_file`` parts, ``function_call``, ``function_call_output``
(``output`` a string, or ``input_text`` / ``input_image`` / ``input_file`` parts: the result's
text and files, :func:`_tool_output`) and ``reasoning``), ``instructions`` and ``system`` /
``developer`` messages (joined into ``options.system``), function ``tools`` (flat: ``{type: function, name, description,
parameters}``; any other tool type, a built-in such as ``web_search``, is a 400 naming it),
``tool_choice``, ``max_output_tokens``, ``temperature``, ``top_p``, ``reasoning.effort``,
``text.format`` (``text`` / ``json_object`` / ``json_schema``). ``include`` (only
``reasoning.encrypted_content``: another value is a 400 naming it), ``metadata``,
``parallel_tool_calls`` and ``truncation`` (``auto`` / ``disabled``) are checked and echoed in
the response object; the last two also reach a route of the Responses wire unchanged, and on
another wire a value other than the API's default (``true``, ``disabled``: so
``parallel_tool_calls: false`` or ``truncation: auto``) is a 400 naming it (:data:`DEFAULTED`).
Uploaded ``file_id`` s and ``item_reference`` s are 400s. Any other field
follows the field rule (:func:`~harness_gateway.request.pass_through`): unchanged to a route of
the Responses wire, dropped on another only when it is on :data:`IGNORED`, else a 400 naming it.

State: ``store`` (default true) keeps the finished response (:meth:`OpenAIResponses.conclude`,
rows in :mod:`harness_gateway.responses_store`); ``previous_response_id`` puts the stored chain
before the new input with each route's replay state restored for that route's plugin instance
only (:meth:`OpenAIResponses.resolve`, :func:`continued`); earlier ``instructions`` are not
carried over, as in the API.

Output: one output item per harness block, in block order: reasoning → a ``reasoning`` item
(its text as one ``summary_text`` part), text → a ``message`` item (one ``output_text`` part),
a tool call → a ``function_call`` item (``call_id`` is the harness tool call id). Finish
``stop`` / ``tool-calls`` → ``completed``; ``length`` → ``incomplete`` (``max_output_tokens``);
``content-filter`` → ``incomplete`` (``content_filter``). Usage: ``input_tokens`` (with
``input_tokens_details.cached_tokens``), ``output_tokens`` (with
``output_tokens_details.reasoning_tokens``), ``total_tokens``.

Stream: ``response.created``, ``response.in_progress``; per block ``response.output_item.added`` (+
``response.content_part.added`` / ``response.reasoning_summary_part.added``), its deltas
(``response.output_text.delta``, ``response.reasoning_summary_text.delta``,
``response.function_call_arguments.delta``), its ``.done`` events and ``response.output_item.done``
(sent with the next chunk's events, so a finish can still mark the item cut); then one of
``response.completed`` / ``response.incomplete`` carrying the whole response. An item cut by
``max_output_tokens`` or a content filter (the one ended last, or one still open), and an item
still open when the stream fails or ended right before its failure (a route's adapter closes
its open blocks before the failed finish: :meth:`harness_core.kit.BlockWriter.finish`), has
``status: "incomplete"``. Every event has ``event: <type>``,
the same ``type`` inside and an increasing ``sequence_number`` from 0. A failure after the stream
started, and a stream the gateway or its upstream aborted
(:func:`~harness_gateway.errors.finish_error`), is an ``error`` event (``code``, ``message``,
``param`` and the OpenAI error object under ``error``, which the ``openai`` SDK raises as
``APIError``) followed by ``response.failed`` (not ``response.incomplete``, whose
``incomplete_details.reason`` names a limit the model reached: ``max_output_tokens`` or
``content_filter``; an aborted response is one that failed, PROTOCOLS.md §9.2).

Reasoning replay (stateless): with ``include: ["reasoning.encrypted_content"]`` the route's
``finish.replay_state`` is handed to the client as the ``encrypted_content`` of the first
reasoning item (a reasoning item without summary is added when the reply has no reasoning block):
:data:`STATE_PREFIX` + base64url of ``{"source": <plugins.yaml key>, "state": <replay_state>}``.
A client sending the item back gets the state restored byte for byte on the rebuilt assistant
message, with that ``source``: the runtime replays it only to the same plugin instance
(docs/stream-obligations.md#9-replay-state). It is opaque, not encrypted: it holds what the
provider returned (signatures, the provider's own encrypted reasoning), never a secret. The
streamed ``response.output_item.done`` of a reasoning item comes before the route's finish, so
the state appears only in the final response object (``response.completed``'s ``response``).
"""

from __future__ import annotations

import base64
import binascii
import logging
import time
from types import MappingProxyType
from typing import Any, Final

import msgspec

from harness_core import (
    BlockEnd,
    BlockStart,
    FileBlock,
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
    mask_strings,
)
from harness_gateway.dialect import Dialect, Ending, StreamEncoder
from harness_gateway.errors import GatewayError, finish_error
from harness_gateway.files import file_block, image_detail
from harness_gateway.keys import KeyRecord, mask_keys
from harness_gateway.openai_chat import OPENAI_EFFORTS, reasoning_effort
from harness_gateway.request import (
    OPENAI_TOOL_NAME,
    Body,
    ParsedRequest,
    Target,
    bad_request,
    build_options,
    pass_through,
    tool_name,
    tool_result_text,
)
from harness_gateway.responses_store import StoredResponse, chain, owner_of, put
from harness_gateway.sse import sse_event
from harness_gateway.store import SqlStore

__all__ = [
    "ENCRYPTED_REASONING",
    "IGNORED",
    "MAPPED",
    "OPENAI_RESPONSES",
    "STATE_PREFIX",
    "WIRE",
    "OpenAIResponses",
    "ResponsesExtras",
    "ResponsesStreamEncoder",
    "continued",
    "parse_responses_request",
    "responses_response",
]

ENCRYPTED_REASONING: Final = "reasoning.encrypted_content"
"""The ``include`` value that makes reasoning items carry the route's replay state."""
STATE_PREFIX: Final = "hgw1."
"""How an ``encrypted_content`` this gateway wrote starts (then base64url JSON, module docstring)."""

logger = logging.getLogger(__name__)

_TRUNCATION: Final = ("auto", "disabled")
_encode = msgspec.json.Encoder().encode


class ResponsesExtras(msgspec.Struct, kw_only=True, frozen=True):
    """What the Responses dialect keeps from a request besides the options.

    ``owner`` is the plugins.yaml key serving the route (the ``source`` of the replay state handed
    out); ``include_state`` is ``include`` naming :data:`ENCRYPTED_REASONING`; ``echo`` holds the
    request fields the response object repeats (``instructions``, ``tools``, ``metadata`` …).
    """

    owner: str | None = None
    include_state: bool = False
    store: bool = True
    previous_response_id: str | None = None
    echo: dict[str, Any] = msgspec.field(default_factory=dict)
    input_items: list[Any] = msgspec.field(default_factory=list)
    """The request's ``input`` as items (a string is one user ``message`` item): what is stored."""
    account: str = ""
    """Who stores and reads the response (:func:`~harness_gateway.responses_store.owner_of`)."""


WIRE: Final = "openai-responses"
"""The wire of this dialect (:attr:`harness_core.LlmAdapter.wire` of ``harness-llm-openai``'s
``api: responses`` adapter): a route speaking it receives the unmapped fields unchanged."""

MAPPED: Final = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "max_output_tokens",
        "temperature",
        "top_p",
        "reasoning",
        "text",
        "include",
        "truncation",
        "metadata",
        "parallel_tool_calls",
        "store",
        "previous_response_id",
        "stream",
    }
)
"""The request fields this dialect reads (mapped into the vocabulary, or kept for the response)."""

IGNORED: Final = frozenset({"user", "safety_identifier", "prompt_cache_key", "stream_options"})
"""Fields that change no output, dropped on a route of another wire (the field rule,
docs/gateway.md#no-field-is-dropped-in-silence); a Responses route receives them."""


def parse_responses_request(raw: Any, owner: str | None = None, target: Target | None = None) -> ParsedRequest:
    """Read a Responses body into a :class:`ParsedRequest` (``extras``: :class:`ResponsesExtras`).

    A field outside :data:`MAPPED` reaches a ``target`` route of the Responses wire unchanged
    (``provider_options``); on another wire it is a 400 naming it, except :data:`IGNORED`
    (:func:`~harness_gateway.request.pass_through`).

    Raises a 400 :class:`GatewayError` naming the field at fault.
    """
    body = Body(raw)
    model = body.get("model", str, required=True)
    truncation = body.get("truncation", str, "disabled")  # values first: a bad one is named as such on any route
    if truncation not in _TRUNCATION:
        raise bad_request("truncation", f"expected auto or disabled, got {truncation[:40]!r}")
    parallel = body.get("parallel_tool_calls", bool, True)
    extra = {
        **pass_through(body, MAPPED, IGNORED, wire=WIRE, target=target),
        **_nested(body, target),
        **_defaulted(body, target),
    }
    system: list[str] = []
    instructions = body.get("instructions", str)
    if instructions:
        system.append(instructions)
    messages = _read_input(body, system)
    tools = [_read_tool(Body(item, where)) for where, item in body.items("tools")]
    reasoning = body.obj("reasoning")
    if reasoning is not None and not (target is not None and target.takes(WIRE)):
        _check_summary(reasoning)  # dropped on this wire: checked here, as the API would
    include = [_string(where, item) for where, item in body.items("include")]
    for where, value in zip((where for where, _ in body.items("include")), include, strict=True):
        if value != ENCRYPTED_REASONING:
            raise bad_request(
                where, f"include {value[:80]!r} is not supported by the gateway: only {ENCRYPTED_REASONING!r} is"
            )
    metadata = body.get("metadata", dict)
    options: dict[str, Any] = {
        "messages": messages,
        "system": "\n\n".join(system) if system else None,
        "tools": tools,
        "tool_choice": _tool_choice(body),
        "max_tokens": body.get("max_output_tokens", int),
        "temperature": body.number("temperature", 0, 2),  # OpenAI's ranges
        "top_p": body.number("top_p", 0, 1),
        "reasoning_effort": reasoning_effort(reasoning.get("effort", str)) if reasoning is not None else None,
        "response_format": _text_format(body),
        "provider_options": {target.options_key: extra} if extra and target is not None else None,
    }
    generate = build_options(options, {"max_tokens": "max_output_tokens", "system": "instructions"})
    echo = {
        "instructions": instructions,
        "metadata": metadata or {},
        "tools": body.get("tools", list, []),
        "tool_choice": body.get("tool_choice", (str, dict), "auto"),
        "temperature": options["temperature"],
        "top_p": options["top_p"],
        "max_output_tokens": body.get("max_output_tokens", int),
        "parallel_tool_calls": parallel,
        "reasoning": reasoning.value if reasoning is not None else None,
        "text": body.get("text", dict, {"format": {"type": "text"}}),
        "truncation": truncation,
    }
    given = body.get("input", (str, list), required=True)
    items = [_user_item(given)] if isinstance(given, str) else [_as_listed(item) for item in given]
    extras = ResponsesExtras(
        owner=owner,
        include_state=ENCRYPTED_REASONING in include,
        store=body.get("store", bool, True),
        previous_response_id=body.get("previous_response_id", str),
        echo=echo,
        input_items=items,
    )
    return ParsedRequest(model=model, options=generate, stream=body.get("stream", bool, False), extras=extras)


def _user_item(text: str) -> dict[str, Any]:
    """A string ``input`` as the one item it stands for."""
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _as_listed(item: Any) -> Any:
    """An input item (checked by :func:`_read_input`) as ``input_items`` lists it, the API's
    shape: an easy message (``{"role": "user", "content": "hi"}``) with its ``type`` and its text as
    one part (``input_text``; ``output_text`` for the assistant's); any other item unchanged."""
    if not isinstance(item, dict) or item.get("type", "message") != "message":
        return item
    content = item.get("content")
    if isinstance(content, str):
        part: dict[str, Any] = {"type": "input_text", "text": content}
        if item.get("role") == "assistant":
            part = {"type": "output_text", "text": content, "annotations": []}
        content = [part]
    return {**item, "type": "message", "content": content}


def continued(parsed: ParsedRequest, history: list[StoredResponse], account: str) -> ParsedRequest:
    """``parsed`` (a request with ``previous_response_id``) with the conversation of ``history``
    (the stored responses of the chain, oldest first) before its own input: each one's input items,
    then its output items with the route's replay state restored on them (``source``: the plugins.yaml
    key of the route that produced it, so the runtime replays it only to that instance,
    docs/stream-obligations.md#9-replay-state). As the API does, earlier ``instructions`` are not
    carried over; ``system`` / ``developer`` input items are."""
    extras: ResponsesExtras = parsed.extras
    items: list[Any] = []
    for record in history:
        carrier = f"rs_{record.id}_state"  # what _with_state added for a client that asked for the state
        output = [
            {key: value for key, value in item.items() if key != "encrypted_content"}
            for item in record.response["output"]
            if item.get("id") != carrier
        ]
        _with_state(output, record.id, ResponsesExtras(owner=record.source, include_state=True), record.replay_state)
        items += [*record.input_items, *output]
    items += extras.input_items
    system: list[str] = [extras.echo["instructions"]] if extras.echo.get("instructions") else []
    messages = _read_input(Body({"input": items}), system)
    options = msgspec.structs.replace(parsed.options, messages=messages, system="\n\n".join(system) or None)
    return msgspec.structs.replace(parsed, options=options, extras=msgspec.structs.replace(extras, account=account))


def _string(where: str, value: Any) -> str:
    if not isinstance(value, str):
        raise bad_request(where, "expected a string")
    return value


class _History:
    """The conversation being rebuilt from input items: consecutive assistant-side items
    (assistant messages, function calls, reasoning) make one assistant message."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.blocks: list[Any] = []
        self.replay: Any = None
        self.source: str | None = None

    def add(self, message: Message) -> None:
        self.flush()
        self.messages.append(message)

    def flush(self) -> None:
        if self.blocks or self.replay is not None:
            self.messages.append(
                Message(role="assistant", content=self.blocks, replay_state=self.replay, source=self.source)
            )
        self.blocks, self.replay, self.source = [], None, None


def _read_input(body: Body, system: list[str]) -> list[Message]:
    value = body.get("input", (str, list), required=True)
    if isinstance(value, str):
        if not value:  # OpenAI refuses it too
            raise bad_request("input", "must not be empty: a string with the prompt, or a list of input items")
        return [Message(role="user", content=[TextBlock(value)])]
    history = _History()
    for where, raw in body.items("input"):
        item = Body(raw, where)
        kind = item.get("type", str, "message")
        if kind == "message":
            _read_message(item, system, history)
        elif kind == "function_call":
            history.blocks.append(
                ToolCallBlock(
                    id=item.get("call_id", str, required=True),
                    name=item.get("name", str, required=True),
                    arguments=item.get("arguments", str, "{}") or "{}",
                )
            )
        elif kind == "function_call_output":
            history.add(Message(role="tool", content=[_tool_output(item)]))
        elif kind == "reasoning":
            _read_reasoning(item, history)
        elif kind == "item_reference":
            raise bad_request(item.path("type"), "item references are not supported: send the items themselves")
        else:
            raise bad_request(item.path("type"), f"unknown input item type {kind!r}")
    history.flush()
    return history.messages


def _read_message(item: Body, system: list[str], history: _History) -> None:
    role = item.get("role", str, required=True)
    # (an output item sent back carries its `id` and `status`: they change no output)
    item.only(("type", "role", "content"), ("id", "status"), what="message item")
    if role in ("system", "developer"):
        system.append(_parts_text(item, "content", required=True))
    elif role == "user":
        history.add(Message(role="user", content=_user_content(item)))
    elif role == "assistant":
        text = _parts_text(item, "content", required=True)
        if text:
            history.blocks.append(TextBlock(text))
    else:
        raise bad_request(item.path("role"), f"expected user, assistant, system or developer, got {role!r}")


_TEXT_PARTS: Final = ("input_text", "output_text", "text", "refusal")


def _parts_text(item: Body, key: str, *, required: bool = False) -> str:
    """A string field, or a list of text parts (``input_text``, ``output_text``, ``refusal``) joined."""
    value = item.get(key, (str, list), required=required)
    if value is None or isinstance(value, str):
        return value or ""
    texts: list[str] = []
    for where, raw in item.items(key):
        part = Body(raw, where)
        kind = part.get("type", str, required=True)
        if kind not in _TEXT_PARTS:
            raise bad_request(part.path("type"), f"only text parts are allowed here, got {kind!r}")
        texts.append(_part_text(part, kind))
    return "".join(texts)


def _part_text(part: Body, kind: str) -> str:
    """The text of a text part of type ``kind`` (one of :data:`_TEXT_PARTS`: a ``refusal``'s is its
    ``refusal``); a 400 naming the field when it is missing or not a string."""
    text: str = part.get("refusal" if kind == "refusal" else "text", str, required=True)
    return text


def _user_content(item: Body) -> list[Any]:
    """A user message's content: a string, or ``input_text`` / ``input_image`` / ``input_file`` parts."""
    value = item.get("content", (str, list), required=True)
    if isinstance(value, str):
        return [TextBlock(value)]
    blocks: list[Any] = []
    for where, raw in item.items("content"):
        part = Body(raw, where)
        kind = part.get("type", str, required=True)
        if kind in ("input_text", "text"):
            part.only(("type", "text"), what="text part")
            blocks.append(TextBlock(part.get("text", str, required=True)))
        elif kind in _FILE_PARTS:
            blocks.append(_file_part(part, kind))
        else:
            raise bad_request(part.path("type"), f"unknown content part type {kind!r}")
    return blocks


_FILE_PARTS: Final = ("input_image", "input_file")


def _file_part(part: Body, kind: str) -> FileBlock:
    """An ``input_image`` (``image_url``: an https or ``data:`` URL, ``detail``) or ``input_file``
    (``file_data``: a ``data:`` URL, or ``file_url``; ``filename``) part as a :class:`FileBlock`
    (PROTOCOLS.md §9.4, §10.1): the one reader of a user message's parts and of a
    ``function_call_output``'s.

    Raises:
        GatewayError: 400 naming the field at fault: an uploaded ``file_id``, a field the
            dialect does not read, a ``file_data`` that is not a ``data:`` URL, and what
            :func:`~harness_gateway.files.file_block` refuses.
    """
    if kind == "input_image":
        part.only(("type", "image_url", "file_id", "detail"), what="input_image part")
        if part.get("file_id", str) is not None:
            raise bad_request(part.path("file_id"), "uploaded file ids are not supported: send image_url")
        url = part.get("image_url", str, required=True)
        return file_block(part.path("image_url"), url=url, detail=image_detail(part))
    part.only(("type", "file_data", "file_url", "file_id", "filename"), what="input_file part")
    if part.get("file_id", str) is not None:
        raise bad_request(part.path("file_id"), "uploaded file ids are not supported: send file_data")
    filename = part.get("filename", str)
    url = part.get("file_url", str)
    if url is not None:
        return file_block(part.path("file_url"), url=url, filename=filename)
    data = part.get("file_data", str, required=True)
    if not data.startswith("data:"):
        raise bad_request(part.path("file_data"), "expected a data: URL (data:<media type>;base64,<data>)")
    return file_block(part.path("file_data"), url=data, filename=filename)


def _tool_output(item: Body) -> ToolResultBlock:
    """A ``function_call_output`` item: ``output`` a string, or a list of ``input_text``,
    ``input_image`` and ``input_file`` parts (the API's ``ResponseFunctionCallOutputItemList``;
    PROTOCOLS.md §9.4): the texts, one a line (:func:`~harness_gateway.request.tool_result_text`),
    become the result's content, the media its ``files`` in
    order, read as a user message's are (:func:`_file_part`). The other text parts a message
    takes (``output_text``, ``refusal``) are read as text, as before. The vocabulary's tool
    result holds one text and its files, so a route sends the text first, then the files.

    Raises:
        GatewayError: 400 naming the field at fault (``input[3].output[1].type`` for another
            part type, ``input[3].output[1].image_url`` for a malformed image …).
    """
    call_id = item.get("call_id", str, required=True)
    output = item.get("output", (str, list), required=True)
    if isinstance(output, str):
        return ToolResultBlock(tool_call_id=call_id, content=output)
    texts: list[str] = []
    files: list[FileBlock] = []
    for where, raw in item.items("output"):
        part = Body(raw, where)
        kind = part.get("type", str, required=True)
        if kind in _FILE_PARTS:
            files.append(_file_part(part, kind))
        elif kind in _TEXT_PARTS:
            texts.append(_part_text(part, kind))
        else:
            raise bad_request(
                part.path("type"),
                f"a function_call_output holds input_text, input_image and input_file parts only, got {kind[:40]!r}",
            )
    return ToolResultBlock(tool_call_id=call_id, content=tool_result_text(texts), files=tuple(files))


def _read_reasoning(item: Body, history: _History) -> None:
    """A ``reasoning`` item: a reasoning block (its summary texts joined), and the route's replay
    state when its ``encrypted_content`` is one this gateway handed out."""
    texts = [Body(raw, where).get("text", str, required=True) for where, raw in item.items("summary")]
    encrypted = item.get("encrypted_content", str)
    carrier = False
    if encrypted is not None:
        state = _unpack_state(item.path("encrypted_content"), encrypted)
        if history.replay is None:
            history.replay, history.source = state.get("state"), state.get("source")
        carrier = bool(state.get("carrier"))
    if not carrier:
        history.blocks.append(ReasoningBlock("".join(texts), signed=encrypted is not None))


def pack_state(source: str | None, state: Any, *, carrier: bool = False) -> str:
    """The ``encrypted_content`` carrying a route's replay ``state`` (module docstring)."""
    payload: dict[str, Any] = {"source": source, "state": state}
    if carrier:
        payload["carrier"] = True
    return STATE_PREFIX + base64.urlsafe_b64encode(_encode(payload)).decode()


def _unpack_state(where: str, text: str) -> dict[str, Any]:
    if not text.startswith(STATE_PREFIX):
        raise bad_request(where, "this encrypted_content was not issued by this gateway")
    try:
        state = msgspec.json.decode(base64.urlsafe_b64decode(text[len(STATE_PREFIX) :].encode()))
    except (binascii.Error, ValueError):
        raise bad_request(where, "this encrypted_content is damaged") from None
    if not isinstance(state, dict):
        raise bad_request(where, "this encrypted_content is damaged")
    return state


def _read_tool(tool: Body) -> ToolSpec:
    """A ``tools`` entry: ``{type: function, name, description, parameters, strict}``
    (https://platform.openai.com/docs/api-reference/responses/create#responses-create-tools); a
    built-in tool, a name outside OpenAI's rule (:func:`~harness_gateway.request.tool_name`), or a
    field the dialect does not read, is a 400 naming it. ``strict`` absent is
    ``false`` here (the API's default is true, which refuses ordinary schemas; docs/gateway.md). A
    missing ``type`` is a 400 naming it, as the API answers."""
    kind = tool.get("type", str, required=True)
    if kind != "function":
        raise bad_request(
            tool.path("type"), f"built-in tool {kind!r} is not supported by the gateway: only function tools are"
        )
    tool.only(_TOOL_FIELDS, what="function tool")
    return ToolSpec(
        name=tool_name(tool, OPENAI_TOOL_NAME),
        description=tool.get("description", str, "") or "",
        parameters=tool.get("parameters", dict) or {"type": "object", "properties": {}},
        strict=tool.get("strict", bool, False) or False,
    )


_TOOL_FIELDS: Final = frozenset({"type", "name", "description", "parameters", "strict"})


def _tool_choice(body: Body) -> Any:
    choice = body.get("tool_choice", (str, dict))
    if choice is None:
        return None
    if isinstance(choice, str):
        if choice not in ("auto", "none", "required"):
            raise bad_request("tool_choice", f"expected auto, none, required or a function, got {choice!r}")
        return choice
    named = Body(choice, "tool_choice")
    kind = named.get("type", str, required=True)
    if kind != "function":
        raise bad_request(named.path("type"), f"only function tool choices are supported, got {kind!r}")
    return NamedToolChoice(named.get("name", str, required=True))


DEFAULTED: Final = {"parallel_tool_calls": True, "truncation": "disabled"}
"""Fields this dialect reads for its echo that also change what a route does, with the API's
default: a route of the Responses wire receives them unchanged; on another wire only the default
(or ``null``) is accepted, any other value is a 400 naming the field (the field rule)."""


def _defaulted(body: Body, target: Target | None) -> dict[str, Any]:
    """The :data:`DEFAULTED` fields of ``body`` for a route of this wire; on another wire ``{}``,
    or a 400 naming the first one given a value other than its default."""
    given = {name: body.value[name] for name in DEFAULTED if body.value.get(name) is not None}
    if target is not None and target.takes(WIRE):
        return given
    asked = {name: value for name, value in given.items() if value != DEFAULTED[name]}
    return pass_through(Body(asked), (), (), wire=WIRE, target=target)


NESTED: Final = {"text": (("format",), ()), "reasoning": (("effort",), ("summary", "generate_summary"))}
"""``(read, ignored)`` fields of ``text`` and ``reasoning``: any field beyond those read
(``text.verbosity``, ``reasoning.summary`` …) sends the object whole, unchanged, to a route of the
Responses wire; on another wire one outside ``ignored`` is a 400 naming it (the field rule), and
``reasoning.summary`` is dropped there (every reasoning block becomes a summary item anyway)."""


def _nested(body: Body, target: Target | None) -> dict[str, Any]:
    """``text`` / ``reasoning`` whole, to pass to a route of this wire, when they hold a field
    beyond those :data:`NESTED` reads (:func:`~harness_gateway.request.pass_through`)."""
    passed: dict[str, Any] = {}
    for name, (read, ignored) in NESTED.items():
        part = body.obj(name)
        if part is not None and pass_through(part, read, ignored, wire=WIRE, target=target):
            passed[name] = part.value
    return passed


SUMMARIES: Final = ("auto", "concise", "detailed")
"""The values of ``reasoning.summary`` (and the deprecated ``generate_summary``),
https://platform.openai.com/docs/api-reference/responses/create#responses-create-reasoning."""


def _check_summary(reasoning: Body) -> None:
    """A 400 naming ``reasoning.summary`` / ``generate_summary`` when it is not one of
    :data:`SUMMARIES` (on a route of another wire, which drops it: a typo still fails loudly)."""
    for name in ("summary", "generate_summary"):
        value = reasoning.get(name, str)
        if value is not None and value not in SUMMARIES:
            raise bad_request(reasoning.path(name), f"expected one of {', '.join(SUMMARIES)}, got {value[:40]!r}")


_FORMAT_FIELDS: Final = {
    "text": frozenset({"type"}),
    "json_object": frozenset({"type"}),
    "json_schema": frozenset({"type", "name", "schema", "strict", "description"}),
}


def _text_format(body: Body) -> JsonObjectFormat | JsonSchemaFormat | None:
    """``text.format``: ``text`` (none), ``json_object``, or ``json_schema`` (name, schema,
    strict, description: https://platform.openai.com/docs/api-reference/responses/create#responses-create-text);
    another type, or a field of it the dialect does not read, is a 400 naming it."""
    text = body.obj("text")
    form = text.obj("format") if text is not None else None
    if form is None:
        return None
    kind = form.get("type", str, required=True)
    fields = _FORMAT_FIELDS.get(kind)
    if fields is None:
        raise bad_request(form.path("type"), f"expected text, json_object or json_schema, got {kind!r}")
    form.only(fields, what=f"{kind} format")
    if kind == "text":
        return None
    if kind == "json_object":
        return JsonObjectFormat()
    try:
        return JsonSchemaFormat(
            name=form.get("name", str, required=True),
            schema=form.get("schema", dict, {"type": "object"}),
            strict=form.get("strict", bool, False) or False,
            description=form.get("description", str),
        )
    except ValueError as exc:
        raise bad_request(form.path("name"), str(exc)) from None


# ---------------------------------------------------------------------- output


def usage_body(usage: TokenUsage | None) -> dict[str, Any]:
    """The Responses ``usage`` object (cached input and reasoning output tokens in their details)."""
    given = (usage.input_tokens if usage else 0) or 0
    produced = (usage.output_tokens if usage else 0) or 0
    return {
        "input_tokens": given,
        "input_tokens_details": {"cached_tokens": (usage.cache_read_tokens if usage else 0) or 0},
        "output_tokens": produced,
        "output_tokens_details": {"reasoning_tokens": (usage.reasoning_tokens if usage else 0) or 0},
        "total_tokens": given + produced,
    }


def _status(reason: FinishReason) -> tuple[str, dict[str, str] | None]:
    """``status`` and ``incomplete_details`` for a finish that did not fail."""
    if reason.kind == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    if reason.kind == "content-filter":
        return "incomplete", {"reason": "content_filter"}
    return "completed", None


def _text_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": content}


def _reasoning_item(item_id: str, text: str) -> dict[str, Any]:
    summary = [{"type": "summary_text", "text": text}] if text else []
    return {"type": "reasoning", "id": item_id, "summary": summary}


def _call_item(item_id: str, call_id: str, name: str, arguments: str, status: str = "completed") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def _with_state(output: list[dict[str, Any]], public_id: str, extras: ResponsesExtras, state: Any) -> None:
    """Hand the route's replay ``state`` to the client on the first reasoning item (added when none)."""
    if state is None or not extras.include_state:
        return
    for item in output:
        if item["type"] == "reasoning":
            item["encrypted_content"] = pack_state(extras.owner, state)
            return
    carrier = _reasoning_item(f"rs_{public_id}_state", "")
    carrier["encrypted_content"] = pack_state(extras.owner, state, carrier=True)
    output.insert(0, carrier)


def response_object(
    public_id: str,
    parsed: ParsedRequest,
    created: int,
    status: str,
    output: list[dict[str, Any]],
    usage: TokenUsage | None = None,
    *,
    error: dict[str, Any] | None = None,
    incomplete: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The ``response`` object: ``status`` ``in_progress`` / ``completed`` / ``incomplete`` /
    ``failed``, the request's echoed fields, ``output`` and (once known) ``usage``."""
    extras: ResponsesExtras = parsed.extras
    return {
        "id": public_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "model": parsed.model,
        "output": output,
        "usage": usage_body(usage) if status != "in_progress" else None,
        "error": error,
        "incomplete_details": incomplete,
        "previous_response_id": extras.previous_response_id,
        "store": extras.store,
        **extras.echo,
    }


def responses_response(
    public_id: str, parsed: ParsedRequest, message: Message, usage: TokenUsage | None, finish: Finish
) -> dict[str, Any]:
    """The non-streaming ``response`` object of a generation that did not fail."""
    output: list[dict[str, Any]] = []
    for index, block in enumerate(message.content):
        if isinstance(block, ReasoningBlock):
            output.append(_reasoning_item(f"rs_{public_id}_{index}", block.text))
        elif isinstance(block, TextBlock):
            output.append(_text_item(f"msg_{public_id}_{index}", block.text))
        else:
            assert isinstance(block, ToolCallBlock), "an assistant reply holds text, reasoning and tool calls only"
            output.append(_call_item(f"fc_{public_id}_{index}", block.id, block.name, block.arguments))
    status, incomplete = _status(finish.reason)
    if status == "incomplete" and output:
        output[-1]["status"] = "incomplete"  # the item the limit cut (as the stream marks it)
    _with_state(output, public_id, parsed.extras, finish.replay_state)
    return response_object(public_id, parsed, int(time.time()), status, output, usage, incomplete=incomplete)


class _Open:
    """A block being streamed as an output item."""

    def __init__(self, kind: str, item_id: str, position: int, call_id: str = "", name: str = "") -> None:
        self.kind = kind
        self.item_id = item_id
        self.position = position
        self.call_id = call_id
        self.name = name
        self.parts: list[str] = []


class ResponsesStreamEncoder:
    """Turns harness stream chunks into the Responses event sequence (module docstring)."""

    def __init__(self, public_id: str, parsed: ParsedRequest) -> None:
        self.id = public_id
        self.parsed = parsed
        self.created = int(time.time())
        self.sequence = 0
        self.usage: TokenUsage | None = None
        self.output: list[dict[str, Any]] = []
        self.open: dict[int, _Open] = {}
        self.failure: GatewayError | None = None
        self._final: dict[str, Any] | None = None
        self._ended: tuple[_Open, str, dict[str, Any]] | None = None
        """The block ended last, whose ``.done`` events wait for the next chunk: a ``length`` or
        ``content-filter`` finish right after it marks its item ``incomplete`` (it was cut)."""
        self._closing: list[tuple[_Open, str, dict[str, Any]]] | None = None  # (:meth:`_last_items`)

    def event(self, kind: str, body: dict[str, Any]) -> bytes:
        """One event ``kind`` with ``type`` and the next ``sequence_number``."""
        payload = {"type": kind, "sequence_number": self.sequence, **body}
        self.sequence += 1
        return sse_event(kind, _encode(payload))

    def _response(self, status: str, **fields: Any) -> dict[str, Any]:
        output = self.output if status != "in_progress" else []
        usage = self.usage if status != "in_progress" else None
        return {"response": response_object(self.id, self.parsed, self.created, status, output, usage, **fields)}

    def start(self) -> bytes:
        """``response.created`` and ``response.in_progress`` (status ``in_progress``, no output yet)."""
        return self.event("response.created", self._response("in_progress")) + self.event(
            "response.in_progress", self._response("in_progress")
        )

    def feed(self, chunk: StreamChunk) -> bytes:
        """The SSE bytes for ``chunk`` (``b""`` when it adds nothing on this wire). The ``.done``
        events of a block come with the next chunk that has events of its own (a usage chunk
        has none), so a finish can still mark it cut."""
        if self._ended is not None and not isinstance(chunk, Usage | Finish):
            return self._done(*self._release()) + self.feed(chunk)
        if isinstance(chunk, TextDelta):
            return self._delta(chunk.index, chunk.text, "response.output_text.delta", content_index=0)
        if isinstance(chunk, ReasoningDelta):
            return self._delta(chunk.index, chunk.text, "response.reasoning_summary_text.delta", summary_index=0)
        if isinstance(chunk, ToolCallDelta):
            return self._delta(chunk.index, chunk.arguments_delta, "response.function_call_arguments.delta")
        if isinstance(chunk, BlockStart):
            return self._start(chunk)
        if isinstance(chunk, BlockEnd):
            self._ended = self._close(chunk.index, "completed")
            return b""
        if isinstance(chunk, Usage):
            self.usage = chunk.usage
            return b""
        if isinstance(chunk, Finish):
            return self.finish(chunk)
        return b""

    def _delta(self, index: int, text: str, kind: str, **where: int) -> bytes:
        block = self.open[index]
        block.parts.append(text)
        return self.event(kind, {"item_id": block.item_id, "output_index": block.position, **where, "delta": text})

    def _start(self, chunk: BlockStart) -> bytes:
        position = len(self.output) + len(self.open)
        if chunk.block_type == "text":
            block = _Open("text", f"msg_{self.id}_{chunk.index}", position)
            item = _text_item(block.item_id, "", "in_progress")
            item["content"] = []
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            follow = ("response.content_part.added", {"content_index": 0, "part": part})
        elif chunk.block_type == "reasoning":
            block = _Open("reasoning", f"rs_{self.id}_{chunk.index}", position)
            item = _reasoning_item(block.item_id, "")
            follow = (
                "response.reasoning_summary_part.added",
                {"summary_index": 0, "part": {"type": "summary_text", "text": ""}},
            )
        else:
            block = _Open("call", f"fc_{self.id}_{chunk.index}", position, chunk.id or "", chunk.name or "")
            item = _call_item(block.item_id, block.call_id, block.name, "", "in_progress")
            follow = None
        self.open[chunk.index] = block
        out = self.event("response.output_item.added", {"output_index": position, "item": item})
        if follow is not None:
            kind, body = follow
            out += self.event(kind, {"item_id": block.item_id, "output_index": position, **body})
        return out

    def _release(self) -> tuple[_Open, str, dict[str, Any]]:
        ended, self._ended = self._ended, None
        assert ended is not None, "called with a block ended"
        return ended

    def _close(self, index: int, status: str) -> tuple[_Open, str, dict[str, Any]]:
        """Close the open block ``index``: its output item (``status`` ``completed`` or
        ``incomplete``) joins :attr:`output`; the block, its text and the item."""
        block = self.open.pop(index)
        text = "".join(block.parts)
        if block.kind == "text":
            item = _text_item(block.item_id, text, status)
        elif block.kind == "reasoning":
            item = _reasoning_item(block.item_id, text)
            if status != "completed":  # (a reasoning item's status is optional: set when it was cut)
                item["status"] = status
        else:
            item = _call_item(block.item_id, block.call_id, block.name, text or "{}", status)
        self.output.append(item)
        return block, text, item

    def _done(self, block: _Open, text: str, item: dict[str, Any]) -> bytes:
        """The ``.done`` events of a closed block and ``response.output_item.done``."""
        where = {"item_id": block.item_id, "output_index": block.position}
        if block.kind == "text":
            out = self.event("response.output_text.done", {**where, "content_index": 0, "text": text})
            out += self.event("response.content_part.done", {**where, "content_index": 0, "part": item["content"][0]})
        elif block.kind == "reasoning":
            out = self.event("response.reasoning_summary_text.done", {**where, "summary_index": 0, "text": text})
            part = {"type": "summary_text", "text": text}
            out += self.event("response.reasoning_summary_part.done", {**where, "summary_index": 0, "part": part})
        else:
            out = self.event("response.function_call_arguments.done", {**where, "arguments": item["arguments"]})
        return out + self.event("response.output_item.done", {"output_index": block.position, "item": item})

    def finish(self, finish: Finish) -> bytes:
        """The terminal events: ``response.completed`` / ``response.incomplete`` with the whole
        response, or the error and ``response.failed`` of a failed or aborted stream
        (:func:`~harness_gateway.errors.finish_error`), after the ``.done`` events of the blocks
        :meth:`_last_items` closes."""
        out = b"".join(self._done(*closed) for closed in self._last_items(finish))
        body = self.final(finish)
        failed = finish_error(finish.reason)
        if failed is not None:
            self.failure = failed
            return out + self._error_events(failed, body)
        kind = "response.completed" if body["status"] == "completed" else "response.incomplete"
        return out + self.event(kind, {"response": body})

    def _last_items(self, finish: Finish) -> list[tuple[_Open, str, dict[str, Any]]]:
        """The blocks whose ``.done`` events are still to be sent at ``finish``, in order (the
        one ended last, then those still open, closed now), decided once (:meth:`final` may ask
        first): open ones become ``incomplete`` items when the stream failed or was cut (a
        ``length`` or ``content-filter`` finish); a failed or cut stream with none open marks the
        item ended last, right before the finish, ``incomplete``: the block the limit cut, or the
        one the route's adapter closed as it failed (OpenAI's output item ``status``:
        ``in_progress`` / ``completed`` / ``incomplete``)."""
        if self._closing is None:
            failed = finish_error(finish.reason) is not None
            cut = not failed and _status(finish.reason)[0] == "incomplete"
            closing = [self._release()] if self._ended is not None else []
            if closing and (cut or failed) and not self.open:
                closing[0][2]["status"] = "incomplete"  # the item the limit cut, or the failure
            status = "incomplete" if failed or cut else "completed"
            closing += [self._close(index, status) for index in sorted(self.open)]
            self._closing = closing
        return self._closing

    def final(self, finish: Finish) -> dict[str, Any]:
        """The ``response`` object the terminal event of ``finish`` carries: ``completed`` /
        ``incomplete``, or ``failed`` with its error for a failed or aborted stream
        (:func:`~harness_gateway.errors.finish_error`), with the usage fed so far (the relay feeds
        a failed stream the usage its key is charged before its finish). Built once, so what
        :meth:`OpenAIResponses.conclude` stores (and marks) is what is sent."""
        if self._final is None:
            self._last_items(finish)  # every item closed, the cut one marked
            failed = finish_error(finish.reason)
            if failed is not None:
                self._final = self._failed(failed)
            else:
                _with_state(self.output, self.id, self.parsed.extras, finish.replay_state)
                status, incomplete = _status(finish.reason)
                self._final = self._response(status, incomplete=incomplete)["response"]
        return self._final

    def _failed(self, error: GatewayError) -> dict[str, Any]:
        """The ``failed`` response object of ``error``: the items and usage so far, and the error."""
        shown = {"code": error.code or "server_error", "message": error.message}
        failed: dict[str, Any] = self._response("failed", error=shown)["response"]
        return failed

    def error(self, error: GatewayError) -> bytes:
        """An ``error`` event (``code``, ``message``, ``param`` and the OpenAI error object) and
        ``response.failed`` (:meth:`_failed`): the end of a stream that failed without its finish
        (before any output, once a keep-alive went out)."""
        return self._error_events(error, self._failed(error))

    def _error_events(self, error: GatewayError, response: dict[str, Any]) -> bytes:
        """The ``error`` event of ``error`` and the ``response.failed`` event carrying ``response``."""
        detail = {"code": error.code, "message": error.message, "param": error.param}
        out = self.event("error", {**detail, **error.openai_body()})  # (first: its sequence number is the lower)
        return out + self.event("response.failed", {"response": response})


class OpenAIResponses(Dialect):
    """The Responses dialect (this module's functions behind :class:`~harness_gateway.dialect.Dialect`)."""

    name = "responses"
    path = "/v1/responses"
    id_prefix = "resp_"
    messages_field = "input"
    option_fields = MappingProxyType({"reasoning_effort": "reasoning.effort", "response_format": "text.format"})
    option_values = MappingProxyType({"reasoning_effort": OPENAI_EFFORTS})

    def parse(self, raw: Any, owner: str | None, upstream_model: str, *, target: Target | None = None) -> ParsedRequest:
        """:func:`parse_responses_request` (``owner`` becomes the ``source`` of handed-out replay
        state; ``target`` decides which unmapped fields pass on)."""
        return parse_responses_request(raw, owner, target)

    def encoder(self, public_id: str, model: str, parsed: ParsedRequest) -> ResponsesStreamEncoder:
        """A :class:`ResponsesStreamEncoder`."""
        return ResponsesStreamEncoder(public_id, parsed)

    def response(
        self, public_id: str, parsed: ParsedRequest, message: Message, usage: TokenUsage | None, finish: Finish
    ) -> dict[str, Any]:
        """:func:`responses_response`."""
        return responses_response(public_id, parsed, message, usage, finish)

    async def resolve(self, store: SqlStore, who: KeyRecord | bool | None, parsed: ParsedRequest) -> ParsedRequest:
        """With ``previous_response_id``, the stored conversation before the new input
        (:func:`continued`); every request learns who stores its response (``extras.account``).

        Raises:
            GatewayError: 404 ``previous_response_not_found`` (``param`` ``previous_response_id``)
                when that response, or one before it, is not stored for this caller (never stored,
                ``store: false``, deleted, expired, or another key's); 400 naming
                ``previous_response_id`` when that response failed (its stream failed or was
                aborted: stored as the client saw it, it cannot be continued); 503 while the store
                is away.
        """
        extras: ResponsesExtras = parsed.extras
        account = owner_of(who)
        if extras.previous_response_id is None:
            return msgspec.structs.replace(parsed, extras=msgspec.structs.replace(extras, account=account))
        history = await chain(store, extras.previous_response_id, None if who is True else account)
        last = history[-1]
        if last.response.get("status") == "failed":  # (kept as the client saw it: its output is partial)
            cure = (
                f"continue from the response before it ({last.previous_id!r})"
                if last.previous_id
                else "send the conversation again without previous_response_id"
            )
            raise bad_request("previous_response_id", f"response {last.id!r} failed and cannot be continued: {cure}")
        return continued(parsed, history, account)

    async def conclude(self, ending: Ending, result: dict[str, Any] | StreamEncoder) -> None:
        """Store the response when the request said ``store: true``: one that completed or came
        out incomplete, and a stream that failed or was aborted after it began (its
        ``response.failed``: status ``failed``, the error, the items and the usage so far, as the
        client saw them; a collected failure is an HTTP error, with no response to keep): the
        Response object, the input items, the serving route, model and ``source`` and the route's
        replay state, owned by the caller (:mod:`harness_gateway.responses_store`). What is stored
        holds no secret of the gateway's: the configuration's secrets (``ending.redact``) and
        gateway keys (:func:`mask_keys`) in the input items and the Response are masked (a later
        ``previous_response_id`` replays them masked, as the console shows them); the answer the
        client gets is as it was. When the store refuses it (503), the response still goes out,
        with ``store: false`` and the fault logged: its id cannot be used later."""
        extras: ResponsesExtras = ending.parsed.extras
        if not extras.store:
            return
        if isinstance(result, ResponsesStreamEncoder):
            body = result.final(ending.finish)
        elif ending.finish.reason.kind in ("error", "aborted"):
            return  # (a collected failure: its answer is an HTTP error, no Response object)
        else:
            assert isinstance(result, dict), "the relay passes the response body or this dialect's encoder"
            body = result
        now = time.time()
        redact = ending.redact

        def mask(text: str) -> str:
            return mask_keys(redact(text))

        record = StoredResponse(
            id=body["id"], owner=extras.account, previous_id=extras.previous_response_id,
            route=ending.route, model=ending.model, source=ending.source,
            replay_state=ending.finish.replay_state, input_items=mask_strings(extras.input_items, mask),
            response=mask_strings(body, mask), created_at=now, expires_at=now + ending.retention,
        )  # fmt: skip
        try:
            await put(ending.store, record, now=now)
        except GatewayError as error:
            logger.error("response %s could not be stored (answered with store: false): %s", body["id"], error)
            body["store"] = False


OPENAI_RESPONSES: Final = OpenAIResponses()
"""The Responses dialect."""
