"""`harness serve`, `harness keys` and `harness console` never run on a config they could not
fully load (issue 21, item 1): an unset `${{ env.X }}` in the `gateway` entry, or a failed
policy plugin, is exit 2 with the located problem (file, line, plugin, field, never a value); a
reload onto such a config keeps the running one and logs the problem."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from gw_helpers import gateway_yaml

from harness_core.cli._app import cli
from harness_gateway.runtime import RuntimeHolder, load_runtime

UNSET_KEY = "HARNESS_TEST_UNSET_MASTER_KEY"
UNSET_DB = "HARNESS_TEST_UNSET_DATABASE"
UNSET_LIMITS = "HARNESS_TEST_UNSET_LIMITS"


def isolated_env(tmp_path: Path) -> dict[str, str]:
    """Our environment without the test variables and with the user data dir (the default
    SQLite store) in ``tmp_path/data``, so a command falling back to it would be seen."""
    env = {k: v for k, v in os.environ.items() if k not in (UNSET_KEY, UNSET_DB, UNSET_LIMITS, "HARNESS_CONFIG")}
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    return env


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plugins.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def unset_gateway(tmp_path: Path) -> Path:
    return write(
        tmp_path,
        "plugins:\n"
        "  gateway:\n"
        "    host: 127.0.0.1\n"
        f"    master_key: ${{{{ env.{UNSET_KEY} }}}}\n"
        f"    database: ${{{{ env.{UNSET_DB} }}}}\n"
        f"    limits: ${{{{ env.{UNSET_LIMITS} }}}}\n"
        "  mock: {}\n",
    )


def located(path: Path) -> list[str]:
    return [
        f"{path}:4, plugin 'gateway', field 'master_key': environment variable {UNSET_KEY} is not set",
        f"{path}:5, plugin 'gateway', field 'database': environment variable {UNSET_DB} is not set",
        f"{path}:6, plugin 'gateway', field 'limits': environment variable {UNSET_LIMITS} is not set",
    ]


def test_serve_refuses_an_unset_variable_in_the_gateway_entry(tmp_path: Path) -> None:
    path = unset_gateway(tmp_path)
    result = subprocess.run(  # before the fix this served on defaults: the timeout failed the test
        [sys.executable, "-m", "harness_core.cli", "serve", "-c", str(path), "--port", "0"],
        capture_output=True,
        text=True,
        env=isolated_env(tmp_path),
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2, result.stderr
    for line in located(path):
        assert line in result.stderr
    assert "running on" not in result.stderr
    assert not (tmp_path / "data").exists()  # no default store was opened


@pytest.mark.parametrize("args", [("create", "--name", "n"), ("list",), ("revoke", "n")], ids=" ".join)
def test_keys_refuse_an_unset_variable_in_the_gateway_entry(tmp_path: Path, args: tuple[str, ...]) -> None:
    path = unset_gateway(tmp_path)
    result = CliRunner().invoke(cli, ["keys", args[0], "-c", str(path), *args[1:]], env=isolated_env(tmp_path))
    assert result.exit_code == 2, result.output
    for line in located(path):
        assert line in result.output
    assert "hk-" not in result.output  # no key was created
    assert not (tmp_path / "data").exists()  # the default store was never touched


def test_keys_refuse_a_failed_policy_plugin(tmp_path: Path) -> None:
    path = write(tmp_path, gateway_yaml("", "  usage: {}\n", db=tmp_path / "gw.sqlite"))
    env = isolated_env(tmp_path)
    env["XDG_DATA_HOME"] = str(tmp_path / "not-a-folder")  # the usage ledger's default folder cannot be made
    (tmp_path / "not-a-folder").write_text("x")
    result = CliRunner().invoke(cli, ["keys", "list", "-c", str(path)], env=env)
    assert result.exit_code == 2, result.output
    assert f"{path}:6: plugin 'usage' failed to start" in result.output
    assert "fail closed" in result.output
    assert not (tmp_path / "gw.sqlite").exists()


def test_console_refuses_a_failed_prompt_log(tmp_path: Path) -> None:
    path = write(tmp_path, "plugins:\n  mock: {}\n  prompt-log: {}\n")
    env = isolated_env(tmp_path)
    env["XDG_DATA_HOME"] = str(tmp_path / "not-a-folder")  # the prompt log's default folder cannot be made
    (tmp_path / "not-a-folder").write_text("x")
    result = subprocess.run(  # before the fix this served another prompt log: the timeout failed it
        [sys.executable, "-m", "harness_core.cli", "console", "-c", str(path), "--port", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2, result.stderr
    assert f"{path}:3: plugin 'prompt-log' failed to start" in result.stderr


def test_a_reload_onto_an_unset_variable_keeps_the_running_config(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(UNSET_KEY, raising=False)
    monkeypatch.delenv(UNSET_DB, raising=False)
    good = tmp_path / "good.yaml"
    good.write_text(gateway_yaml("    require_keys: true\n", db=tmp_path / "gw.sqlite"))
    bad = unset_gateway(tmp_path)

    async def main() -> None:
        holder = RuntimeHolder(await load_runtime(good))
        try:
            with caplog.at_level(logging.ERROR, logger="harness_gateway.runtime"):
                assert not await holder.reload(bad)
            assert holder.current.config.require_keys is True  # the old config still serves
            assert holder.current.source == str(good)
        finally:
            await holder.current.aclose()

    anyio.run(main)
    [record] = [r for r in caplog.records if r.getMessage().startswith("reload refused")]
    for line in located(bad):
        assert line in record.getMessage()


def test_console_reads_the_ledger_and_log_the_config_names(tmp_path: Path) -> None:
    usage, log = tmp_path / "mine" / "usage.sqlite", tmp_path / "mine" / "log.sqlite"
    path = write(tmp_path, f"plugins:\n  mock: {{}}\n  usage: {{path: '{usage}'}}\n  prompt-log: {{path: '{log}'}}\n")
    command = [sys.executable, "-m", "harness_core.cli", "console", "-c", str(path), "--port", "0"]
    env = {**isolated_env(tmp_path), "HARNESS_CONSOLE_TOKEN": "t" * 24}
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        assert process.stderr is not None
        banner = process.stderr.readline()  # printed before the server starts
        assert f"(ledger {usage}, log {log})" in banner  # never the default ledger beside the config's log
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:  # never leave the console running past the test
            process.kill()
            process.wait()
            raise
        finally:
            assert process.stderr is not None
            process.stderr.close()
