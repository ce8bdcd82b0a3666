"""One plugin config through :func:`msgspec.convert`, reporting every problem, not only the first.

:class:`Converter` turns a config mapping into its ``Config`` struct (YAML strings become
:class:`~harness_core.secret.Secret` for ``Secret`` fields, every such value a secret of the
redactor from then on); when msgspec refuses it, every field is converted on its own (nested
structs and ``dict[str, Struct]`` values too) so each problem is reported at its own key.
:func:`split_msgspec_error` turns msgspec's message into a message and a path.
"""

from __future__ import annotations

import difflib
import enum
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from harness_core.config import ConfigPath, named_field
from harness_core.secret import ConnectionString, Redactor, Secret, connection_secrets, secret_problem, secrets_of

__all__ = [
    "Converter",
    "Found",
    "env_text_values",
    "holds_secret",
    "humane_message",
    "split_msgspec_error",
    "struct_of",
    "struct_values_of",
    "type_at",
]

Found = tuple[str, ConfigPath, bool]
"""One conversion problem: ``(message, path inside the config, refused)``, ``refused`` for a secret
that cannot be sent (a provider with such a key only fails; see
:func:`~harness_core.loader.validate.validate`)."""

_MSGSPEC_PATH = re.compile(r"^(?P<message>.*?)(?: - at `\$(?P<path>.*)`)?$", re.DOTALL)
_PATH_PART = re.compile(r"\.([^.\[]+)|\[(\d+)\]|(\[\.\.\.\])")  # msgspec hides mapping keys as [...]
_UNKNOWN_FIELD = re.compile(r"unknown field `([^`]*)`")
_EXPECTED = re.compile(  # msgspec's "Expected `int`, got `str`", "… `int` >= 1", "… `str` of length >= 1"
    r"^Expected `(?P<want>[^`]+)`(?:, got `(?P<got>[^`]+)`| (?P<length>of length )?(?P<op>[<>]=?) (?P<bound>\S+))$"
)
_TYPE_WORDS: Final = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "bool": "a boolean",
    "array": "a list",
    "object": "a mapping",
    "null": "null",
    "Secret": "a string (a secret)",
}
_UNKNOWN_PREFIX: Final = "Object contains unknown field"  # msgspec's, for a nested struct
_BOUND_WORDS: Final = {">=": "of at least", "<=": "of at most", ">": "greater than", "<": "less than"}


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
        found = self.convert_fields(config_type, raw, set()) or [first]  # else a cross-field check
        return None, found + self.struct_checks(config_type, raw, found)

    def struct_checks(self, config_type: type[msgspec.Struct], raw: dict[str, Any], found: list[Found]) -> list[Found]:
        """The problems the struct's own checks (its ``__post_init__``, which msgspec runs only
        once every field converted) find in the fields of ``raw`` that ``found`` (the problems
        already known) does not name: the config is converted again without those fields (their
        defaults instead), then without each field a check named, until it converts, a check
        names no field of ``raw``, or a field already left out. So ``port: 99999`` no longer hides
        a bad ``database`` URL, and two checks that fail are both reported."""
        dropped = {where[0] for _, where, _ in found if where}
        more: list[Found] = []
        while True:
            self.refused_secret = False
            try:
                msgspec.convert({k: v for k, v in raw.items() if k not in dropped}, config_type, dec_hook=self.dec_hook)
            except msgspec.ValidationError as exc:
                message, where = split_msgspec_error(str(exc))
                if not where or where[0] in dropped or where[0] not in raw:
                    return more
                more.append((message, where, self.refused_secret))
                dropped.add(where[0])
            else:
                return more

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
            declared = [f.encode_name for f in fields]  # (a tie goes to the field declared first)
            names = ", ".join(declared) or "none"
            for key in raw:
                if key not in known:
                    close = difflib.get_close_matches(key, declared, n=1) if isinstance(key, str) else []
                    hint = f": did you mean `{close[0]}`?" if close else ""
                    found.append((f"unknown field `{key}`{hint} (known fields: {names})", (key,), False))
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
        mapping is looked at field by field, each value of a ``dict[str, X]`` given a mapping on
        its own at its own key, each item of a ``list[Struct]`` at its index (a union such as
        ``list[Member] | Pool`` by the member the value's shape picks), since msgspec stops at the
        first error and hides mapping keys: every problem is reported at its own key's line (and
        every bad item of a list, not only the first). An invalid enum value lists the values of
        the field's ``Literal[…]`` (or :class:`enum.Enum`) and names the closest one; an unknown
        field names the closest known one (``did you mean``, :func:`difflib.get_close_matches`
        over the struct's field names, or its allowed values)."""
        shaped = _shaped(type_, value)
        nested = struct_of(shaped)
        found: list[Found] = []
        if nested is not None and isinstance(value, dict):
            found = [(m, (*path, *where), r) for m, where, r in self.convert_fields(nested, value, set())]
        elif typing.get_origin(shaped) is dict and isinstance(value, dict):
            items = typing.get_args(shaped)[1]
            found = [p for key, item in value.items() for p in self.convert_value(items, item, (*path, key))]
        elif typing.get_origin(shaped) is list and isinstance(value, list):
            items = typing.get_args(shaped)[0]  # each item: msgspec alone names only the first bad index
            found = [p for index, item in enumerate(value) for p in self.convert_value(items, item, (*path, index))]
        if found:
            return found
        self.refused_secret = False
        try:
            msgspec.convert(value, type_, dec_hook=self.dec_hook)
        except msgspec.ValidationError as exc:
            message, where = split_msgspec_error(str(exc))
            if message.startswith("Invalid enum value "):  # the value itself when it is at `path` (where is ())
                message += _expected_values(type_at(type_, value, where), None if where else value)
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
    message written by :func:`~harness_core.config.field_message` (``field 'aliases.slow': …``, a
    config's ``__post_init__`` check) is located at that path inside the struct that raised it."""
    match = _MSGSPEC_PATH.match(text)
    assert match is not None  # the pattern matches any text
    path: list[str | int] = []
    for name, index, hidden_key in _PATH_PART.findall(match.group("path") or ""):
        path.append(int(index) if index else "<key>" if hidden_key else name)
    message = match.group("message")
    unknown = _UNKNOWN_FIELD.search(message)
    named = named_field(message)
    if unknown is not None:
        path.append(unknown.group(1))
    elif named is not None:  # raised by a config's __post_init__: that value's line
        path.extend(named[0])
        message = named[1]
    return humane_message(message), tuple(path)


def humane_message(message: str) -> str:
    """msgspec's type message in a YAML user's words: ``Expected `int`, got `str``` → ``expected
    an integer, got a string``; ``Expected `float` >= 0.0`` → ``expected a number of at least
    0.0``; ``Expected `str` of length >= 1`` → ``expected a string of at least 1 characters``;
    a union's members joined by ``or``; ``Object contains unknown field `x``` → ``unknown field
    `x```. Any other message is returned as it is."""
    if message.startswith(_UNKNOWN_PREFIX):
        return message.removeprefix("Object contains ")
    match = _EXPECTED.match(message)
    if match is None:
        return message

    def words(name: str) -> str:
        return " or ".join(_TYPE_WORDS.get(part, f"`{part}`") for part in name.split(" | "))

    want = words(match.group("want"))
    if match.group("got") is not None:
        return f"expected {want}, got {words(match.group('got'))}"
    bound = match.group("bound")
    if match.group("length"):
        unit = "characters" if match.group("want") == "str" else "items"
        return f"expected {want} {_BOUND_WORDS[match.group('op')]} {bound} {unit}"
    return f"expected {want} {_BOUND_WORDS[match.group('op')]} {bound}"


def _shaped(annotation: Any, value: Any) -> Any:
    """``annotation`` without ``Annotated[…]`` and ``| None``; of another union, the one member the
    shape of ``value`` picks (a mapping: a struct or ``dict[…]``; a list: a ``list[…]``), else ``None``."""
    inner = _unwrapped(annotation)
    if inner is not None:
        return inner
    members = [_unwrapped(arg) for arg in typing.get_args(_strip_annotated(annotation))]
    if isinstance(value, dict):
        fits = [m for m in members if struct_of(m) is not None or typing.get_origin(m) is dict]
    elif isinstance(value, list):
        fits = [m for m in members if typing.get_origin(m) is list]
    else:
        fits = []
    return fits[0] if len(fits) == 1 else None


def type_at(annotation: Any, value: Any, path: ConfigPath) -> Any:
    """The type ``annotation`` expects at ``path`` inside ``value`` (a struct's field, a
    ``dict[str, X]``'s value, a ``list[X]``'s item; unions as :meth:`Converter.convert_value`
    picks them), or ``None`` when the path leaves what the type describes."""
    for part in path:
        shaped = _shaped(annotation, value)
        nested = struct_of(shaped)
        if nested is not None and isinstance(value, dict) and part in value:
            fields = {f.encode_name: f.type for f in msgspec.structs.fields(nested)}
            if part not in fields:
                return None
            annotation = fields[part]
        elif typing.get_origin(shaped) is dict and isinstance(value, dict) and part in value:
            annotation = typing.get_args(shaped)[1]
        elif typing.get_origin(shaped) is list and isinstance(value, list) and isinstance(part, int):
            annotation = typing.get_args(shaped)[0]
        else:
            return None
        value = value[part]
    return annotation


def _expected_values(annotation: Any, refused: Any) -> str:
    """For a value msgspec refused as an invalid enum value, whose type is ``annotation`` (``None``
    when unknown): ``": did you mean 'weighted'? (expected one of 'weighted', 'latency')"`` when it
    is a ``Literal[…]`` or an :class:`enum.Enum` (or an optional one, or a union of them), the hint
    only when ``refused`` (the value itself; ``None`` when unknown) is text close to an allowed
    value, case aside (:func:`difflib.get_close_matches`, as for unknown field names); else ``""``."""
    values: list[Any] = []
    for member in (annotation, *typing.get_args(_strip_annotated(annotation))):
        member = _strip_annotated(member)
        if typing.get_origin(member) is typing.Literal:
            values += [v for v in typing.get_args(member) if v not in values]
        elif isinstance(member, type) and issubclass(member, enum.Enum):
            values += [m.value for m in member if m.value not in values]
    folded: dict[str, str] = {}  # the allowed texts by their case-folded form (`AsyncIO` is close to `asyncio`)
    for allowed in values:
        if isinstance(allowed, str):
            folded.setdefault(allowed.casefold(), allowed)
    close = difflib.get_close_matches(refused.casefold(), list(folded), n=1) if isinstance(refused, str) else []
    hint = f": did you mean {folded[close[0]]!r}?" if close else ""
    return f"{hint} (expected one of {', '.join(repr(v) for v in values)})" if values else ""


def env_text_values(
    config_type: type[msgspec.Struct], raw: dict[str, Any], expanded: Mapping[ConfigPath, tuple[str, ...]]
) -> tuple[dict[str, Any], list[Found]]:
    """``raw`` with every text that ``${{ env.NAME }}`` substituted (``expanded``: path → the
    variables in it, see :func:`~harness_core.config.substitute_env`) read as YAML would read
    it where the field takes a number or a boolean only (``int``, ``float``, ``bool``, optional
    or not; ``8080``, ``1.5``, ``true``/``false``, ``null`` for an optional one; msgspec's
    ``strict=False``): an environment variable is text, so ``port: ${{ env.PORT }}`` works.
    A field that also takes a string keeps the text.

    Returns the new ``raw`` and a problem per text that is not such a value, naming the
    variables, never the value (it is a secret). Constraints (``ge=1`` …) are checked later,
    with the rest of the config."""
    found: list[Found] = []
    for path, names in expanded.items():
        kind = _scalar_kind(type_at(config_type, raw, path))
        if kind is None:
            continue
        target, wanted = kind
        parent: Any = raw
        for part in path[:-1]:
            parent = parent[part]
        try:
            parent[path[-1]] = msgspec.convert(parent[path[-1]], target, strict=False)
        except msgspec.ValidationError:
            which = "variable " + names[0] if len(names) == 1 else "variables " + ", ".join(names)
            message = f"the environment {which} must hold {_KINDS[wanted]} for this field; its value is not shown"
            found.append((message, path, False))
    return raw, found


_KINDS: Final[dict[Any, str]] = {
    int: "an integer (such as 8080)",
    float: "a number (such as 1.5)",
    bool: "a boolean (true or false)",
}


def _scalar_kind(annotation: Any) -> tuple[Any, type] | None:
    """For a field of type ``annotation`` that takes an ``int``, a ``float`` or a ``bool`` and no
    string: the type text is converted to (``| None`` kept) and that scalar type; else ``None``."""
    inner = _strip_annotated(annotation)
    union = isinstance(inner, types.UnionType) or typing.get_origin(inner) is typing.Union
    members = typing.get_args(inner) if union else (inner,)
    kinds = [_strip_annotated(m) for m in members if m is not type(None)]
    if len(kinds) != 1 or kinds[0] not in _KINDS:
        return None
    return (kinds[0] | None if len(kinds) < len(members) else kinds[0]), kinds[0]


def _strip_annotated(annotation: Any) -> Any:
    return typing.get_args(annotation)[0] if typing.get_origin(annotation) is typing.Annotated else annotation
