"""One plugin config through :func:`msgspec.convert`, reporting every problem, not only the first.

:class:`Converter` turns a config mapping into its ``Config`` struct (YAML strings become
:class:`~harness_core.secret.Secret` for ``Secret`` fields, every such value a secret of the
redactor from then on); when msgspec refuses it, every field is converted on its own (nested
structs and ``dict[str, Struct]`` values too) so each problem is reported at its own key.
:func:`split_msgspec_error` turns msgspec's message into a message and a path.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any

import msgspec

from harness_core.config import ConfigPath
from harness_core.secret import ConnectionString, Redactor, Secret, connection_secrets, secret_problem, secrets_of

__all__ = ["Converter", "Found", "holds_secret", "split_msgspec_error", "struct_of", "struct_values_of"]

Found = tuple[str, ConfigPath, bool]
"""One conversion problem: ``(message, path inside the config, refused)``, ``refused`` for a secret
that cannot be sent (a provider with such a key only fails; see
:func:`~harness_core.loader.validate.validate`)."""

_MSGSPEC_PATH = re.compile(r"^(?P<message>.*?)(?: - at `\$(?P<path>.*)`)?$", re.DOTALL)
_PATH_PART = re.compile(r"\.([^.\[]+)|\[(\d+)\]|(\[\.\.\.\])")  # msgspec hides mapping keys as [...]
_UNKNOWN_FIELD = re.compile(r"unknown field `([^`]*)`")
_NAMED_FIELD = re.compile(r"^field '([A-Za-z_][\w-]*)': ")  # a __post_init__ check naming its field


class Converter:
    """Converts config mappings for one load, adding every secret it meets to ``redactor``."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.refused_secret = False
        """Whether the last conversion failed on a secret that cannot be sent (set by :meth:`dec_hook`)."""

    def convert(
        self, config_type: type[msgspec.Struct], raw: dict[str, Any]
    ) -> tuple[msgspec.Struct | None, list[Found]]:
        """The config built from ``raw``, or ``None`` and every problem (see :meth:`convert_fields`)."""
        self.refused_secret = False
        try:
            config = msgspec.convert(raw, config_type, dec_hook=self.dec_hook)
        except msgspec.ValidationError as exc:
            first = (*split_msgspec_error(str(exc)), self.refused_secret)
        else:
            secrets_of(config, self.redactor)  # a secret inside a plain field (base_url's password)
            return config, []
        # msgspec stops at the first error: look at every field on its own to report them all
        return None, self.convert_fields(config_type, raw, set()) or [first]  # else a cross-field check

    def convert_fields(
        self, config_type: type[msgspec.Struct], raw: dict[str, Any], skipped: set[str | int]
    ) -> list[Found]:
        """Every problem of ``raw`` field by field, in the order of ``raw``'s keys (the file's):
        ``(message, path, refused)``,
        ``refused`` for a secret that cannot be sent. Fields in ``skipped`` are not looked at."""
        fields = msgspec.structs.fields(config_type)
        known = {f.encode_name for f in fields}
        found: list[Found] = []
        if config_type.__struct_config__.forbid_unknown_fields:
            names = ", ".join(f.encode_name for f in fields) or "none"
            for key in raw:
                if key not in known:
                    found.append((f"Object contains unknown field `{key}` (known fields: {names})", (key,), False))
        for field in fields:
            if field.encode_name in skipped:
                continue
            if field.encode_name not in raw:
                if field.required:
                    found.append((f"Object missing required field `{field.encode_name}`", (), False))
                continue
            found += self.convert_value(field.type, raw[field.encode_name], (field.encode_name,))
        order: dict[str | int, int] = {key: index for index, key in enumerate(raw)}
        return sorted(found, key=lambda problem: order.get(problem[1][0], len(order)) if problem[1] else -1)

    def convert_value(self, type_: Any, value: Any, path: ConfigPath) -> list[Found]:
        """Every problem of ``value`` (at ``path``) as a ``type_``: a nested struct given as a
        mapping, and each value of a ``dict[str, Struct]``, is looked at field by field (msgspec
        stops at the first error), so every problem is reported at its own key's line."""
        nested = struct_of(type_)
        if nested is not None and isinstance(value, dict):
            found = [(m, (*path, *where), r) for m, where, r in self.convert_fields(nested, value, set())]
            if found:
                return found
        items = struct_values_of(type_)
        if items is not None and isinstance(value, dict):
            found = [
                problem for key, item in value.items() for problem in self.convert_value(items, item, (*path, key))
            ]
            if found:
                return found
        self.refused_secret = False
        try:
            msgspec.convert(value, type_, dec_hook=self.dec_hook)
        except msgspec.ValidationError as exc:
            message, where = split_msgspec_error(str(exc))
            return [(message, (*path, *where), self.refused_secret)]
        return []

    def dec_hook(self, type_: type, obj: Any) -> Any:
        """``msgspec.convert`` hook: YAML strings become :class:`Secret` for ``Secret`` fields, and
        every such value (literal, from the environment or an env fallback) is secret from then on.
        A value that cannot be sent in a header (:func:`~harness_core.secret.secret_problem`) is
        refused with the reason (never the value).

        Raises:
            ValueError: a ``Secret`` that cannot be sent (msgspec reports it as a validation error).
            TypeError: any other type msgspec cannot convert itself."""
        if type_ is ConnectionString and isinstance(obj, str):  # only a URL's password is secret
            for part in connection_secrets(obj):
                self.redactor.add(part)
            return ConnectionString(obj)
        if type_ is Secret and isinstance(obj, str):
            self.redactor.add(obj)
            problem = secret_problem(obj)
            if problem is not None:
                self.refused_secret = True
                raise ValueError(problem)
            return Secret(obj)
        raise TypeError(f"Expected `{getattr(type_, '__name__', type_)}`, got `{type(obj).__name__}`")


def _unwrapped(annotation: Any) -> Any:
    """``annotation`` without ``Annotated[…]`` and an optional ``| None``; ``None`` for another union."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return _unwrapped(members[0]) if len(members) == 1 else None
    return annotation


def struct_of(annotation: Any) -> type[msgspec.Struct] | None:
    """The msgspec Struct a field holds (``Struct``, ``Struct | None``, annotated), else ``None``."""
    inner = _unwrapped(annotation)
    return inner if isinstance(inner, type) and issubclass(inner, msgspec.Struct) else None


def struct_values_of(annotation: Any) -> Any:
    """The value type of a ``dict[str, Struct]`` field (the Struct), else ``None``."""
    inner = _unwrapped(annotation)
    if typing.get_origin(inner) is dict:
        value_type = typing.get_args(inner)[1]
        return value_type if struct_of(value_type) is not None else None
    return None


def holds_secret(annotation: Any) -> bool:
    """Whether the type ``annotation`` holds a :class:`Secret` or :class:`ConnectionString` (anywhere in it)."""
    return annotation in (Secret, ConnectionString) or any(holds_secret(arg) for arg in typing.get_args(annotation))


def split_msgspec_error(text: str) -> tuple[str, ConfigPath]:
    """``"Expected `int`, got `str` - at `$.a[0]`"`` → ``("Expected `int`, got `str`", ("a", 0))``; a
    message starting ``field 'name': `` (a config's ``__post_init__`` check) is located at that field."""
    match = _MSGSPEC_PATH.match(text)
    assert match is not None  # the pattern matches any text
    path: list[str | int] = []
    for name, index, hidden_key in _PATH_PART.findall(match.group("path") or ""):
        path.append(int(index) if index else "<key>" if hidden_key else name)
    message = match.group("message")
    unknown = _UNKNOWN_FIELD.search(message)
    named = _NAMED_FIELD.match(message)
    if unknown is not None:
        path.append(unknown.group(1))
    elif named is not None:  # "field 'base_url': …" raised by a config's __post_init__: that field's line
        path.append(named.group(1))
        message = message[named.end() :]
    return message, tuple(path)
