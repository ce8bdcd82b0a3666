"""Structured output from Python types: the JSON schema for a type, and decoding a reply into it.

Used by :meth:`harness_core.Harness.generate_object`. The schema comes from
:func:`msgspec.json.schema` (JSON Schema draft 2020-12; https://jcristharif.com/msgspec/jsonschema.html)
for any type msgspec can decode: a :class:`msgspec.Struct`, a dataclass, a ``TypedDict``, or a
container of them. Providers want an object at the root, so a root ``$ref`` is inlined (its
``$defs`` kept only when something still refers to them). :func:`response_format_for` also closes
every object (``additionalProperties: false``), which strict modes and Anthropic's structured
outputs require; decoding ignores extra fields anyway, so nothing valid is lost. (OpenAI's strict
mode also wants every property required: give fields with defaults only when ``strict=False``.)

Decoding is strict msgspec decoding of the reply text. A reply that is not JSON, or JSON that does
not match the type, raises :class:`~harness_core.errors.InvalidOutputError` (code
``INVALID_OUTPUT``) naming the JSON path of the first mismatch and keeping the raw text.
"""

from __future__ import annotations

import re
from typing import Any, Final, TypeVar

import msgspec

from harness_core.errors import InvalidOutputError
from harness_core.types import JsonSchemaFormat

__all__ = ["decode_output", "response_format_for", "schema_for", "schema_name"]

T = TypeVar("T")

_PATH: Final = re.compile(r" - at `(\$[^`]*)`$")
_FENCE: Final = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\n(.*)\n```\Z", re.DOTALL)
_NAME_CHARS: Final = re.compile(r"[^A-Za-z0-9_-]+")


def schema_for(type_: Any) -> dict[str, Any]:
    """The JSON Schema of ``type_`` with its root ``$ref`` inlined (see the module docstring).

    Raises:
        TypeError: msgspec cannot describe ``type_`` (e.g. an arbitrary class).
    """
    schema: dict[str, Any] = msgspec.json.schema(type_)
    ref = schema.get("$ref")
    definitions: dict[str, Any] = schema.get("$defs", {})
    if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
        return schema
    name = ref.removeprefix("#/$defs/")
    root = dict(definitions[name])
    encoded = msgspec.json.encode(root)
    if b'"$ref"' in encoded:  # nested types still need their definitions; a recursive one its own
        recursive = f'"{ref}"'.encode() in encoded
        root["$defs"] = definitions if recursive else {k: v for k, v in definitions.items() if k != name}
    return root


def schema_name(type_: Any) -> str:
    """A structured-output schema name for ``type_``: its ``__name__`` restricted to
    ``A-Z a-z 0-9 _ -`` and 64 characters (``"output"`` when nothing is left)."""
    name = _NAME_CHARS.sub("_", str(getattr(type_, "__name__", ""))).strip("_")[:64]
    return name or "output"


def response_format_for(type_: Any, *, name: str | None = None, strict: bool = False) -> JsonSchemaFormat:
    """The :class:`~harness_core.types.JsonSchemaFormat` asking for ``type_``.

    Args:
        type_: the type the reply must decode into.
        name: the schema name (default: derived from the type's name).
        strict: ask the provider for constrained decoding (see :class:`JsonSchemaFormat`).
    """
    return JsonSchemaFormat(name or schema_name(type_), _closed(schema_for(type_)), strict=strict)


def _closed(node: Any) -> Any:
    """``node`` with ``additionalProperties: false`` on every object schema that sets none."""
    if isinstance(node, list):
        return [_closed(item) for item in node]
    if not isinstance(node, dict):
        return node
    closed = {key: _closed(value) for key, value in node.items()}
    if closed.get("type") == "object" and "properties" in closed:
        closed.setdefault("additionalProperties", False)
    return closed


def decode_output(text: str, type_: type[T], *, provider: str | None = None) -> T:
    """Decode the reply ``text`` into ``type_``.

    Surrounding whitespace and one enclosing Markdown code fence (```` ```json … ``` ````),
    which some models add even in JSON mode, are ignored.

    Raises:
        InvalidOutputError: the text is not JSON (path ``$``) or does not match ``type_``; the
            message names the path of the first mismatch, ``text`` keeps the reply whole.
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced is not None:
        body = fenced.group(1)
    try:
        return msgspec.json.decode(body, type=type_)
    except msgspec.ValidationError as exc:
        detail = str(exc)
        found = _PATH.search(detail)
        path = "$"
        if found is not None:
            path, detail = found.group(1), detail[: found.start()]
        what = type_.__name__ if isinstance(type_, type) else repr(type_)
        raise InvalidOutputError(
            f"the reply does not match {what} at {path}: {detail}", text=text, path=path, provider=provider
        ) from None
    except msgspec.DecodeError as exc:
        raise InvalidOutputError(f"the reply is not JSON: {exc}", text=text, provider=provider) from None
