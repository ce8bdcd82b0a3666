"""A config is complete for policy only when every plugin that fails closed loaded
(:meth:`LoadedConfig.require_complete`): a plugin that serves no adapter (the gateway's entry)
with an unset variable is a located config problem, never a failure the commands run past."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from harness_core.config import ConfigError
from harness_core.loader import LoadedConfig, inspect_config, load_config
from harness_core.plugininfo import PluginFailure

Write = Callable[..., Path]


def test_an_unset_variable_in_a_plugin_without_adapters_is_a_located_problem(
    fake_plugins: Path, write_config: Write
) -> None:
    path = write_config("plugins:\n  mock: {}\n  policy:\n    token: ${{ env.POLICY_TOKEN }}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    [problem] = caught.value.problems
    assert (problem.plugin, problem.field, problem.line, problem.source) == ("policy", "token", 4, str(path))
    assert problem.message == "environment variable POLICY_TOKEN is not set"
    [entry] = [e for e in inspect_config(path, environ={}).entries if e.key == "policy"]
    assert entry.state == "invalid"


def test_a_refused_secret_of_a_plugin_without_adapters_is_never_shown(fake_plugins: Path, write_config: Write) -> None:
    value = "pol" + "icy-sec\u00e9ret"  # built at run time: no key-shaped literal
    path = write_config(f'plugins:\n  policy:\n    token: "{value}"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    assert "non-ASCII character U+00E9" in str(caught.value)
    assert value not in str(caught.value)


def test_a_failed_plugin_without_adapters_fails_closed(fake_plugins: Path, write_config: Write) -> None:
    path = write_config("plugins:\n  mock: {}\n  policy: {fail: true}\n  strict: {name: s}\n")
    loaded = load_config(path, environ={})
    [failure] = loaded.failures
    assert (failure.key, failure.stage, failure.is_middleware) == ("policy", "init", True)
    with pytest.raises(ConfigError) as caught:
        loaded.require_complete()
    [problem] = caught.value.problems
    assert (problem.source, problem.line) == (str(path), 3)
    assert problem.message.startswith("plugin 'policy' failed to start: RuntimeError: policy store unreachable")
    assert "fail closed" in problem.message
    assert str(problem).startswith(f"{path}:3: plugin 'policy' failed to start")


def test_a_failed_tool_middleware_without_llm_stream_fails_closed(fake_plugins: Path, write_config: Write) -> None:
    """A plugin implementing ``llm_tool_call`` only is a middleware (its kind says so before it is
    built): when it cannot start, the config is incomplete and no command runs without it."""
    path = write_config("plugins:\n  mock: {}\n  toolguard: {fail: true}\n")
    loaded = load_config(path, environ={})
    [failure] = loaded.failures
    assert (failure.key, failure.stage, failure.is_middleware) == ("toolguard", "init", True)
    with pytest.raises(ConfigError) as caught:
        loaded.require_complete()
    [problem] = caught.value.problems
    assert (problem.source, problem.line) == (str(path), 3)
    assert problem.message.startswith("plugin 'toolguard' failed to start: RuntimeError: tool policy unreachable")
    assert "fail closed" in problem.message
    assert load_config(write_config("plugins:\n  mock: {}\n  toolguard: {}\n"), environ={}).failures == []


def test_an_adapter_failure_keeps_the_config_complete(fake_plugins: Path, write_config: Write) -> None:
    path = write_config("plugins:\n  mock: {}\n  failinit: {name: f}\n  openai: {}\n")
    loaded = load_config(path, environ={})
    assert sorted(f.key for f in loaded.failures) == ["failinit", "openai"]
    assert loaded.require_complete() is loaded  # only their routes fail


def test_a_failure_from_the_runtime_is_named_and_located() -> None:
    failure = PluginFailure(key="mw", name="mw", message="TypeError: bad hook", stage="register", is_middleware=True)
    loaded = LoadedConfig(path=None, failures=[failure])
    with pytest.raises(ConfigError) as caught:
        loaded.require_complete()
    [problem] = caught.value.problems
    assert problem.source == "<built-in default>"
    assert problem.line is None
    assert problem.message.startswith("plugin 'mw' failed at register: TypeError: bad hook (fail closed")


def test_the_start_policy_splits_failures_into_those_that_stop_and_those_that_fail_alone() -> None:
    from harness_core.plugininfo import adapter_failures, stopping_failures

    def failure(key: str, is_middleware: bool) -> PluginFailure:
        return PluginFailure(key=key, name=key, message="boom", stage="init", is_middleware=is_middleware)

    failures = [failure("a", False), failure("m1", True), failure("b", False), failure("m2", True)]
    assert [f.key for f in stopping_failures(failures)] == ["m1", "m2"]  # in order
    assert [f.key for f in adapter_failures(failures)] == ["a", "b"]
    assert stopping_failures(iter(failures)) == stopping_failures(failures)  # any iterable, read once
    loaded = LoadedConfig(path=None, failures=adapter_failures(failures))
    assert loaded.require_complete() is loaded  # adapter failures never stop
    with pytest.raises(ConfigError) as caught:
        LoadedConfig(path=None, failures=failures).require_complete()
    assert [p.message.split(" failed")[0] for p in caught.value.problems] == ["plugin 'm1'", "plugin 'm2'"]
