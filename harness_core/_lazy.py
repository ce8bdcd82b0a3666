"""Lazy package exports: a module ``__getattr__`` that imports a name's module on first use.

Used by package ``__init__`` modules whose names would otherwise import heavy dependencies
(httpx, anyio) on the CLI's fast paths (PEP 562 module ``__getattr__``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


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
