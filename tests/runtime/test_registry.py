"""Route registry: one adapter per route, duplicates name both owners, all-or-nothing, unregister."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_scripted import AdapterPlugin, ScriptedAdapter, reply

from harness_core import GenerateOptions, Harness, LlmError, hookimpl
from harness_core.registry import RouteRegistry

pytestmark = pytest.mark.anyio


def test_register_lookup_and_routes() -> None:
    registry = RouteRegistry()
    adapter = ScriptedAdapter()
    registry.register("openai:work", ["work", "work-fast"], adapter)
    registration = registry.get("work")
    assert registration is not None
    assert registration.owner == "openai:work"
    assert registration.adapter is adapter
    assert registration.routes == ("work", "work-fast")
    assert "openai:work" in repr(registration)
    assert registry.routes() == {"work": "openai:work", "work-fast": "openai:work"}
    assert registry.get("other") is None


def test_duplicate_route_names_both_owners_and_is_all_or_nothing() -> None:
    registry = RouteRegistry()
    registry.register("openai", ["openai"], ScriptedAdapter())
    with pytest.raises(LlmError) as caught:
        registry.register("openai:groq", ["groq", "openai"], ScriptedAdapter())
    assert caught.value.code == "DUPLICATE_ROUTE"
    assert "'openai:groq'" in caught.value.message
    assert "already registered by plugin 'openai'" in caught.value.message
    assert registry.routes() == {"openai": "openai"}  # "groq" was not registered either


def test_route_listed_twice_in_one_registration() -> None:
    registry = RouteRegistry()
    with pytest.raises(LlmError, match="lists route 'a' twice") as caught:
        registry.register("p", ["a", "b", "a"], ScriptedAdapter())
    assert caught.value.code == "DUPLICATE_ROUTE"
    assert registry.routes() == {}


def test_unregister_removes_exactly_that_registration() -> None:
    registry = RouteRegistry()
    first = ScriptedAdapter()
    unregister_a = registry.register("p", ["a", "b"], first)
    registry.register("q", ["c"], ScriptedAdapter())
    unregister_a()
    assert registry.routes() == {"c": "q"}
    replacement = ScriptedAdapter()
    registry.register("r", ["a"], replacement)
    unregister_a()  # idempotent, and never removes the later registration of "a"
    registration = registry.get("a")
    assert registration is not None
    assert registration.adapter is replacement
    assert registry.adapters() == [first, registry.get("c").adapter, replacement]  # type: ignore[union-attr]


def test_remove_owner_and_adapters_are_listed_once() -> None:
    registry = RouteRegistry()
    shared = ScriptedAdapter()
    registry.register("p", ["a"], shared)
    registry.register("p", ["b"], shared)
    registry.register("q", ["c"], ScriptedAdapter())
    registry.remove_owner("p")
    assert registry.routes() == {"c": "q"}
    assert registry.adapters()[0] is shared
    assert len(registry.adapters()) == 2


@pytest.mark.parametrize(
    ("routes", "adapter", "error", "match"),
    [
        ("openai", ScriptedAdapter(), TypeError, "not the string 'openai'"),
        ([], ScriptedAdapter(), ValueError, "for no route"),
        ([1], ScriptedAdapter(), TypeError, "must be strings"),
        ([""], ScriptedAdapter(), ValueError, "is empty"),
        (["a"], object(), TypeError, "expected an LlmAdapter instance"),
    ],
)
def test_bad_registrations_are_clear_errors(routes: Any, adapter: Any, error: type[Exception], match: str) -> None:
    registry = RouteRegistry()
    with pytest.raises(error, match=match):
        registry.bind("p")(routes, adapter)
    assert registry.routes() == {}


async def test_duplicate_between_plugins_keeps_the_first_and_records_the_second() -> None:
    first, second = ScriptedAdapter(reply("one")), ScriptedAdapter(reply("two"))
    harness = Harness([("openai", AdapterPlugin(first, ["x"])), ("openai:b", AdapterPlugin(second, ["y", "x"]))])
    async with harness:
        assert harness.routes() == {"x": "openai"}  # "y" rolled back with the failed registration
        (failure,) = harness.failures
        assert failure.key == "openai:b"
        assert failure.name == "openai"
        assert failure.stage == "register"
        assert not failure.is_middleware
        assert "DUPLICATE_ROUTE" in failure.message
        assert "'openai:b'" in failure.message
        assert "'openai'" in failure.message
        assert (await harness.generate(GenerateOptions(route="x"))).text == "one"
        result = [c async for c in _chunks(harness, "y")]
        assert result[-1].reason.failure.code == "NO_ADAPTER"
        assert "'openai:b' failed at register" in result[-1].reason.failure.message


async def _chunks(harness: Harness, route: str) -> Any:
    async with harness.stream(GenerateOptions(route=route)) as chunks:
        async for chunk in chunks:
            yield chunk


class _Unregisters:
    def __init__(self) -> None:
        self.adapter = ScriptedAdapter(reply("kept"))

    @hookimpl
    def register_adapter(self, register: Any) -> None:
        register(["kept"], self.adapter)
        unregister = register(["gone"], ScriptedAdapter())
        unregister()


async def test_unregister_handle_from_a_plugin() -> None:
    async with Harness([("p", _Unregisters())]) as harness:
        assert harness.routes() == {"kept": "p"}
