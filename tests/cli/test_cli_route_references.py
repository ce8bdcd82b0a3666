"""A config naming a route that nothing serves (a misspelt ``fallback`` target, ``balance`` member
or alias) is refused where it is loaded: ``harness config check`` lists it and exits 2, and a
command that starts the harness (``run``) stops before any request, naming the plugin, the
file:line, the route and the closest served one."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

Harness = Callable[..., "subprocess.CompletedProcess[str]"]
Config = Callable[[str], str]

MISSPELT = "plugins:\n  fallback:\n    targets:\n      mock: [mokc/echo]\n  mock: {}\n"
LOCATED = (
    "{path}:4, plugin 'fallback', field 'targets.mock[0]': fallback target 'mokc/echo' (in the list of 'mock') "
    "names route 'mokc', which no plugin serves (did you mean 'mock'?); routes: 'mock'"
)


def test_config_check_lists_a_fallback_target_nothing_serves(harness: Harness, config: Config) -> None:
    path = config(MISSPELT)
    result = harness("config", "check")
    assert result.returncode == 2, result.stderr
    assert result.stdout == f"{path}: 1 problem\n  - {LOCATED.format(path=path)}\n"


def test_run_refuses_a_fallback_target_nothing_serves_before_any_request(harness: Harness, config: Config) -> None:
    path = config(MISSPELT)
    result = harness("run", "--no-log", "hi")
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert "error: CONFIG: invalid configuration (1 problem):" in result.stderr
    assert LOCATED.format(path=path) in result.stderr


def test_config_check_says_a_named_route_s_plugin_failed(
    harness: Harness, config: Config, cli_env: dict[str, str]
) -> None:
    cli_env.pop("OPENAI_API_KEY", None)
    path = config("plugins:\n  mock: {}\n  openai: {}\naliases:\n  smart: openai/gpt-4o\n")
    result = harness("config", "check")  # no OPENAI_API_KEY: the openai plugin fails alone
    assert result.returncode == 2, result.stderr
    assert (
        f"  - {path}:5, field 'aliases.smart': alias 'smart' names route 'openai', whose plugin failed: "
        f"plugin 'openai' cannot be used: no API key"
    ) in result.stdout
    assert "which no plugin serves" not in result.stdout
    assert "[adapter, stage config]" in result.stdout  # the failure itself is listed too
