"""Middleware order: (tier, plugins.yaml position), first = outermost; wrappers rejected."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from runtime_scripted import AdapterPlugin, PassThrough, ScriptedAdapter, reply

from harness_core import GenerateOptions, Harness, LlmError, StreamChunk, hookimpl
from harness_core.chain import ChainLink

pytestmark = pytest.mark.anyio


class First(PassThrough):
    @hookimpl(tryfirst=True)
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        async for chunk in super().llm_stream(options, call_next):
            yield chunk


class Last(PassThrough):
    @hookimpl(trylast=True)
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        async for chunk in super().llm_stream(options, call_next):
            yield chunk


async def test_pinned_order_tiers_then_yaml_position() -> None:
    log: list[str] = []
    plugins = [
        ("last1", Last("last1", log)),
        ("a", PassThrough("a", log)),
        ("fake", AdapterPlugin(ScriptedAdapter(reply()))),
        ("first1", First("first1", log)),
        ("b", PassThrough("b", log)),
        ("last2", Last("last2", log)),
        ("first2", First("first2", log)),
    ]
    async with Harness(plugins) as harness:
        expected = ["first1", "first2", "a", "b", "last1", "last2"]
        assert harness.chain() == [
            ChainLink("first1", "tryfirst"),
            ChainLink("first2", "tryfirst"),
            ChainLink("a", "normal"),
            ChainLink("b", "normal"),
            ChainLink("last1", "trylast"),
            ChainLink("last2", "trylast"),
        ]
        assert harness.chain("fake")[-1] == ChainLink("fake", "adapter")
        with pytest.raises(LlmError) as caught:
            harness.chain("nowhere")
        assert caught.value.code == "NO_ADAPTER"
        await harness.generate(GenerateOptions(route="fake"))
    assert [entry for entry in log if entry.startswith("enter:")] == [f"enter:{k}" for k in expected]
    # closing runs outermost first (each middleware left its loop normally, so finally order is inner-first
    # for a completed stream; the close order under break is pinned in test_closing.py)
    assert sorted(e for e in log if e.startswith("finally:")) == sorted(f"finally:{k}" for k in expected)


class SyncWrapper:
    @hookimpl(wrapper=True)
    def llm_stream(self, options: GenerateOptions, call_next: Any) -> Iterator[None]:
        return (yield)  # pragma: no cover - never run: rejected at start


class AsyncHookWrapper:
    @hookimpl(hookwrapper=True)
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        yield  # type: ignore[misc]  # pragma: no cover - never run: rejected at start


class NotAGenerator:
    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> None:
        """A coroutine, not an async generator."""


@pytest.mark.parametrize("plugin", [SyncWrapper(), AsyncHookWrapper(), NotAGenerator()])
async def test_bad_middleware_impls_are_rejected_at_start(plugin: object) -> None:
    adapter = ScriptedAdapter()
    harness = Harness([("fake", AdapterPlugin(adapter)), ("badmw", plugin)])
    with pytest.raises(LlmError) as caught:
        async with harness:
            pass  # pragma: no cover - never entered
    assert caught.value.code == "CONFIG"
    assert "'badmw'" in caught.value.message
    assert adapter.close_count == 1  # what was started is closed again
