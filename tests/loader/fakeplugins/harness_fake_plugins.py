"""Test-only plugins for the loader and CLI tests (see entry_points.txt next to this file)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

import anyio
import click
import msgspec

from harness_core import (
    BlockStart,
    Finish,
    FinishReason,
    GenerateOptions,
    LlmAdapter,
    Secret,
    StreamChunk,
    TextDelta,
    hookimpl,
)
from harness_core.config import EnvFallback
from harness_core.hookspecs import CallNext, RegisterAdapter
from harness_llm_mock import MockAdapter, MockConfig

DEFAULT_HOST = "default.example"


class Inner(msgspec.Struct, forbid_unknown_fields=True):
    level: int


class StrictConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: str
    count: int = 1
    host: str = DEFAULT_HOST
    token: Annotated[Secret | None, EnvFallback("FAKE_TOKEN", only_when={"host": DEFAULT_HOST})] = None
    other: Annotated[str | None, "unrelated metadata", EnvFallback("FAKE_OTHER", only_when={"nosuchfield": 1})] = None
    extra: Annotated[str | None, EnvFallback("FAKE_EXTRA", only_when={"tags": []})] = None
    tags: list[str] = msgspec.field(default_factory=list)
    inner: Inner | None = None
    routes: list[str] = msgspec.field(default_factory=lambda: ["strict"])


class StrictPlugin:
    """An adapter plugin with a demanding config; serves its routes with the mock adapter."""

    Config = StrictConfig

    def __init__(self, config: StrictConfig) -> None:
        self.config = config

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        register(self.config.routes, MockAdapter(MockConfig(routes=self.config.routes)))


class FailingInitPlugin:
    """An adapter plugin whose constructor fails, quoting its secret (which must be scrubbed)."""

    Config = StrictConfig

    def __init__(self, config: StrictConfig) -> None:
        token = config.token.get_secret_value() if config.token else "none"
        raise RuntimeError(f"cannot connect with token {token}")

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:  # pragma: no cover - never built
        raise AssertionError


class FailingMiddlewarePlugin:
    """A middleware whose constructor fails: harness run must stop (fail closed)."""

    class Config(msgspec.Struct, forbid_unknown_fields=True):
        pass

    def __init__(self, config: Any) -> None:
        raise ValueError("middleware exploded")

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        async for chunk in call_next(options):  # pragma: no cover - never built
            yield chunk


class StartFailingMiddlewarePlugin:
    """A middleware that builds but fails at start (register_adapter raises)."""

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        raise RuntimeError("cannot start")

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        async for chunk in call_next(options):  # pragma: no cover - never started
            yield chunk


class NoFinishMiddlewarePlugin:
    """A (buggy) middleware that drops the finish chunk."""

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        async for chunk in call_next(options):
            if not isinstance(chunk, Finish):
                yield chunk


class BadConfigTypePlugin:
    Config = dict


class NoConfigPlugin:
    """A plugin class without Config: built with no arguments."""

    built = 0

    def __init__(self) -> None:
        NoConfigPlugin.built += 1


@click.command()
@click.argument("word", required=False, default="world")
def fake_command(word: str) -> None:
    """A plugin subcommand."""
    click.echo(f"fake command says {word}")


NOT_A_COMMAND = 42


class StubbornAdapter(LlmAdapter):
    """Ignores the abort signal: only task cancellation (a second Ctrl-C) stops it."""

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        yield BlockStart(index=0, block_type="text")
        yield TextDelta(index=0, text="partial ")
        await anyio.sleep_forever()
        yield Finish(reason=FinishReason(kind="stop"))  # pragma: no cover - never reached


class StubbornPlugin:
    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        register(["stubborn"], StubbornAdapter())


class NotAGeneratorMiddlewarePlugin:
    """A (buggy) middleware whose llm_stream is a plain coroutine: the harness refuses to start."""

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> Any:  # pragma: no cover - refused
        return call_next(options)


class RaisingMiddlewarePlugin:
    """A middleware that passes the whole reply on, then raises (a plugin's bug at run time)."""

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        async for chunk in call_next(options):
            yield chunk
        raise FileNotFoundError(2, "No such file or directory", "/proc/x")


class LenientPlugin:
    """An adapter plugin whose config ignores unknown fields (msgspec's default)."""

    class Config(msgspec.Struct, kw_only=True):
        count: int = 1
        size: int = 1

    def __init__(self, config: Any) -> None:
        self.config = config

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:  # pragma: no cover - never started
        raise AssertionError


class PolicyConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    token: Secret | None = None
    fail: bool = False


class PolicyPlugin:
    """A plugin with no hook, like the gateway's entry (its config is read by a command): it
    serves no adapter, so it fails closed; ``fail: true`` makes its constructor fail."""

    Config = PolicyConfig

    def __init__(self, config: PolicyConfig) -> None:
        if config.fail:
            raise RuntimeError("policy store unreachable")
        self.config = config


class ToolGuardConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    fail: bool = False


class ToolGuardPlugin:
    """A tool middleware only (``llm_tool_call``, no ``llm_stream``): a middleware all the same, so
    it fails closed; ``fail: true`` makes its constructor fail."""

    Config = ToolGuardConfig

    def __init__(self, config: ToolGuardConfig) -> None:
        if config.fail:
            raise RuntimeError("tool policy unreachable")
        self.config = config

    @hookimpl
    async def llm_tool_call(self, call: Any, tool: Any, call_next: Any) -> Any:  # pragma: no cover - never called here
        return await call_next(call)
