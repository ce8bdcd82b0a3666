"""Middleware on counted requests (``llm_count_tokens``): ``redact`` masks what is counted,
``balance`` and ``fallback`` pick the member or target a stream would; the rest pass by.

Every count runs through a real :class:`Harness` and the Anthropic adapter against scripted
servers on 127.0.0.1 that record the ``/v1/messages/count_tokens`` bodies (the provider is
scripted, never the harness).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import msgspec
import pytest

from harness_core import GenerateOptions, Harness, LlmError, Message
from harness_core.testing.server import Reply, ScriptedServer
from harness_llm_anthropic.config import AnthropicConfig
from harness_llm_anthropic.plugin import AnthropicPlugin
from harness_llm_mock import MockConfig, MockPlugin
from harness_middleware.balance import BalancePlugin, MemoryState
from harness_middleware.fallback import Cooldowns, FallbackPlugin
from harness_middleware.redact import RedactPlugin
from harness_middleware.retry import RetryPlugin

pytestmark = pytest.mark.anyio

COUNT: Final = "/v1/messages/count_tokens"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def provider(tokens: int | None = None, status: int = 200) -> ScriptedServer:
    """A scripted Anthropic server answering every count with ``tokens`` (or an error ``status``)."""
    server = ScriptedServer()
    if status == 200:
        server.route("POST", COUNT, Reply.json(200, {"input_tokens": tokens}))
    else:
        kind = "invalid_request_error" if status == 400 else "api_error"
        body = {"type": "error", "error": {"type": kind, "message": f"status {status}"}}
        server.route("POST", COUNT, Reply.json(status, body))
    return server


@pytest.fixture
def up() -> Iterator[ScriptedServer]:
    with provider(7) as server:
        yield server


@pytest.fixture
def down() -> Iterator[ScriptedServer]:
    with provider(status=503) as server:
        yield server


@pytest.fixture
def refusing() -> Iterator[ScriptedServer]:
    with provider(status=400) as server:
        yield server


def anthropic(route: str, server: ScriptedServer) -> tuple[str, AnthropicPlugin]:
    return f"anthropic:{route}", AnthropicPlugin(AnthropicConfig(base_url=server.url, routes=[route]))


def ask(text: str = "hi", **fields: Any) -> GenerateOptions:
    return GenerateOptions(messages=[Message.user(text)], **{"model": "claude-x", **fields})


def fallback(cooldowns: Cooldowns, **config: Any) -> tuple[str, FallbackPlugin]:
    return "fallback", FallbackPlugin(msgspec.convert(config, FallbackPlugin.Config), cooldowns=cooldowns)


def balance(pools: dict[str, Any]) -> tuple[str, BalancePlugin]:
    config = msgspec.convert({"pools": pools, "seed": 7}, BalancePlugin.Config)
    return "balance", BalancePlugin(config, state=MemoryState(), clock=Clock())


async def test_redact_masks_the_counted_request_as_the_stream_s(up: ScriptedServer) -> None:
    async with Harness([("redact", RedactPlugin()), anthropic("claude", up)]) as harness:
        counted = await harness.count_tokens(ask("mail jo@example.com", route="claude", system="to jo@example.com"))
    assert counted == 7
    (request,) = up.requests
    sent = request.json()
    assert sent["messages"] == [{"role": "user", "content": [{"type": "text", "text": "mail [REDACTED:email]"}]}]
    assert "jo@example.com" not in request.body.decode()
    assert "to [REDACTED:email]" in str(sent["system"])


async def test_redact_requests_false_counts_the_text_as_it_is(up: ScriptedServer) -> None:
    plugins = [("redact", RedactPlugin(RedactPlugin.Config(requests=False))), anthropic("claude", up)]
    async with Harness(plugins) as harness:
        assert await harness.count_tokens(ask("jo@example.com", route="claude")) == 7
    assert up.requests[0].json()["messages"][0]["content"] == [{"type": "text", "text": "jo@example.com"}]


async def test_fallback_counts_on_the_next_target_and_cools_none(up: ScriptedServer, down: ScriptedServer) -> None:
    cooldowns = Cooldowns(Clock())
    layer = fallback(cooldowns, targets={"main": ["spare/claude-spare"]})
    async with Harness([layer, anthropic("main", down), anthropic("spare", up)]) as harness:
        assert await harness.count_tokens(ask(route="main")) == 7
    assert len(down.requests) == 1
    assert up.requests[0].json()["model"] == "claude-spare"
    assert not cooldowns.cooling(("main", "claude-x"))


async def test_fallback_names_every_attempt_or_keeps_a_lone_route_s_error(
    down: ScriptedServer, refusing: ScriptedServer
) -> None:
    layer = fallback(Cooldowns(Clock()), targets={"main": ["bad"]})
    async with Harness([layer, anthropic("main", down), anthropic("bad", refusing)]) as harness:
        with pytest.raises(LlmError) as caught:
            await harness.count_tokens(ask(route="main"))
        assert caught.value.code == "BAD_REQUEST"  # the last target's error, not moving on
        assert "fallback attempts: main/claude-x: " in caught.value.message
        with pytest.raises(LlmError) as lone:
            await harness.count_tokens(ask(route="bad"))
        assert lone.value.code == "BAD_REQUEST"
        assert "attempts" not in lone.value.message


async def test_balance_counts_on_a_member_with_its_model(up: ScriptedServer, down: ScriptedServer) -> None:
    layer = balance({"pool": [{"target": "main"}, {"target": "spare/claude-member"}]})
    plugins = [layer, anthropic("main", down), anthropic("spare", up), ("mock", MockPlugin(MockConfig()))]
    async with Harness(plugins) as harness:
        for _ in range(3):  # whichever member the strategy picks first, the count comes from `spare`
            assert await harness.count_tokens(ask(route="pool")) == 7
        assert await harness.count_tokens(ask("a b c", route="mock", model="echo")) == 3  # not a pool: untouched
    assert {request.json()["model"] for request in up.requests} == {"claude-member"}


async def test_balance_names_every_attempt_when_no_member_counts(down: ScriptedServer) -> None:
    async with Harness([balance({"pool": [{"target": "main"}]}), anthropic("main", down)]) as harness:
        with pytest.raises(LlmError) as caught:
            await harness.count_tokens(ask(route="pool"))
    assert "balance attempts: main/claude-x: " in caught.value.message


async def test_count_chain_lists_only_the_middleware_that_take_part(up: ScriptedServer) -> None:
    layers = [("retry", RetryPlugin()), fallback(Cooldowns(Clock())), balance({"pool": [{"target": "claude"}]})]
    async with Harness([*layers, ("redact", RedactPlugin()), anthropic("claude", up)]) as harness:
        assert [link.key for link in harness.count_chain()] == ["fallback", "balance", "redact"]
