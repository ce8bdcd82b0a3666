"""The kit's plugin class registers an embedding adapter for its routes when it says it embeds."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from kit_adapter import ToyAdapter, ToyPlugin

from harness_core.embedding import EmbeddingAdapter, Embeddings, EmbedOptions

pytestmark = pytest.mark.anyio


class EmbeddingToy(ToyAdapter, EmbeddingAdapter):
    """The toy adapter with a one-dimensional embedder (the length of each text)."""

    async def embed(self, options: EmbedOptions) -> Embeddings:
        return Embeddings(array("f", [float(len(text)) for text in options.inputs]), 1)


class EmbeddingToyPlugin(ToyPlugin):
    adapter = "test_kit_embedder:EmbeddingToy"
    embeds = True


class ClaimingToyPlugin(ToyPlugin):
    embeds = True  # but ToyAdapter does not embed


def recorder() -> tuple[list[tuple[list[str], object]], Any]:
    """The registrations and the ``register`` function recording them (either hook's)."""
    registered: list[tuple[list[str], object]] = []

    def register(routes: Sequence[str], adapter: object) -> Callable[[], None]:
        registered.append((list(routes), adapter))
        return lambda: None

    return registered, register


async def test_a_plugin_that_embeds_registers_one_object_for_both_hooks() -> None:
    plugin = EmbeddingToyPlugin()
    streams, register_stream = recorder()
    embedders, register_embedder = recorder()
    plugin.register_embedder(register_embedder)  # either hook may run first
    plugin.register_adapter(register_stream)
    [(routes, adapter)] = streams
    assert embedders == [(routes, adapter)]
    assert routes == ["toy"]
    assert isinstance(adapter, EmbeddingToy)
    assert (await adapter.embed(EmbedOptions(inputs=["abc"]))).tolist() == [[3.0]]
    await adapter.aclose()


def test_a_plugin_that_does_not_embed_registers_no_embedder() -> None:
    embedders, register_embedder = recorder()
    ToyPlugin().register_embedder(register_embedder)
    assert embedders == []


def test_a_plugin_claiming_to_embed_without_an_embedder_fails_naming_it() -> None:
    embedders, register_embedder = recorder()
    with pytest.raises(TypeError, match=r"ClaimingToyPlugin\.embeds is set but ToyAdapter is not an EmbeddingAdapter"):
        ClaimingToyPlugin().register_embedder(register_embedder)
    assert embedders == []
