"""Embeddings on the Gemini wire (``batchEmbedContents``) against a scripted server recording bodies."""

from __future__ import annotations

from array import array
from typing import Any

import msgspec
import pytest
from gemini_fixtures import make_config

from harness_core.embedding import EmbedOptions
from harness_core.errors import LlmError
from harness_core.runtime import Harness
from harness_core.testing.server import RecordedRequest, Reply, ScriptedServer
from harness_core.types import ModelInfo
from harness_llm_gemini import GeminiPlugin
from harness_llm_gemini.adapter import GeminiAdapter
from harness_llm_gemini.config import GeminiConfig

pytestmark = pytest.mark.anyio

PATH = "/v1beta/models/gemini-embedding-001:batchEmbedContents"


def echo(request: RecordedRequest) -> Reply:
    """Each request's vector is ``[len(text), 0.1]``."""
    requests = request.json()["requests"]
    return Reply.json(200, {"embeddings": [{"values": [len(r["content"]["parts"][0]["text"]), 0.1]} for r in requests]})


async def test_the_request_maps_task_type_and_dimensions(server: ScriptedServer, adapter: GeminiAdapter) -> None:
    server.route("POST", PATH, echo)
    result = await adapter.embed(EmbedOptions(inputs=["ab", "c"], input_type="query", dimensions=2))
    assert result.data == array("f", [2.0, 0.1, 1.0, 0.1])
    assert (result.model, result.usage) == ("gemini-embedding-001", None)
    [request] = server.requests
    assert request.path == PATH
    common = {"model": "models/gemini-embedding-001", "taskType": "RETRIEVAL_QUERY", "outputDimensionality": 2}
    assert request.json() == {
        "requests": [
            {"content": {"parts": [{"text": "ab"}]}, **common},
            {"content": {"parts": [{"text": "c"}]}, **common},
        ]
    }
    server.route("POST", "/v1beta/models/text-embedding-004:batchEmbedContents", echo)
    await adapter.embed(EmbedOptions(inputs=["d"], model="text-embedding-004", input_type="document"))
    assert server.requests[-1].json()["requests"] == [
        {"model": "models/text-embedding-004", "content": {"parts": [{"text": "d"}]}, "taskType": "RETRIEVAL_DOCUMENT"}
    ]
    await adapter.embed(EmbedOptions(inputs=["e"], model="text-embedding-004"))
    assert set(server.requests[-1].json()["requests"][0]) == {"model", "content"}


async def test_batches_of_the_configured_size_join_in_order() -> None:
    with ScriptedServer() as server:
        server.route("POST", PATH, echo)
        config = msgspec.structs.replace(make_config(server), embed_batch=2)
        async with Harness([("gemini", GeminiPlugin(config))]) as harness:
            result = await harness.embed(["a", "bb", "ccc", "dddd", "eeeee"], route="gemini")
    assert [len(r.json()["requests"]) for r in server.requests] == [2, 2, 1]
    assert [row[0] for row in result.tolist()] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert (result.route, result.source) == ("gemini", "gemini")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"embeddings": [{"values": [1.0]}]}, "returned 1 embeddings for 2 inputs"),
        ({"embeddings": [{"values": [1.0]}, {"values": [1.0, 2.0]}]}, "embedding 1 has 2 dimensions"),
        ({"embeddings": [{"values": []}, {"values": []}]}, "embedding 0 has 0 dimensions"),
        ({"vectors": []}, "unexpected"),
    ],
)
async def test_a_malformed_reply_is_protocol(
    server: ScriptedServer, adapter: GeminiAdapter, body: dict[str, Any], message: str
) -> None:
    server.add(Reply.json(200, body))
    with pytest.raises(LlmError) as caught:
        await adapter.embed(EmbedOptions(inputs=["a", "b"]))
    assert caught.value.code == "PROTOCOL"
    assert message in caught.value.message


async def test_errors_go_through_the_classifier(server: ScriptedServer, adapter: GeminiAdapter) -> None:
    bad_key = {
        "error": {
            "code": 400,
            "message": "API key not valid.",
            "status": "INVALID_ARGUMENT",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}],
        }
    }
    server.add(Reply.json(400, bad_key))
    server.add(
        Reply.json(
            429,
            {"error": {"code": 429, "message": "slow", "status": "RESOURCE_EXHAUSTED"}},
            headers={"retry-after": "4"},
        )
    )
    server.add(Reply.json(500, {"error": {"code": 500, "message": "boom", "status": "INTERNAL"}}))
    codes = []
    for _ in range(3):
        with pytest.raises(LlmError) as caught:
            await adapter.embed(EmbedOptions(inputs=["a"]))
        codes.append((caught.value.code, caught.value.retry_after))
    assert codes == [("AUTH", None), ("RATE_LIMITED", 4.0), ("SERVER", None)]
    with pytest.raises(LlmError) as refused:
        await adapter.embed(EmbedOptions(inputs=["a"], dimensions=0))
    assert (refused.value.code, refused.value.field) == ("BAD_REQUEST", "dimensions")
    assert len(server.requests) == 3


async def test_embedding_models_are_those_supporting_embed_content(
    server: ScriptedServer, adapter: GeminiAdapter
) -> None:
    page1 = {
        "models": [
            {"name": "models/gemini-2.5-flash", "supportedGenerationMethods": ["generateContent"]},
            {"name": "models/gemini-embedding-001", "supportedGenerationMethods": ["embedContent"]},
        ],
        "nextPageToken": "p2",
    }
    page2 = {"models": [{"name": "models/text-embedding-004", "supportedGenerationMethods": ["embedContent"]}]}
    server.add(Reply.json(200, page1), Reply.json(200, page2))
    assert await adapter.list_embedding_models() == [
        ModelInfo(model="gemini-embedding-001"),
        ModelInfo(model="text-embedding-004"),
    ]


def test_embed_batch_is_at_most_one_hundred() -> None:
    assert GeminiAdapter(GeminiConfig(api_key=None)).max_batch == 100
    with pytest.raises(msgspec.ValidationError, match="embed_batch"):
        msgspec.convert({"api_key": None, "embed_batch": 101}, GeminiConfig)
