"""Embeddings on the OpenAI wire (``POST /embeddings``) against a scripted server recording bodies."""

from __future__ import annotations

import base64
import struct
from array import array
from collections.abc import AsyncIterator, Sequence
from typing import Any

import msgspec
import pytest

from harness_core.embedding import EmbedOptions
from harness_core.errors import LlmError
from harness_core.runtime import Harness
from harness_core.secret import Secret
from harness_core.testing.server import RecordedRequest, Reply, ScriptedServer
from harness_core.types import ModelInfo, TokenUsage
from harness_llm_openai import Config, OpenAIAdapter, OpenAIPlugin, ResponsesAdapter

pytestmark = pytest.mark.anyio

KNOWN = (0.1, -2.5, 3.0e-8, 1.0 / 3.0)
"""Floats that are not exact in float32: the decoded bytes must be exactly their float32 packing."""


def key() -> Secret:
    return Secret("sk-" + "e" * 24)


def b64(values: Sequence[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()


def reply(
    vectors: Sequence[Sequence[float] | str], *, model: str | None = "text-embedding-3-small", tokens: int | None = 7
) -> Reply:
    body: dict[str, Any] = {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": vector} for i, vector in enumerate(vectors)],
    }
    if model is not None:
        body["model"] = model
    if tokens is not None:
        body["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
    return Reply.json(200, body)


def echo(request: RecordedRequest) -> Reply:
    """Each input's vector is ``[len(text), first character code]``, base64 as asked."""
    texts = request.json()["input"]
    return reply([b64([float(len(text)), float(ord(text[0]))]) for text in texts], tokens=len(texts))


@pytest.fixture
async def wire() -> AsyncIterator[tuple[ScriptedServer, OpenAIAdapter]]:
    with ScriptedServer() as server:
        adapter = OpenAIAdapter(Config(base_url=server.url, api_key=key()))
        try:
            yield server, adapter
        finally:
            await adapter.aclose()


async def test_base64_decodes_exactly_into_the_buffer(wire: tuple[ScriptedServer, OpenAIAdapter]) -> None:
    server, adapter = wire
    server.add(reply([b64(KNOWN), b64([-v for v in KNOWN])]))
    result = await adapter.embed(EmbedOptions(inputs=["one", "two"]))
    assert result.data.tobytes() == struct.pack("<8f", *KNOWN, *(-v for v in KNOWN))
    assert (len(result), result.dimensions) == (2, 4)
    assert result.model == "text-embedding-3-small"
    assert result.usage == TokenUsage(7, None)
    [request] = server.requests
    assert (request.method, request.path) == ("POST", "/embeddings")
    assert request.headers["authorization"] == "Bearer " + key().get_secret_value()
    assert request.json() == {"model": "text-embedding-3-small", "input": ["one", "two"], "encoding_format": "base64"}


async def test_model_and_dimensions_are_sent_and_input_type_is_not(
    wire: tuple[ScriptedServer, OpenAIAdapter],
) -> None:
    server, adapter = wire
    server.add(reply([b64([1.0, 0.0])], model=None, tokens=None))
    options = EmbedOptions(inputs=["q"], model="text-embedding-3-large", dimensions=2, input_type="query")
    result = await adapter.embed(options)
    assert server.requests[0].json() == {
        "model": "text-embedding-3-large",
        "input": ["q"],
        "encoding_format": "base64",
        "dimensions": 2,
    }
    assert result.model == "text-embedding-3-large"  # the reply named none: the requested one
    assert result.usage is None


async def test_a_float_list_reply_is_accepted(wire: tuple[ScriptedServer, OpenAIAdapter]) -> None:
    server, adapter = wire
    server.add(reply([list(KNOWN), [0.5, 0.25, 0.125, 2.0]], model="nomic-embed-text"))
    result = await adapter.embed(EmbedOptions(inputs=["a", "b"]))
    assert result.data == array("f", [*KNOWN, 0.5, 0.25, 0.125, 2.0])
    assert result.model == "nomic-embed-text"


async def test_vectors_are_put_in_the_order_of_their_index(wire: tuple[ScriptedServer, OpenAIAdapter]) -> None:
    server, adapter = wire
    data = [
        {"index": 2, "embedding": b64([2.0])},
        {"index": 0, "embedding": [0.0]},
        {"index": 1, "embedding": b64([1.0])},
    ]
    server.add(Reply.json(200, {"data": data, "model": "m"}))
    result = await adapter.embed(EmbedOptions(inputs=["x", "y", "z"]))
    assert result.tolist() == [[0.0], [1.0], [2.0]]
    server.add(Reply.json(200, {"data": [{"embedding": [5.0]}, {"embedding": [6.0]}]}))  # no index: reply order
    assert (await adapter.embed(EmbedOptions(inputs=["x", "y"]))).tolist() == [[5.0], [6.0]]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([{"index": 0, "embedding": [1.0]}], "returned 1 embeddings for 2 inputs"),
        ([{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}], "got index 0"),
        ([{"index": 0, "embedding": [1.0]}, {"index": 2, "embedding": [2.0]}], "got index 2"),
        ([{"index": 0, "embedding": [1.0]}, {"embedding": [2.0]}], "got index None"),
        ([{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [2.0, 3.0]}], "embedding 1 has 2 dimensions"),
        (
            [{"index": 0, "embedding": "@@@"}, {"index": 1, "embedding": "AAAA"}],
            "embedding 0: an embedding is not valid",
        ),
        (
            [{"index": 0, "embedding": "AAA="}, {"index": 1, "embedding": "AAAA"}],
            "embedding 0: a base64 embedding holds",
        ),
        ([{"index": 0, "embedding": []}, {"index": 1, "embedding": ""}], "empty embeddings"),
        ([{"index": 0, "embedding": {"x": 1}}, {"index": 1, "embedding": []}], "unexpected /embeddings response"),
    ],
)
async def test_a_malformed_reply_is_protocol(
    wire: tuple[ScriptedServer, OpenAIAdapter], data: list[dict[str, Any]], message: str
) -> None:
    server, adapter = wire
    server.add(Reply.json(200, {"data": data}))
    with pytest.raises(LlmError) as caught:
        await adapter.embed(EmbedOptions(inputs=["a", "b"]))
    assert caught.value.code == "PROTOCOL"
    assert caught.value.provider == "openai"
    assert message in caught.value.message


async def test_dimensions_below_one_are_refused_before_any_request(wire: tuple[ScriptedServer, OpenAIAdapter]) -> None:
    server, adapter = wire
    with pytest.raises(LlmError) as caught:
        await adapter.embed(EmbedOptions(inputs=["a"], dimensions=0))
    assert (caught.value.code, caught.value.message) == ("BAD_REQUEST", "dimensions must be at least 1, got 0")
    assert caught.value.field == "dimensions"  # a gateway names it as param
    assert server.requests == []


@pytest.mark.parametrize(
    ("status", "body", "headers", "code", "retry_after"),
    [
        (401, {"error": {"message": "Incorrect API key", "type": "invalid_request_error"}}, {}, "AUTH", None),
        (
            429,
            {"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}},
            {"retry-after": "3"},
            "RATE_LIMITED",
            3.0,
        ),
        (429, {"error": {"message": "quota", "type": "insufficient_quota"}}, {}, "QUOTA", None),
        (500, {"error": {"message": "boom", "type": "server_error"}}, {}, "SERVER", None),
        (400, {"error": {"message": "'$.input' is invalid", "type": "invalid_request_error"}}, {}, "BAD_REQUEST", None),
    ],
)
async def test_http_errors_are_classified(
    wire: tuple[ScriptedServer, OpenAIAdapter],
    status: int,
    body: dict[str, Any],
    headers: dict[str, str],
    code: str,
    retry_after: float | None,
) -> None:
    server, adapter = wire
    server.add(Reply.json(status, body, headers=headers))
    with pytest.raises(LlmError) as caught:
        await adapter.embed(EmbedOptions(inputs=["a"]))
    assert (caught.value.code, caught.value.status, caught.value.retry_after) == (code, status, retry_after)
    assert body["error"]["message"] in caught.value.message


async def test_batches_split_and_join_in_order_through_the_harness() -> None:
    with ScriptedServer() as server:
        server.route("POST", "/embeddings", echo)
        plugin = OpenAIPlugin(Config(base_url=server.url, api_key=key(), embed_batch=2, routes=["emb"]))
        async with Harness([("openai", plugin)]) as harness:
            assert harness.embed_routes() == {"emb": "openai"}
            result = await harness.embed(["a", "bb", "ccc", "dddd", "eeeee"], route="emb")
        assert [request.json()["input"] for request in server.requests] == [["a", "bb"], ["ccc", "dddd"], ["eeeee"]]
        assert result.tolist() == [[1.0, 97.0], [2.0, 98.0], [3.0, 99.0], [4.0, 100.0], [5.0, 101.0]]
        assert result.usage == TokenUsage(5, None)  # 2 + 2 + 1, summed over the batches
        assert (result.route, result.source, result.model) == ("emb", "openai", "text-embedding-3-small")


async def test_a_secret_echoed_into_an_error_is_masked() -> None:
    def hostile(request: RecordedRequest) -> Reply:
        return Reply.json(400, {"error": {"message": "bad key " + request.headers["authorization"]}})

    with ScriptedServer() as server:
        server.route("POST", "/embeddings", hostile)
        plugin = OpenAIPlugin(Config(base_url=server.url, api_key=key()))
        async with Harness([("openai", plugin)]) as harness:
            with pytest.raises(LlmError) as caught:
                await harness.embed(["a"], route="openai")
    assert caught.value.code == "BAD_REQUEST"
    assert "bad key" in caught.value.message
    assert key().get_secret_value() not in str(caught.value)


async def test_the_responses_api_embeds_on_the_same_routes() -> None:
    with ScriptedServer() as server:
        server.route("POST", "/embeddings", echo)
        plugin = OpenAIPlugin(Config(base_url=server.url, api_key=key(), api="responses", embedding_model="e5"))
        async with Harness([("openai", plugin)]) as harness:
            assert harness.routes() == harness.embed_routes() == {"openai": "openai"}
            result = await harness.embed(["hi"])
        assert isinstance(plugin._shared_adapter(), ResponsesAdapter)
    assert result.tolist() == [[2.0, 104.0]]
    assert server.requests[0].json()["model"] == "e5"


async def test_embedding_models_are_the_default_then_the_listed_embed_ids(
    wire: tuple[ScriptedServer, OpenAIAdapter],
) -> None:
    server, adapter = wire
    ids = ["gpt-4o", "text-embedding-3-large", "text-embedding-3-small", "nomic-Embed-text"]
    server.route("GET", "/models", Reply.json(200, {"object": "list", "data": [{"id": i} for i in ids]}))
    assert await adapter.list_embedding_models() == [
        ModelInfo(model="text-embedding-3-small"),
        ModelInfo(model="text-embedding-3-large"),
        ModelInfo(model="nomic-Embed-text"),
    ]


def test_embed_batch_is_configurable_and_at_least_one() -> None:
    assert OpenAIAdapter(Config(api_key=None)).max_batch == 2048
    assert OpenAIAdapter(Config(api_key=None, embed_batch=16)).max_batch == 16
    with pytest.raises(msgspec.ValidationError, match="embed_batch"):
        msgspec.convert({"embed_batch": 0}, Config)
