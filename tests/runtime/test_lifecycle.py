"""Start and stop: plugin failures, middleware failures, closing adapters and plugins, introspection."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from runtime_scripted import AdapterPlugin, PassThrough, ScriptedAdapter, reply

from harness_core import GenerateOptions, Harness, LlmError, ModelInfo, StreamChunk, hookimpl
from harness_core.plugininfo import Defaults, LoadedPlugin

pytestmark = pytest.mark.anyio


class Broken:
    """An adapter plugin whose register_adapter raises after registering one route."""

    def __init__(self) -> None:
        self.adapter = ScriptedAdapter()

    @hookimpl
    def register_adapter(self, register: Any) -> None:
        register(["half"], self.adapter)
        raise ConnectionError("cannot reach the model server")


class BrokenMiddleware(Broken):
    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        async for chunk in call_next(options):  # pragma: no cover - never started
            yield chunk


class AsyncRegister:
    @hookimpl
    async def register_adapter(self, register: Any) -> None:
        """Wrongly a coroutine: never awaited by pluggy."""


class BadSignature:
    @hookimpl
    def register_adapter(self, registrar: Any) -> None:  # pragma: no cover - rejected by pluggy
        """Argument name differs from the hookspec."""


class Closable:
    def __init__(self, log: list[str], name: str, error: Exception | None = None, hang: bool = False) -> None:
        self.log, self.name, self.error, self.hang = log, name, error, hang

    async def aclose(self) -> None:
        if self.hang:
            await anyio.sleep_forever()
        self.log.append(f"aclose:{self.name}")
        if self.error is not None:
            raise self.error


class SyncClose:
    def __init__(self) -> None:
        self.closed = False

    def aclose(self) -> None:  # not a coroutine function: not called by the runtime
        self.closed = True  # pragma: no cover - must not run


async def test_failing_adapter_plugins_do_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    broken = Broken()
    good = ScriptedAdapter(reply("fine"))
    plugins = [
        ("broken", broken),
        ("async", AsyncRegister()),
        ("sig", BadSignature()),
        ("good", AdapterPlugin(good, ["good"])),
    ]
    async with Harness(plugins) as harness:
        assert harness.routes() == {"good": "good"}  # "half" rolled back with its failed plugin
        assert [(f.key, f.stage, f.is_middleware) for f in harness.failures] == [
            ("sig", "register", False),
            ("broken", "register", False),
            ("async", "register", False),
        ]
        messages = {f.key: f.message for f in harness.failures}
        assert messages["broken"] == "ConnectionError: cannot reach the model server"
        assert "not `async def`" in messages["async"]
        assert "PluginValidationError" in messages["sig"]
        with pytest.raises(LlmError, match="cannot reach the model server") as caught:
            await harness.generate(GenerateOptions(route="half"))
        assert caught.value.code == "NO_ADAPTER"
        assert (await harness.generate(GenerateOptions(route="good"))).text == "fine"
    assert broken.adapter.close_count == 1  # registered once, so closed on exit
    assert "plugin 'broken' failed to start" in caplog.text


async def test_failing_middleware_plugin_stops_start_with_config() -> None:
    good = ScriptedAdapter()
    log: list[str] = []
    plugins = [("good", AdapterPlugin(good, ["good"])), ("mw", BrokenMiddleware()), ("c", Closable(log, "c"))]
    harness = Harness(plugins)
    with pytest.raises(LlmError, match="plugin 'mw' failed at register") as caught:
        async with harness:
            pass  # pragma: no cover - never entered
    assert caught.value.code == "CONFIG"
    assert good.close_count == 1
    assert log == ["aclose:c"]


async def test_exit_closes_adapters_then_plugins_once_each() -> None:
    log: list[str] = []
    shared = ScriptedAdapter()
    both = Closable(log, "both")

    class Two:
        @hookimpl
        def register_adapter(self, register: Any) -> None:
            register(["a"], shared)
            register(["b"], shared)

    sync_close = SyncClose()
    plugins = [("two", Two()), ("p", Closable(log, "p")), ("sync", sync_close), ("both", both)]
    async with Harness(plugins):
        pass
    assert shared.close_count == 1
    assert log == ["aclose:p", "aclose:both"]
    assert not sync_close.closed


async def test_close_errors_are_raised_after_everything_closed(caplog: pytest.LogCaptureFixture) -> None:
    log: list[str] = []
    one = [("a", Closable(log, "a", ValueError("a failed"))), ("b", Closable(log, "b"))]
    with pytest.raises(ValueError, match="a failed"):
        async with Harness(one):
            pass
    assert log == ["aclose:a", "aclose:b"]
    log.clear()
    two = [("a", Closable(log, "a", ValueError("a failed"))), ("b", Closable(log, "b", OSError("b failed")))]
    with pytest.raises(ExceptionGroup) as caught:
        async with Harness(two):
            pass
    assert [str(e) for e in caught.value.exceptions] == ["a failed", "b failed"]
    assert log == ["aclose:a", "aclose:b"]
    assert caplog.text.count("closing the adapter or plugin failed") == 3


async def test_hanging_close_is_bounded(caplog: pytest.LogCaptureFixture) -> None:
    log: list[str] = []
    harness = Harness([("hang", Closable(log, "hang", hang=True)), ("b", Closable(log, "b"))])
    harness.close_timeout = 0.01
    with caplog.at_level(logging.WARNING, logger="harness"):
        async with harness:
            pass
    assert log == ["aclose:b"]
    assert "took longer than" in caplog.text


async def test_exit_under_cancellation_still_closes() -> None:
    log: list[str] = []

    class AwaitsOnClose(Closable):
        async def aclose(self) -> None:
            await anyio.lowlevel.checkpoint()
            self.log.append(f"aclose:{self.name}")

    with anyio.CancelScope() as scope:
        async with Harness([("p", AwaitsOnClose(log, "p"))]):
            scope.cancel()
            await anyio.sleep_forever()
    assert log == ["aclose:p"]


async def test_single_use_and_unique_keys() -> None:
    harness = Harness()
    async with harness:
        with pytest.raises(RuntimeError, match="only once"):
            await harness.__aenter__()
    with pytest.raises(ValueError, match="listed twice"):
        Harness([("a", object()), ("a", object())])


async def test_loaded_plugins_and_introspection() -> None:
    adapter = ScriptedAdapter(models=[ModelInfo(model="echo", context_window=1000), ModelInfo(model="other")])
    loaded = LoadedPlugin(key="mock:x", name="mock", instance=AdapterPlugin(adapter, ["m"]), dist="d", version="1")
    log: list[str] = []
    harness = Harness([loaded, ("mw:two", PassThrough("mw", log))], defaults=Defaults(route="m", model="echo"))
    assert harness.plugins[0] is loaded
    assert harness.plugins[1].name == "mw"
    assert harness.defaults == Defaults(route="m", model="echo")
    async with harness:
        assert harness.resolve_model() == ModelInfo(model="echo", route="m", context_window=1000)
        assert harness.resolve_model("m", "other").model == "other"
        assert await harness.list_models() == [
            ModelInfo(model="echo", route="m", context_window=1000),
            ModelInfo(model="other", route="m"),
        ]
        with pytest.raises(LlmError) as caught:
            harness.resolve_model("m", "unknown")  # the adapter's own error passes through
        assert caught.value.code == "NOT_FOUND"
        with pytest.raises(LlmError) as caught:
            harness.resolve_model("nope", "x")
        assert caught.value.code == "NO_ADAPTER"
        with pytest.raises(LlmError) as caught:
            await harness.list_models("nope")
        assert caught.value.code == "NO_ADAPTER"
    async with Harness([("a", AdapterPlugin(adapter, ["a"]))]) as bare:
        with pytest.raises(LlmError, match="no default model") as caught:
            bare.resolve_model("a")
        assert caught.value.code == "BAD_REQUEST"
        assert bare.default_route() == "a"  # no defaults: the only route served is the default one
        with pytest.raises(LlmError, match="no model given for route 'a'") as caught:
            bare.resolve_model()
        assert caught.value.code == "BAD_REQUEST"
    async with Harness([("a", AdapterPlugin(adapter, ["a", "b"]))]) as two:
        assert two.default_route() is None  # two routes and no defaults: none is chosen
        with pytest.raises(LlmError) as caught:
            two.resolve_model()
        assert caught.value.code == "NO_ADAPTER"
        with pytest.raises(LlmError) as caught:
            await two.list_models()
        assert caught.value.code == "NO_ADAPTER"


class Misspelt:
    @hookimpl
    async def llm_steam(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        yield  # type: ignore[misc]  # pragma: no cover - never called


class OptionalExtra:
    @hookimpl(optionalhook=True)
    def some_future_hook(self) -> None:  # pragma: no cover - never called
        """Optional hooks of other hosts are allowed."""


async def test_unknown_hooks_fail_closed_as_middleware() -> None:
    with pytest.raises(
        LlmError, match=r"plugin 'typo' failed at register: TypeError: implements unknown hooks \['llm_steam'\]"
    ):
        async with Harness([("typo", Misspelt())]):
            pass  # pragma: no cover - never entered
    async with Harness([("opt", OptionalExtra())]) as harness:
        assert harness.failures == ()


async def test_start_error_wins_over_close_errors(caplog: pytest.LogCaptureFixture) -> None:
    log: list[str] = []
    plugins = [("c", Closable(log, "c", OSError("close failed"))), ("typo", Misspelt())]
    with pytest.raises(LlmError, match="unknown hooks"):
        async with Harness(plugins):
            pass  # pragma: no cover - never entered
    assert log == ["aclose:c"]
    assert "close failed" in caplog.text
