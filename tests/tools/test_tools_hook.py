"""The ``register_tools`` hook: each plugin on its own, duplicates name both owners, failures isolated."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from harness_core import GenerateOptions, Harness, LlmError, StreamChunk, hookimpl
from harness_core.hookspecs import RegisterAdapter, RegisterTool
from harness_core.testing.fake import FakeAdapter, text_reply

pytestmark = pytest.mark.anyio


def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


def whisper(text: str) -> str:
    return text.lower()


def untyped(text):  # type: ignore[no-untyped-def]
    return text


class Tools:
    """Registers ``funcs`` (as ``(func, name)``) as tools, optionally an adapter for route ``route``."""

    def __init__(self, *funcs: tuple[Any, str | None], route: str | None = None) -> None:
        self.funcs = funcs
        self.route = route

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        if self.route is not None:
            register([self.route], FakeAdapter(text_reply("hi")))

    @hookimpl
    def register_tools(self, register: RegisterTool) -> None:
        for func, name in self.funcs:
            register(func, name=name, description=None)


class AsyncTools:
    @hookimpl
    async def register_tools(self, register: RegisterTool) -> None:  # type: ignore[misc]
        register(shout)  # never runs: the coroutine is closed unawaited


class MiddlewareWithTools(Tools):
    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        async for chunk in call_next(options):
            yield chunk


async def test_every_plugin_registers_its_tools_bound_to_its_key() -> None:
    harness = Harness([("a", Tools((shout, None))), ("b:two", Tools((whisper, "quiet")))])
    assert len(harness.tools) == 0  # filled on start
    async with harness:
        assert harness.tools.names() == ["shout", "quiet"]
        assert harness.tools.owner("quiet") == "b:two"
        spec = harness.tools.select(["shout"])[0].spec
        assert spec.description == "Upper-case the text."
        assert harness.failures == ()


async def test_a_duplicate_tool_name_fails_that_plugin_only_naming_both_owners() -> None:
    harness = Harness(
        [
            ("first", Tools((shout, None))),
            ("second", Tools((whisper, "whisper"), (whisper, "shout"), route="second-route")),
            ("third", Tools((whisper, "third_tool"), route="third-route")),
        ]
    )
    async with harness:
        [failure] = harness.failures
        assert failure.key == "second"
        assert failure.stage == "register"
        assert not failure.is_middleware
        assert failure.message == "CONFIG: tool 'shout' is registered by 'first' and again by 'second'"
        # the failing plugin is out entirely: its earlier tool and its route are rolled back
        assert harness.tools.names() == ["shout", "third_tool"]
        assert harness.tools.owner("shout") == "first"
        assert harness.routes() == {"third-route": "third"}
        assert (await harness.generate(GenerateOptions(route="third-route", model="m"))).text == "hi"


async def test_a_failed_plugin_is_named_by_no_adapter() -> None:
    harness = Harness([("first", Tools((shout, None))), ("second", Tools((whisper, "shout"), route="r"))])
    async with harness:
        with pytest.raises(LlmError, match="'second'") as caught:
            await harness.generate(GenerateOptions(route="r", model="m"))
    assert caught.value.code == "NO_ADAPTER"


async def test_two_instances_of_one_plugin_share_its_tools() -> None:
    async with Harness([("p", Tools((shout, None))), ("p:two", Tools((shout, None)))]) as harness:
        assert harness.failures == ()
        assert harness.tools.owner("shout") == "p"


async def test_a_function_that_cannot_be_described_fails_its_plugin() -> None:
    harness = Harness([("bad", Tools((untyped, None))), ("good", Tools((shout, None)))])
    async with harness:
        [failure] = harness.failures
        assert failure.key == "bad"
        assert "TypeError: tool 'untyped': parameter 'text' needs a type hint" in failure.message
        assert harness.tools.names() == ["shout"]


async def test_an_async_register_tools_impl_is_a_failure() -> None:
    async with Harness([("async", AsyncTools())]) as harness:
        [failure] = harness.failures
        assert failure.message == "TypeError: register_tools must be a plain `def`, not `async def`"
        assert len(harness.tools) == 0


async def test_a_middleware_whose_tools_fail_stops_the_start() -> None:
    harness = Harness([("first", Tools((shout, None))), ("mw", MiddlewareWithTools((whisper, "shout")))])
    with pytest.raises(LlmError, match="middleware plugins failed to start: plugin 'mw' failed at register"):
        async with harness:
            pass
