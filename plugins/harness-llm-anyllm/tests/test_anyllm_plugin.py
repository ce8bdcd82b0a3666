"""The plugin through the real loader, runtime and CLI: config checks naming the plugin and line,
the key fallback bound to the provider's own host, the whole middleware chain, and start-up that
never imports any-llm."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from anyllm_wire import MISTRAL_TEXT, UNICODE, key

from harness_core.loader import inspect_config, load_config
from harness_core.runtime import Harness
from harness_core.secret import Secret
from harness_core.testing.server import Reply, ScriptedServer
from harness_core.types import GenerateOptions, Message
from harness_llm_anyllm import PROVIDERS, AnyLLMPlugin

pytestmark = pytest.mark.anyio


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plugins.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _plugin(tmp_path: Path, text: str, environ: dict[str, str]) -> AnyLLMPlugin:
    loaded = load_config(_write(tmp_path, text), environ=environ)
    assert not loaded.failures, loaded.failures
    plugin = loaded.plugins[0].instance
    assert isinstance(plugin, AnyLLMPlugin)
    return plugin


def test_three_yaml_lines_take_the_key_from_the_provider_variable(tmp_path: Path) -> None:
    secret = key()
    text = "plugins:\n  anyllm:mistral:\n    provider: mistral\n    routes: [mistral]\n"
    plugin = _plugin(tmp_path, text, {"MISTRAL_API_KEY": secret})
    assert plugin.config.api_key == Secret(secret)
    assert plugin.config.served_routes == ["mistral"]
    assert secret not in repr(plugin) + repr(plugin.config)


def test_the_key_variable_is_never_read_for_another_host(tmp_path: Path) -> None:
    text = "plugins:\n  anyllm:\n    provider: mistral\n    base_url: http://127.0.0.1:9/\n"
    plugin = _plugin(tmp_path, text, {"MISTRAL_API_KEY": key()})
    assert plugin.config.api_key is None
    assert plugin.config.served_routes == ["mistral"]  # routes default to the provider name
    from harness_llm_anyllm.adapter import KEYLESS_PLACEHOLDER

    assert plugin.make_adapter()._key == KEYLESS_PLACEHOLDER


def test_another_providers_variable_is_not_used(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path, "plugins:\n  anyllm:\n    provider: mistral\n", {"OPENAI_API_KEY": key()})
    assert plugin.config.api_key is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("mistrall", "unknown any-llm provider 'mistrall'; known: anthropic, atlascloud"),
        ("voyage", "any-llm cannot stream chat completions from 'voyage'"),
    ],
)
def test_a_bad_provider_names_plugin_field_and_line(tmp_path: Path, value: str, message: str) -> None:
    text = f"plugins:\n  anyllm:x:\n    routes: [x]\n    provider: {value}\n"
    loaded = inspect_config(_write(tmp_path, text), environ={})
    [problem] = loaded.problems
    assert problem.plugin == "anyllm:x"
    assert message in problem.message
    assert problem.line is not None


def test_negative_retries_are_refused(tmp_path: Path) -> None:
    text = "plugins:\n  anyllm:\n    provider: openai\n    max_retries: -1\n"
    [problem] = inspect_config(_write(tmp_path, text), environ={}).problems
    assert "field 'max_retries' must be at least 0" in problem.message


def test_the_table_matches_the_installed_library() -> None:
    from any_llm import AnyLLM

    assert set(PROVIDERS) == {str(name) for name in AnyLLM.get_supported_providers()}
    for name, facts in PROVIDERS.items():
        try:
            provider_class = AnyLLM.get_provider_class(name)
        except ImportError:  # the provider module needs an SDK that is not installed (gemini, vertexai)
            continue
        declared = provider_class.ENV_API_KEY_NAME
        assert facts.env_var == (declared if declared and declared.isidentifier() and declared != "None" else None)
        assert facts.streaming == provider_class.SUPPORTS_COMPLETION_STREAMING, name
        assert facts.reasoning == provider_class.SUPPORTS_COMPLETION_REASONING, name
        assert facts.images == provider_class.SUPPORTS_COMPLETION_IMAGE, name
        assert facts.pdf == provider_class.SUPPORTS_COMPLETION_PDF, name
        assert facts.embeddings == provider_class.SUPPORTS_EMBEDDING, name
        assert facts.signed_reasoning == any(b.__name__ == "BaseAnthropicProvider" for b in provider_class.__mro__)


async def test_through_the_runtime_and_a_middleware(server: ScriptedServer) -> None:
    from harness_core.hookspecs import hookimpl

    class Tagger:
        def __init__(self) -> None:
            self.seen: list[str] = []

        @hookimpl
        async def llm_stream(self, options, call_next):  # type: ignore[no-untyped-def]
            async for chunk in call_next(options):
                self.seen.append(chunk.type if hasattr(chunk, "type") else type(chunk).__name__)
                yield chunk

    server.add(Reply(reads=[MISTRAL_TEXT]))
    config = AnyLLMPlugin.Config(provider="mistral", base_url=server.url, api_key=Secret(key()), routes=["mistral"])
    tagger = Tagger()
    async with Harness([("tagger", tagger), ("anyllm:mistral", AnyLLMPlugin(config))]) as harness:
        result = await harness.generate(
            GenerateOptions(route="mistral", model="mistral-small-latest", messages=[Message.user("hi")])
        )
    assert result.text == "".join(UNICODE)
    assert result.finish.kind == "stop"
    assert result.usage is not None
    assert result.usage.output_tokens == 4
    assert len(tagger.seen) >= 4
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.json()["model"] == "mistral-small-latest"
    assert sent.headers["authorization"] == f"Bearer {key()}"


def _cli_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("HARNESS_CONFIG", None)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    env["NO_COLOR"] = "1"
    return env


def test_harness_run_streams_through_the_cli_and_trace_middleware(tmp_path: Path) -> None:
    with ScriptedServer(Reply(reads=[MISTRAL_TEXT])) as server:
        _write(
            tmp_path,
            "plugins:\n"
            "  trace: {path: trace.jsonl}\n"
            "  anyllm:mistral:\n"
            "    provider: mistral\n"
            f"    base_url: {server.url}\n"
            "    api_key: ${{ env.MY_MISTRAL_KEY }}\n"
            "    routes: [mistral]\n",
        )
        env = _cli_env(tmp_path) | {"MY_MISTRAL_KEY": key()}
        result = subprocess.run(
            [sys.executable, "-m", "harness_core.cli", "run", "-r", "mistral", "-m", "mistral-small-latest", "hi"],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "".join(UNICODE).strip()
    assert (tmp_path / "trace.jsonl").read_text().count("\n") >= 4
    assert key() not in result.stdout + result.stderr


def test_an_echoed_key_never_reaches_cli_output(tmp_path: Path) -> None:
    secret = key()
    body = {"error": {"message": f"Incorrect API key provided: {secret}", "type": "invalid_request_error"}}
    with ScriptedServer(Reply.json(401, body)) as server:
        _write(
            tmp_path,
            f"plugins:\n  anyllm:\n    provider: openai\n    base_url: {server.url}/v1\n"
            "    api_key: ${{ env.K }}\n",
        )
        result = subprocess.run(
            [sys.executable, "-m", "harness_core.cli", "-v", "run", "-r", "openai", "-m", "m", "hi"],
            capture_output=True,
            text=True,
            env=_cli_env(tmp_path) | {"K": secret},
            cwd=tmp_path,
            timeout=120,
        )
    assert result.returncode == 1
    assert "AUTH" in result.stderr
    assert secret not in result.stdout + result.stderr
    assert secret[-4:] not in result.stdout + result.stderr


@pytest.mark.parametrize("command", [["--help"], ["plugins"], ["run", "-r", "mock", "hi"]])
def test_start_up_never_imports_the_library(tmp_path: Path, command: list[str]) -> None:
    _write(tmp_path, "plugins:\n  mock: {}\n  anyllm:\n    provider: openai\n    api_key: x-key-value\n")
    code = (
        "import sys\n"
        "from harness_core.cli import main\n"
        f"try:\n    main({command!r})\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_cli_env(tmp_path), cwd=tmp_path, timeout=120
    )
    modules = set(result.stderr.split())
    assert not {m for m in modules if m.split(".")[0] in ("any_llm", "openai", "anthropic", "mistralai", "pydantic")}
    if command[0] == "run":
        assert "harness_llm_anyllm.adapter" in modules  # the plugin did start


@pytest.mark.parametrize(
    ("fields", "provider"),
    [
        ({"provider": "mistral"}, "mistral_ai"),
        ({"provider": "bedrock"}, "aws.bedrock"),
        ({"provider": "vertexaianthropic"}, "gcp.vertex_ai"),  # the platform called
        ({"provider": "together"}, "together"),  # none of the conventions' values: the any-llm name
        ({"provider": "ollama", "gen_ai_provider": "harness.local"}, "harness.local"),
    ],
)
def test_the_gen_ai_provider_maps_the_any_llm_provider(fields: dict[str, str], provider: str) -> None:
    from harness_llm_anyllm.adapter import AnyLLMAdapter
    from harness_llm_anyllm.config import AnyLLMConfig

    config = AnyLLMConfig(**fields, base_url="http://127.0.0.1:9/v1")  # type: ignore[arg-type]
    assert AnyLLMAdapter(config).gen_ai_provider("anyllm") == provider


def test_every_mapped_provider_is_one_any_llm_knows() -> None:
    from harness_llm_anyllm.providers import GEN_AI_PROVIDERS, PROVIDERS

    assert set(GEN_AI_PROVIDERS) <= set(PROVIDERS)
