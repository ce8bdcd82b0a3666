"""The routes a config names (``route_references()``, ``aliases:``) are checked when the harness
starts (:func:`harness_core.routing.check_routes`): a route nothing serves stops it with a located
``ConfigError`` (the fault: a fallback to a misspelt route ended in ``NO_ADAPTER`` at request
time, hiding the first route's real error); a route whose adapter plugin failed does not stop it
(docs/loader.md: only its routes are unavailable) and is named as such."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness_core import ConfigError, Harness, RouteReference, hookimpl
from harness_core.embedding import EmbeddingAdapter, Embeddings, EmbedOptions
from harness_core.hookspecs import RegisterAdapter, RegisterEmbedder
from harness_core.loader import load_config
from harness_core.plugininfo import PluginFailure, failed_owner
from harness_core.routing import route_problems, unknown_route_message
from harness_llm_mock import MockConfig, MockPlugin

pytestmark = pytest.mark.anyio


class NoVectors(EmbeddingAdapter):
    """An embedder never called here: the start only needs its route registered."""

    async def embed(self, options: EmbedOptions) -> Embeddings:
        raise AssertionError("not called")  # pragma: no cover - no test embeds


class EmbedOnly:
    """Serves route ``vec`` for embeddings only (no stream adapter)."""

    @hookimpl
    def register_embedder(self, register: RegisterEmbedder) -> None:
        register(["vec"], NoVectors())


class Naming:
    """A plugin whose config names ``routes`` (at ``("to", i)``)."""

    def __init__(self, *routes: str) -> None:
        self.routes = routes

    def route_references(self) -> list[RouteReference]:
        return [RouteReference(("to", index), route, f"target {route!r}") for index, route in enumerate(self.routes)]


class BrokenNaming(Naming):
    """Names a route nobody serves, but fails to start: its references are not checked."""

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        raise RuntimeError("cannot start")


async def test_a_served_route_passes_an_unknown_one_stops_the_start() -> None:
    ok = [
        ("mock", MockPlugin(MockConfig(routes=["chat"]))),
        ("vec", EmbedOnly()),
        ("n", Naming("chat", "vec")),
    ]
    async with Harness(ok) as harness:  # a stream route and an embedding-only route are both served
        assert route_problems(harness) == []
    bad = [("mock", MockPlugin(MockConfig(routes=["chat"]))), ("vec", EmbedOnly()), ("n", Naming("chta"))]
    harness = Harness(bad)
    with pytest.raises(ConfigError) as caught:
        async with harness:
            pass  # pragma: no cover - the start raises
    (problem,) = caught.value.problems
    assert (problem.plugin, problem.field, problem.line, problem.source) == ("n", "to[0]", None, None)
    assert problem.message == (
        "target 'chta' names route 'chta', which no plugin serves (did you mean 'chat'?); routes: 'chat', 'vec'"
    )


async def test_a_plugin_that_failed_to_start_is_not_checked() -> None:
    async with Harness([("mock", MockPlugin(MockConfig())), ("b", BrokenNaming("nowhere"))]) as harness:
        assert [f.key for f in harness.failures] == ["b"]
        assert route_problems(harness) == []


def test_the_message_names_a_failed_owner_or_the_failures_that_may_own_it() -> None:
    owned = PluginFailure(
        key="g",
        name="openai",
        message="plugin 'g' cannot be used: no key",
        stage="config",
        is_middleware=False,
        routes=["groq"],
    )
    unclaimed = PluginFailure(
        key="x", name="x", message="plugin 'x' failed to start", stage="init", is_middleware=False
    )
    middleware = PluginFailure(key="m", name="m", message="m broke", stage="init", is_middleware=True, routes=["groq"])
    assert failed_owner([middleware, owned], "groq") is owned
    assert failed_owner([owned], None) is None
    assert unknown_route_message("alias 'f'", "groq", ["mock"], [owned]) == (
        "alias 'f' names route 'groq', whose plugin failed: plugin 'g' cannot be used: no key"
    )
    assert unknown_route_message("alias 'f'", "gorq", ["mock"], [owned, unclaimed]) == (
        "alias 'f' names route 'gorq', which no plugin serves (did you mean 'groq'?); routes: 'mock'; "
        "adapter plugins that failed (one may own it): plugin 'x' failed to start"
    )
    assert (
        unknown_route_message("alias 'f'", "zzz", [], [])
        == "alias 'f' names route 'zzz', which no plugin serves; routes: none"
    )


async def test_aliases_and_references_of_a_loaded_config_are_located(tmp_path: Path) -> None:
    path = tmp_path / "plugins.yaml"
    path.write_text(
        "plugins:\n  mock: {}\naliases:\n  fast: mokc/echo\n  plain: echo\n  ok: mock/echo\n", encoding="utf-8"
    )
    harness = Harness.from_loaded(load_config(path, environ={}))
    with pytest.raises(ConfigError) as caught:
        async with harness:
            pass  # pragma: no cover - the start raises
    (problem,) = caught.value.problems  # a plain model id names no route
    assert (problem.plugin, problem.field, problem.line, problem.source) == (None, "aliases.fast", 4, str(path))
    assert problem.message == (
        "alias 'fast' names route 'mokc', which no plugin serves (did you mean 'mock'?); routes: 'mock'"
    )


async def test_a_route_read_from_the_environment_is_shown_masked(tmp_path: Path) -> None:
    # The masker hides a ${{ env.X }} value whole; the route part of it must not show either,
    # in an alias target or in a plugin's reference (a fallback target).
    path = tmp_path / "plugins.yaml"
    path.write_text(
        "plugins:\n  mock: {}\n  fallback: {default: ['${{ env.BACKUP }}']}\naliases:\n  fast: ${{ env.TARGET }}\n",
        encoding="utf-8",
    )
    environ = {"TARGET": "envSECRETtop/echo", "BACKUP": "otherSECRETroute/echo"}
    with pytest.raises(ConfigError) as caught:
        async with Harness.from_loaded(load_config(path, environ=environ)):
            pass  # pragma: no cover - the start raises
    messages = [problem.message for problem in caught.value.problems]
    assert [problem.field for problem in caught.value.problems] == ["aliases.fast", "default[0]"]
    assert messages[0] == "alias 'fast' names route **********, which no plugin serves; routes: 'mock'"
    assert all("SECRET" not in message for message in messages), messages
    assert "names route **********, which no plugin serves" in messages[1]


async def test_a_route_whose_adapter_plugin_failed_is_named_and_does_not_stop_the_start(tmp_path: Path) -> None:
    path = tmp_path / "plugins.yaml"
    path.write_text("plugins:\n  mock: {}\n  openai: {}\naliases:\n  smart: openai/gpt-4o\n", encoding="utf-8")
    loaded = load_config(path, environ={})  # no OPENAI_API_KEY: the openai plugin fails, claiming its route
    async with Harness.from_loaded(loaded) as harness:  # the rest works (docs/loader.md, failure policy)
        (problem,) = route_problems(harness, loaded)
    assert (problem.field, problem.line) == ("aliases.smart", 5)
    assert problem.message.startswith(
        "alias 'smart' names route 'openai', whose plugin failed: plugin 'openai' cannot be used: no API key"
    )
    path.write_text(
        "plugins:\n  mock: {}\n  openai: {}\naliases:\n  smart: openai/gpt-4o\n  fast: mokc/echo\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError) as caught:  # with an unknown route, the start stops naming both
        async with Harness.from_loaded(load_config(path, environ={})):
            pass  # pragma: no cover - the start raises
    assert [problem.field for problem in caught.value.problems] == ["aliases.smart", "aliases.fast"]
    assert "whose plugin failed" in caught.value.problems[0].message
    assert "which no plugin serves (did you mean 'mock'?)" in caught.value.problems[1].message
