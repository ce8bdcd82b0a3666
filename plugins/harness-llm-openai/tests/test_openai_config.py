"""The plugin's config through the real loader: env fallback only for OpenAI's own host."""

from __future__ import annotations

from pathlib import Path

import pytest
from openai_fixtures import chunk, sse
from openai_harness import options

from harness_core.loader import inspect_config, load_config
from harness_core.secret import Secret
from harness_core.testing.server import Reply, ScriptedServer
from harness_llm_openai import OpenAIPlugin

pytestmark = pytest.mark.anyio


def _load(tmp_path: Path, yaml_text: str, environ: dict[str, str]) -> OpenAIPlugin:
    path = tmp_path / "plugins.yaml"
    path.write_text(yaml_text)
    loaded = load_config(path, environ=environ)
    assert not loaded.failures
    plugin = loaded.plugins[0].instance
    assert isinstance(plugin, OpenAIPlugin)
    return plugin


def test_env_fallback_for_openai_host(tmp_path: Path) -> None:
    plugin = _load(tmp_path, "plugins:\n  openai: {}\n", {"OPENAI_API_KEY": "sk-env"})
    assert plugin.config.api_key == Secret("sk-env")
    assert "sk-env" not in repr(plugin.config)


async def test_env_key_never_sent_to_another_host(tmp_path: Path) -> None:
    with ScriptedServer(Reply(reads=[sse(chunk({}, finish="stop"))])) as server:
        yaml_text = f"plugins:\n  openai:local:\n    base_url: {server.url}/v1\n    routes: [local]\n"
        plugin = _load(tmp_path, yaml_text, {"OPENAI_API_KEY": "sk-env"})
        assert plugin.config.api_key is None
        adapter = plugin.make_adapter()
        try:
            _ = [c async for c in adapter.stream(options())]
        finally:
            await adapter.aclose()
        headers = server.requests[0].headers
    assert "authorization" not in headers
    assert all("sk-env" not in value for value in headers.values())


async def test_explicit_key_for_another_host(tmp_path: Path) -> None:
    with ScriptedServer(Reply(reads=[sse(chunk({}, finish="stop"))])) as server:
        yaml_text = (
            "plugins:\n  openai:groq:\n"
            f"    base_url: {server.url}/v1\n    api_key: ${{{{ env.GROQ_API_KEY }}}}\n    routes: [groq]\n"
        )
        plugin = _load(tmp_path, yaml_text, {"GROQ_API_KEY": "gsk-1", "OPENAI_API_KEY": "sk-env"})
        adapter = plugin.make_adapter()
        try:
            _ = [c async for c in adapter.stream(options())]
        finally:
            await adapter.aclose()
        assert server.requests[0].headers["authorization"] == "Bearer gsk-1"


@pytest.mark.parametrize(
    ("field_yaml", "field", "start"),
    [
        ("base_url: ${{ env.OPENAI_URL }}", "base_url", "base_url has an invalid port"),
        ("base_url: ftp://127.0.0.1/v1", "base_url", "base_url must start with http:// or https://"),
        ("headers:\n      ${{ env.HEADER }}: x", "headers", "a header name holds a ${{ … }} expression"),
        ("headers:\n      X Bad: x", "headers", "a header name holds ' ' at position 2: not a valid HTTP field name"),
        ("max_connections: -3", "max_connections", "expected an integer of at least 1"),
        ("pool_timeout: -1", "pool_timeout", "expected a number of at least 0.0"),
        ("timeout: {connect: -1}", "timeout.connect", "expected a number of at least 0.0"),
    ],
)
def test_unusable_http_settings_are_located_config_problems(
    tmp_path: Path, field_yaml: str, field: str, start: str
) -> None:
    path = tmp_path / "plugins.yaml"
    path.write_text(f"plugins:\n  openai:\n    api_key: sk-test\n    {field_yaml}\n", encoding="utf-8")
    loaded = inspect_config(path, environ={"OPENAI_URL": "http://127.0.0.1:99999/v1", "HEADER": "X-Secret-Name"})
    [problem] = loaded.problems
    assert (problem.plugin, problem.field, problem.line) == ("openai", field, 4)
    assert problem.message.startswith(start)
    assert "99999" not in problem.message
    assert "X-Secret-Name" not in problem.message


def test_config_check_lists_every_problem_of_nested_structs_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "plugins.yaml"
    path.write_text(
        "plugins:\n  openai:\n    api_key: sk-test\n"
        "    timeout: {connect: x, reed: 5, read: y}\n"
        "    models:\n      m1:\n        context_window: big\n        bogus: 1\n"
        "      m2:\n        max_output_tokens: x\n      m3: {context_window: 5}\n"
        "    max_connections: -3\n",
        encoding="utf-8",
    )
    problems = inspect_config(path, environ={}).problems
    assert [(p.field, p.line) for p in problems] == [
        ("timeout.connect", 4),
        ("timeout.reed", 4),
        ("timeout.read", 4),
        ("models.m1.context_window", 7),
        ("models.m1.bogus", 8),
        ("models.m2.max_output_tokens", 10),
        ("max_connections", 12),
    ]
    assert problems[1].message.startswith("unknown field `reed`")


def test_a_nested_value_that_is_no_mapping_is_one_problem(tmp_path: Path) -> None:
    path = tmp_path / "plugins.yaml"
    path.write_text(
        "plugins:\n  openai:\n    api_key: sk-test\n    models: {m1: 5}\n    timeout: 3\n", encoding="utf-8"
    )
    problems = inspect_config(path, environ={}).problems
    assert [(p.field, p.line) for p in problems] == [("models.m1", 4), ("timeout", 5)]
    path.write_text(
        "plugins:\n  openai:\n    api_key: sk-test\n    models: {m1: {context_window: 5}}\n"
        "    timeout: {connect: 1}\n    max_connections: 0\n",
        encoding="utf-8",
    )
    [problem] = inspect_config(path, environ={}).problems  # the valid nested values add nothing
    assert (problem.field, problem.line) == ("max_connections", 6)


@pytest.mark.parametrize(
    ("base_url", "provider"),
    [
        ("https://api.openai.com/v1", "openai"),
        ("https://API.OpenAI.com:443/v1/", "openai"),
        ("https://my-resource.openai.azure.com/openai/v1", "azure.ai.openai"),
        ("https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/l/endpoints/openapi", "gcp.vertex_ai"),
        ("https://generativelanguage.googleapis.com/v1beta/openai", "gcp.gemini"),
        ("https://api.deepseek.com/v1", "deepseek"),
        ("https://api.groq.com/openai/v1", "groq"),
        ("https://api.x.ai/v1", "x_ai"),
        ("https://api.mistral.ai/v1", "mistral_ai"),
        ("https://api.perplexity.ai", "perplexity"),
        ("http://127.0.0.1:8000/v1", "harness.openai_compatible"),  # a local vLLM or Ollama
        ("https://openai.example.com/v1", "harness.openai_compatible"),  # says openai, is not OpenAI's host
        ("https://user:pw@gateway.internal/v1", "harness.openai_compatible"),
    ],
)
def test_the_gen_ai_provider_is_the_base_url_s_host(base_url: str, provider: str) -> None:
    from harness_llm_openai.adapter import OpenAIAdapter
    from harness_llm_openai.responses_adapter import ResponsesAdapter
    from harness_llm_openai.semconv import provider_for_url

    assert provider_for_url(base_url) == provider
    for adapter in (OpenAIAdapter, ResponsesAdapter):
        assert adapter(OpenAIPlugin.Config(base_url=base_url)).gen_ai_provider("openai") == provider


def test_the_config_names_the_gen_ai_provider_of_a_compatible_server() -> None:
    from harness_llm_openai.adapter import OpenAIAdapter

    config = OpenAIPlugin.Config(base_url="http://127.0.0.1:8000/v1", gen_ai_provider="vllm")
    assert OpenAIAdapter(config).gen_ai_provider("openai") == "vllm"
