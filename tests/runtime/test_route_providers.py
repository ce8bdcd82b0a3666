"""The GenAI provider of a route (``gen_ai.provider.name``): ``Harness.route_provider`` and the
``use_route_providers`` hook that hands it to middleware (docs/hooks.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from harness_core import (
    EmbeddingAdapter,
    Embeddings,
    EmbedOptions,
    GenerateOptions,
    Harness,
    LlmAdapter,
    LlmError,
    hookimpl,
)
from harness_core.hookspecs import RegisterAdapter, RegisterEmbedder
from harness_core.middleware import CallNext, ProviderLookup
from harness_core.types import StreamChunk
from harness_llm_mock import MockConfig, MockPlugin

pytestmark = pytest.mark.anyio


class Declared(LlmAdapter):
    """An adapter naming its provider (``None``: it says nothing, so its plugin is named);
    ``asked`` counts the questions."""

    def __init__(self, provider: str | None = None) -> None:
        self.provider = provider
        self.asked: list[str] = []

    def gen_ai_provider(self, plugin: str) -> str | None:
        self.asked.append(plugin)
        return self.provider if self.provider is not None else super().gen_ai_provider(plugin)

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:  # pragma: no cover - not streamed
        raise AssertionError("not streamed")
        yield


class Vectors(EmbeddingAdapter):
    """An embedder that is no stream adapter (it declares nothing)."""

    async def embed(self, options: EmbedOptions) -> Embeddings:  # pragma: no cover - not called
        raise AssertionError("not called")


class Serving:
    def __init__(self, adapter: LlmAdapter | None, routes: Sequence[str], embedder: EmbeddingAdapter | None = None):
        self.adapter, self.embedder, self.routes = adapter, embedder, list(routes)

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        if self.adapter is not None:
            register(self.routes, self.adapter)

    @hookimpl
    def register_embedder(self, register: RegisterEmbedder) -> None:
        if self.embedder is not None:
            register(self.routes, self.embedder)


class Listening:
    """A middleware keeping the lookup the harness hands it."""

    def __init__(self) -> None:
        self.lookups: list[ProviderLookup] = []

    @hookimpl
    def use_route_providers(self, provider_of: ProviderLookup) -> None:
        self.lookups.append(provider_of)

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        async for chunk in call_next(options):  # pragma: no cover - not streamed
            yield chunk


class Refusing(Listening):
    @hookimpl
    def use_route_providers(self, provider_of: ProviderLookup) -> None:
        raise RuntimeError("cannot keep the lookup")


async def test_a_route_is_named_by_its_adapter_else_by_its_plugin() -> None:
    declared, silent = Declared("acme.cloud"), Declared()
    plugins: list[tuple[str, Any]] = [
        ("mock", MockPlugin(MockConfig(routes=["chat"]))),
        ("acme:eu", Serving(declared, ["eu", "eu2"])),
        ("plain:x", Serving(silent, ["r1"])),
        ("vec", Serving(None, ["vec"], Vectors())),
    ]
    async with Harness(plugins) as harness:
        assert harness.route_provider("chat") == "harness.mock"
        assert harness.route_provider("eu") == harness.route_provider("eu2") == "acme.cloud"
        assert harness.route_provider("eu2") == "acme.cloud"
        assert declared.asked == ["acme"]  # once per registration, handed its entry-point name
        assert harness.route_provider("r1") == "plain"  # says nothing: its plugin's name (not the key, not the route)
        assert harness.route_provider("vec") is None  # embeds only: no stream adapter
        assert harness.route_provider("vec", embeddings=True) == "vec"  # an embedder is named by its plugin
        assert harness.route_provider("chat", embeddings=True) == "harness.mock"
        assert harness.route_provider("eu", embeddings=True) == "acme.cloud"  # no embedder: its stream adapter
        assert harness.route_provider("nowhere") is None


async def test_middleware_receive_the_lookup_when_the_harness_starts() -> None:
    listening = Listening()
    # listed before the adapter: the lookup answers from the routes registered when it is asked
    async with Harness([("listening", listening), ("mock", MockPlugin(MockConfig()))]) as harness:
        [lookup] = listening.lookups
        assert lookup("mock") == harness.route_provider("mock") == "harness.mock"
        assert lookup("mock", embeddings=True) == "harness.mock"


async def test_a_failing_use_route_providers_of_a_middleware_stops_the_start() -> None:
    with pytest.raises(LlmError, match=r"middleware plugins failed to start: .*cannot keep the lookup"):
        async with Harness([("refusing", Refusing()), ("mock", MockPlugin(MockConfig()))]):
            pass  # pragma: no cover - the start fails
