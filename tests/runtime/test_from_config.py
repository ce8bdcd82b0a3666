"""Harness.from_config: built through the loader; failed middleware refuses to start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from runtime_scripted import AdapterPlugin, ScriptedAdapter, reply

import harness_core.loader
from harness_core import GenerateOptions, Harness, LlmError
from harness_core.loader import LoadedConfig
from harness_core.plugininfo import Defaults, LoadedPlugin, PluginFailure

pytestmark = pytest.mark.anyio


def fake_loader(monkeypatch: pytest.MonkeyPatch, config: LoadedConfig) -> list[Any]:
    calls: list[Any] = []

    def find_config(explicit: Any = None) -> Any:
        calls.append(("find", explicit))
        return Path("/found/plugins.yaml")

    def load_config(path: Any) -> LoadedConfig:
        calls.append(("load", path))
        return config

    monkeypatch.setattr(harness_core.loader, "find_config", find_config)
    monkeypatch.setattr(harness_core.loader, "load_config", load_config)
    return calls


async def test_from_config_builds_plugins_defaults_and_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    adapter_failure = PluginFailure(key="openai", name="openai", message="boom", stage="init", is_middleware=False)
    config = LoadedConfig(
        path=Path("/found/plugins.yaml"),
        plugins=[LoadedPlugin(key="mock", name="mock", instance=AdapterPlugin(ScriptedAdapter(reply("m")), ["mock"]))],
        failures=[adapter_failure],
        defaults=Defaults(route="mock", model="echo"),
    )
    calls = fake_loader(monkeypatch, config)
    harness = Harness.from_config("my.yaml")
    assert calls == [("find", "my.yaml"), ("load", Path("/found/plugins.yaml"))]
    assert harness.failures == (adapter_failure,)
    assert harness.defaults == Defaults(route="mock", model="echo")
    async with harness:
        assert (await harness.generate(GenerateOptions())).text == "m"


def test_from_config_refuses_failed_middleware(monkeypatch: pytest.MonkeyPatch) -> None:
    failures = [
        PluginFailure(key="redact", name="redact", message="ImportError: x", stage="import", is_middleware=True),
        PluginFailure(key="openai", name="openai", message="boom", stage="init", is_middleware=False),
    ]
    fake_loader(monkeypatch, LoadedConfig(path=None, failures=failures))
    with pytest.raises(LlmError, match="plugin 'redact' failed at import: ImportError: x") as caught:
        Harness.from_config()
    assert caught.value.code == "CONFIG"
    assert "openai" not in caught.value.message
