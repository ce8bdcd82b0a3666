"""The `harness` command line, run as a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from harness_core import StreamChunk
from harness_core.cli._inspect import NO_COUNT_MIDDLEWARE, NO_EMBED_MIDDLEWARE

Harness = Callable[..., "subprocess.CompletedProcess[str]"]
Config = Callable[[str], str]
SECRET = "tok-cli-secret-987654"


# ------------------------------------------------------------------ help and import discipline


def test_help_lists_builtin_and_plugin_commands(harness: Harness) -> None:
    result = harness("--help")
    assert result.returncode == 0
    for name in ("run", "chat", "plugins", "config", "chain"):
        assert f"  {name} " in result.stdout
    assert "fakecmd" in result.stdout
    assert "(from plugin harness-fake-plugins: harness fakecmd --help)" in result.stdout


def test_help_imports_no_provider_code(cli_env: dict[str, str], tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from harness_core.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted(m for m in sys.modules)), file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=cli_env, cwd=tmp_path, check=True
    )
    modules = set(result.stderr.split())
    assert "click" in modules
    assert "httpx" not in modules
    assert "yaml" not in modules
    assert "importlib.metadata" not in modules
    assert not {m for m in modules if m.startswith(("harness_llm", "harness_trace", "harness_fake"))}
    assert "harness_core.runtime" not in modules
    assert "harness_core.conversation" not in modules
    assert "harness_core.tools" not in modules


def test_plugins_imports_no_provider_sdk(config: Config, cli_env: dict[str, str]) -> None:
    code = (
        "import sys\n"
        "from harness_core.cli import main\n"
        "try:\n    main(['plugins'])\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=cli_env,
        cwd=Path(config("plugins: {}\n")).parent,
    )
    assert "httpx" not in result.stderr.split()


def test_version(harness: Harness) -> None:
    result = harness("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("harness, version ")


def test_console_script_is_installed(cli_env: dict[str, str], tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "harness"
    result = subprocess.run(
        [str(script), "run", "hi there"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=cli_env,
        cwd=tmp_path,
    )
    assert result.returncode == 0
    assert result.stdout == "hi there\n"


# ------------------------------------------------------------------ run


def test_run_streams_text_with_the_builtin_default(harness: Harness) -> None:
    result = harness("run", "hello world")
    assert result.returncode == 0
    assert result.stdout == "hello world\n"
    assert "[finish: stop (stop); tokens: 2 in, 2 out]" in result.stderr


def test_run_reads_the_prompt_from_stdin(harness: Harness) -> None:
    result = harness("run", "-", input="from stdin\n")
    assert result.returncode == 0
    assert result.stdout == "from stdin\n"


def test_run_json_prints_one_chunk_per_line(harness: Harness) -> None:
    result = harness("run", "--json", "a b c")
    assert result.returncode == 0
    chunks = [msgspec.json.decode(line, type=StreamChunk) for line in result.stdout.splitlines()]
    assert [type(c).__name__ for c in chunks] == [
        "BlockStart",
        "TextDelta",
        "TextDelta",
        "TextDelta",
        "BlockEnd",
        "Usage",
        "Finish",
    ]
    assert result.stderr == ""


def test_run_options_reach_the_provider(harness: Harness) -> None:
    result = harness("run", "one two three", "--max-tokens", "2", "--system", "be brief", "--temperature", "0.5")
    assert result.returncode == 0
    assert result.stdout == "one two \n"
    assert "[finish: length (max_tokens); tokens: 5 in, 2 out]" in result.stderr


@pytest.mark.parametrize(("flag", "value"), [("--temperature", "nan"), ("--temperature", "inf"), ("--top-p", "nan")])
def test_sampling_flags_refuse_numbers_json_cannot_carry(harness: Harness, flag: str, value: str) -> None:
    result = harness("run", "hello", flag, value)
    assert result.returncode == 2
    assert f"{value!r} is not a finite number" in result.stderr
    assert flag in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("command", ["run", "chat"])
@pytest.mark.parametrize("value", ["2147483648", "99999999999999999999"])
def test_max_tokens_above_the_limit_is_a_usage_error(harness: Harness, command: str, value: str) -> None:
    """GenerateOptions refuses the value: one `error:` line naming the option, exit 2, no traceback."""
    result = harness(command, *(["hello"] if command == "run" else []), "--max-tokens", value, input="")
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == (
        f"error: Invalid value for '--max-tokens': must be an integer in range (at most 2147483647), got {value}"
    )
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_sampling_flags_at_their_limits_reach_the_provider(harness: Harness) -> None:
    """The values GenerateOptions takes at the edges pass (the check refuses only what it refuses)."""
    result = harness(
        "run", "hi", "--max-tokens", "2147483647", "--seed", str(2**70), "--temperature", "0", "--top-p", "1"
    )
    assert (result.returncode, result.stdout) == (0, "hi\n")


def test_run_reasoning_goes_to_stderr_when_not_a_tty(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {reasoning: thinking hard}\ndefaults: {route: mock, model: echo}\n")
    result = harness("run", "answer", "--reasoning-effort", "low")
    assert result.returncode == 0
    assert result.stdout == "answer\n"
    assert result.stderr.startswith("thinking hard\n")
    off = harness("run", "answer", "--reasoning-effort", "off")
    assert "thinking" not in off.stderr


def test_run_error_finish_exits_1(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {error: RATE_LIMITED, error_after: 1}\ndefaults: {route: mock, model: echo}\n")
    result = harness("run", "one two three")
    assert result.returncode == 1
    assert result.stdout == "one \n"
    assert "error: RATE_LIMITED from route 'mock' (mock): scripted mock error after 1 deltas\n" in result.stderr


def test_run_unknown_route_and_model(harness: Harness) -> None:
    """NO_ADAPTER and UNSUPPORTED are usage errors (exit 2); a model the provider lacks is an error finish."""
    result = harness("run", "-r", "nowhere", "hi")
    assert result.returncode == 2
    first, hint = result.stderr.splitlines()
    assert first == "error: NO_ADAPTER: no adapter serves route 'nowhere'; known routes: 'mock'"
    # no plugins.yaml: the hint says the built-in default is in use and what is installed but idle
    assert hint.startswith("  no plugins.yaml was found, so the built-in default (the mock plugin) is in use; ")
    assert "installed plugins not enabled: anthropic, " in hint
    assert ", openai, " in hint
    typo = harness("run", "-r", "mokc", "hi")  # the closest route, as the gateway's unknown model says it
    assert typo.returncode == 2
    assert typo.stderr.splitlines()[0] == (
        "error: NO_ADAPTER: no adapter serves route 'mokc' (did you mean 'mock'?); known routes: 'mock'"
    )
    result = harness("run", "-m", "gpt-9", "hi")
    assert result.returncode == 1
    assert "error: NOT_FOUND from route 'mock' (mock): the mock has no model 'gpt-9'" in result.stderr
    result = harness("run", "--reasoning-effort", "extreme", "hi")
    assert result.returncode == 2
    assert "error: UNSUPPORTED from route 'mock' (mock): reasoning_effort 'extreme'" in result.stderr


def test_run_without_a_default_provider_exits_2(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {routes: [mock, echo2]}\n")
    result = harness("run", "hi")
    assert result.returncode == 2
    assert (
        "error: NO_ADAPTER: no route given (options.route; -r/--route on the command line) "
        "and no default route configured (defaults.route)" in result.stderr
    )
    assert "no plugins.yaml was found" not in result.stderr  # a config file is in use: no such hint


def test_the_only_route_served_is_the_default(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {}\n")
    result = harness("run", "hi")
    assert (result.returncode, result.stdout) == (0, "hi\n")
    result = harness("chain")
    assert result.stdout.startswith("route: mock (the only route served; no defaults.route) (outermost first)\n")
    assert "2. mock (adapter)" in result.stdout  # after the prompt log, on by default


def test_run_usage_errors_exit_2(harness: Harness) -> None:
    assert harness("run").returncode == 2
    assert harness("run", "--max-tokens", "-1", "x").returncode == 2
    assert harness("--nosuchoption").returncode == 2  # short form of run: run has no such option


def test_run_config_problems_exit_2(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {delay: soon}\n")
    result = harness("run", "hi")
    assert result.returncode == 2
    assert "plugins.yaml:2, plugin 'mock', field 'delay'" in result.stderr


def test_run_stops_when_a_middleware_failed(harness: Harness, config: Config) -> None:
    config("plugins:\n  failmw: {}\n  mock: {}\n")
    result = harness("run", "hi")
    assert result.returncode == 2
    assert "plugin 'failmw' failed to start: ValueError: middleware exploded" in result.stderr
    assert "fail closed" in result.stderr
    assert result.stdout == ""
    config("plugins:\n  broken: {}\n  mock: {}\n")
    result = harness("run", "hi")
    assert result.returncode == 2
    assert "treated as a middleware" in result.stderr


def test_run_stops_when_a_middleware_fails_at_start(harness: Harness, config: Config) -> None:
    config("plugins:\n  startfail: {}\n  mock: {}\ndefaults: {route: mock}\n")
    result = harness("run", "hi")
    assert result.returncode == 2
    assert "CONFIG" in result.stderr
    assert "cannot start" in result.stderr


def test_run_survives_a_failed_adapter_plugin(harness: Harness, config: Config, cli_env: dict[str, str]) -> None:
    config(
        "plugins:\n  failinit:\n    name: x\n    token: ${{ env.CLI_TOKEN }}\n  mock: {}\n"
        "defaults: {route: mock, model: echo}\n"
    )
    cli_env["CLI_TOKEN"] = SECRET
    result = harness("run", "still works")
    assert result.returncode == 0
    assert result.stdout == "still works\n"
    assert "warning: plugin 'failinit' failed to start" in result.stderr
    assert SECRET not in result.stderr
    result = harness("run", "-r", "strict", "x")
    assert result.returncode == 2
    assert "NO_ADAPTER" in result.stderr
    assert SECRET not in result.stderr + result.stdout


def test_run_without_finish_is_an_error(harness: Harness, config: Config) -> None:
    config("plugins:\n  nofinish: {}\n  mock: {}\ndefaults: {route: mock, model: echo}\n")
    result = harness("run", "--no-log", "hi")  # the prompt log would be one more layer named
    assert result.returncode == 1
    assert (
        "error: PROTOCOL from route 'mock' (mock): the middleware chain ('nofinish') ended the stream without a finish"
        in result.stderr
    )


def _start(tmp_path: Path, cli_env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "harness_core.cli", "run", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env,
        cwd=tmp_path,
    )
    assert process.stdout is not None
    return process


def test_ctrl_c_aborts_cleanly_and_keeps_partial_output(
    tmp_path: Path, cli_env: dict[str, str], config: Config
) -> None:
    config("plugins:\n  mock: {delay: 0.2}\ndefaults: {route: mock, model: echo}\n")
    process = _start(tmp_path, cli_env, " ".join(f"w{i}" for i in range(200)))
    assert process.stdout is not None
    first = process.stdout.read(3)  # "w0 " arrives after one delay: the stream is running
    process.send_signal(signal.SIGINT)
    rest, err = process.communicate(timeout=60)
    assert process.returncode == 130
    output = first + rest
    assert output.startswith("w0 ")
    assert output.endswith("\n")
    assert "w199" not in output
    assert "aborted: interrupted by Ctrl-C" in err


def test_second_ctrl_c_cancels_at_once(tmp_path: Path, cli_env: dict[str, str], config: Config) -> None:
    config("plugins:\n  stubborn: {}\n")
    process = _start(tmp_path, cli_env, "-r", "stubborn", "-m", "any", "x")
    assert process.stdout is not None
    assert process.stderr is not None
    assert process.stdout.read(8) == "partial "
    process.send_signal(signal.SIGINT)
    assert "aborting" in process.stderr.readline()  # the first Ctrl-C fired the abort signal
    process.send_signal(signal.SIGINT)
    rest, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert rest == "\n"
    assert "interrupted" in err


# ------------------------------------------------------------------ plugins


def test_plugins_lists_every_state(harness: Harness, config: Config, cli_env: dict[str, str]) -> None:
    config(
        "plugins:\n  trace: {}\n  mock: {routes: [mock, echo2]}\n  broken: {}\n  ~disabledone: {}\n"
        "  strict: {name: s, token: '${{ env.CLI_TOKEN }}'}\n  nosuchplugin: {}\n"
    )
    cli_env["CLI_TOKEN"] = SECRET
    result = harness("plugins")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0].endswith("plugins.yaml")
    table = {line.split()[0]: line.split() for line in lines[1:] if not line.startswith("!")}
    assert table["trace"][:3] == ["trace", "enabled", "middleware"]
    assert table["mock"][1:3] == ["enabled", "adapter+tools"]  # it registers routes and the echo tool
    assert lines[[row[0] for row in (line.split() for line in lines)].index("mock")].endswith("mock, echo2")
    assert table["broken"][1:3] == ["failed", "-"]  # never imported: its kind is unknown (it fails closed)
    assert table["disabledone"][1] == "disabled"
    assert table["nosuchplugin"][1] == "invalid"
    assert table["failinit"][1] == "installed"
    assert any(line.startswith("! broken: plugin 'broken' cannot be imported") for line in lines)
    assert any("unknown plugin 'nosuchplugin'" in line for line in lines)
    assert SECRET not in result.stdout + result.stderr


def test_plugins_shows_what_each_plugin_is(harness: Harness, config: Config, tmp_path: Path) -> None:
    config(
        f"plugins:\n  gateway: {{database: '{tmp_path / 'gw.sqlite'}'}}\n"
        "  mcp:time: {command: [echo]}\n  mock: {}\n"
    )
    result = harness("plugins")
    assert result.returncode == 0, result.stderr
    table = {line.split()[0]: line.split() for line in result.stdout.splitlines()[1:] if not line.startswith("!")}
    assert table["gateway"][1:3] == ["enabled", "settings"]  # no hooks: `harness serve` reads its config
    assert table["mcp:time"][1:3] == ["enabled", "tools"]
    assert table["mock"][1:3] == ["enabled", "adapter+tools"]


def test_plugins_json(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {}\n  ~trace: {}\n  strict: {name: 3}\ndefaults: {route: mock}\n")
    result = harness("plugins", "--json")
    assert result.returncode == 0
    document = json.loads(result.stdout)
    assert document["config"].endswith("plugins.yaml")
    assert document["defaults"] == {"route": "mock", "model": None}
    entries = {e["key"]: e for e in document["plugins"]}
    assert entries["mock"]["routes"] == ["mock"]
    assert entries["mock"]["version"] == "0.1.0"
    assert entries["trace"]["state"] == "disabled"
    assert entries["strict"]["state"] == "invalid"
    assert document["problems"] == [
        f"{document['config']}:4, plugin 'strict', field 'name': expected a string, got an integer",
    ]


def test_plugins_with_broken_yaml_still_lists_installed(harness: Harness, config: Config) -> None:
    config("plugins: [\n")
    result = harness("plugins")
    assert result.returncode == 0
    assert "mock" in result.stdout
    assert "invalid YAML" in result.stdout


# ------------------------------------------------------------------ config check


def test_config_check_ok(harness: Harness) -> None:
    result = harness("config", "check")
    assert result.returncode == 0
    assert result.stdout == "<built-in default>: ok; plugins: mock; defaults: route=mock, model=echo\n"


def test_config_check_reports_every_problem(harness: Harness, config: Config, cli_env: dict[str, str]) -> None:
    cli_env["CLI_TOKEN"] = SECRET
    path = config(
        "plugins:\n"
        "  mock: {delay: x}\n"
        "  strict:\n"
        "    name: a\n"
        "    count: ${{ env.CLI_TOKEN }}\n"
        "  nosuchplugin: {}\n"
        "colour: blue\n"
    )
    result = harness("config", "check", "--config", path)
    assert result.returncode == 2
    lines = result.stdout.splitlines()
    assert lines[0] == f"{path}: 4 problems"
    assert lines[1] == f"  - {path}:7: unknown top-level key 'colour'; expected `plugins`, `defaults` or `aliases`"
    assert lines[2].startswith(f"  - {path}:6, plugin 'nosuchplugin': unknown plugin 'nosuchplugin'")
    assert lines[3:] == [
        f"  - {path}:2, plugin 'mock', field 'delay': expected a number, got a string",
        f"  - {path}:5, plugin 'strict', field 'count': the environment variable CLI_TOKEN must hold an "
        "integer (such as 8080) for this field; its value is not shown",
    ]
    assert SECRET not in result.stdout + result.stderr


def test_config_check_refuses_malformed_keys_and_lists_every_problem_of_a_plugin(
    harness: Harness, config: Config, cli_env: dict[str, str]
) -> None:
    cli_env["OPENAI_API_KEY"] = SECRET
    literal = "$" + SECRET  # a key pasted after a stray `$`
    path = config(
        "plugins:\n"
        "  openai:\n"
        "    api_key: ${ env.OPENAI_API_KEY }\n"  # 3
        "    timeout: soon\n"  # 4
        "  openai:b:\n"
        f"    api_key: '{literal}'\n"  # 6
        "    routes: [b]\n"
        "  openai:c:\n"
        "    api_key: ${{ env.OPENAI_API_KEY }}-2\n"  # 9
        "    routes: [c]\n"
    )
    result = harness("config", "check")
    assert result.returncode == 2
    lines = result.stdout.splitlines()
    assert lines[0] == f"{path}: 4 problems"
    assert lines[1] == (
        f"  - {path}:3, plugin 'openai', field 'api_key': '${{ env.OPENAI_API_KEY }}' is not expanded: harness reads "
        "the environment only as ${{ env.NAME }} (double braces): write ${{ env.OPENAI_API_KEY }} "
        "(write $${ for a literal ${)"
    )
    assert lines[2].startswith(f"  - {path}:4, plugin 'openai', field 'timeout': expected ")
    assert lines[3].startswith(f"  - {path}:6, plugin 'openai:b', field 'api_key': the value starts with `$`")
    assert lines[4].startswith(f"  - {path}:9, plugin 'openai:c', field 'api_key': a secret is one whole value")
    assert SECRET not in result.stdout + result.stderr


def test_usage_errors_read_like_every_other_error(harness: Harness) -> None:
    result = harness("run", "--bogus", "hi")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: No such option '--bogus'.\nUsage: harness run ")
    assert "Error" not in result.stderr
    result = harness("config", "nosuch")
    assert (result.returncode, result.stderr.splitlines()[0]) == (2, "error: No such command 'nosuch'.")
    result = harness("-c")  # the group's own option
    assert (result.returncode, result.stderr.splitlines()[0]) == (2, "error: Option '-c' requires an argument.")


def test_config_check_reports_failures_without_secrets(
    harness: Harness, config: Config, cli_env: dict[str, str]
) -> None:
    cli_env["CLI_TOKEN"] = SECRET
    config("plugins:\n  failinit:\n    name: a\n    token: ${{ env.CLI_TOKEN }}\n  startfail: {}\n  mock: {}\n")
    result = harness("config", "check")
    assert result.returncode == 2
    assert "plugin 'failinit' failed to start: RuntimeError: cannot connect with token **********" in result.stdout
    assert "[adapter, stage init]" in result.stdout
    assert "RuntimeError: cannot start [middleware, stage register]" in result.stdout
    assert SECRET not in result.stdout + result.stderr


def test_config_check_reports_duplicate_routes(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {}\n  mock:two: {}\n")
    result = harness("config", "check")
    assert result.returncode == 2
    assert "DUPLICATE_ROUTE" in result.stdout


def test_config_check_reports_start_errors_without_failures(harness: Harness, config: Config) -> None:
    config("plugins:\n  modplugin: {}\n  strict: {name: a, routes: [modroute]}\n")
    result = harness("config", "check")
    assert result.returncode == 2
    assert "modroute" in result.stdout


# ------------------------------------------------------------------ chain


def test_chain_shows_the_middleware_order(harness: Harness, config: Config) -> None:
    config(
        "plugins:\n  trace: {path: t.jsonl}\n  nofinish: {}\n  mock: {}\n  ~prompt-log: {}\ndefaults: {route: mock}\n"
    )
    result = harness("chain")
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        "route: mock (outermost first)",
        "1. trace (normal)",
        "2. nofinish (normal)",
        "3. mock (adapter)",
        "embedding calls (outermost first):",  # harness-trace also wraps embedding calls
        "1. trace (normal)",
        f"token counts (outermost first): {NO_COUNT_MIDDLEWARE}",  # said, not left out
    ]
    result = harness("chain", "--json", "mock")
    assert json.loads(result.stdout) == {
        "route": "mock",
        "chain": [
            {"key": "trace", "tier": "normal"},
            {"key": "nofinish", "tier": "normal"},
            {"key": "mock", "tier": "adapter"},
        ],
        "embed_chain": [{"key": "trace", "tier": "normal"}],
        "count_chain": [],  # harness-trace does not wrap token counts
    }


def test_chain_without_route(harness: Harness, config: Config) -> None:
    config("plugins:\n  trace: {path: t.jsonl}\n  ~prompt-log: {}\n")
    result = harness("chain")
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        "route: none given (pass ROUTE or set defaults.route): middleware only (outermost first)",
        "1. trace (normal)",
        "embedding calls (outermost first):",
        "1. trace (normal)",
        "token counts (outermost first): none (no middleware wraps llm_count_tokens: a count goes to the route's"
        " adapter)",
    ]


def test_chain_shows_empty_embedding_and_count_chains(harness: Harness, config: Config) -> None:
    """Found by a review: an empty embedding chain was left out, while an empty count chain was shown."""
    config("plugins:\n  nofinish: {}\n  mock: {}\n  ~prompt-log: {}\n")  # nofinish wraps streams only
    result = harness("chain")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "route: mock (the only route served; no defaults.route) (outermost first)",
        "1. nofinish (normal)",
        "2. mock (adapter)",
        "embedding calls (outermost first): none (no middleware wraps llm_embed: an embedding call goes to the"
        " route's adapter)",
        f"token counts (outermost first): {NO_COUNT_MIDDLEWARE}",
    ]
    assert NO_EMBED_MIDDLEWARE in result.stdout
    document = json.loads(harness("chain", "--json").stdout)
    assert (document["embed_chain"], document["count_chain"]) == ([], [])


def test_chain_lists_the_middleware_a_token_count_passes_through(harness: Harness, config: Config) -> None:
    """Found by a review: the ``llm_count_tokens`` chain (``run --count-tokens``) was not listed."""
    config(
        "plugins:\n  redact: {}\n  fallback: {targets: {mock: [mock/echo]}}\n  mock: {}\n  ~prompt-log: {}\n"
        "defaults: {route: mock}\n"
    )
    result = harness("chain")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-3:] == [
        "token counts (outermost first):",
        "1. redact (normal)",
        "2. fallback (normal)",
    ]
    document = json.loads(harness("chain", "--json").stdout)
    assert document["count_chain"] == [{"key": "redact", "tier": "normal"}, {"key": "fallback", "tier": "normal"}]


def test_chain_describes_a_balance_pool_once(harness: Harness, config: Config) -> None:
    """Found by a fresh-user trial: the balance middleware and the pool's adapter (the same
    plugin) printed the same detail twice."""
    config(
        "plugins:\n  balance: {pools: {ep: [{target: mock}, {target: two}]}}\n  mock: {}\n"
        "  mock:two: {routes: [two]}\n  ~prompt-log: {}\n"
    )
    result = harness("chain", "ep")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].startswith("1. balance (normal): pool ep: ")
    assert lines[2] == "2. balance (adapter): the same plugin as link 1"
    assert result.stdout.count("pool ep:") == 1


def test_chain_errors_exit_2(harness: Harness, config: Config) -> None:
    result = harness("chain", "nowhere")
    assert result.returncode == 2
    assert "NO_ADAPTER" in result.stderr
    config("plugins: {mock: {x: 1}}\n")
    assert harness("chain").returncode == 2


# ------------------------------------------------------------------ plugin subcommands


def test_plugin_subcommands_load_on_demand(harness: Harness) -> None:
    result = harness("fakecmd", "there")
    assert result.returncode == 0
    assert result.stdout == "fake command says there\n"
    for name, message in [
        ("notcmd", "is no click command"),
        ("modcmd", "is no click command"),
        ("brokencmd", "cannot load the 'brokencmd' subcommand of harness-fake-plugins"),
    ]:
        result = harness(name)
        assert result.returncode == 2, name
        assert message in result.stderr


def test_config_env_variable_is_used(harness: Harness, cli_env: dict[str, str], tmp_path: Path) -> None:
    path = tmp_path / "elsewhere.yaml"
    path.write_text("plugins:\n  mock: {routes: [envroute]}\ndefaults: {route: envroute, model: echo}\n")
    cli_env["HARNESS_CONFIG"] = str(path)
    result = harness("run", "via env")
    assert result.returncode == 0
    assert result.stdout == "via env\n"
    os.environ.get("HARNESS_CONFIG")  # the test process itself is untouched


def test_openai_without_key_does_not_block_the_mock(harness: Harness, config: Config, cli_env: dict[str, str]) -> None:
    """The shipped example enables only mock + trace; enabling openai without a key stays harmless."""
    pytest.importorskip("harness_llm_openai")
    cli_env.pop("OPENAI_API_KEY", None)
    config("plugins:\n  openai: {}\n  mock: {}\ndefaults: {route: mock, model: echo}\n")
    result = harness("run", "still the mock")
    assert result.returncode == 0
    assert result.stdout == "still the mock\n"
    plugins = harness("plugins")
    assert "openai" in plugins.stdout


def test_shipped_example_config_works(harness: Harness, cli_env: dict[str, str], tmp_path: Path) -> None:
    example = Path(__file__).parents[2] / "config" / "plugins.yaml"
    cli_env["HARNESS_CONFIG"] = str(example)
    check = harness("config", "check")
    assert check.returncode == 0, check.stdout
    result = harness("run", "hello")
    assert result.returncode == 0
    assert result.stdout == "hello\n"
    assert (tmp_path / "harness-trace.jsonl").is_file()


# ------------------------------------------------------------------ habits brought from llm


def test_prompt_short_form_and_sampling_options(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {}\n  ~prompt-log: {}\ndefaults: {route: mock, model: echo}\n")
    result = harness("Hello short form")
    assert (result.returncode, result.stdout) == (0, "Hello short form\n")
    result = harness("-v", "--top-p", "0.5", "--seed", "3", "--stop", "x", "--tool-choice", "auto", "hi")
    assert (result.returncode, result.stdout) == (0, "hi\n")
    result = harness("--json", "--tool-choice", "none", "hi")
    assert result.returncode == 0, result.stderr
    assert harness("--help").returncode == 0
    assert "Commands" in harness("--help").stdout


def test_a_mistyped_command_is_refused_not_sent(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {}\n  ~prompt-log: {}\ndefaults: {route: mock, model: echo}\n")
    typo = harness("modles")
    assert (typo.returncode, typo.stdout) == (2, "")
    hint = "did you mean `harness models`? (to send it as a prompt: harness run modles)"
    assert f"error: no command 'modles': {hint}" in typo.stderr
    sent = harness("run", "modles")
    assert (sent.returncode, sent.stdout) == (0, "modles\n")


@pytest.mark.parametrize(
    ("args", "first"),
    [
        (("modles",), "error: no command 'modles': did you mean `harness models`?"),
        (("-c", "/etc", "run", "hi"), "error: Invalid value for '-c' / '--config': File '/etc' is a directory."),
        (("run", "-p", "mock", "-r", "mock", "hi"), "error: give -r/--route only"),
    ],
)
def test_a_usage_error_says_what_is_wrong_first(harness: Harness, args: tuple[str, ...], first: str) -> None:
    """Found by a trial: click's ``Usage:`` and ``Try …`` lines came before the ``error:`` line."""
    lines = [line for line in harness(*args).stderr.splitlines() if not line.startswith("warning: ")]
    assert lines[0].startswith(first), lines
    assert lines[1].startswith("Usage: harness ")
    assert lines[2].startswith("Try 'harness ")
    assert lines[2].endswith(" --help' for help.")


def test_no_stream_and_extract(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {}\ndefaults: {route: mock, model: echo}\n")
    fenced = "Here:\n```python\nprint(1)\n```\nbye"
    result = harness("run", "-x", fenced)
    assert (result.returncode, result.stdout) == (0, "print(1)\n")
    result = harness("run", "--no-stream", "whole reply")
    assert (result.returncode, result.stdout) == (0, "whole reply\n")


def test_model_aliases(harness: Harness, config: Config) -> None:
    config(
        "plugins:\n  mock: {}\n  mock:b: {routes: [b]}\n"
        "aliases: {fast: b/echo, plain: echo}\ndefaults: {route: mock, model: echo}\n"
    )
    result = harness("run", "--json", "-m", "fast", "hi")
    assert result.returncode == 0, result.stderr
    logs = harness("logs", "-n", "1", "--json")
    assert json.loads(logs.stdout)[0]["route"] == "b"
    assert harness("run", "-m", "plain", "hi").returncode == 0
    config("plugins:\n  mock: {}\naliases: {fast: 3}\n")
    bad = harness("run", "-m", "fast", "hi")
    assert bad.returncode == 2
    assert "alias 'fast'" in bad.stderr
    config("plugins:\n  mock: {}\naliases: [fast]\n")
    assert "`aliases` must be a mapping" in harness("run", "hi").stderr


def test_provider_options_errors(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {}\ndefaults: {route: mock, model: echo}\n")
    result = harness("run", "-o", "novalue", "hi")
    assert result.returncode == 2
    assert "-o 'novalue' must be key=value" in result.stderr
    result = harness("run", "-r", "nowhere", "-o", "a=1", "hi")
    assert result.returncode == 2
    assert "'nowhere' is none" in result.stderr
    config("plugins:\n  mock: {routes: [mock, gpt]}\n")  # no default route: the route is None, not "None"
    result = harness("run", "-o", "a=1", "hi")
    assert (result.returncode, result.stderr) == (
        2,
        "error: -o needs a route served by a plugin of plugins.yaml; none given (-r/--route) and no default route\n",
    )
    config("plugins:\n  mock: {}\ndefaults: {route: mock, model: echo}\n")
    for pair, flag in [
        ("model=echo-key", "use -m/--model"),
        ("messages=[]", "use PROMPT"),
        ("stream_options=null", "the adapter sets it"),
        ("tools=[]", "use -t/--tool"),
        (" tool_choice =none", "use --tool-choice"),
    ]:
        refused = harness("run", "-o", pair, "hi")
        assert refused.returncode == 2
        key = pair.partition("=")[0].strip()
        assert f"error: -o {key}: the harness sets `{key}` itself; {flag}" in refused.stderr
        assert refused.stdout == ""


def test_prompt_log_on_by_default_and_continue(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {}\ndefaults: {route: mock, model: echo}\n")
    assert harness("run", "first question").returncode == 0
    assert harness("run", "--no-log", "not logged").returncode == 0
    again = harness("run", "-C", "second")
    assert again.returncode == 0, again.stderr
    entries = json.loads(harness("logs", "-n", "0", "--json").stdout)
    assert [e["prompt"] for e in entries] == ["first question", "second"]
    assert entries[0]["conversation_id"] == entries[1]["conversation_id"]
    assert [m["content"][0]["text"] for m in entries[1]["request"]["messages"]] == [
        "first question",
        "first question",
        "second",
    ]
    third = harness("run", "--cid", entries[0]["conversation_id"], "third")
    assert third.returncode == 0
    missing = harness("run", "--cid", "nope", "x")
    assert missing.returncode == 2
    assert "no logged conversation 'nope'" in missing.stderr
    path = config("plugins:\n  mock: {}\n  ~prompt-log: {}\ndefaults: {route: mock, model: echo}\n")
    disabled = harness("run", "-C", "x")
    assert disabled.returncode == 2
    assert disabled.stderr == f"error: --continue/--cid need the prompt log: `~prompt-log:` at {path}:3 disables it\n"
    unlogged = harness("run", "--no-log", "--cid", "x", "y")
    assert unlogged.stderr == "error: --continue/--cid need the prompt log: --no-log was given\n"


def test_without_harness_middleware_continuing_says_what_to_install() -> None:
    from harness_core.cli._promptlog import why_no_prompt_log
    from harness_core.loader import LoadedConfig

    assert why_no_prompt_log(LoadedConfig(path=None), enabled=True) == (
        "it comes with harness-middleware: pip install harness-middleware"
    )


def test_models_lists_every_route(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {}\n  mock:b: {routes: [b]}\ndefaults: {route: mock, model: echo}\n")
    result = harness("models")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "b/echo  context 1000000  max output 100000  efforts off,low,medium,high",
        "mock/echo  context 1000000  max output 100000  efforts off,low,medium,high",
        "b/hash  embeddings",  # the mock embeds on its routes too
        "mock/hash  embeddings",
    ]
    data = json.loads(harness("models", "-r", "b", "--json").stdout)
    assert data == [
        {
            "model": "echo",
            "route": "b",
            "context_window": 1000000,
            "max_output_tokens": 100000,
            "reasoning_efforts": ["off", "low", "medium", "high"],
        },
        {"model": "hash", "route": "b", "embeddings": True},
    ]
    assert harness("models", "-r", "nowhere").returncode == 2


def test_models_from_config_and_listing_failures(harness: Harness, config: Config) -> None:
    config(
        "plugins:\n  stubborn: {}\n  openai: {base_url: 'http://127.0.0.1:1/v1', routes: [down]}\n"
        "aliases: {s: stubborn/other, d: down/x}\ndefaults: {route: stubborn, model: slow}\n"
    )
    result = harness("models")
    assert result.returncode == 1
    assert result.stdout.splitlines() == ["stubborn/slow", "stubborn/other"]  # listing unsupported: the config's
    assert "error: route 'down':" in result.stderr
    assert "NETWORK" in result.stderr
    config("plugins:\n  stubborn: {}\n")
    assert harness("models").stdout.startswith("stubborn  no model list")  # named, never left out
    config("plugins: {}\n")
    assert harness("models").stdout == "no models\n"


def test_models_reports_a_route_that_failed_to_start(harness: Harness, config: Config) -> None:
    config(
        "plugins:\n  mock: {}\n  openai:\n    api_key: ${{ env.HARNESS_TEST_UNSET_KEY }}\n    routes: [oai]\n"
        "  failinit: {name: n, token: x, routes: [s1]}\n"
    )
    result = harness("models")
    assert result.returncode == 1
    assert result.stdout.startswith("mock/echo")  # the others are still shown
    assert "error: route 'oai': plugin 'openai' cannot be used: environment variable HARNESS_TEST_UNSET_KEY" in (
        result.stderr
    )
    assert "error: plugin 'failinit' failed to start: RuntimeError" in result.stderr  # routes unknown


def test_chat_turns_are_one_logged_conversation(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {}\naliases: {e: mock/echo}\ndefaults: {route: mock, model: echo}\n")
    result = harness("chat", "-m", "e", input="one\ntwo\n")
    assert result.returncode == 0, result.stderr
    entries = json.loads(harness("logs", "--json").stdout)
    assert [e["prompt"] for e in entries] == ["one", "two"]
    assert entries[0]["conversation_id"] == entries[1]["conversation_id"]


def test_attach_dash_reads_the_attachment_from_stdin(tmp_path: Path, cli_env: dict[str, str]) -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"

    def run_with_png_on_stdin(*args: str) -> subprocess.CompletedProcess[bytes]:
        command = [sys.executable, "-m", "harness_core.cli", "run", "-r", "mock", "-a", "-", *args]
        return subprocess.run(command, input=png, capture_output=True, env=cli_env, cwd=tmp_path, timeout=120)

    result = run_with_png_on_stdin("what is it?")
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().strip() == "what is it? [image/png (16 bytes)]"  # stdin is no prompt text
    both = run_with_png_on_stdin("-")
    assert both.returncode == 2
    assert both.stderr == b"error: stdin holds either the prompt (PROMPT -) or an attachment (-a -), not both\n"
