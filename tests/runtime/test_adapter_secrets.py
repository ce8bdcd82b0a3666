"""The harness masks the plugins' own keys in everything an adapter produces, before middleware
(cache, trace, telemetry) and callers see it: a proxy echoing the Authorization header."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest

from harness_core import (
    BlockEnd,
    BlockStart,
    Failure,
    Finish,
    FinishReason,
    GenerateOptions,
    Harness,
    LlmAdapter,
    LlmError,
    ModelInfo,
    Redactor,
    Secret,
    StreamChunk,
    TextBlock,
    TextDelta,
    hookimpl,
)
from harness_core.secret import MASK

pytestmark = pytest.mark.anyio

KEY = "sk-" + "echo-" + 'q"\\' + "0123456789abcdef"


class EchoConfig(msgspec.Struct):
    api_key: Secret


class EchoingAdapter(LlmAdapter):
    """A provider behind a proxy that echoes the key everywhere it can."""

    def __init__(self, how: str) -> None:
        self.how = how

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        if self.how == "raise":
            raise LlmError("AUTH", f"invalid key {KEY!r}", status=401)
        yield BlockStart(0, "text")
        yield TextDelta(0, "echo " + KEY[:7])
        yield TextDelta(0, KEY[7:])
        yield BlockEnd(0, TextBlock("echo " + KEY))
        failure = Failure(code="SERVER", message=f"upstream saw Bearer {KEY}")
        yield Finish(FinishReason("error", failure=failure))

    def resolve_model(self, model: str) -> ModelInfo:
        raise LlmError("NOT_FOUND", f"{model} unknown for key {KEY}")

    async def list_models(self) -> list[ModelInfo]:
        raise LlmError("AUTH", f"bad key {KEY}", status=401, provider="echo")


class EchoPlugin:
    def __init__(self, how: str = "inband") -> None:
        self.config = EchoConfig(Secret(KEY))
        self.adapter = EchoingAdapter(how)

    @hookimpl
    def register_adapter(self, register: Any) -> None:
        register(["echo"], self.adapter)


class Recorder:
    """A middleware recording what it sees (as a cache or trace would store it)."""

    def __init__(self) -> None:
        self.seen: list[bytes] = []

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        async for chunk in call_next(options):
            self.seen.append(msgspec.json.encode(chunk))
            yield chunk


async def test_streamed_text_and_inband_failures_are_masked_before_middleware() -> None:
    recorder = Recorder()
    async with Harness([("rec", recorder), ("echo", EchoPlugin())]) as harness:
        with pytest.raises(LlmError) as caught:
            await harness.generate(GenerateOptions(messages=[], route="echo", model="m"))
    assert caught.value.message == f"upstream saw Bearer {MASK}"
    stored = b"".join(recorder.seen).decode()
    assert "0123456789abcdef" not in stored
    assert f'"text":"echo {MASK}"' in stored


async def test_a_raised_error_is_masked_in_the_finish_and_for_generate_callers() -> None:
    async with Harness([("echo", EchoPlugin("raise"))]) as harness:
        with pytest.raises(LlmError) as caught:
            await harness.generate(GenerateOptions(messages=[], route="echo", model="m"))
    assert caught.value.code == "AUTH"
    assert "0123456789abcdef" not in caught.value.message
    assert MASK in caught.value.message


async def test_list_models_and_resolve_model_errors_are_masked() -> None:
    async with Harness([("echo", EchoPlugin())]) as harness:
        with pytest.raises(LlmError) as listed:
            await harness.list_models("echo")
        with pytest.raises(LlmError) as resolved:
            harness.resolve_model("echo", "m")
    assert (listed.value.code, listed.value.status, listed.value.provider) == ("AUTH", 401, "echo")
    assert listed.value.message == f"bad key {MASK}"
    assert resolved.value.message == f"m unknown for key {MASK}"
    assert listed.value.__cause__ is None  # the original, unmasked error is not chained


async def test_secrets_of_a_given_redactor_are_masked_too_and_clean_errors_stay_as_they_are() -> None:
    redactor = Redactor()
    redactor.add("other-secret-value")

    class Plain(LlmAdapter):
        async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
            yield Finish(FinishReason("error", failure=Failure(code="SERVER", message="other-secret-value")))

        def resolve_model(self, model: str) -> ModelInfo:
            raise LlmError("NOT_FOUND", "nothing secret")

    class PlainPlugin:
        @hookimpl
        def register_adapter(self, register: Any) -> None:
            register(["plain"], Plain())

    async with Harness([("plain", PlainPlugin())], redact=redactor) as harness:
        with pytest.raises(LlmError) as caught:
            await harness.generate(GenerateOptions(messages=[], route="plain", model="m"))
        with pytest.raises(LlmError) as resolved:
            harness.resolve_model("plain", "m")
    assert caught.value.message == MASK
    assert resolved.value.message == "nothing secret"


async def test_an_ordinary_delta_reaches_the_caller_before_the_next_is_read() -> None:
    """With a realistic key configured, a delta is not held back until the next one: the server
    sends one delta and then stalls (sends nothing more, holds the connection); the caller sees
    the whole delta while the adapter's next read is still waiting."""
    from harness_core import Message
    from harness_core.testing.server import Reply, ScriptedServer
    from harness_llm_openai import Config, OpenAIPlugin

    key = "sk-" + "proj-" + "0123456789abcdef" * 3  # 56 characters, built at run time
    event = {"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": []}
    first = {**event, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello"}}]}
    with ScriptedServer(
        Reply(reads=[f"data: {msgspec.json.encode(first).decode()}\n\n".encode()], end="stall")
    ) as server:
        config = Config(base_url=f"{server.url}/v1", api_key=Secret(key), routes=["echo"])
        options = GenerateOptions(messages=[Message.user("hi")], route="echo", model="m")
        async with Harness([("openai", OpenAIPlugin(config))]) as harness, harness.stream(options) as chunks:
            async for chunk in chunks:  # the stall never ends: only a delta shown at once ends this loop
                if isinstance(chunk, TextDelta):
                    assert chunk.text == "Hello"
                    break
        assert server.requests[0].headers["authorization"] == f"Bearer {key}"


class ListingAdapter(EchoingAdapter):
    """A proxy whose model list echoes the Authorization header as a model id."""

    async def list_models(self) -> list[ModelInfo]:
        return [ModelInfo(model="gpt-4o"), ModelInfo(model=f"Bearer {KEY}")]


async def test_listed_model_ids_are_masked() -> None:
    plugin = EchoPlugin()
    plugin.adapter = ListingAdapter("inband")
    async with Harness([("echo", plugin)]) as harness:
        listed = await harness.list_models("echo")
    assert [info.model for info in listed] == ["gpt-4o", f"Bearer {MASK}"]
    assert {info.route for info in listed} == {"echo"}
