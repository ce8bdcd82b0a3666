"""``harness run -o key=value`` follows the gateway's field rule (harness_core.fields): an option
reaches a route whose adapter takes provider options unchanged, and is refused naming the option
and the route elsewhere, never dropped (issue 23). The provider is a scripted server on 127.0.0.1."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from test_cli_providers import ANTHROPIC_BODY, CASES, run_with

from harness_core.testing.server import Reply, ScriptedServer

Harness = Callable[..., "subprocess.CompletedProcess[str]"]
Config = Callable[[str], str]


def test_an_option_reaches_a_route_that_takes_provider_options_unchanged(tmp_path: Path) -> None:
    entry = CASES["claude-gw"][0]
    with ScriptedServer(Reply(reads=ANTHROPIC_BODY)) as server:
        result = run_with(
            tmp_path,
            entry.format(url=server.url),
            "-r",
            "claude-gw",
            "-m",
            "claude-x",
            "-o",
            "top_k=5",
            "-o",
            'metadata={"user_id": "u1"}',
            "hi",
        )
        assert result.returncode == 0, result.stderr
        (request,) = server.requests
    sent = request.json()
    assert (sent["top_k"], sent["metadata"]) == (5, {"user_id": "u1"})


def test_an_option_the_route_cannot_take_is_refused_naming_it_and_the_route(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {}\ndefaults: {route: mock, model: echo}\n")
    for args in (("run", "-o", "delay=0", "hi"), ("run", "--count-tokens", "-o", "delay=0", "hi")):
        refused = harness(*args)
        assert refused.returncode == 2, refused.stderr
        assert refused.stdout == ""
        assert "-o delay: route 'mock' cannot take this field" in refused.stderr
        assert "its adapter takes no provider options" in refused.stderr
    assert harness("run", "--no-log", "hi").returncode == 0  # without -o the route answers
