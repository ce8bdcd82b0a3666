"""The plugin: entry point, config validation and key fallback through the real loader, adapter
registration, cheap import."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from pathlib import Path

import msgspec
import pytest

import harness_llm_gemini
from harness_core.adapter import LlmAdapter
from harness_core.kit.config import HttpTimeouts
from harness_core.loader import load_config
from harness_core.secret import Secret
from harness_llm_gemini import GeminiAdapter, GeminiConfig, GeminiPlugin, ModelConfig, Translator
from harness_llm_gemini.translate import Translator as RealTranslator

GOOGLE_KEY = "AIza" + "GoogleKey0123456789abcdefghijklmnop"
GEMINI_KEY = "AIza" + "GeminiKey0123456789abcdefghijklmno"


def test_entry_point() -> None:
    (point,) = [ep for ep in entry_points(group="harness.plugins") if ep.name == "gemini"]
    assert point.load() is GeminiPlugin


def test_config_defaults_and_validation() -> None:
    config = msgspec.convert({}, GeminiConfig)
    assert config.base_url == "https://generativelanguage.googleapis.com/v1beta"
    assert config.routes == ["gemini"]
    assert config.api_key is None
    assert config.timeout == HttpTimeouts()
    assert config.include_thoughts is True
    full = msgspec.convert(
        {"routes": ["g"], "models": {"m": {"efforts": {"fast": 0, "deep": "high"}, "default_effort": "deep"}}},
        GeminiConfig,
    )
    assert full.models["m"] == ModelConfig(efforts={"fast": 0, "deep": "high"}, default_effort="deep")
    assert full.efforts_for("m") == {"fast": 0, "deep": "high"}
    assert full.default_effort_for("m") == "deep"
    assert full.default_effort_for("other") is None
    with pytest.raises(msgspec.ValidationError, match="unknown_field"):
        msgspec.convert({"unknown_field": 1}, GeminiConfig)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plugins.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def key_of(path: Path, environ: dict[str, str]) -> Secret | None:
    loaded = load_config(path, environ=environ)
    (plugin,) = [p for p in loaded.plugins if p.name == "gemini"]
    assert isinstance(plugin.instance, GeminiPlugin)
    return plugin.instance.config.api_key


def test_the_key_comes_from_the_environment_only_for_googles_host(tmp_path: Path) -> None:
    google = write(tmp_path, "plugins:\n  gemini: {}\n")
    assert key_of(google, {"GEMINI_API_KEY": GEMINI_KEY}) == Secret(GEMINI_KEY)
    assert key_of(google, {"GEMINI_API_KEY": GEMINI_KEY, "GOOGLE_API_KEY": GOOGLE_KEY}) == Secret(GOOGLE_KEY)
    assert key_of(google, {"GOOGLE_API_KEY": GOOGLE_KEY}) == Secret(GOOGLE_KEY)
    (failure,) = load_config(google, environ={}).failures
    assert failure.key == "gemini"
    assert "no API key: set the environment variables GEMINI_API_KEY or GOOGLE_API_KEY" in failure.message
    assert "field 'api_key'" in failure.message
    opted_out = write(tmp_path, "plugins:\n  gemini: {api_key: null}\n")
    assert key_of(opted_out, {}) is None
    gateway = write(tmp_path, "plugins:\n  gemini:\n    base_url: https://gateway.example.com/v1beta\n")
    assert key_of(gateway, {"GEMINI_API_KEY": GEMINI_KEY, "GOOGLE_API_KEY": GOOGLE_KEY}) is None


def test_register_adapter() -> None:
    plugin = GeminiPlugin(GeminiConfig(routes=["a", "b"]))
    registered: list[tuple[Sequence[str], LlmAdapter]] = []

    def register(routes: Sequence[str], adapter: LlmAdapter) -> Callable[[], None]:
        registered.append((routes, adapter))
        return lambda: None

    plugin.register_adapter(register)
    ((routes, adapter),) = registered
    assert routes == ["a", "b"]
    assert isinstance(adapter, GeminiAdapter)
    assert "routes=['a', 'b']" in repr(plugin)
    assert GeminiPlugin().config.routes == ["gemini"]


def test_secret_never_shows_in_repr() -> None:
    plugin = GeminiPlugin(GeminiConfig(api_key=Secret(GOOGLE_KEY)))
    assert GOOGLE_KEY not in repr(plugin)
    assert GOOGLE_KEY not in repr(plugin.config)


def test_lazy_attributes() -> None:
    assert harness_llm_gemini.GeminiAdapter is GeminiAdapter
    assert Translator is RealTranslator
    with pytest.raises(AttributeError, match="nothing"):
        _ = harness_llm_gemini.nothing


def test_import_does_not_load_httpx() -> None:
    code = "import sys, harness_llm_gemini; print('httpx' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("fields", "provider"),
    [
        ({}, "gcp.gemini"),
        ({"base_url": "https://llm-gateway.example.com/v1beta"}, "gcp.gemini"),  # a gateway speaking the Gemini API
        (
            {"base_url": "https://aiplatform.googleapis.com/v1/projects/p/locations/global/publishers/google"},
            "gcp.vertex_ai",
        ),
        (
            {"base_url": "https://europe-west4-aiplatform.googleapis.com/v1/projects/p/locations/l/publishers/google"},
            "gcp.vertex_ai",
        ),
        ({"gen_ai_provider": "gcp.gen_ai"}, "gcp.gen_ai"),
    ],
)
def test_the_gen_ai_provider_is_gemini_or_vertex_ai(fields: dict[str, str], provider: str) -> None:
    from harness_llm_gemini.adapter import GeminiAdapter
    from harness_llm_gemini.config import GeminiConfig

    config = msgspec.convert(fields, GeminiConfig)
    assert GeminiAdapter(config).gen_ai_provider("gemini") == provider
