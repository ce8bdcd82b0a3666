"""Lazy package exports: a module ``__getattr__`` that imports a name's module on first use.

Used by package ``__init__`` modules whose names would otherwise import heavy dependencies
(httpx, anyio) on the CLI's fast paths (PEP 562 module ``__getattr__``).
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports", "moved_names"]


def lazy_exports(package: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``table`` maps an exported name to the module
    defining it. The value is cached in the package on first use.

    The returned function carries a copy of ``table`` as its ``exports`` attribute (the layer
    test checks it against the package's ``__all__``).

    Raises (from the returned function):
        AttributeError: for a name ``table`` does not list, naming the package.
    """

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    __getattr__.exports = dict(table)  # type: ignore[attr-defined]  # read by tests/layers/test_faces.py
    return __getattr__


def moved_names(module: str, moved: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module``'s names that moved: ``moved`` maps an old name to
    the module that owns it now. Reading one warns (a :class:`DeprecationWarning` naming the
    owner, attributed to the importing line) and returns the owner's value; the value is not
    cached, so every use warns.

    Raises (from the returned function):
        AttributeError: for a name ``moved`` does not list, naming the module.
    """

    def __getattr__(name: str) -> Any:
        owner = moved.get(name)
        if owner is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(
            f"{module}.{name} moved: import it from {owner} (the old path goes away in a later release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(owner), name)

    __getattr__.moved = dict(moved)  # type: ignore[attr-defined]  # read by tests/layers/test_faces.py
    return __getattr__
