"""SyncHarness: a blocking facade on one long-lived portal."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import harness_core.loader
from harness_core import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    GenerateOptions,
    Harness,
    LlmError,
    Message,
    ModelInfo,
    StreamChunk,
    SyncHarness,
    TextBlock,
    TextDelta,
    hookimpl,
)
from harness_core.chain import ChainLink
from harness_core.loader import LoadedConfig
from harness_core.plugininfo import Defaults, LoadedPlugin
from harness_core.testing.fake import FakeAdapter, Raise, Step

REPLY: list[StreamChunk] = [
    BlockStart(0, "text"),
    TextDelta(0, "a"),
    TextDelta(0, "b"),
    BlockEnd(0, TextBlock("ab")),
    Finish(FinishReason(kind="stop")),
]


class Adapter(FakeAdapter):
    """The kit's FakeAdapter, recording the thread every stream runs on."""

    def __init__(self) -> None:
        super().__init__(self.script, models=[ModelInfo(model="m"), ModelInfo(model="only")])
        self.threads: set[int] = set()

    def script(self, options: GenerateOptions) -> list[Step]:
        self.threads.add(threading.get_ident())
        if options.model == "fail":
            return [Raise(LlmError("AUTH", "bad key", status=401))]
        return list(REPLY)


class Plugin:
    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter

    @hookimpl
    def register_adapter(self, register: Any) -> None:
        register(["sync"], self.adapter)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_generate_stream_and_introspection(backend: str) -> None:
    adapter = Adapter()
    harness = Harness([("sync:p", Plugin(adapter))], defaults=Defaults(route="sync", model="m"))
    with SyncHarness(harness, backend=backend) as sync:
        assert sync.harness is harness
        result = sync.generate(GenerateOptions())
        assert result.text == "ab"
        assert result.message.source == "sync:p"
        with pytest.raises(LlmError) as caught:
            sync.generate(GenerateOptions(model="fail"))
        assert (caught.value.code, caught.value.status) == ("AUTH", 401)
        with sync.stream(GenerateOptions()) as chunks:
            assert list(chunks) == REPLY
        with sync.stream(GenerateOptions()) as chunks:
            for chunk in chunks:
                assert chunk == REPLY[0]
                break
        assert adapter.finalized == adapter.started == 4  # the broken-off stream was closed on the portal too
        assert sync.routes() == {"sync": "sync:p"}
        assert sync.chain("sync") == [ChainLink("sync:p", "adapter")]
        assert sync.resolve_model() == ModelInfo(model="m", route="sync")
        assert sync.list_models() == [ModelInfo(model="m", route="sync"), ModelInfo(model="only", route="sync")]
        assert sync.plugins == harness.plugins
        assert sync.failures == ()
        with pytest.raises(RuntimeError, match="already running"):
            sync.__enter__()
    assert adapter.closed
    assert len(adapter.threads) == 1  # one portal thread for every call
    assert threading.get_ident() not in adapter.threads


def test_not_running() -> None:
    sync = SyncHarness(Harness())
    with pytest.raises(RuntimeError, match="not running"):
        sync.generate(GenerateOptions())
    with pytest.raises(RuntimeError, match="not running"):
        sync.stream(GenerateOptions())
    sync.__exit__(None, None, None)  # exiting a facade that never started does nothing


def test_start_failure_stops_the_portal() -> None:
    class BadMiddleware:
        @hookimpl(hookwrapper=True)
        def llm_stream(self, options: GenerateOptions, call_next: Any) -> Any:
            yield  # pragma: no cover - rejected at start

    sync = SyncHarness(Harness([("bad", BadMiddleware())]))
    with pytest.raises(LlmError, match="'bad'"):
        sync.__enter__()
    with pytest.raises(RuntimeError, match="not running"):
        sync.generate(GenerateOptions())


def test_from_config(monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = Adapter()
    config = LoadedConfig(
        path=None,
        plugins=[LoadedPlugin(key="sync", name="sync", instance=Plugin(adapter))],
        defaults=Defaults(route="sync"),
    )
    monkeypatch.setattr(harness_core.loader, "find_config", lambda explicit=None: None)
    monkeypatch.setattr(harness_core.loader, "load_config", lambda path: config)
    with SyncHarness.from_config(Path("x.yaml")) as sync:
        assert sync.generate(GenerateOptions()).text == "ab"


def test_real_loader_and_mock_plugin(tmp_path: Path) -> None:
    """End to end through the real loader and the installed mock provider plugin."""
    pytest.importorskip("harness_llm_mock")
    config = tmp_path / "plugins.yaml"
    config.write_text("plugins:\n  mock: {}\ndefaults: {route: mock, model: echo}\n")
    with SyncHarness.from_config(config) as sync:
        assert sync.routes() == {"mock": "mock"}
        result = sync.generate(GenerateOptions(messages=[Message.user("hello there")]))
    assert (result.message.route, result.message.source) == ("mock", "mock")
    assert result.finish.kind == "stop"
    assert result.text


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_leaving_with_a_stream_still_open_closes_it_instead_of_hanging(backend: str) -> None:
    adapter = Adapter()
    harness = Harness([("sync:p", Plugin(adapter))], defaults=Defaults(route="sync", model="m"))

    with SyncHarness(harness, backend=backend) as sync:

        def first_chunks() -> Iterator[StreamChunk]:
            with sync.stream(GenerateOptions()) as chunks:
                yield from chunks

        abandoned = first_chunks()
        assert next(abandoned) == REPLY[0]
    assert adapter.finalized == adapter.started == 1  # closed on the portal before it stopped
    assert adapter.closed
    abandoned.close()  # type: ignore[attr-defined] # the generator's own `with` exit later is harmless


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_exception_in_the_stream_block_closes_the_stream_and_propagates(backend: str) -> None:
    adapter = Adapter()
    harness = Harness([("sync:p", Plugin(adapter))], defaults=Defaults(route="sync", model="m"))
    with SyncHarness(harness, backend=backend) as sync:

        def consume() -> None:
            with sync.stream(GenerateOptions()) as chunks:
                next(iter(chunks))
                raise KeyError("consumer bug")

        with pytest.raises(KeyError):
            consume()
        assert adapter.finalized == adapter.started == 1
