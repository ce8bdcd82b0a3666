"""What to do about an error that the command line or a missing config explains (``harness run``).

One owner of these hints: the renderer shows them after an error finish, ``--count-tokens`` and
``--tool`` after a raised error (:mod:`harness_core.cli._count`); ``chat`` and ``embed`` show the
hint of a mistyped ``-m route/model`` (:func:`typo_hint`) after theirs.
"""

from __future__ import annotations

from harness_core.errors import LlmError
from harness_core.loader import LoadedConfig
from harness_core.routing import default_model

__all__ = ["TYPO_CODES", "Hints", "typo_hint"]

TYPO_CODES = frozenset({"NOT_FOUND", "BAD_REQUEST", "NO_ADAPTER"})
"""The error codes a mistyped ``-m route/model`` explains (the id went to the default route as a
model id: the provider does not know it, or no default route serves it)."""


def typo_hint(error: BaseException, what: str, typo: str | None) -> str | None:
    """``"-m 'mokc/echo': route 'mokc' is not served (did you mean 'mock/echo'?)"`` (``what``
    the value as the command line names it, ``typo`` what :meth:`LoadedConfig.mistyped_route
    <harness_core.loader.LoadedConfig.mistyped_route>` says of it) when ``error`` is an
    :class:`LlmError` it explains (:data:`TYPO_CODES`); else ``None``. Shown after the error by
    ``run`` (:class:`Hints`), ``chat`` and ``embed``."""
    if typo is None or not isinstance(error, LlmError) or error.code not in TYPO_CODES:
        return None
    return f"{what}: {typo}"


class Hints:
    """What to do about an error finish that the command line or a missing config explains.

    ``loaded`` is the configuration in use, ``route``/``model`` what ``-r``/``-m`` gave.
    """

    def __init__(self, loaded: LoadedConfig, *, route: str | None, model: str | None) -> None:
        self.loaded = loaded
        self.typo = loaded.mistyped_route(route, model)
        """``route 'mokc' is not served (did you mean 'mock/echo'?)`` for ``-m mokc/echo``, or ``None``."""
        self.model = model
        # the runtime's own rule: defaults.model applies to the default route (or every route when none is set)
        self.no_model = model is None and default_model(loaded.defaults, route) is None

    def cause(self, error: LlmError) -> str | None:
        """The command line's mistake that explains ``error``, shown before the provider's
        answer (exit 2: a usage error), or ``None``: ``BAD_REQUEST`` (a provider's HTTP 400, or
        the adapter refusing to send) when no model was given and ``defaults.model`` does not
        apply."""
        if error.code == "BAD_REQUEST" and self.no_model:
            return "no model was given: pass -m MODEL or set defaults.model in plugins.yaml"
        return None

    def for_error(self, error: LlmError) -> str | None:
        """One hint line shown after ``error``, or ``None`` (a hint is exit 2): a ``-m``
        naming a mistyped route (``-m 'mokc/echo': route 'mokc' is not served (did you mean
        'mock/echo'?)``: :meth:`LoadedConfig.mistyped_route
        <harness_core.loader.LoadedConfig.mistyped_route>`) after an error it explains
        (:data:`TYPO_CODES`); else ``NO_ADAPTER`` without a config file (the built-in default is
        in use; names the installed plugins it does not enable and how to enable them)."""
        typo = typo_hint(error, f"-m {self.model!r}", self.typo)
        if typo is not None:
            return typo
        loaded = self.loaded
        if error.code == "NO_ADAPTER" and loaded.path is None:
            idle = sorted(entry.key for entry in loaded.entries if entry.state == "installed")
            names = ", ".join(idle) if idle else "none"
            return (
                "no plugins.yaml was found, so the built-in default (the mock plugin) is in use; "
                f"installed plugins not enabled: {names} (list them in plugins.yaml or pass -c FILE; "
                "see `harness config check`)"
            )
        return None
