"""The plugin: entry point, config validation, adapter registration, cheap import."""

from __future__ import annotations

import subprocess
import sys
import typing
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points

import msgspec
import pytest

import harness_llm_anthropic
from harness_core.adapter import LlmAdapter
from harness_core.config import EnvFallback
from harness_core.secret import Secret
from harness_llm_anthropic import AnthropicAdapter, AnthropicConfig, AnthropicPlugin, ModelConfig, Timeout


def test_entry_point() -> None:
    (point,) = [ep for ep in entry_points(group="harness.plugins") if ep.name == "anthropic"]
    assert point.load() is AnthropicPlugin


def test_config_defaults_and_validation() -> None:
    config = msgspec.convert({}, AnthropicConfig)
    assert config.base_url == "https://api.anthropic.com"
    assert config.routes == ["anthropic"]
    assert config.api_key is None
    assert config.timeout == Timeout()
    assert config.max_tokens_default == 4096
    assert config.anthropic_version == "2023-06-01"
    assert config.thinking_budgets == {"low": 1024, "medium": 4096, "high": 16384}
    full = msgspec.convert(
        {
            "api_key": "sk-x",
            "routes": ["claude"],
            "timeout": {"connect": 1, "read": None},
            "models": {"m": {"context_window": 5, "thinking_budgets": {"think": 2048}}},
        },
        AnthropicConfig,
        dec_hook=lambda tp, value: Secret(value) if tp is Secret else value,
    )
    assert full.api_key == Secret("sk-x")
    assert full.models["m"] == ModelConfig(context_window=5, thinking_budgets={"think": 2048})
    assert full.budgets_for("m") == {"think": 2048}
    assert full.budgets_for("other") == config.thinking_budgets
    with pytest.raises(msgspec.ValidationError, match="unknown_field"):
        msgspec.convert({"unknown_field": 1}, AnthropicConfig)


def test_api_key_env_fallback_only_for_anthropic_host() -> None:
    hints = typing.get_type_hints(AnthropicConfig, include_extras=True)
    (marker,) = [m for m in hints["api_key"].__metadata__ if isinstance(m, EnvFallback)]
    assert marker.var == "ANTHROPIC_API_KEY"
    assert marker.only_when == {"base_url": "https://api.anthropic.com"}


def test_default_effort_per_model() -> None:
    config = AnthropicConfig(default_effort="low", models={"m": ModelConfig(default_effort="high")})
    assert config.default_effort_for("m") == "high"
    assert config.default_effort_for("x") == "low"


def test_register_adapter() -> None:
    plugin = AnthropicPlugin(AnthropicConfig(routes=["a", "b"]))
    registered: list[tuple[Sequence[str], LlmAdapter]] = []

    def register(routes: Sequence[str], adapter: LlmAdapter) -> Callable[[], None]:
        registered.append((routes, adapter))
        return lambda: None

    plugin.register_adapter(register)
    ((routes, adapter),) = registered
    assert routes == ["a", "b"]
    assert isinstance(adapter, AnthropicAdapter)
    assert "routes=['a', 'b']" in repr(plugin)
    assert AnthropicPlugin().config.routes == ["anthropic"]


def test_secret_never_shows_in_repr() -> None:
    plugin = AnthropicPlugin(AnthropicConfig(api_key=Secret("sk-very-secret")))
    assert "sk-very-secret" not in repr(plugin)
    assert "sk-very-secret" not in repr(plugin.config)


def test_lazy_adapter_attribute() -> None:
    assert harness_llm_anthropic.AnthropicAdapter is AnthropicAdapter
    with pytest.raises(AttributeError, match="nothing"):
        _ = harness_llm_anthropic.nothing


def test_import_does_not_load_httpx() -> None:
    code = "import sys, harness_llm_anthropic; print('httpx' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_the_gen_ai_provider_is_anthropic_unless_the_config_says_another() -> None:
    from harness_llm_anthropic.adapter import AnthropicAdapter
    from harness_llm_anthropic.config import AnthropicConfig

    assert AnthropicAdapter(AnthropicConfig()).gen_ai_provider("anthropic") == "anthropic"
    configured = AnthropicConfig(base_url="http://127.0.0.1:9/", gen_ai_provider="gcp.vertex_ai")
    assert AnthropicAdapter(configured).gen_ai_provider("anthropic") == "gcp.vertex_ai"
