"""No command that enforces policy runs on a config it could not fully load (docs/loader.md,
failure policy): a plugin that fails closed stops it with exit 2 and the located problem, an
adapter plugin that fails only loses its routes, and the inspecting commands show everything."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

Harness = Callable[..., "subprocess.CompletedProcess[str]"]
Config = Callable[[str], str]

STARTING = [("run", "hi"), ("chat",), ("models",), ("chain",), ("chain", "mock")]


@pytest.mark.parametrize("args", STARTING, ids=" ".join)
def test_a_failed_plugin_without_adapters_stops_every_starting_command(
    harness: Harness, config: Config, args: tuple[str, ...]
) -> None:
    path = config("plugins:\n  mock: {}\n  policy: {fail: true}\ndefaults: {route: mock, model: echo}\n")
    result = harness(*args, "--no-log") if args[0] == "run" else harness(*args)
    assert result.returncode == 2, result.stderr
    assert f"{path}:3: plugin 'policy' failed to start: RuntimeError: policy store unreachable" in result.stderr
    assert "fail closed" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("args", STARTING, ids=" ".join)
def test_an_unset_variable_in_a_plugin_without_adapters_stops_every_starting_command(
    harness: Harness, config: Config, args: tuple[str, ...]
) -> None:
    path = config("plugins:\n  mock: {}\n  policy:\n    token: ${{ env.POLICY_TOKEN_UNSET }}\n")
    result = harness(*args)
    assert result.returncode == 2, result.stderr
    assert f"{path}:4, plugin 'policy', field 'token': environment variable POLICY_TOKEN_UNSET is not set" in (
        result.stderr
    )


def test_an_adapter_that_fails_keeps_the_other_routes(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {}\n  failinit: {name: f}\ndefaults: {route: mock, model: echo}\n")
    result = harness("run", "--no-log", "hi")
    assert result.returncode == 0, result.stderr
    assert "warning: plugin 'failinit' failed to start" in result.stderr


def test_the_inspecting_commands_show_the_failure(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {}\n  policy: {fail: true}\n")
    listed = harness("plugins")
    assert "policy" in listed.stdout
    assert "failed" in listed.stdout
    checked = harness("config", "check")
    assert checked.returncode == 2
    assert "plugin 'policy' failed to start: RuntimeError: policy store unreachable" in checked.stdout
