"""The ``use_redactor`` hook: every plugin that stores or exports data gets the harness's masker."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pytest

from harness_core import GenerateOptions, Harness, LlmError, Message, Redactor, Secret, SecretMasking, hookimpl
from harness_core.hookspecs import CallNext
from harness_core.types import StreamChunk
from harness_llm_mock import MockConfig, MockPlugin

pytestmark = pytest.mark.anyio

KEY = "sk-hook-3b9d0f6e1a2c"


class Recorder(SecretMasking):
    """A sink middleware: keeps what it would store, masked."""

    def __init__(self) -> None:
        self.stored: list[Any] = []
        self.config = Config(Secret("tok-7f3e5a9c1d"))  # a Secret of a plugin's config joins the masker

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        self.stored.append(self.mask_data({"route": options.route, "prompt": options.messages[-1].text}))
        self.stored.append(self.mask_text(options.model))
        async for chunk in call_next(options):
            yield chunk


class Config(msgspec.Struct):
    token: Secret


class Refusing:
    """A plugin whose ``use_redactor`` raises."""

    @hookimpl
    def use_redactor(self, redact: Callable[[str], str]) -> None:
        raise RuntimeError(f"cannot use the masker for {KEY}")


class RefusingMiddleware(Refusing):
    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        async for chunk in call_next(options):  # pragma: no cover - never started
            yield chunk


async def test_a_library_harness_hands_its_masker_to_sink_middleware() -> None:
    redactor = Redactor()
    redactor.add(KEY)
    recorder = Recorder()
    harness = Harness([("sink", recorder), ("mock", MockPlugin(MockConfig(routes=[KEY])))], redact=redactor)
    options = GenerateOptions(route=KEY, model=None, messages=[Message.user(f"{KEY} tok-7f3e5a9c1d")])
    assert recorder.redact(KEY) == KEY  # nothing masked before the harness starts
    async with harness:
        assert harness.redact(f"a {KEY}") == "a **********"
        await harness.generate(options)
    # the model the mock served by default is recorded (LlmAdapter.default_model), not None
    assert recorder.stored == [{"route": "**********", "prompt": "********** **********"}, "echo"]


async def test_a_failing_use_redactor_of_a_middleware_stops_the_start() -> None:
    harness = Harness([("refusing", RefusingMiddleware())], redact=lambda text: text.replace(KEY, "****"))
    with pytest.raises(LlmError, match=r"middleware plugins failed to start: .*cannot use the masker for \*\*\*\*"):
        async with harness:
            pass  # pragma: no cover - the start fails


async def test_a_failing_use_redactor_of_another_plugin_is_a_failure() -> None:
    async with Harness([("refusing", Refusing()), ("mock", MockPlugin(MockConfig()))]) as harness:
        [failure] = harness.failures
        assert failure.key == "refusing"
        assert not failure.is_middleware
        assert harness.routes() == {"mock": "mock"}


async def test_a_harness_built_from_a_loaded_config_masks_what_the_environment_gave(tmp_path: Any) -> None:
    from harness_core.loader import load_config
    from harness_core.plugininfo import PluginFailure

    path = tmp_path / "plugins.yaml"
    path.write_text("plugins:\n  mock: {}\ndefaults:\n  route: mock\n  model: ${{ env.HOOK_MODEL }}\n")
    loaded = load_config(path, environ={"HOOK_MODEL": KEY})
    harness = Harness.from_loaded(loaded)
    assert harness.redact(f"model {KEY}") == "model **********"  # the value taken from the environment
    assert harness.failures == tuple(loaded.failures)
    failure = PluginFailure(key="x", name="x", stage="import", message="m", is_middleware=False)
    assert Harness.from_loaded(loaded, failures=[failure]).failures == (failure,)


async def test_a_further_mask_reaches_use_redactor_after_the_secrets(tmp_path: Any) -> None:
    from harness_core.loader import load_config

    path = tmp_path / "plugins.yaml"
    path.write_text("plugins:\n  mock: {}\ndefaults:\n  route: mock\n  model: ${{ env.HOOK_MODEL }}\n")
    loaded = load_config(path, environ={"HOOK_MODEL": KEY})
    harness = Harness.from_loaded(loaded, mask=lambda text: text.replace("own-format", "[own]"))
    recorder = Recorder()
    harness = Harness([("recorder", recorder)], redact=loaded.redactor, mask=harness.redact)
    async with harness:
        assert recorder.redact(f"{KEY} own-format tok-7f3e5a9c1d") == "********** [own] **********"
