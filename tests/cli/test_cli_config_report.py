"""``harness config check`` reports every problem in one run (schema problems, then what the start
of the valid plugins finds), and a ``DUPLICATE_ROUTE`` names where plugins.yaml declares the route
twice; a command that runs still refuses the same file."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

Harness = Callable[..., "subprocess.CompletedProcess[str]"]
Config = Callable[[str], str]

KNOWN = "(known fields: routes, delay, reasoning, error, error_after, embedding_dimensions, embed_batch)"


def test_config_check_reports_schema_and_route_problems_in_one_run(harness: Harness, config: Config) -> None:
    path = config(
        "plugins:\n"
        "  mock: {}\n"
        "  mock:bad: {delya: 1}\n"  # line 3: a schema problem
        "  mock:two: {}\n"  # line 4: route 'mock' again
        "aliases:\n"
        "  fast: mokc/echo\n"  # line 6: a route nothing serves
    )
    result = harness("config", "check")
    assert result.returncode == 2
    duplicate = (
        "DUPLICATE_ROUTE: route 'mock' of plugin 'mock:two' is already registered by plugin 'mock' "
        f"(declared again at {path}:4, plugin 'mock:two'; first at {path}:2, plugin 'mock')"
    )
    assert result.stdout.splitlines() == [
        f"{path}: 3 problems",
        f"  - {path}:3, plugin 'mock:bad', field 'delya': unknown field `delya`: did you mean `delay`? {KNOWN}",
        f"  - {path}:6, field 'aliases.fast': alias 'fast' names route 'mokc', which no plugin serves (did you "
        "mean 'mock'?); routes: 'mock'; adapter plugins that failed (one may own it): plugin 'mock:bad' is "
        f"invalid (its problems are listed above); {duplicate}",
        f"  - plugin 'mock:two' failed to start: {duplicate} [adapter, stage register]",
    ]
    # a command that runs refuses the file it could not fully load: the schema problem only, nothing started
    run = harness("run", "hi")
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.splitlines() == [
        "error: CONFIG: invalid configuration (1 problem):",
        f"  - {path}:3, plugin 'mock:bad', field 'delya': unknown field `delya`: did you mean `delay`? {KNOWN}",
    ]


def test_config_check_says_an_invalid_plugin_may_serve_the_default_route(harness: Harness, config: Config) -> None:
    path = config("plugins:\n  mock: {bad: 1}\ndefaults: {route: mock}\n")
    result = harness("config", "check")
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        f"{path}: 2 problems",
        f"  - {path}:2, plugin 'mock', field 'bad': unknown field `bad` {KNOWN}",
        f"  - {path}:3, field 'defaults.route': no enabled plugin serves the default route 'mock' (routes: none); "
        "plugins that are invalid (one may serve it): 'mock'",
    ]


def test_config_check_of_a_document_that_does_not_parse(harness: Harness, config: Config) -> None:
    path = config("plugins: [\n")
    result = harness("config", "check")
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        f"{path}: 1 problem",
        f"  - {path}:2: invalid YAML: expected the node content, but found '<stream end>'",
    ]


def test_duplicate_route_names_the_line_and_field_of_both_declarations(harness: Harness, config: Config) -> None:
    path = config("plugins:\n  mock: {}\n  mock:two:\n    routes: [x, mock]\n")
    result = harness("config", "check")
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        f"{path}: 1 problem",
        "  - plugin 'mock:two' failed to start: DUPLICATE_ROUTE: route 'mock' of plugin 'mock:two' is already "
        f"registered by plugin 'mock' (declared again at {path}:4, plugin 'mock:two', field 'routes[1]'; first at "
        f"{path}:2, plugin 'mock') [adapter, stage register]",
    ]
    run = harness("run", "-r", "mock", "hi")  # the first plugin's routes work; the warning says where
    assert run.returncode == 0
    assert run.stderr.splitlines()[0] == (
        "warning: plugin 'mock:two' failed to start: DUPLICATE_ROUTE: route 'mock' of plugin 'mock:two' is already "
        f"registered by plugin 'mock' (declared again at {path}:4, plugin 'mock:two', field 'routes[1]'; first at "
        f"{path}:2, plugin 'mock'); its routes are unavailable"
    )


def test_a_route_listed_twice_names_both_items(harness: Harness, config: Config) -> None:
    path = config("plugins:\n  mock:\n    routes:\n      - a\n      - b\n      - a\n")
    result = harness("config", "check")
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        f"{path}: 1 problem",
        "  - plugin 'mock' failed to start: DUPLICATE_ROUTE: plugin 'mock' lists route 'a' twice (declared again at "
        f"{path}:6, plugin 'mock', field 'routes[2]'; first at {path}:4, plugin 'mock', field 'routes[0]') "
        "[adapter, stage register]",
    ]
