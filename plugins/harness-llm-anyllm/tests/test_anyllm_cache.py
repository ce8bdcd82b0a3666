"""Prompt-cache marks through any-llm (issue 23). any-llm-sdk's completion API carries no cache
breakpoint to Bedrock (no ``cachePoint``: its Converse conversion keeps a text part's text only)
nor to Anthropic, and the other providers cache implicitly: a mark without a TTL changes nothing,
one with a TTL is ``UNSUPPORTED`` naming its place, before any request."""

from __future__ import annotations

import pytest
from anyllm_wire import ANTHROPIC_TEXT, OPENAI_TEXT, make_adapter, options, run

from harness_core.errors import LlmError
from harness_core.testing.server import Reply, ScriptedServer
from harness_core.types import CacheMark, Message, ModelInfo, TextBlock
from harness_llm_anyllm.serialize import NO_BREAKPOINTS, RequestBuilder

pytestmark = pytest.mark.anyio

MARKED = [Message(role="user", content=[TextBlock("long prefix", cache=CacheMark())])]
HOUR = [Message(role="user", content=[TextBlock("long prefix", cache=CacheMark(3600))])]


def test_bedrock_refuses_a_ttl_by_name_and_sends_no_breakpoint() -> None:
    assert "bedrock" in NO_BREAKPOINTS
    builder = RequestBuilder(library_provider="bedrock", images=True)
    info = ModelInfo(model="anthropic.claude-x")
    with pytest.raises(LlmError) as caught:
        builder.request(options(messages=HOUR), info)
    assert caught.value.code == "UNSUPPORTED"
    assert caught.value.provider == "anyllm"
    assert caught.value.message == (
        "messages[0].content[0]: a prompt-cache TTL of 3600 s is not supported by anyllm "
        "(any-llm carries no cache breakpoint to provider 'bedrock': no prompt caching)"
    )
    request = builder.request(options(messages=MARKED, system_cache=CacheMark()), info)
    assert "cache" not in repr(request.messages) + repr(request.arguments)  # nothing any-llm would drop


async def test_anthropic_through_any_llm_refuses_a_ttl_before_any_request(server: ScriptedServer) -> None:
    adapter = make_adapter("anthropic", server)
    try:
        _, error = await run(adapter, options(messages=HOUR))
        assert error is not None
        assert error.code == "UNSUPPORTED"
        assert "any-llm carries no cache breakpoint to provider 'anthropic'" in error.message
        assert server.requests == []
        server.add(Reply(reads=[ANTHROPIC_TEXT]))
        _, error = await run(adapter, options(messages=MARKED))
    finally:
        await adapter.aclose()
    assert error is None
    assert "cache_control" not in server.requests[0].body.decode()


async def test_an_implicitly_caching_provider_takes_an_untimed_mark_and_refuses_a_ttl(server: ScriptedServer) -> None:
    server.add(Reply(reads=[OPENAI_TEXT]))
    adapter = make_adapter("openai", server)
    try:
        _, error = await run(adapter, options(messages=MARKED))
        assert error is None
        _, refused = await run(adapter, options(messages=HOUR))
    finally:
        await adapter.aclose()
    assert refused is not None
    assert "any-llm provider 'openai' caches implicitly, if at all" in refused.message
    assert len(server.requests) == 1
