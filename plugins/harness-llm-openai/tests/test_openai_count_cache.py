"""Responses input-token counting and cache marks on the OpenAI wires (scripted server recording bodies)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from harness_core.errors import LlmError
from harness_core.secret import Secret
from harness_core.testing.server import Reply, ScriptedServer
from harness_core.types import CacheMark, GenerateOptions, Message, ModelInfo, ToolSpec
from harness_llm_openai import Config, ResponsesAdapter
from harness_llm_openai.responses_serialize import ResponsesSerializer
from harness_llm_openai.serialize import RequestSerializer

pytestmark = pytest.mark.anyio

OPTIONS = GenerateOptions(
    model="gpt-x", system="S", max_tokens=9, tools=[ToolSpec("t", cache=CacheMark())], messages=[Message.user("hi")]
)


@pytest.fixture
async def adapter() -> AsyncIterator[tuple[ScriptedServer, ResponsesAdapter]]:
    with ScriptedServer() as server:
        instance = ResponsesAdapter(Config(base_url=server.url, api_key=Secret("k-" + "x" * 8), api="responses"))
        try:
            yield server, instance
        finally:
            await instance.aclose()


async def test_input_tokens_counts_the_countable_fields(adapter: tuple[ScriptedServer, ResponsesAdapter]) -> None:
    server, responses = adapter
    server.route(
        "POST", "/responses/input_tokens", Reply.json(200, {"object": "response.input_tokens", "input_tokens": 11})
    )
    assert await responses.count_tokens(OPTIONS) == 11
    body = server.requests[-1].json()
    assert set(body) == {"model", "input", "instructions", "tools"}  # no stream, store or max_output_tokens


async def test_input_tokens_errors(adapter: tuple[ScriptedServer, ResponsesAdapter]) -> None:
    server, responses = adapter
    with pytest.raises(LlmError) as caught:
        await responses.count_tokens(GenerateOptions(messages=[Message.user("x")]))
    assert caught.value.code == "BAD_REQUEST"
    server.route("POST", "/responses/input_tokens", Reply.json(200, {"count": 1}))
    with pytest.raises(LlmError) as caught:
        await responses.count_tokens(OPTIONS)
    assert caught.value.code == "PROTOCOL"


def test_a_ttl_is_unsupported_on_both_openai_wires() -> None:
    timed = GenerateOptions(model="gpt-x", system="S", system_cache=CacheMark(3600), messages=[Message.user("hi")])
    info = ModelInfo(model="gpt-x")
    for serializer in (RequestSerializer(provider="openai"), ResponsesSerializer(provider="openai")):
        serializer.body(OPTIONS, info)  # a mark without a TTL: implicit caching, nothing to send
        with pytest.raises(LlmError) as caught:
            serializer.body(timed, info)
        assert caught.value.code == "UNSUPPORTED"
        assert "system: a prompt-cache TTL of 3600 s" in caught.value.message
