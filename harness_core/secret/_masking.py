"""Masking what a plugin stores or exports: :func:`mask_strings` (every string of JSON-like data)
and the plugin mixin :class:`SecretMasking` (the ``use_redactor`` hook)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, overload

from harness_core.hookspecs import hookimpl

__all__ = ["SecretMasking", "mask_strings"]


def mask_strings(value: Any, redact: Callable[[str], str]) -> Any:
    """``value`` (JSON-like builtins: ``str``, ``dict``, ``list``, ``tuple``, numbers, ``None``)
    with every string, mapping keys included, passed through ``redact``; tuples become lists,
    other values are returned as they are. Mask before encoding: what a sink stores or exports
    (a ledger row, a trace line, a span attribute) then never holds a secret, whatever the
    encoding."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {mask_strings(key, redact): mask_strings(item, redact) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [mask_strings(item, redact) for item in value]
    return value


class SecretMasking:
    """Mixin for a plugin that stores or exports data (a ledger, a log, a trace file, telemetry):
    it implements the ``use_redactor`` hook, keeping the masker the harness hands over when it
    starts, and offers :meth:`redact`, :meth:`mask_text` and :meth:`mask_data` to mask every
    string before it leaves the process (docs/hooks.md). Until the hook is called (a plugin used
    without a :class:`~harness_core.Harness`) nothing is masked.
    """

    _redact: Callable[[str], str] | None = None

    @hookimpl
    def use_redactor(self, redact: Callable[[str], str]) -> None:
        """Mask what ``redact`` masks (the configuration's secrets) in everything stored or exported."""
        self._redact = redact

    def redact(self, text: str) -> str:
        """``text`` with the configuration's secrets masked (unchanged before :meth:`use_redactor`)."""
        return text if self._redact is None else self._redact(text)

    @overload
    def mask_text(self, text: str) -> str: ...

    @overload
    def mask_text(self, text: None) -> None: ...

    def mask_text(self, text: str | None) -> str | None:
        """``text`` masked; ``None`` stays ``None``."""
        return None if text is None else self.redact(text)

    def mask_data(self, value: Any) -> Any:
        """``value`` (JSON-like builtins) with every string masked (:func:`mask_strings`)."""
        return value if self._redact is None else mask_strings(value, self._redact)
