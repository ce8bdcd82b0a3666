"""Embeddings through any-llm's ``aembedding`` (the OpenAI provider pointed at a scripted server)."""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import pytest
from anyllm_wire import base_url, key, make_adapter

from harness_core.embedding import EmbedOptions
from harness_core.errors import LlmError
from harness_core.runtime import Harness
from harness_core.secret import Secret
from harness_core.testing.server import RecordedRequest, Reply, ScriptedServer
from harness_core.types import ModelInfo, TokenUsage
from harness_llm_anyllm import AnyLLMPlugin
from harness_llm_anyllm.config import AnyLLMConfig

pytestmark = pytest.mark.anyio

KNOWN = (0.1, -2.5, 1.0 / 3.0)


def item(index: int, vector: Sequence[float], *, as_base64: bool) -> dict[str, Any]:
    packed = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
    return {"object": "embedding", "index": index, "embedding": packed if as_base64 else list(vector)}


def replying(
    order: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] = list,
) -> Callable[[RecordedRequest], Reply]:
    """Each input's vector is ``[len(text), 0.1, 1/3]``, in the encoding the request asked for."""

    def answer(request: RecordedRequest) -> Reply:
        body = request.json()
        as_base64 = body.get("encoding_format") == "base64"
        data = [
            item(i, [float(len(text)), 0.1, 1.0 / 3.0], as_base64=as_base64) for i, text in enumerate(body["input"])
        ]
        usage = {"prompt_tokens": len(body["input"]), "total_tokens": len(body["input"])}
        return Reply.json(200, {"object": "list", "data": order(data), "model": body["model"], "usage": usage})

    return answer


async def test_embeds_in_order_with_usage_and_dimensions() -> None:
    with ScriptedServer() as server:
        server.route("POST", "/v1/embeddings", replying(lambda data: data[::-1]))
        adapter = make_adapter("openai", server, embedding_model="text-embedding-3-small")
        try:
            result = await adapter.embed(EmbedOptions(inputs=["a", "bbb"], dimensions=3))
        finally:
            await adapter.aclose()
    assert result.data.tobytes() == struct.pack("<6f", 1.0, 0.1, 1.0 / 3.0, 3.0, 0.1, 1.0 / 3.0)
    assert (result.model, result.usage) == ("text-embedding-3-small", TokenUsage(2, None))
    assert await adapter.list_embedding_models() == [ModelInfo(model="text-embedding-3-small")]
    assert await make_adapter("openai", server).list_embedding_models() == []
    body = server.requests[0].json()
    assert (body["model"], body["input"], body["dimensions"]) == ("text-embedding-3-small", ["a", "bbb"], 3)


async def test_batches_and_the_route_through_the_harness() -> None:
    with ScriptedServer() as server:
        server.route("POST", "/v1/embeddings", replying())
        config = AnyLLMConfig(
            provider="openai", base_url=base_url("openai", server), api_key=Secret(key()), embed_batch=2
        )
        async with Harness([("anyllm", AnyLLMPlugin(config))]) as harness:
            assert harness.embed_routes() == {"openai": "anyllm"}
            result = await harness.embed(["a", "bb", "ccc"], route="openai", model="e5")
    assert [request.json()["input"] for request in server.requests] == [["a", "bb"], ["ccc"]]
    assert [row[0] for row in result.tolist()] == [1.0, 2.0, 3.0]
    assert result.usage == TokenUsage(3, None)


async def test_a_provider_any_llm_cannot_embed_with_registers_no_embedder() -> None:
    with ScriptedServer() as server:
        config = AnyLLMConfig(provider="anthropic", base_url=server.url, api_key=Secret(key()))
        async with Harness([("anyllm", AnyLLMPlugin(config))]) as harness:
            with pytest.raises(LlmError) as caught:
                await harness.embed(["a"], route="anthropic")
        adapter = make_adapter("anthropic", server)
        with pytest.raises(LlmError) as direct:
            await adapter.embed(EmbedOptions(inputs=["a"], model="m"))
    assert caught.value.code == "UNSUPPORTED"
    assert "route 'anthropic' does not serve embeddings" in caught.value.message
    assert (direct.value.code, direct.value.message) == ("UNSUPPORTED", "any-llm cannot embed with 'anthropic'")
    assert server.requests == []
    with pytest.raises(msgspec.ValidationError, match="field 'embedding_model': any-llm cannot embed with 'anthropic'"):
        msgspec.convert({"provider": "anthropic", "embedding_model": "x"}, AnyLLMConfig)


async def test_bad_requests_errors_and_mismatched_replies() -> None:
    with ScriptedServer() as server:
        adapter = make_adapter("openai", server)
        try:
            with pytest.raises(LlmError) as no_model:
                await adapter.embed(EmbedOptions(inputs=["a"]))
            with pytest.raises(LlmError) as no_dimensions:
                await adapter.embed(EmbedOptions(inputs=["a"], model="m", dimensions=0))
            assert server.requests == []
            server.add(Reply.json(401, {"error": {"message": "bad key", "type": "invalid_request_error"}}))
            with pytest.raises(LlmError) as auth:
                await adapter.embed(EmbedOptions(inputs=["a"], model="m"))
            server.add(replying(lambda data: data[:1]))
            with pytest.raises(LlmError) as short:
                await adapter.embed(EmbedOptions(inputs=["a", "b"], model="m"))
        finally:
            await adapter.aclose()
    assert (no_model.value.code, no_dimensions.value.code) == ("BAD_REQUEST", "BAD_REQUEST")
    assert "embedding_model" in no_model.value.message
    assert auth.value.code == "AUTH"
    assert key() not in str(auth.value)
    assert (short.value.code, short.value.message) == ("PROTOCOL", "the provider returned embeddings [0] for 2 inputs")
