"""pytest-harness: pytest fixtures wrapping :mod:`harness_core.testing`, and the adapter
conformance suite.

Installed, it registers the ``pytest11`` plugin :mod:`pytest_harness.plugin`, which only adds
fixtures whose names start with ``harness_``; it defines no hooks and no ``anyio_backend``.

The conformance suite (:class:`AdapterConformance`, :class:`Recording`,
:func:`load_recordings`, :class:`ConformanceFailure`, from
:mod:`harness_core.testing.conformance`) is importable from here; subclass it as ``Test…`` in an
adapter's test module (see ``docs/testing.md``). It loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness_core._lazy import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only; the suite loads on first use
    from harness_core.testing.conformance import AdapterConformance, ConformanceFailure, Recording, load_recordings

__all__ = ["AdapterConformance", "ConformanceFailure", "Recording", "load_recordings"]

__version__ = "0.1.0"
"""The distribution's version (the single source: ``pyproject.toml`` reads it)."""

__getattr__ = lazy_exports(__name__, dict.fromkeys(__all__, "harness_core.testing.conformance"))
