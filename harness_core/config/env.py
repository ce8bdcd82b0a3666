"""The environment in a config: :class:`EnvFallback` (a field filled from a variable when the YAML
omits it) and :func:`substitute_env` (``${{ env.NAME }}``, a lookup, never an evaluation); every
value taken from the environment is a secret from then on.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harness_core.secret import Redactor

if TYPE_CHECKING:  # pragma: no cover - typing only
    pass

from harness_core.config.problems import ConfigPath

__all__ = ["EnvFallback", "substitute_env"]


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


_EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
_ENV_REFERENCE = re.compile(r"\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*")


def substitute_env(
    data: Any, environ: Mapping[str, str], redactor: Redactor, path: ConfigPath = ()
) -> tuple[Any, list[tuple[ConfigPath, str]]]:
    """Replace every ``${{ env.NAME }}`` in the strings of ``data`` by the variable's value.

    Only that one form is understood (a lookup, never an evaluation). Returns the new data and a
    list of ``(path, message)`` problems: a missing variable (named), or any other ``${{ … }}``
    expression. Every substituted value is added to ``redactor``: it is secret from then on.
    Keys are not substituted.
    """
    problems: list[tuple[ConfigPath, str]] = []

    def walk(value: Any, here: ConfigPath) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, (*here, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, (*here, i)) for i, v in enumerate(value)]
        if not isinstance(value, str) or "${{" not in value:
            return value

        def replace(match: re.Match[str]) -> str:
            reference = _ENV_REFERENCE.fullmatch(match.group(1))
            if reference is None:
                problems.append(
                    (here, f"unsupported expression {match.group(0)!r}: only ${{{{ env.NAME }}}} is allowed")
                )
                return ""
            name = reference.group(1)
            found = environ.get(name)
            if found is None:
                problems.append((here, f"environment variable {name} is not set"))
                return ""
            redactor.add(found)
            return found

        return _EXPRESSION.sub(replace, value)

    return walk(data, path), problems
