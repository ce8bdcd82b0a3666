"""``-r/--route`` names the plugins.yaml route on every command that takes one; ``-p/--provider``
is its hidden deprecated alias: the same route, one warning line on stderr first."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from harness_core.cli._app import PROVIDER_NOTE

Config = Callable[[str], str]
Harness = Callable[..., "subprocess.CompletedProcess[str]"]

CONFIG = "plugins:\n  mock: {routes: [mock, other]}\n"

COMMANDS = [
    ("run", "--no-log", "hi there"),
    ("models", "--json"),
    ("embed", "some text"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_the_provider_flag_is_the_route_flag_with_a_warning(
    harness: Harness, config: Config, command: tuple[str, ...]
) -> None:
    config(CONFIG)
    name, *rest = command
    new = harness(name, "-r", "other", *rest)
    for flag in ("-p", "--provider"):
        old = harness(name, flag, "other", *rest)
        assert (old.returncode, old.stdout) == (new.returncode, new.stdout) == (0, new.stdout)
        assert old.stderr.startswith(PROVIDER_NOTE + "\n")
        assert old.stderr.count(PROVIDER_NOTE) == 1
    assert PROVIDER_NOTE not in new.stderr
    assert harness(name, "--route", "other", *rest).stdout == new.stdout


def test_run_serves_the_route_given(harness: Harness, config: Config) -> None:
    config(CONFIG)
    result = harness("run", "--count-tokens", "--json", "-r", "other", "hi")
    assert result.returncode == 0
    assert json.loads(result.stdout)["route"] == "other"


def test_both_flags_at_once_are_a_usage_error(harness: Harness, config: Config) -> None:
    config(CONFIG)
    result = harness("run", "-r", "mock", "-p", "other", "hi")
    assert result.returncode == 2
    assert "error: give -r/--route only (-p/--provider is its deprecated old name)" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("command", ["run", "chat", "models", "embed", "embed-multi"])
def test_help_shows_route_and_hides_provider(harness: Harness, command: str) -> None:
    text = harness(command, "--help").stdout
    assert "-r, --route TEXT" in text
    assert "--provider" not in text


def test_chat_takes_the_route_flag(harness: Harness, config: Config) -> None:
    config(CONFIG)
    new = harness("chat", "-r", "other", input="/route\n")
    old = harness("chat", "-p", "other", input="/route\n")
    assert new.returncode == old.returncode == 0
    assert "route other, model echo" in new.stderr
    assert "route other, model echo" in old.stderr
    assert old.stderr.startswith(PROVIDER_NOTE + "\n")


def test_embed_multi_takes_the_route_flag(harness: Harness, config: Config, tmp_path: Path) -> None:
    config(CONFIG)
    (tmp_path / "in.csv").write_text("id,content\na,first\n")
    new = harness("embed-multi", "docs", "in.csv", "-d", "new.sqlite", "-r", "other")
    old = harness("embed-multi", "docs", "in.csv", "-d", "old.sqlite", "-p", "other")
    assert new.returncode == old.returncode == 0
    for result in (new, old):
        assert "(route 'other', model 'hash'" in result.stderr
    assert old.stderr.startswith(PROVIDER_NOTE + "\n")


def test_the_old_defaults_key_is_one_warning_line(harness: Harness, config: Config) -> None:
    path = config("plugins:\n  mock: {}\ndefaults:\n  provider: mock\n")
    result = harness("run", "--no-log", "hi")
    assert (result.returncode, result.stdout) == (0, "hi\n"), result.stderr
    first = result.stderr.splitlines()[0]
    assert first == f"warning: {path}, line 4: `defaults.provider` is deprecated: write `defaults.route`"
    assert "FutureWarning" not in result.stderr  # not Python's two lines naming a harness source file
    assert "harness_core" not in result.stderr


def test_other_warnings_keep_pythons_form(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import warnings

    from harness_core import cli

    before: list[tuple[object, ...]] = []
    monkeypatch.setattr(warnings, "showwarning", lambda *shown: before.append(shown))  # restored after the test
    cli._deprecations_as_warning_lines()
    renamed = io.StringIO()
    warnings.showwarning("plain", UserWarning, "x.py", 3)
    warnings.showwarning("renamed", FutureWarning, "x.py", 4, renamed)
    assert before == [("plain", UserWarning, "x.py", 3, None, None)]  # handed on as it came
    assert renamed.getvalue() == "warning: renamed\n"


def test_a_route_model_id_names_the_route_as_on_the_gateway(harness: Harness, config: Config) -> None:
    config(CONFIG)  # two routes, no default one: the model id alone says where it goes
    result = harness("run", "--count-tokens", "--json", "-m", "other/echo", "hi")
    assert result.returncode == 0, result.stderr
    assert (json.loads(result.stdout)["route"], json.loads(result.stdout)["model"]) == ("other", "echo")
    generated = harness("run", "--no-log", "-m", "other/echo", "hi there")
    assert (generated.returncode, generated.stdout) == (0, "hi there\n"), generated.stderr
    chat = harness("chat", "-m", "other/echo", input="/route\n")
    assert "route other, model echo" in chat.stderr
    embedded = harness("embed", "--json", "-m", "other/hash", "some text")
    assert embedded.returncode == 0, embedded.stderr
    assert (json.loads(embedded.stdout)["route"], json.loads(embedded.stdout)["model"]) == ("other", "hash")


def test_a_route_given_takes_the_model_id_as_it_is(harness: Harness, config: Config) -> None:
    """``-r`` names the route, so ``-m`` is the provider's model id even where its first part names
    another route (OpenRouter's ``openai/gpt-4o`` beside an ``openai`` route): sent whole."""
    config(CONFIG)
    for route in ("mock", "other"):  # another route's name first, or its own: the id goes as it is
        result = harness("run", "--no-log", "-r", route, "-m", "other/echo", "hi")
        assert (result.returncode, result.stdout) == (1, "")
        assert result.stderr == (
            f"error: NOT_FOUND from route '{route}' (mock): the mock has no model 'other/echo'; it serves 'echo'\n"
        )


def test_chat_model_command_reads_a_route_model_id_as_the_model_flag_does(harness: Harness, config: Config) -> None:
    """``/model other/echo`` switches route and model, and says so, while no route was chosen
    (``-m``'s reading, :meth:`LoadedConfig.resolve_target`, aliases included); with ``-r`` the id
    is the provider's, sent as it is."""
    config(CONFIG + "defaults: {route: mock, model: echo}\naliases: {fast: other/echo}\n")
    switched = harness("chat", input="/model other/echo\n/model mock/echo\n/model fast\n")
    assert switched.returncode == 0, switched.stderr
    assert switched.stderr.splitlines() == [
        "route other, model echo (switched from route mock: other/echo names route other)",
        "route mock, model echo (switched from route other: mock/echo names route mock)",
        "route other, model echo (switched from route mock: fast names route other)",
    ]
    chosen = harness("chat", "-r", "mock", input="/model other/echo\n/model fast\n")
    assert chosen.returncode == 0, chosen.stderr
    assert chosen.stderr.splitlines() == [
        "error: NOT_FOUND: the mock has no model 'other/echo'; it serves 'echo'",
        "route mock, model echo",
        "route mock, model echo",  # an alias's model, for the route chosen
    ]
