"""The environment in a config: :class:`EnvFallback` (a field filled from a variable when the YAML
omits it) and :func:`substitute_env` (``${{ env.NAME }}``, a lookup, never an evaluation; ``$${``
for a literal ``${``; every other ``${`` is an error, :class:`EnvProblem`); every value taken
from the environment is a secret from then on.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from harness_core.secret import Redactor

if TYPE_CHECKING:  # pragma: no cover - typing only
    pass

from harness_core.config.problems import ConfigPath

__all__ = ["EnvFallback", "EnvProblem", "substitute_env"]


class EnvFallback:
    """Config-field marker: fill the field from an environment variable when YAML omits it.

    Used as ``Annotated`` metadata on a plugin ``Config`` field::

        api_key: Annotated[Secret | None, EnvFallback("OPENAI_API_KEY",
                                                      only_when={"base_url": "https://api.openai.com/v1"})] = None

    Args:
        var: the environment variable name.
        only_when: field name → value; the fallback applies only when every listed field has
            exactly that value (the YAML value when given, else the field's default). A name
            that is not a field of the Config never matches. Use it so a vendor's key is never
            sent to another host (docs/stream-obligations.md#10-secrets).

        required: when ``only_when`` holds and neither the YAML nor the variable gives a value,
            the plugin cannot be used (the provider's own host refuses unauthenticated calls):
            the loader records a failure naming the variable and the config field, before any
            request is sent. Writing the field explicitly as ``null`` opts out (no key sent).

    The loader applies it only when the field is absent from the YAML mapping and the variable
    is set and non-empty; the value is then treated as a secret.
    """

    __slots__ = ("only_when", "required", "var")

    def __init__(self, var: str, only_when: Mapping[str, object] | None = None, *, required: bool = False) -> None:
        self.var = var
        self.only_when: dict[str, object] = dict(only_when or {})
        self.required = required

    def __repr__(self) -> str:
        return f"EnvFallback({self.var!r}, only_when={self.only_when!r}, required={self.required!r})"


_ENV_REFERENCE = re.compile(r"\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*")
_ESCAPE = "$${"
"""Written for a literal ``${``: ``$${{ not an expression }}`` is the text ``${{ not an expression }}``."""
_OPEN = "${{"
_CLOSE = "}}"
_SHELL_LIKE = re.compile(r"\$\{\s*(?:env\.)?([A-Za-z_][A-Za-z0-9_]*)\s*\}?")
"""``${NAME}``, ``${ env.NAME }``, ``${NAME`` (shell or single-brace habits) at a ``${``."""
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_WHOLE_EXPRESSION = re.compile(r"\$\{\{(?:(?!\}\}).)*\}\}", re.DOTALL)
_BARE_VARIABLE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_MUSTACHE = re.compile(r"(?<!\$)\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_SYNTAX = "the syntax is ${{ env.NAME }}"
_LITERAL = "write $${ for a literal ${"


class EnvProblem(NamedTuple):
    """One problem :func:`substitute_env` found: where (``path``), what (``message``, which quotes
    expression text but never a literal value of a secret field), and whether it is only an
    ``unset`` variable (the file is right, the environment is not) rather than a mistake in the file."""

    path: ConfigPath
    message: str
    unset: bool = False


def substitute_env(
    data: Any,
    environ: Mapping[str, str],
    redactor: Redactor,
    path: ConfigPath = (),
    *,
    secret_fields: Collection[str] = (),
    expanded: dict[ConfigPath, tuple[str, ...]] | None = None,
) -> tuple[Any, list[EnvProblem]]:
    """Replace every ``${{ env.NAME }}`` in the strings of ``data`` by the variable's value.

    Only that one form is understood (a lookup, never an evaluation; spaces inside the braces are
    optional, as in GitHub Actions' expressions,
    https://docs.github.com/en/actions/reference/workflows-and-actions/expressions). ``$${`` is
    an escape: it stands for a literal ``${``. Any other ``${`` is a mistake in the file, never
    text sent as is: ``${ env.X }``, ``${X}``, ``${{ env.X }`` (a brace missing), ``${{ 1 + 1 }}``.

    ``secret_fields`` names the keys of the top-level mapping of ``data`` whose values are
    secrets (``Secret``-typed config fields). There a key is one whole value: ``${{ env.X }}``
    mixed with other text is refused, and so are ``$NAME``, ``{{ env.NAME }}`` (a shell or
    template habit that would otherwise be sent as the literal key) and the ``$${`` escape. Messages about those fields
    quote only what looks like a variable name, never the value; a value refused without being
    quoted is added to ``redactor`` (it may be a key written wrong).

    Returns the new data and the :class:`EnvProblem` s, in document order. Every substituted
    value is added to ``redactor``: it is secret from then on. Keys are not substituted. When
    ``expanded`` is given, it is filled with the path of every string a variable was substituted
    into → the names of those variables (the loader reads such text as a number or a boolean
    where a field takes one: :func:`~harness_core.loader.convert.env_text_values`).
    """
    problems: list[EnvProblem] = []

    def walk(value: Any, here: ConfigPath, secret: bool) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, (*here, k), secret or (here == path and k in secret_fields)) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, (*here, i), secret) for i, v in enumerate(value)]
        if not isinstance(value, str):
            return value
        if not secret:
            return expand(value, here, secret)
        before = len(problems)
        mistake = _secret_mistake(value)
        if mistake is not None:
            problems.append(EnvProblem(here, mistake))
            expanded_text = value
        else:
            expanded_text = expand(value, here, secret)
        if any(not p.unset and value not in p.message for p in problems[before:]):
            redactor.add(value)  # perhaps a key written wrong: masked wherever else it shows up
        return expanded_text

    def expand(value: str, here: ConfigPath, secret: bool) -> str:
        used: list[str] = []
        text = _expand(value, here, environ, redactor, problems, secret, used)
        if used and expanded is not None:
            expanded[here] = tuple(used)
        return text

    return walk(data, path, False), problems


def _expand(
    text: str,
    here: ConfigPath,
    environ: Mapping[str, str],
    redactor: Redactor,
    problems: list[EnvProblem],
    secret: bool,
    used: list[str],
) -> str:
    """``text`` with its expressions substituted and ``$${`` unescaped; problems appended, the
    name of every variable substituted appended to ``used``."""
    out: list[str] = []
    position = 0
    while (start := text.find("$", position)) != -1:
        out.append(text[position:start])
        if text.startswith(_ESCAPE, start):
            out.append("${")
            position = start + len(_ESCAPE)
            continue
        if text.startswith(_OPEN, start):
            end = text.find(_CLOSE, start + len(_OPEN))
            if end == -1:
                problems.append(EnvProblem(here, _unterminated(text[start:], secret)))
                return ""
            expression = text[start : end + len(_CLOSE)]
            reference = _ENV_REFERENCE.fullmatch(expression[len(_OPEN) : -len(_CLOSE)])
            position = end + len(_CLOSE)
            if reference is None:
                problems.append(
                    EnvProblem(here, f"unsupported expression {expression!r}: only ${{{{ env.NAME }}}} is allowed")
                )
                continue
            name = reference.group(1)
            found = environ.get(name)
            if found is None:
                problems.append(EnvProblem(here, f"environment variable {name} is not set", unset=True))
                continue
            redactor.add(found)
            used.append(name)
            out.append(found)
            continue
        if text.startswith("${", start):
            problems.append(EnvProblem(here, _single_brace(text[start:], secret)))
            return ""
        out.append("$")
        position = start + 1
    out.append(text[position:])
    return "".join(out)


def _variable(reference: re.Match[str], secret: bool) -> str | None:
    """The variable name of ``reference`` when it may be quoted: always outside secret fields;
    inside one when written ``env.NAME`` or when it looks like an environment variable name (upper
    case with an underscore: ``OPENAI_API_KEY``), since a key pasted after a ``$``
    (``$sk_live_…``) is an identifier too."""
    name = reference.group(1)
    if not secret or "env." in reference.group(0) or _ENV_NAME.fullmatch(name):
        return name
    return None


def _unterminated(rest: str, secret: bool) -> str:
    """``rest`` starts with ``${{`` that no ``}}`` closes."""
    named = _SHELL_LIKE.match(rest.replace(_OPEN, "${", 1))
    name = _variable(named, secret) if named is not None else None
    quoted = f" {rest!r}" if not secret else ""
    hint = f"write ${{{{ env.{name} }}}}" if name is not None else _SYNTAX
    return f"unterminated expression{quoted}: `${{{{` without a closing `}}}}`; {hint} ({_LITERAL})"


def _single_brace(rest: str, secret: bool) -> str:
    """``rest`` starts with ``${`` not followed by ``{``: a shell-style or single-brace reference."""
    named = _SHELL_LIKE.match(rest)
    name = _variable(named, secret) if named is not None and named.group(0).endswith("}") else None
    if named is None or name is None:
        return f"`${{` starts no expression here: {_SYNTAX} ({_LITERAL})"
    return (
        f"{named.group(0)!r} is not expanded: harness reads the environment only as ${{{{ env.NAME }}}} "
        f"(double braces): write ${{{{ env.{name} }}}} ({_LITERAL})"
    )


def _secret_mistake(value: str) -> str | None:
    """Why the value of a secret field is an environment reference written wrong, or ``None``.

    Never quotes the value: only a variable name it holds (see :func:`_variable`). The ``$${``
    escape is refused too: no key holds ``${``, so it is an expression escaped by mistake (it
    would send ``${{ env.NAME }}`` itself as the key)."""
    if _ESCAPE in value:
        return (
            "`$${` (the escape for a literal `${`) is not allowed in a secret: no key holds `${`; "
            f"{_SYNTAX} (the value is not shown)"
        )

    expression = _WHOLE_EXPRESSION.search(value)
    if expression is not None and expression.group(0) != value:
        return (
            "a secret is one whole value: ${{ env.NAME }} cannot be combined with other text "
            "(put the whole value in one environment variable)"
        )
    if value.startswith("$") and not value.startswith("${"):
        bare = _BARE_VARIABLE.fullmatch(value)
        name = _variable(bare, True) if bare is not None else None
        if name is not None:
            return f"${name} is not expanded (harness does not expand shell variables): write ${{{{ env.{name} }}}}"
        return (
            "the value starts with `$`, which no API key does: harness does not expand shell variables; "
            f"{_SYNTAX} (the value is not shown)"
        )
    mustache = _MUSTACHE.search(value)
    if mustache is not None:
        return f"a `$` is missing: write ${{{{ env.{mustache.group(1)} }}}}"
    return None
