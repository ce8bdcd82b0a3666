"""Reading a client's JSON request body: typed field access whose errors name the field.

Both API dialects parse their bodies with :class:`Body`, so a bad request is always a 400
:class:`~harness_gateway.errors.GatewayError` whose message and ``param`` name the field at fault
(``messages[2].content[0].type``).
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from harness_gateway.errors import GatewayError

__all__ = ["Body", "ParsedRequest", "bad_request", "decode_json"]

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


def bad_request(where: str, message: str) -> GatewayError:
    """A 400 naming the field ``where`` (``""`` for the whole body)."""
    text = f"{where}: {message}" if where else message
    return GatewayError(400, text, code="invalid_request", param=where or None)


def decode_json(raw: bytes) -> Any:
    """The JSON value of a request body.

    Raises:
        GatewayError: 400 naming the byte offset when it is not JSON, or saying it nests too
            deeply (msgspec's decoder stops near 1,000 levels, bounded by Python's recursion
            limit: a request nests a few levels, a schema a few dozen).
    """
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise bad_request("", f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise bad_request("", "the request body nests too deeply (arrays and objects within each other)") from None


class Body:
    """A JSON object of the request at path ``where``, read field by field."""

    def __init__(self, value: Any, where: str = "") -> None:
        if not isinstance(value, dict):
            raise bad_request(where, f"expected an object, got {_kind(value)}")
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
            raise bad_request(self.path(key), f"expected {expected}, got {_kind(value)}")
        return value

    def obj(self, key: str, *, required: bool = False) -> Body | None:
        """Field ``key`` as a nested :class:`Body` (``None`` when absent and not required)."""
        value = self.get(key, dict, required=required)
        return None if value is None else Body(value, self.path(key))

    def items(self, key: str, *, required: bool = False) -> list[tuple[str, Any]]:
        """The elements of list field ``key`` with their display paths."""
        values = self.get(key, list, [], required=required)
        return [(f"{self.path(key)}[{i}]", item) for i, item in enumerate(values)]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return _TYPE_NAMES.get(type(value), type(value).__name__)
