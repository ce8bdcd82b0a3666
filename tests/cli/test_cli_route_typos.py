"""Every place the command line names an unknown route suggests the closest one, as the gateway
does (``did you mean``: :func:`harness_core.routing.route_suggestion`): ``-r``, ``-m route/model``
(sent as it is to the default route: said after the failure it explains), ``-o``, ``chat``'s
``/route`` and ``/model``, ``embed`` and ``embed-multi``."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

Harness = Callable[..., "subprocess.CompletedProcess[str]"]
Config = Callable[[str], str]

NOT_FOUND = "error: NOT_FOUND from route 'mock' (mock): the mock has no model 'mokc/echo'; it serves 'echo'"
TYPO = "  -m 'mokc/echo': route 'mokc' is not served (did you mean 'mock/echo'?)"


def test_run_with_a_mistyped_route_in_the_model_id(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {}\n")
    result = harness("run", "-m", "mokc/echo", "hi")
    assert (result.returncode, result.stdout) == (2, "")  # the command line's mistake: a usage error
    assert result.stderr.splitlines() == [NOT_FOUND, TYPO]
    counted = harness("run", "--count-tokens", "-m", "mokc/echo", "hi")
    assert (counted.returncode, counted.stderr.splitlines()) == (2, [NOT_FOUND, TYPO])
    with_tools = harness("run", "-t", "*", "-m", "mokc/echo", "hi")  # the tool round trip reports alike
    assert (with_tools.returncode, with_tools.stderr.splitlines()) == (2, [NOT_FOUND, TYPO])
    # a provider's own id close to no route is no typo: the provider's answer alone (exit 1)
    own = harness("run", "-m", "meta-llama/llama-3", "hi")
    assert own.returncode == 1
    assert own.stderr.splitlines() == [
        "error: NOT_FOUND from route 'mock' (mock): the mock has no model 'meta-llama/llama-3'; it serves 'echo'"
    ]
    given = harness("run", "-r", "mock", "-m", "mokc/echo", "hi")  # -r given: the id is the provider's
    assert (given.returncode, given.stderr.splitlines()) == (1, [NOT_FOUND])


def test_run_without_a_default_route_and_a_mistyped_model_id(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {routes: [mock, other]}\n")
    result = harness("run", "-m", "mokc/echo", "hi")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: NO_ADAPTER: no route given (options.route; -r/--route on the command line) and no default route "
        "configured (defaults.route); known routes: 'mock', 'other'",
        TYPO,
    ]
    typo = harness("run", "-r", "othr", "hi")
    assert typo.returncode == 2
    assert typo.stderr.splitlines() == [
        "error: NO_ADAPTER: no adapter serves route 'othr' (did you mean 'other'?); known routes: 'mock', 'other'"
    ]


def test_provider_options_for_a_mistyped_route(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {}\n")
    result = harness("run", "-r", "mokc", "-o", "top_k=5", "hi")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: -o needs a route served by a plugin of plugins.yaml; 'mokc' is none (did you mean 'mock'?)"
    ]


def test_chat_route_and_model_commands_suggest_the_route(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {}\n")
    result = harness("chat", input="/route mokc\n/model mokc/echo\n/model mock/nope\n/exit\n")
    assert result.returncode == 0
    assert result.stderr.splitlines() == [
        "error: no route 'mokc' (did you mean 'mock'?); routes: mock",
        "error: NOT_FOUND: the mock has no model 'mokc/echo'; it serves 'echo'",
        "  /model 'mokc/echo': route 'mokc' is not served (did you mean 'mock/echo'?)",
        "route mock, model echo",
        "error: NOT_FOUND: the mock has no model 'nope'; it serves 'echo'",  # a served route: no typo
        "route mock, model echo",
    ]
    sent = harness("chat", "-m", "mokc/echo", input="hi\n")
    assert sent.returncode == 0
    assert sent.stderr.splitlines() == [
        f"{NOT_FOUND} (the message was not added to the history)",
        "  model 'mokc/echo': route 'mokc' is not served (did you mean 'mock/echo'?)",
    ]


def test_embed_suggests_the_route(harness: Harness, config: Config, tmp_path: Path) -> None:
    config("plugins:\n  mock: {}\n")
    unknown = harness("embed", "-r", "mokc", "hi")
    assert unknown.returncode == 2
    assert unknown.stderr.splitlines() == [
        "error: NO_ADAPTER: no embedder serves route 'mokc' (did you mean 'mock'?); embedding routes: 'mock'"
    ]
    not_found = (
        "error: NOT_FOUND from route 'mock' (mock): the mock has no embedding model 'mokc/hash'; it serves 'hash'"
    )
    typo = "  -m 'mokc/hash': route 'mokc' is not served (did you mean 'mock/hash'?)"
    model = harness("embed", "-m", "mokc/hash", "hi")
    assert (model.returncode, model.stderr.splitlines()) == (2, [not_found, typo])
    (tmp_path / "rows.csv").write_text("id,content\n1,hello\n", encoding="utf-8")
    database = str(tmp_path / "vectors.sqlite")
    multi = harness("embed-multi", "-d", database, "-m", "mokc/hash", "notes", "rows.csv")
    assert multi.returncode == 2
    assert multi.stderr.splitlines() == [
        not_found,
        typo,
        "collection 'notes': 0 embedded, 0 unchanged, 1 not embedded; run it again to resume",
    ]
