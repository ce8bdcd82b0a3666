"""Reading a client's JSON request body: typed field access whose errors name the field.

Both API dialects parse their bodies with :class:`Body`, so a bad request is always a 400
:class:`~harness_gateway.errors.GatewayError` whose message and ``param`` name the field at fault
(``messages[2].content[0].type``).

The rule for request fields is the core's (:mod:`harness_core.fields`, shared with ``harness run
-o``), applied to a body by :func:`pass_through` for every dialect
(docs/gateway.md#no-field-is-dropped-in-silence): a field either maps into the vocabulary, or
reaches a route that speaks the dialect's own wire unchanged (as ``provider_options`` of the
route's plugin), or is a 400 naming the field and the route that cannot take it. Only the
dialect's short ignore list (fields that change no output: ``user``, ``metadata`` …) is dropped
on a route of another wire. :func:`cache_mark` reads the ``cache_control`` convention both
dialects share; :func:`build_options` builds the vocabulary's options of every dialect, naming
the request field a refused value came from.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Final, TypeVar

import msgspec

from harness_core import CacheMark, FieldTarget, FileBlock, GenerateOptions, RefusedField
from harness_core import pass_through as harness_pass_through
from harness_gateway.errors import GatewayError

__all__ = [
    "ANTHROPIC_TOOL_NAME",
    "OPENAI_TOOL_NAME",
    "Body",
    "ParsedRequest",
    "Target",
    "bad_request",
    "build_options",
    "cache_mark",
    "decimal",
    "decode_json",
    "kind_of",
    "pass_through",
    "single_query",
    "tool_name",
    "tool_result_text",
]

T = TypeVar("T")

_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    list: "a list",
    dict: "an object",
}


class ParsedRequest(msgspec.Struct, kw_only=True, frozen=True):
    """A client request read into the harness vocabulary.

    ``model`` is the model as the client wrote it (``route/model`` or an alias); ``options`` has
    ``provider`` and ``model`` unset (the gateway resolves them). ``include_usage`` is OpenAI's
    ``stream_options.include_usage``. ``extras`` is what a dialect keeps for its own encoder and
    response builder (the Responses dialect's ``include``, ``store`` and echoed fields), else ``None``.
    """

    model: str
    options: Any
    stream: bool = False
    include_usage: bool = False
    extras: Any = None
    files: tuple[tuple[str, FileBlock], ...] = ()
    """The request's file blocks, each with the request field holding it, in request order (noted
    as it was parsed: :func:`~harness_gateway.files.noting_places`): a route's refusal of one
    names its field (:func:`~harness_gateway.files.located_refusal`)."""


Target = FieldTarget
"""The route a request goes to, as the field rule needs it (:class:`harness_core.FieldTarget`,
built by :meth:`harness_core.Harness.route_target`)."""


def pass_through(
    body: Body, mapped: Collection[str], ignored: Collection[str], *, wire: str | None, target: Target | None
) -> dict[str, Any]:
    """The fields of ``body`` outside ``mapped`` that reach ``target`` unchanged: the core's
    rule (:func:`harness_core.pass_through`) applied to a request object.

    Args:
        body: the request object (or a nested one: its paths name the field).
        mapped: the fields the dialect reads into the vocabulary.
        ignored: the dialect's ignore list: fields that change no output, dropped on a route of
            another wire (a route of ``wire`` receives them).
        wire: the dialect's wire (``"openai-chat"``, ``"anthropic-messages"``); ``None`` for
            fields addressed to the route's own plugin (``/v1/embeddings`` passes a target that
            takes no options: the embedding vocabulary has none, so every field outside both
            lists is a 400).
        target: the route; ``None`` when there is none (then nothing may pass).

    Returns the fields to merge into the request body (``{}`` when none).

    Raises:
        GatewayError: 400 naming the first such field (in body order) and the route, when the
            route cannot take it and it is not on the ignore list.
    """
    try:
        return harness_pass_through(body.value, mapped, ignored, wire=wire, target=target, path=body.path)
    except RefusedField as refused:
        raise bad_request(refused.field, refused.reason) from None


_TTLS: Final = {"5m": 300, "1h": 3600}


def cache_mark(block: Body) -> CacheMark | None:
    """The ``cache_control`` of ``block`` (``{"type": "ephemeral", "ttl": "5m" | "1h"}``) as a
    :class:`~harness_core.types.CacheMark`; ``None`` without one.

    Raises:
        GatewayError: 400 naming ``cache_control.type`` or ``cache_control.ttl`` for another
            value.
    """
    control = block.obj("cache_control")
    if control is None:
        return None
    kind = control.get("type", str, required=True)
    if kind != "ephemeral":
        raise bad_request(control.path("type"), f"expected ephemeral, got {kind!r}")
    ttl = control.get("ttl", str)
    if ttl is None:
        return CacheMark()
    if ttl not in _TTLS:
        raise bad_request(control.path("ttl"), f"expected 5m or 1h, got {ttl!r}")
    return CacheMark(_TTLS[ttl])


OPENAI_TOOL_NAME: Final = 64
"""The longest tool name OpenAI takes (Chat ``tools[].function.name``, Responses ``tools[].name``)."""
ANTHROPIC_TOOL_NAME: Final = 128
"""The longest tool name Anthropic takes (Messages ``tools[].name``)."""
_TOOL_NAME_CHARACTER: Final = re.compile(r"[^a-zA-Z0-9_-]")


def tool_name(holder: Body, longest: int) -> str:
    """The ``name`` of a tool definition ``holder`` (Chat's ``function`` object, a Responses or
    Messages tool), which must match ``^[a-zA-Z0-9_-]{1,longest}$``: the rule of both APIs,
    OpenAI's with :data:`OPENAI_TOOL_NAME`, Anthropic's with :data:`ANTHROPIC_TOOL_NAME`.

    Raises:
        GatewayError: 400 naming the field (``tools[1].function.name``) when it is missing, not
            a string, empty, too long or holds another character.
    """
    name: str = holder.get("name", str, required=True)
    rule = f"a tool name matches ^[a-zA-Z0-9_-]{{1,{longest}}}$"
    bad = _TOOL_NAME_CHARACTER.search(name)
    if not name:
        raise bad_request(holder.path("name"), f"must not be empty: {rule}")
    if len(name) > longest:
        raise bad_request(holder.path("name"), f"is {len(name)} characters long, more than {longest}: {rule}")
    if bad is not None:
        shown = f"{bad.group()!r} (U+{ord(bad.group()):04X})"
        raise bad_request(holder.path("name"), f"{name!r} holds {shown}, which is not allowed: {rule}")
    return name


TOOL_RESULT_SEPARATOR: Final = "\n"
"""What :func:`tool_result_text` puts between a tool result's text parts."""


def tool_result_text(texts: Iterable[str]) -> str:
    """The text of a tool result given as several text parts (a Messages ``tool_result``'s
    ``text`` blocks, a Responses ``function_call_output``'s ``input_text`` parts, a Chat ``tool``
    message's ``text`` parts), the one rule of every dialect.

    The vocabulary's :class:`~harness_core.ToolResultBlock` holds one text (and its files), so
    the parts are joined, each on its own line (``["taken", "more"]`` is ``"taken\nmore"``): a
    tool's words and lines stay apart, as the model would read them in separate blocks. Joined
    with nothing, ``"taken"`` and ``"more"`` reached the route as ``"takenmore"``.
    """
    return TOOL_RESULT_SEPARATOR.join(texts)


def bad_request(where: str, message: str) -> GatewayError:
    """A 400 naming the field ``where`` (``""`` for the whole body)."""
    text = f"{where}: {message}" if where else message
    return GatewayError(400, text, code="invalid_request", param=where or None)


_OPTION_FIELD: Final = re.compile(r"GenerateOptions\.(\w+)(\[\d+\])?((?:\.\w+)*)")
"""A vocabulary field a refusal names: ``GenerateOptions.max_tokens``, or an element's field
``GenerateOptions.tools[1].name`` (field, index, the rest)."""


def _spelled(found: re.Match[str], wire_names: Mapping[str, str]) -> str:
    """The request field of a refusal's vocabulary field (``found``: :data:`_OPTION_FIELD`), in
    the dialect's spelling: ``wire_names`` maps a field (``max_tokens``) or an element's field,
    written with ``[]`` for its index (``tools[].name`` -> ``tools[].function.name``)."""
    field, index, rest = found.groups()
    if index is None:
        return wire_names.get(field, field) + rest
    key = f"{field}[]{rest}"
    return wire_names.get(key, key).replace("[]", index, 1)


def build_options(fields: Mapping[str, Any], wire_names: Mapping[str, str] | None = None) -> GenerateOptions:
    """The :class:`~harness_core.GenerateOptions` of a dialect's parsed ``fields`` (``None``
    values left out), for every dialect.

    ``wire_names`` maps an options field to the request field it came from where the names
    differ (``max_tokens`` → ``max_output_tokens`` on Responses; an element's field with ``[]``
    for its index: ``tools[].name`` → ``tools[].function.name`` on Chat); the others keep their name.

    Raises:
        GatewayError: 400 naming the request field whose value the vocabulary refuses
            (``max_tokens: -1`` → ``param: "max_tokens"``; a tool name offered twice →
            ``tools[1].name``), or the whole body when none is named;
            400 naming ``tool_choice`` when it forces a tool that is not among the tools sent
            (:meth:`~harness_core.GenerateOptions.unoffered_tool_choice`), or requires a tool
            call (``required``; Messages' ``any``) with no tools sent.
    """
    try:
        options = GenerateOptions(**{key: value for key, value in fields.items() if value is not None})
    except (TypeError, ValueError) as exc:
        message = str(exc)
        found = _OPTION_FIELD.match(message)
        where = "" if found is None else _spelled(found, wire_names or {})
        raise bad_request(where, message[found.end() :].lstrip() if found else message) from None
    forced = options.unoffered_tool_choice()
    where = (wire_names or {}).get("tool_choice", "tool_choice")
    if forced is not None:
        offered = ", ".join(repr(tool.name) for tool in options.tools) or "none"
        raise bad_request(where, f"forces the tool {forced!r}, which is not among the tools sent ({offered})")
    if options.tool_choice == "required" and not options.tools:
        raise bad_request(where, "requires a tool call, but no tools were sent")
    return options


_LONE_SURROGATE: Final = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})")
"""A high-surrogate escape (``\\ud800``) not followed by a low one: no character (RFC 8259 §8.2)."""


def decode_json(raw: bytes) -> Any:
    """The JSON value of a request body.

    Raises:
        GatewayError: 400 saying the body is empty when it holds nothing but JSON whitespace (a
            ``POST`` without a body: msgspec would call it "truncated"); naming the byte offset
            when it is not JSON (a lone surrogate escape is
            named as such, with its offset); naming the field of a number too large for a float
            (``max_tokens: the number 1e400 is out of range …``), or saying it nests too
            deeply (msgspec's decoder stops near 1,000 levels, bounded by Python's recursion
            limit: a request nests a few levels, a schema a few dozen).
    """
    if not raw.strip(b" \t\r\n"):  # JSON's whitespace (RFC 8259 §2)
        raise bad_request("", "the request body is empty; expected a JSON object")
    try:
        try:
            return msgspec.json.decode(raw)
        except msgspec.ValidationError:  # the one a decode without a type raises: a number out of range
            marked = msgspec.json.Decoder(float_hook=_number).decode(raw)  # (a later fault is named below)
            where, number = _out_of_range(marked)
            raise bad_request(where, f"{number} is out of range: a JSON number must fit a 64-bit float") from None
    except msgspec.DecodeError as exc:
        lone = _LONE_SURROGATE.search(raw)  # msgspec calls it "truncated"
        if lone is not None:
            raise bad_request(
                "",
                f"the request body is not valid JSON: {lone.group().decode()} at byte {lone.start()} is a lone "
                "UTF-16 surrogate escape, not a character (escape both halves of a pair, or send UTF-8)",
            ) from None
        raise bad_request("", f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise bad_request("", "the request body nests too deeply (arrays and objects within each other)") from None


class _OutOfRange(msgspec.Struct, frozen=True):
    """A number :func:`_out_of_range` found too large for a float, as written (``1e400``)."""

    text: str


def _number(text: str) -> float | _OutOfRange:
    """A JSON float as a float, or marked :class:`_OutOfRange` when it has none (``1e400``)."""
    value = float(text)
    return _OutOfRange(text) if math.isinf(value) else value


def _out_of_range(tree: Any) -> tuple[str, str]:
    """The path (``max_tokens``, ``messages[0].content``) of the first number in ``tree`` (a body
    decoded with :func:`_number`) marked out of range, walked in body order (iteratively: no
    recursion limit), and how a message names it (``the number 1e400``, cut to 40 characters);
    ``("", "a number of the body")`` when none is left (a repeated key replaced it)."""
    stack: list[tuple[str, Any]] = [("", tree)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, _OutOfRange):
            return where, f"the number {value.text[:40]}"
        if isinstance(value, dict):
            stack += reversed([(f"{where}.{key}" if where else key, item) for key, item in value.items()])
        elif isinstance(value, list):
            stack += reversed([(f"{where}[{i}]", item) for i, item in enumerate(value)])
    return "", "a number of the body"


class Body:
    """A JSON object of the request at path ``where``, read field by field."""

    def __init__(self, value: Any, where: str = "") -> None:
        if not isinstance(value, dict):
            raise bad_request(where, f"expected an object, got {kind_of(value)}")
        self.value: dict[str, Any] = value
        self.where = where

    def path(self, key: str) -> str:
        """The display path of field ``key`` under this object."""
        return f"{self.where}.{key}" if self.where else key

    def get(self, key: str, kind: type[T] | tuple[type, ...], default: Any = None, *, required: bool = False) -> Any:
        """Field ``key`` checked against ``kind`` (``None`` counts as missing)."""
        value = self.value.get(key)
        if value is None:
            if required:
                raise bad_request(self.path(key), "this field is required")
            return default
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            return value
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            expected = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)
            raise bad_request(self.path(key), f"expected {expected}, got {kind_of(value)}")
        return value

    def number(self, key: str, low: float, high: float) -> float | None:
        """Number field ``key`` (``None`` when absent), which must lie in ``low``…``high``
        (inclusive: the range the dialect's own API accepts, e.g. OpenAI's ``temperature`` 0…2).

        Raises:
            GatewayError: 400 naming the field, for another type or a value outside the range.
        """
        value: float | None = self.get(key, float)
        if value is not None and not low <= value <= high:
            shown = value if isinstance(value, int) else f"{value:g}"  # an integer as written, not 1e+14
            raise bad_request(self.path(key), f"must be between {low:g} and {high:g}, got {shown}")
        return value

    def only(self, known: Collection[str], ignored: Collection[str] = (), *, what: str) -> None:
        """Refuse a field of this object outside ``known`` and ``ignored`` (the fields a dialect
        reads, and those it documents as dropped: they change no output), so none is dropped in
        silence; a ``null`` counts as absent (clients echo a reply's ``"refusal": null``).

        Raises:
            GatewayError: 400 naming the first such field (in body order) and ``what`` the object
                is (``user message``: "unknown field of the user message"), with the fields read.
        """
        for key, value in self.value.items():
            if value is not None and key not in known and key not in ignored:
                expected = ", ".join(sorted(known))
                raise bad_request(self.path(key), f"unknown field of the {what}; this gateway reads {expected}")

    def obj(self, key: str, *, required: bool = False) -> Body | None:
        """Field ``key`` as a nested :class:`Body` (``None`` when absent and not required)."""
        value = self.get(key, dict, required=required)
        return None if value is None else Body(value, self.path(key))

    def items(self, key: str, *, required: bool = False) -> list[tuple[str, Any]]:
        """The elements of list field ``key`` with their display paths."""
        values = self.get(key, list, [], required=required)
        return [(f"{self.path(key)}[{i}]", item) for i, item in enumerate(values)]


def decimal(text: str) -> int | None:
    """``text`` as a non-negative integer written in ASCII digits (a query parameter, a header, a
    cookie field: ``"20"``), else ``None``. ``str.isdigit`` alone also accepts other digits, which
    ``int`` refuses (``"²"``: a ``ValueError``, a 500) or reads (``"٢"``)."""
    return int(text) if text.isascii() and text.isdigit() else None


def single_query(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """A query string's parameters (``pairs``: Starlette's ``query_params.multi_items()``) by
    name, each given once: a repeated one (``?limit=1&limit=50``) is a 400 naming it, where a
    mapping would keep one of the values in silence."""
    query: dict[str, str] = {}
    for name, value in pairs:
        if name in query:
            raise GatewayError(
                400, f"{name[:40]}: given more than once in the query", code="invalid_value", param=name[:40]
            )
        query[name] = value
    return query


def kind_of(value: Any) -> str:
    """How an error message names the JSON type of ``value`` (``a string``, ``an object``, ``null`` …)."""
    if value is None:
        return "null"
    return _TYPE_NAMES.get(type(value), type(value).__name__)
