"""countTokens and cache marks on the Gemini wire, against a scripted server that records bodies."""

from __future__ import annotations

import pytest

from harness_core.errors import LlmError
from harness_core.testing.server import Reply, ScriptedServer
from harness_core.types import GenerateOptions, Message, ToolSpec
from harness_llm_gemini.adapter import GeminiAdapter
from harness_llm_gemini.serialize import build_body

pytestmark = pytest.mark.anyio

OPTIONS = GenerateOptions(model="gemini-x", system="S", tools=[ToolSpec("t")], messages=[Message.user("one two")])


async def test_count_tokens_sends_the_generate_request(server: ScriptedServer, adapter: GeminiAdapter) -> None:
    server.route("POST", "/v1beta/models/gemini-x:countTokens", Reply.json(200, {"totalTokens": 7}))
    assert await adapter.count_tokens(OPTIONS) == 7
    request = server.requests[-1].json()["generateContentRequest"]
    assert request["model"] == "models/gemini-x"
    assert request["contents"] == [{"role": "user", "parts": [{"text": "one two"}]}]
    assert request["systemInstruction"] == {"parts": [{"text": "S"}]}
    assert "tools" in request


async def test_count_tokens_errors(server: ScriptedServer, adapter: GeminiAdapter) -> None:
    with pytest.raises(LlmError) as caught:
        await adapter.count_tokens(GenerateOptions(messages=[Message.user("x")]))
    assert caught.value.code == "BAD_REQUEST"
    server.route("POST", "/v1beta/models/gemini-x:countTokens", Reply.json(200, {"tokens": 7}))
    with pytest.raises(LlmError) as caught:
        await adapter.count_tokens(OPTIONS)
    assert caught.value.code == "PROTOCOL"


def test_cache_marks_change_nothing_and_a_ttl_is_unsupported() -> None:
    marked = GenerateOptions(model="gemini-x", messages=[Message.user("hi").cached()])
    assert build_body(marked, efforts={}) == build_body(
        GenerateOptions(model="gemini-x", messages=[Message.user("hi")]), efforts={}
    )
    with pytest.raises(LlmError) as caught:
        build_body(GenerateOptions(model="gemini-x", messages=[Message.user("hi").cached(3600)]), efforts={})
    assert caught.value.code == "UNSUPPORTED"
    assert "gemini" in caught.value.message
