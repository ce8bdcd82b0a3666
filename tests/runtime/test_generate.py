"""generate(): the stream collected through BlockAssembler; error and aborted finishes raise."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from runtime_scripted import AdapterPlugin, Raise, ScriptedAdapter, reply

from harness_core import (
    AbortSignal,
    Finish,
    FinishReason,
    GenerateOptions,
    Harness,
    LlmError,
    Message,
    StreamChunk,
    TextBlock,
    TokenUsage,
    Usage,
    hookimpl,
)
from harness_core.plugininfo import Defaults

pytestmark = pytest.mark.anyio


async def test_generate_returns_message_usage_and_finish() -> None:
    script = [*reply("hi", "h", "i")[:-1], Usage(TokenUsage(3, 2)), Finish(FinishReason(kind="stop", raw="end"))]
    adapter = ScriptedAdapter(script)
    async with Harness(
        [("mock:a", AdapterPlugin(adapter, ["mock"]))], defaults=Defaults(route="mock", model="echo")
    ) as h:
        result = await h.generate(GenerateOptions(messages=[Message.user("x")]))
    assert result.message == Message(
        role="assistant", content=[TextBlock("hi")], route="mock", source="mock:a", model="echo"
    )
    assert result.text == "hi"
    assert result.usage == TokenUsage(3, 2)
    assert result.finish == FinishReason(kind="stop", raw="end")
    assert result.replay_state is None
    assert (adapter.calls[0].route, adapter.calls[0].model) == ("mock", "echo")


async def test_default_model_applies_only_to_the_default_route() -> None:
    one, two = ScriptedAdapter(reply()), ScriptedAdapter(reply())
    plugins = [("one", AdapterPlugin(one, ["one"])), ("two", AdapterPlugin(two, ["two"]))]
    async with Harness(plugins, defaults=Defaults(route="one", model="m1")) as harness:
        await harness.generate(GenerateOptions(route="two"))
        await harness.generate(GenerateOptions(route="one"))
        await harness.generate(GenerateOptions(model="explicit"))
    assert two.calls[0].model is None
    assert [c.model for c in one.calls] == ["m1", "explicit"]
    async with Harness(
        plugins=[("x", AdapterPlugin(ScriptedAdapter(reply()), ["x"]))], defaults=Defaults(model="mm")
    ) as h:
        await h.generate(GenerateOptions(route="x"))  # a model-only default applies to any route


async def test_error_finish_raises_the_failure() -> None:
    error = LlmError("CONTEXT_LENGTH", "too long", status=400, provider="fake", provider_code="ctx")
    async with Harness([("fake", AdapterPlugin(ScriptedAdapter([Raise(error)])))]) as harness:
        with pytest.raises(LlmError) as caught:
            await harness.generate(GenerateOptions(route="fake"))
        assert caught.value.to_failure() == error.to_failure()
        with pytest.raises(LlmError) as caught:
            await harness.generate(GenerateOptions(route="nowhere"))
        assert caught.value.code == "NO_ADAPTER"


async def test_aborted_finish_raises_aborted() -> None:
    abort = AbortSignal()
    abort.fire("stop now")
    async with Harness([("fake", AdapterPlugin(ScriptedAdapter([Raise(LlmError("NETWORK", "closed"))])))]) as harness:
        with pytest.raises(LlmError, match="stop now") as caught:
            await harness.generate(GenerateOptions(route="fake", abort=abort))
    assert caught.value.code == "ABORTED"


class Emits:
    """A (buggy) middleware replacing the stream with fixed chunks."""

    def __init__(self, chunks: list[StreamChunk]) -> None:
        self.chunks = chunks

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        for chunk in self.chunks:
            yield chunk


@pytest.mark.parametrize(
    ("chunks", "code", "match"),
    [
        ([], "PROTOCOL", "without a finish"),
        ([Finish(FinishReason(kind="error"))], "INTERNAL", "no failure"),
        ([Finish(FinishReason(kind="aborted"))], "ABORTED", "aborted"),
    ],
)
async def test_generate_on_malformed_middleware_output(chunks: list[StreamChunk], code: str, match: str) -> None:
    async with Harness([("emits", Emits(chunks))]) as harness:
        with pytest.raises(LlmError, match=match) as caught:
            await harness.generate(GenerateOptions(route="any"))
    assert caught.value.code == code


async def test_not_running() -> None:
    harness = Harness()
    with pytest.raises(RuntimeError, match="not running"):
        harness.stream(GenerateOptions())
    with pytest.raises(RuntimeError, match="not running"):
        await harness.generate(GenerateOptions())
    with pytest.raises(RuntimeError, match="not running"):
        harness.chain()
    with pytest.raises(RuntimeError, match="not running"):
        harness.resolve_model("x", "y")
