"""`harness usage` and `harness cache` (entry-point group harness.commands)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from mw_helpers import usage_record as record

from harness_core.cli._app import cli as harness_cli
from harness_middleware import cli
from harness_middleware.cache import CacheStore
from harness_middleware.usage import UsageLedger


@pytest.fixture
def ledger(tmp_path: Path) -> UsageLedger:
    ledger = UsageLedger(tmp_path / "usage.sqlite")
    ledger.insert(record())
    ledger.insert(record(input_tokens=None, output_tokens=None, cost=None, status="error", error_code="SERVER"))
    ledger.insert(record(ts=time.time() - 10 * 86400, route="anthropic", model="claude"))
    return ledger


def run(*args: str) -> click.testing.Result:
    return CliRunner().invoke(harness_cli, list(args), catch_exceptions=False)


def test_parse_since() -> None:
    assert cli.parse_since("2025-01-31") == datetime(2025, 1, 31, tzinfo=UTC).timestamp()
    assert cli.parse_since("2025-01-31T10:00:00+01:00") == datetime(2025, 1, 31, 9, tzinfo=UTC).timestamp()
    assert cli.parse_since("7d", now=1_000_000.0) == 1_000_000.0 - 7 * 86400
    assert cli.parse_since("12h", now=100_000.0) == 100_000.0 - 12 * 3600
    assert abs(cli.parse_since("30m") - (time.time() - 1800)) < 60
    with pytest.raises(click.BadParameter, match="neither a date"):
        cli.parse_since("yesterday")
    for digits in (310, 5000):
        with pytest.raises(click.BadParameter, match="too long a span"):
            cli.parse_since("9" * digits + "d")


def test_usage_table(ledger: UsageLedger) -> None:
    result = run("usage", "--db", str(ledger.path))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"usage ledger: {ledger.path}"
    assert lines[1].split()[:5] == ["day", "route", "model", "requests", "input"]
    assert any(line.split()[1:4] == ["anthropic", "claude", "1"] for line in lines)
    openai = next(line.split() for line in lines if "openai" in line)
    assert openai[3:5] == ["2", "100"]  # two requests, one with unknown usage
    assert lines[-1].split()[:3] == ["total", "3", "200"]
    header = lines[1].split()
    assert "unknown_usage" in header  # the name --json uses
    assert "no_usage" not in header
    assert openai[header.index("unknown_usage")] == "1"


def test_usage_json_and_since(ledger: UsageLedger) -> None:
    result = run("usage", "--db", str(ledger.path), "--json", "--since", "2d")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    [row] = data["rows"]
    assert (row["route"], row["requests"], row["unknown_usage"], row["errors"], row["cost"]) == (
        "openai",
        2,
        1,
        1,
        0.25,
    )
    assert data["total"]["requests"] == 2
    assert data["total"]["cache_read_tokens"] is None


def test_usage_by_model_with_cached_rows(ledger: UsageLedger) -> None:
    ledger.insert(record(cached=True, cost=0.0, price_source="cache"))
    result = run("usage", "--db", str(ledger.path), "--json", "--by", "model")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["by"] == ["model"]
    claude, gpt = data["rows"]
    assert (claude["model"], claude["requests"], claude["cost"]) == ("claude", 1, 0.25)
    assert (gpt["model"], gpt["requests"], gpt["cached"], gpt["input_tokens"]) == ("gpt-x", 3, 1, 100)
    assert gpt["cost"] == 0.25
    assert "day" not in gpt
    assert "route" not in gpt
    assert data["total"] == data["total"] | {"model": "total", "requests": 4, "cached": 1, "cost": 0.5}
    table = run("usage", "--db", str(ledger.path), "--by", "route,model")
    header = table.output.splitlines()[1].split()
    assert header[:3] == ["route", "model", "requests"]
    assert "cost_usd" in header
    assert table.output.splitlines()[-1].split()[:2] == ["total", "4"]


def test_usage_without_grouping_prints_one_total_row(ledger: UsageLedger) -> None:
    table = run("usage", "--db", str(ledger.path), "--by", "")
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert len(lines) == 3  # the path, the header, the one total row
    assert lines[2].split()[:2] == ["3", "200"]
    empty = UsageLedger(ledger.path.with_name("empty.sqlite"))
    empty.insert(record(ts=0.0))
    since = run("usage", "--db", str(empty.path), "--by", "", "--since", "1d")
    assert since.output.splitlines()[2].split()[:2] == ["-", "-"]  # nothing since: one empty total row


def test_cache_hits_alone_do_not_make_unpriced_rows_look_free(tmp_path: Path) -> None:
    ledger = UsageLedger(tmp_path / "usage.sqlite")
    ledger.insert(record(cost=None, price_source=None))
    ledger.insert(record(cached=True, cost=0.0, price_source="cache"))
    [row] = json.loads(run("usage", "--db", str(ledger.path), "--json", "--by", "model").output)["rows"]
    assert (row["cost"], row["unpriced"], row["cached"]) == (None, 1, 1)
    ledger.insert(record(cost=0.1))
    [row] = json.loads(run("usage", "--db", str(ledger.path), "--json", "--by", "model").output)["rows"]
    assert (row["cost"], row["unpriced"]) == (0.1, 1)
    hits = UsageLedger(tmp_path / "hits.sqlite")
    hits.insert(record(cached=True, cost=0.0, price_source="cache"))
    [row] = json.loads(run("usage", "--db", str(hits.path), "--json", "--by", "model").output)["rows"]
    assert (row["cost"], row["unpriced"]) == (0.0, 0)  # only cache hits: nothing was spent


def test_usage_bad_grouping(ledger: UsageLedger) -> None:
    result = CliRunner().invoke(harness_cli, ["usage", "--db", str(ledger.path), "--by", "day,user"])
    assert result.exit_code == 2
    assert "--by" in result.output
    assert "'user'" in result.output


def test_usage_missing_ledger(tmp_path: Path) -> None:
    result = run("usage", "--db", str(tmp_path / "none.sqlite"))
    assert result.exit_code == 2
    assert "no usage ledger" in result.output


def test_usage_unreadable_ledger(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    result = run("usage", "--db", str(bad))
    assert result.exit_code == 2
    assert "cannot read the usage ledger" in result.output


def write_config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "plugins.yaml"
    path.write_text(body, encoding="utf-8")
    return path


def test_usage_reads_the_path_from_plugins_yaml(tmp_path: Path, ledger: UsageLedger) -> None:
    config = write_config(tmp_path, f"plugins:\n  usage: {{path: {ledger.path}}}\n  mock: {{}}\n")
    result = run("usage", "-c", str(config), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["path"] == str(ledger.path)


def test_usage_without_the_plugin_uses_the_default_path(
    tmp_path: Path, ledger: UsageLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "default_usage_path", lambda: ledger.path)
    config = write_config(tmp_path, "plugins:\n  mock: {}\n")
    result = run("usage", "-c", str(config), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["total"]["requests"] == 3


def test_invalid_config_exits_2(tmp_path: Path) -> None:
    config = write_config(tmp_path, "plugins:\n  usage: {nope: 1}\n")
    result = run("usage", "-c", str(config))
    assert result.exit_code == 2
    assert "nope" in result.output


def filled_cache(path: Path) -> CacheStore:
    store = CacheStore(path, ttl=60, clock=lambda: time.time() - 3600)
    store.put("old", [])
    store.clock = time.time
    store.put("new", [])
    return store


def test_cache_stats_and_clear(tmp_path: Path) -> None:
    store = filled_cache(tmp_path / "cache.sqlite")
    result = run("cache", "stats", "--db", str(store.path), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["entries"] == 2
    text = run("cache", "stats", "--db", str(store.path))
    assert "entries: 2" in text.output
    cleared = run("cache", "clear", "--db", str(store.path))
    assert cleared.output.strip() == f"deleted 2 cache entries from {store.path}"


def test_cache_clear_expired_uses_the_configured_ttl(tmp_path: Path) -> None:
    store = filled_cache(tmp_path / "cache.sqlite")
    config = write_config(tmp_path, f"plugins:\n  cache: {{path: {store.path}, ttl: 60}}\n")
    result = run("cache", "clear", "--expired", "-c", str(config))
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"deleted 1 cache entry from {store.path}"
    assert store.stats()["entries"] == 1


def test_cache_without_the_plugin_uses_the_default_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "default_cache_path", lambda: tmp_path / "default.sqlite")
    config = write_config(tmp_path, "plugins:\n  mock: {}\n")
    result = CliRunner().invoke(harness_cli, ["cache", "stats", "-c", str(config), "--json"])
    assert result.exit_code == 2
    assert f"no cache at {tmp_path / 'default.sqlite'}" in result.output


@pytest.mark.parametrize("command", [["stats"], ["clear"]])
def test_cache_commands_never_create_a_database(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "typo" / "dir" / "c.sqlite"
    result = CliRunner().invoke(harness_cli, ["cache", *command, "--db", str(missing)])
    assert result.exit_code == 2
    assert "(is the cache middleware enabled?)" in result.output
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize("command", [["stats"], ["clear"]])
def test_cache_database_fault_exits_2(tmp_path: Path, command: list[str]) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    result = run("cache", *command, "--db", str(bad))
    assert result.exit_code == 2
    assert "cannot" in result.output


def test_table_formats_missing_values() -> None:
    assert cli._fmt(None) == "-"
    assert cli._fmt(0.5) == "0.500000"  # dollars: small requests cost fractions of a cent


@pytest.mark.parametrize("plugin", ["usage", "cache", "prompt-log"])
def test_an_unusable_database_path_fails_the_plugin_at_start(tmp_path: Path, plugin: str) -> None:
    from harness_middleware.cache import CachePlugin
    from harness_middleware.promptlog import PromptLogPlugin
    from harness_middleware.usage import UsagePlugin

    kind: Any = {"usage": UsagePlugin, "cache": CachePlugin, "prompt-log": PromptLogPlugin}[plugin]
    with pytest.raises(ValueError, match="is a directory"):
        kind(kind.Config(path=str(tmp_path)))
    with pytest.raises(ValueError, match="is a directory"):
        kind(kind.Config(path=""))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ValueError, match="is not a folder"):
        kind(kind.Config(path=str(blocker / "sub" / "db.sqlite")))
    proc = rf"{plugin} path '/proc/nope/x.sqlite' cannot be created: cannot write in '/proc'"
    with pytest.raises(ValueError, match=proc):
        kind.Config(path="/proc/nope/x.sqlite")  # os.access says yes to root here: the folder is probed
    kind(kind.Config(path=str(tmp_path / "new" / "db.sqlite")))  # a missing folder is created on first use
    assert not (tmp_path / "new").exists()


def test_config_given_before_the_subcommand_reaches_it(tmp_path: Path, ledger: UsageLedger) -> None:
    store = filled_cache(tmp_path / "cache.sqlite")
    config = write_config(tmp_path, f"plugins:\n  usage: {{path: {ledger.path}}}\n  cache: {{path: {store.path}}}\n")
    usage = run("-c", str(config), "usage", "--json")
    assert usage.exit_code == 0, usage.output
    assert json.loads(usage.output)["path"] == str(ledger.path)
    stats = run("--config", str(config), "cache", "stats", "--json")
    assert stats.exit_code == 0, stats.output
    assert json.loads(stats.output)["entries"] == 2
    cleared = run(f"--config={config}", "cache", "clear")
    assert cleared.output.strip() == f"deleted 2 cache entries from {store.path}"


def test_the_subcommands_own_config_wins_over_the_groups(tmp_path: Path, ledger: UsageLedger) -> None:
    right = write_config(tmp_path, f"plugins:\n  usage: {{path: {ledger.path}}}\n")
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("plugins:\n  usage: {nope: 1}\n", encoding="utf-8")
    result = run("-c", str(wrong), "usage", "-c", str(right), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["path"] == str(ledger.path)


def test_usage_by_member_breaks_a_pool_down(tmp_path: Path) -> None:
    ledger = UsageLedger(tmp_path / "usage.sqlite")
    ledger.insert(record(requested_route="pool", requested_model="gpt-x", route="east", cost=1.0))
    ledger.insert(record(requested_route="pool", requested_model="gpt-x", route="east", cost=1.0))
    ledger.insert(record(requested_route="pool", requested_model="gpt-x", route="west", cost=3.0))
    ledger.insert(record(route="openai"))  # an older row: no requested route known
    document = json.loads(run("usage", "--db", str(ledger.path), "--json", "--by", "member").output)
    assert [(r["member"], r["requests"], r["cost"]) for r in document["rows"]] == [
        ("east/gpt-x", 2, 2.0),
        ("openai/gpt-x", 1, 0.25),
        ("west/gpt-x", 1, 3.0),
    ]
    table = run("usage", "--db", str(ledger.path), "--by", "requested,member")
    lines = table.output.splitlines()
    assert lines[1].split()[:3] == ["requested", "member", "requests"]
    assert ["pool", "east/gpt-x", "2"] in [line.split()[:3] for line in lines]
    assert ["-", "openai/gpt-x", "1"] in [line.split()[:3] for line in lines]
    assert lines[-1].split()[:2] == ["total", "4"]
