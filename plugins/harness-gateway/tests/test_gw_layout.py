"""The gateway's modules after the split of ``app.py`` and ``store.py``: every name that moved
still imports from its old place, with a ``DeprecationWarning`` naming the new one."""

from __future__ import annotations

import importlib

import pytest

import harness_gateway.app as app_module
import harness_gateway.store as store_module


@pytest.mark.parametrize("name", sorted(app_module._MOVED))
def test_a_name_moved_out_of_app_still_imports_with_a_warning(name: str) -> None:
    place = app_module._MOVED[name]
    with pytest.warns(DeprecationWarning, match=rf"harness_gateway\.app\.{name} moved: import it from {place}"):
        value = getattr(app_module, name)
    assert value is getattr(importlib.import_module(place), name)


@pytest.mark.parametrize("name", sorted(store_module._MOVED))
def test_the_sqlite_backend_moved_out_of_store_imports_with_a_warning(name: str) -> None:
    with pytest.warns(
        DeprecationWarning, match=rf"harness_gateway\.store\.{name} moved: import it from harness_gateway\.sqlite"
    ):
        value = getattr(store_module, name)
    assert value is getattr(importlib.import_module("harness_gateway.sqlite"), name)


@pytest.mark.parametrize("module", [app_module, store_module])
def test_an_unknown_name_is_an_attribute_error(module: object) -> None:
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        module.nope  # type: ignore[attr-defined]  # noqa: B018
