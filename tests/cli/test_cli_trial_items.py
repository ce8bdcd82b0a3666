"""Issue 21, item 5 (the CLI part): the served model is recorded when `-m` is left out, `harness
models` names a route it cannot list, a plugin's import error is masked, and `harness plugins` /
`harness chain` show the prompt log that is on by default (which fails closed when it cannot start)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from harness_core.secret import MASK

Harness = Callable[..., "subprocess.CompletedProcess[str]"]
Config = Callable[[str], str]


def test_a_run_without_a_model_records_the_model_that_served_it(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {}\n  mock:other: {routes: [other]}\ndefaults: {route: other, model: echo}\n")
    assert harness("run", "-r", "mock", "hi").returncode == 0  # no -m, and defaults.model is for `other`
    [entry] = json.loads(harness("logs", "--json").stdout)
    assert (entry["route"], entry["model"]) == ("mock", "echo")


def test_models_names_a_route_it_cannot_list(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {}\n  stubborn: {}\n")
    listed = harness("models")
    assert listed.returncode == 0, listed.stderr
    assert "mock/echo" in listed.stdout
    assert "stubborn  no model list (its adapter cannot list models and plugins.yaml names none)" in listed.stdout
    as_json = harness("models", "--json")
    rows = json.loads(as_json.stdout)
    assert [(row["route"], row["model"], row.get("embeddings", False)) for row in rows] == [
        ("mock", "echo", False),
        ("mock", "hash", True),  # the mock embeds too; stubborn does not, so it is in no embedding row
    ]
    assert "note: route 'stubborn': no model list" in as_json.stderr


def test_an_import_error_quoting_a_secret_is_masked(harness: Harness, config: Config, cli_env: dict[str, str]) -> None:
    secret = "sk-" + "leaky" * 6  # built at run time: no key-shaped literal in the file
    cli_env["FAKE_LEAKY_KEY"] = secret
    config("plugins:\n  mock: {}\n  leaky:\n    key: ${{ env.FAKE_LEAKY_KEY }}\n")
    ran = harness("run", "hi")
    assert ran.returncode == 2
    assert f"the client refused the key '{MASK}'" in ran.stderr
    listed, checked = harness("plugins"), harness("config", "check")
    assert "cannot be imported" in listed.stdout
    assert "cannot be imported" in checked.stdout
    for result in (ran, listed, checked):
        assert secret not in result.stdout + result.stderr


def test_a_subcommand_import_error_quoting_a_secret_is_masked(
    harness: Harness, config: Config, cli_env: dict[str, str]
) -> None:
    secret = "sk-" + "leaky" * 6
    cli_env["FAKE_LEAKY_KEY"] = secret
    config("plugins:\n  mock: {}\n  openai: {api_key: '${{ env.FAKE_LEAKY_KEY }}'}\n")
    result = harness("leakycmd")
    assert result.returncode == 2
    assert "cannot load the 'leakycmd' subcommand of harness-fake-plugins" in result.stderr
    assert f"the client refused the key '{MASK}'" in result.stderr
    assert secret not in result.stderr


def test_plugins_and_chain_show_the_default_prompt_log(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {}\n")
    listed = harness("plugins")
    [row] = [line.split() for line in listed.stdout.splitlines() if line.startswith("prompt-log ")]
    assert row[:3] == ["prompt-log", "enabled", "middleware"]
    assert "note: prompt-log: on by default: `harness run` and `harness chat` log every prompt" in listed.stdout
    [entry] = [e for e in json.loads(harness("plugins", "--json").stdout)["plugins"] if e["key"] == "prompt-log"]
    assert entry["state"] == "enabled"
    chain = harness("chain").stdout.splitlines()
    assert chain[1].startswith("1. prompt-log (normal): on by default")
    assert chain[2] == "2. mock (adapter)"
    config("plugins:\n  mock: {}\n  ~prompt-log: {}\n")
    assert "prompt-log" not in harness("chain").stdout


def test_a_default_prompt_log_that_cannot_start_stops_the_commands_that_log(
    harness: Harness, config: Config, cli_env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "not-a-folder").write_text("x")
    cli_env["XDG_DATA_HOME"] = str(tmp_path / "not-a-folder")
    config("plugins:\n  mock: {}\n")
    for args in (("run", "hi"), ("chat",), ("chain",)):
        result = harness(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert "plugin 'prompt-log' (on by default; `--no-log` or `~prompt-log:` turns it off) failed" in (
            result.stderr
        )
        assert "fail closed" in result.stderr
    assert harness("run", "--no-log", "hi").stdout == "hi\n"
    listed = harness("plugins")
    assert listed.returncode == 0
    [row] = [line.split() for line in listed.stdout.splitlines() if line.startswith("prompt-log ")]
    assert row[:2] == ["prompt-log", "failed"]
