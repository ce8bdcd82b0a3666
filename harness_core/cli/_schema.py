"""``--schema`` of the CLI: a JSON schema given as JSON, as a file, or in the concise syntax.

The concise syntax is the one of simonw's ``llm`` (https://llm.datasette.io/en/stable/schemas.html
"Concise LLM schema syntax"): fields separated by commas (or by newlines, when there are any),
each ``NAME [TYPE][: DESCRIPTION]`` with ``TYPE`` one of ``str`` (default), ``int``, ``float``,
``bool``. ``'name, age int, bio: a one-sentence biography'`` gives an object schema with every
field required and ``additionalProperties: false`` (so strict modes accept it too).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Final

from harness_core.types import JsonSchemaFormat

__all__ = ["SchemaError", "concise_schema", "parse_schema"]

_TYPES: Final = {
    "str": "string",
    "string": "string",
    "int": "integer",
    "integer": "integer",
    "float": "number",
    "number": "number",
    "bool": "boolean",
    "boolean": "boolean",
}
_FIELD: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAME_CHARS: Final = re.compile(r"[^A-Za-z0-9_-]+")


class SchemaError(ValueError):
    """A ``--schema`` value that is no usable schema; the message says where and why."""


def concise_schema(spec: str) -> dict[str, Any]:
    """The object schema for the concise syntax ``spec`` (see the module docstring).

    Raises:
        SchemaError: an empty spec, a malformed field, an unknown type or a repeated name.
    """
    parts = spec.split("\n") if "\n" in spec else spec.split(",")
    properties: dict[str, Any] = {}
    for position, raw in enumerate(parts, start=1):
        field, colon, description = raw.partition(":")
        words = field.split()
        if not words:
            if colon or raw.strip():
                raise SchemaError(f"field {position} ({raw.strip()!r}) has no name")
            continue
        if len(words) > 2 or not _FIELD.fullmatch(words[0]):
            raise SchemaError(f"field {position} ({raw.strip()!r}) must be NAME [TYPE][: DESCRIPTION]")
        name = words[0]
        kind = words[1] if len(words) == 2 else "str"
        if kind not in _TYPES:
            raise SchemaError(f"field {name!r} has unknown type {kind!r}; use one of str, int, float, bool")
        if name in properties:
            raise SchemaError(f"field {name!r} is given twice")
        prop: dict[str, Any] = {"type": _TYPES[kind]}
        if description.strip():
            prop["description"] = description.strip()
        properties[name] = prop
    if not properties:
        raise SchemaError("no fields given")
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def parse_schema(value: str, *, strict: bool = False) -> JsonSchemaFormat:
    """The response format for ``--schema VALUE``: JSON text (starting with ``{``), the path of
    a JSON file, or the concise syntax. The name is the file's stem, else ``output``.

    Raises:
        SchemaError: invalid JSON (with line and column), a JSON value that is not an object,
            a file that cannot be read, or a malformed concise spec.
    """
    text = value.strip()
    name = "output"
    # The CLI prefixes every message with "--schema: "; a file adds its own path.
    where = ""
    if not text.startswith("{"):
        path = Path(text).expanduser()
        if not path.is_file():
            return JsonSchemaFormat(name, concise_schema(value), strict=strict)
        where = f"{path}: "
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SchemaError(f"{where}cannot read: {getattr(exc, 'strerror', None) or exc}") from None
        name = _NAME_CHARS.sub("_", path.stem).strip("_")[:64] or name
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{where}not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(schema, dict):
        raise SchemaError(f"{where}a JSON schema must be an object, got {type(schema).__name__}")
    return JsonSchemaFormat(name, schema, strict=strict)
