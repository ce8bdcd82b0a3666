"""Keys in plugins.yaml: refused when they cannot be sent, required where the provider needs one,
and a provider whose key is missing fails alone (its routes say why) while middleware fail closed."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from harness_core import GenerateOptions, Harness, LlmError
from harness_core.loader import inspect_config, load_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plugins.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_vendor_route_without_any_key_fails_naming_the_variable(tmp_path: Path) -> None:
    path = write(tmp_path, "plugins:\n  mock: {}\n  openai: {}\ndefaults: {route: mock, model: echo}\n")
    loaded = load_config(path, environ={})
    [failure] = loaded.failures
    assert failure.key == "openai"
    assert failure.stage == "config"
    assert not failure.is_middleware
    assert failure.routes == ["openai"]
    assert "no API key: set the environment variable OPENAI_API_KEY or `api_key:`" in failure.message
    assert f"({path}:3, field 'api_key')" in failure.message
    assert [p.key for p in loaded.plugins] == ["mock"]  # the rest still works

    async def use() -> tuple[str, str]:
        async with Harness(loaded.plugins, defaults=loaded.defaults, failures=loaded.failures) as harness:
            ok = await harness.generate(GenerateOptions(messages=[], route="mock", model="echo"))
            with pytest.raises(LlmError) as caught:
                await harness.generate(GenerateOptions(messages=[], route="openai", model="m"))
            return ok.finish.kind, str(caught.value)

    kind, error = anyio.run(use)
    assert kind == "stop"
    assert error.startswith("CONFIG: route 'openai' is unavailable: plugin 'openai' cannot be used: no API key")


@pytest.mark.parametrize(
    "config",
    [
        "  openai: {api_key: null}\n",  # an explicit opt-out
        "  openai: {base_url: 'http://127.0.0.1:8080/v1'}\n",  # a keyless local server
        "  anthropic: {base_url: 'http://127.0.0.1:8080'}\n",
        "  deepseek: {base_url: 'http://127.0.0.1:8080'}\n",
    ],
)
def test_keyless_servers_and_an_explicit_null_need_no_key(tmp_path: Path, config: str) -> None:
    loaded = load_config(write(tmp_path, "plugins:\n" + config), environ={})
    assert loaded.failures == []
    assert len(loaded.plugins) == 1


def test_a_key_from_the_environment_satisfies_the_requirement(tmp_path: Path) -> None:
    loaded = load_config(write(tmp_path, "plugins:\n  anthropic: {}\n"), environ={"ANTHROPIC_API_KEY": "sk-ant-k-123"})
    assert loaded.failures == []


def test_an_unset_variable_in_a_provider_fails_that_provider_only(tmp_path: Path) -> None:
    text = "plugins:\n  mock: {}\n  openai:\n    api_key: ${{ env.NOT_SET_KEY }}\n"
    loaded = inspect_config(write(tmp_path, text), environ={})
    assert loaded.problems == []
    [failure] = loaded.failures
    assert failure.message.endswith(
        f"environment variable NOT_SET_KEY is not set ({tmp_path / 'plugins.yaml'}:4, field 'api_key')"
    )
    [entry] = [e for e in loaded.entries if e.key == "openai"]
    assert entry.state == "failed"
    assert entry.routes == ["openai"]


def test_an_unset_variable_in_a_middleware_stops_everything(tmp_path: Path) -> None:
    text = "plugins:\n  trace: {path: '${{ env.NOT_SET_PATH }}'}\n  mock: {}\n"
    loaded = inspect_config(write(tmp_path, text), environ={})
    [problem] = loaded.problems
    assert (problem.plugin, problem.field, problem.line) == ("trace", "path", 2)
    assert problem.message == "environment variable NOT_SET_PATH is not set"


def test_a_literal_key_that_cannot_be_sent_is_located_and_never_shown(tmp_path: Path) -> None:
    text = 'plugins:\n  openai:\n    base_url: "http://127.0.0.1:9/v1"\n    api_key: "sk-literal-\\u00e9x"\n'
    loaded = inspect_config(write(tmp_path, text), environ={})
    [failure] = loaded.failures
    assert "the secret holds the non-ASCII character U+00E9 at position 12" in failure.message
    assert ":4, field 'api_key')" in failure.message
    assert "sk-literal" not in failure.message


def test_a_connection_string_hides_only_a_urls_password() -> None:
    from harness_core.secret import ConnectionString, Secret, connection_secrets, secrets_of

    assert connection_secrets("/var/lib/harness/gw.sqlite") == ()
    assert connection_secrets("postgresql://u@h/db") == ()
    assert connection_secrets("postgresql://u:p%40ss@h/db") == ("p%40ss", "p@ss")
    assert connection_secrets("postgresql://u:pass@h:99999999/db") == ("pass",)
    assert connection_secrets("postgresql://u:pass@[::1/db") == ("postgresql://u:pass@[::1/db",)
    found = secrets_of([ConnectionString("/srv/gw.sqlite"), ConnectionString("pg://u:hunter22@h/db"), Secret("k-123")])
    assert found("/srv/gw.sqlite pg://u:hunter22@h/db k-123") == "/srv/gw.sqlite pg://u:**********@h/db **********"
