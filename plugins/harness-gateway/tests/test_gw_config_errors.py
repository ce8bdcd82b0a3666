"""The gateway config's mistakes are reported at their own key's line (a fresh user's trial):
inside ``aliases``, ``prices`` and ``responses``, and ``${{ env.X }}`` in a number or boolean field;
an alias naming a route that no plugin serves stops the start."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from harness_core import ConfigError
from harness_core.cli._app import cli
from harness_core.loader import inspect_config
from harness_gateway.runtime import load_runtime


def problems(
    tmp_path: Path, text: str, environ: dict[str, str] | None = None
) -> list[tuple[str | None, int | None, str]]:
    path = tmp_path / "plugins.yaml"
    path.write_text(text, encoding="utf-8")
    loaded = inspect_config(path, environ=environ or {}, instantiate=False)
    return [(p.field, p.line, p.message) for p in loaded.problems]


def test_a_bad_alias_is_reported_at_its_own_line_and_key(tmp_path: Path) -> None:
    text = "plugins:\n  gateway:\n    aliases:\n      fast: mock/echo\n      slow: 5\n  mock: {}\n"
    assert problems(tmp_path, text) == [("aliases.slow", 5, "expected a string, got an integer")]
    text = "plugins:\n  gateway:\n    aliases:\n      fast: mock/echo\n      gpt-4.1: echo\n  mock: {}\n"
    assert problems(tmp_path, text) == [("aliases.gpt-4.1", 5, "expected `route/model`, got 'echo'")]


def test_a_bad_price_key_and_limits_are_reported_at_their_own_line(tmp_path: Path) -> None:
    text = (
        "plugins:\n  gateway:\n    prices:\n      mock/echo: {input: 1, output: 2}\n"
        "      echo: {input: 1, output: 2}\n  mock: {}\n"
    )
    assert problems(tmp_path, text) == [
        ("prices.echo", 5, "expected a key of the form `route/model`, got 'echo'"),
    ]
    text = "plugins:\n  gateway:\n    port: 8000\n    limits: localhost\n  mock: {}\n"
    [(field, line, message)] = problems(tmp_path, text)
    assert (field, line) == ("limits", 4)
    assert message.startswith("expected a Redis or Valkey URL")


def test_a_bad_retention_is_reported_at_the_retention_line(tmp_path: Path) -> None:
    text = "plugins:\n  gateway:\n    responses:\n      retention: 99999d\n  mock: {}\n"
    assert problems(tmp_path, text) == [("responses.retention", 4, "must be at most 3650d, got '99999d'")]


def test_an_enum_mistake_lists_the_values(tmp_path: Path) -> None:
    text = "plugins:\n  gateway:\n    port: 8000\n    loop: uvlop\n  mock: {}\n"
    assert problems(tmp_path, text) == [
        ("loop", 4, "Invalid enum value 'uvlop': did you mean 'uvloop'? (expected one of 'auto', 'asyncio', 'uvloop')")
    ]


def test_a_field_typo_says_did_you_mean_and_hides_no_other_problem(tmp_path: Path) -> None:
    text = (
        "plugins:\n  gateway:\n    databse: gw.sqlite\n    port: high\n    prices: {mock/echo: {inptu: 1}}\n"
        "  mock: {}\n"
    )
    found = problems(tmp_path, text)
    assert [(field, line) for field, line, _ in found] == [
        ("databse", 3),
        ("port", 4),
        ("prices.mock/echo", 5),  # `input` is required (given as `inptu`)
        ("prices.mock/echo", 5),  # and `output`
        ("prices.mock/echo.inptu", 5),
    ]
    assert found[0][2].startswith("unknown field `databse`: did you mean `database`? (known fields: host, ")
    assert found[1][2] == "expected an integer, got a string"
    assert found[4][2].startswith("unknown field `inptu`: did you mean `input`? (known fields: input, ")


def test_numbers_and_booleans_from_the_environment(tmp_path: Path) -> None:
    text = (
        "plugins:\n  gateway:\n    port: ${{ env.PORT }}\n    require_keys: ${{ env.REQUIRE }}\n"
        "    upstream_read_timeout: ${{ env.READ }}\n  mock: {}\n"
    )
    path = tmp_path / "plugins.yaml"
    path.write_text(text, encoding="utf-8")
    loaded = inspect_config(path, environ={"PORT": "8080", "REQUIRE": "false", "READ": "null"}, instantiate=False)
    assert loaded.problems == []
    [entry] = [e for e in loaded.entries if e.key == "gateway"]
    assert entry.state == "enabled"
    wrong = problems(tmp_path, text, {"PORT": "eighty", "REQUIRE": "yes-please", "READ": "99999"})
    assert wrong == [
        (
            "port",
            3,
            "the environment variable PORT must hold an integer (such as 8080) for this field; its value is not shown",
        ),
        (
            "require_keys",
            4,
            "the environment variable REQUIRE must hold a boolean (true or false) for this field; "
            "its value is not shown",
        ),
    ]
    assert problems(tmp_path, text, {"PORT": "99999", "REQUIRE": "true", "READ": "1"}) == [
        ("port", 3, "expected an integer of at most 65535")
    ]


def test_an_alias_naming_a_route_nothing_serves_stops_the_gateway_start(tmp_path: Path) -> None:
    path = tmp_path / "plugins.yaml"
    path.write_text("plugins:\n  gateway:\n    aliases:\n      fast: mock/echo\n      slow: mokc/echo\n  mock: {}\n")

    async def serve() -> None:
        runtime = await load_runtime(path)  # what `harness serve` starts
        await runtime.aclose()  # pragma: no cover - the start raises

    with pytest.raises(ConfigError) as caught:
        anyio.run(serve)
    [problem] = caught.value.problems
    assert (problem.plugin, problem.field, problem.line, problem.source) == ("gateway", "aliases.slow", 5, str(path))
    assert problem.message == (
        "alias 'slow' names route 'mokc', which no plugin serves (did you mean 'mock'?); routes: 'mock'"
    )


def test_a_bad_port_hides_no_bad_database_url_and_no_secret_is_shown(tmp_path: Path) -> None:
    """``port: 99999`` beside a database URL whose port is out of range: both are reported, each
    at its line (the URL's check, run only once every field converted, was hidden by the port's
    error and reported only when alone); the password of the URL is never shown."""
    text = (
        "plugins:\n  gateway:\n    port: 99999\n    database: postgresql://u:db-password-x@h:70000/db\n"
        "    limits: redis://h:99999\n  mock: {}\n"
    )
    found = problems(tmp_path, text)
    assert found == [
        ("port", 3, "expected an integer of at most 65535"),
        ("database", 4, "the URL's port must be a number from 0 to 65535"),
        ("limits", 5, "the URL's port must be a number from 0 to 65535"),
    ]
    with pytest.raises(ConfigError) as raised:
        anyio.run(load_runtime, tmp_path / "plugins.yaml")  # harness serve's load: the same problems
    assert [(p.field, p.line) for p in raised.value.problems] == [("port", 3), ("database", 4), ("limits", 5)]
    assert "db-password-x" not in str(raised.value)


def test_serve_and_config_check_list_the_same_problems_and_name_only_adapters_as_owners(tmp_path: Path) -> None:
    """One file with problems in four plugins and an alias of a route only an invalid adapter
    could serve: ``harness serve`` (and ``harness keys``) refuse it with the list ``harness config
    check`` prints (serve's lacked the alias line, found only by the start of the valid plugins),
    and the alias's message names as possible owners only the adapter plugins that failed, not
    the middleware ``usage`` nor the gateway's settings entry."""
    path = tmp_path / "plugins.yaml"
    path.write_text(
        "plugins:\n  gateway:\n    port: 99999\n  usage: {path: 5}\n  mock: {delay: -1}\n"
        "  openai:work: {api_key: sk-provider-test-key-1234, base_url: 'ftp://x', routes: [work]}\n"
        "aliases:\n  fast: work/gpt-4o\ndefaults: {route: mock, model: echo}\n"
    )
    check = CliRunner().invoke(cli, ["config", "check", "-c", str(path)])
    assert check.exit_code == 2
    listed = [line.removeprefix("  - ") for line in check.stdout.splitlines()[1:]]
    assert check.stdout.startswith(f"{path}: 5 problems\n")
    assert [line.split(":", 2)[1].split(",")[0] for line in listed] == ["3", "4", "5", "6", "8"]
    alias = listed[-1]
    assert "adapter plugins that failed (one may own it): plugin 'mock' is invalid" in alias
    assert "plugin 'openai:work' is invalid" in alias
    assert "'usage'" not in alias
    assert "'gateway'" not in alias
    for command in (["serve", "-c", str(path), "--port", "0"], ["keys", "list", "-c", str(path)]):
        refused = CliRunner().invoke(cli, command)
        assert refused.exit_code == 2
        assert "invalid configuration (5 problems):" in refused.output
        assert [line.removeprefix("  - ") for line in refused.output.splitlines()[1:] if line] == listed
    assert "sk-provider-test-key-1234" not in check.stdout + refused.output
