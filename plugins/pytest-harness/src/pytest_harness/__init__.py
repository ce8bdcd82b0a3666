"""pytest-harness: pytest fixtures wrapping :mod:`harness_core.testing`, and the adapter
conformance suite.

Installed, it registers the ``pytest11`` plugin :mod:`pytest_harness.plugin`, which only adds
fixtures whose names start with ``harness_``; it defines no hooks and no ``anyio_backend``.

The conformance suite (:class:`AdapterConformance`, :class:`Recording`,
:func:`load_recordings`, :class:`ConformanceFailure`, from
:mod:`harness_core.testing.conformance`) is importable from here; subclass it as ``Test…`` in an
adapter's test module (see ``docs/testing.md``). It loads on first use.
:func:`load_cases_or_skip` loads the shared fault cases at a test module's import, skipping the
module with a reason when a clone has no cases folder (an error on CI).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only; the suite loads on first use
    from harness_core.testing import AdapterConformance, ConformanceFailure, Recording, load_recordings
    from pytest_harness.cases import load_cases_or_skip

__all__ = ["AdapterConformance", "ConformanceFailure", "Recording", "load_cases_or_skip", "load_recordings"]

__version__ = "0.1.0"
"""The distribution's version (the single source: ``pyproject.toml`` reads it)."""

_LAZY = {
    **dict.fromkeys(
        ("AdapterConformance", "ConformanceFailure", "Recording", "load_recordings"), "harness_core.testing"
    ),
    "load_cases_or_skip": "pytest_harness.cases",
}
"""Exported name → the module it is read from on first use (PEP 562): importing this package, as
pytest does on every run through the ``pytest11`` entry point, imports no part of the kit."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
