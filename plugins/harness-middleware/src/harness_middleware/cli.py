"""``harness usage`` and ``harness cache`` (entry-point group ``harness.commands``).

The database path comes from ``--db``, else from the ``usage`` / ``cache`` plugin's config in the
active plugins.yaml (``-c/--config``, else the usual search of :func:`harness_core.loader.find_config`),
else the plugin's default path. Exit codes: 0 success, 2 configuration or usage error.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
import msgspec

from harness_core.cli import config_option
from harness_middleware._sqlite import NotThisDatabase
from harness_middleware.cache import CachePlugin, CacheStore, default_cache_path
from harness_middleware.promptlog import LogEntry, PromptLog, PromptLogPlugin, default_log_path
from harness_middleware.usage import UsageLedger, UsagePlugin, default_usage_path

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_core import LoadedConfig

__all__ = ["cache_command", "logs_command", "parse_since", "prompt_log", "usage_command", "usage_ledger"]

P = TypeVar("P")

PROMPT_LOG = "prompt-log"  # the entry-point name of the prompt log middleware

_SPAN = re.compile(r"^(\d+)([dhm])$")
_SPAN_SECONDS = {"d": 86400, "h": 3600, "m": 60}
_CONFIG_HELP = "plugins.yaml to read the database path from (default: the usual search)"


def parse_since(text: str, now: float | None = None) -> float:
    """``--since`` as unix seconds: ``YYYY-MM-DD`` (UTC midnight), an ISO-8601 time, or a span
    back from now such as ``7d``, ``12h``, ``30m``. Raises :class:`click.BadParameter`."""
    span = _SPAN.match(text)
    if span is not None:
        reference = time.time() if now is None else now
        try:
            return reference - float(int(span.group(1)) * _SPAN_SECONDS[span.group(2)])
        except (OverflowError, ValueError):  # more digits than any real span (or than int() accepts)
            raise click.BadParameter(f"{text[:40]!r}… is too long a span") from None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is neither a date (2025-01-31), a time, nor a span (7d, 12h, 30m)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _load(config: str | None) -> LoadedConfig:
    """plugins.yaml loaded; raises :class:`click.ClickException` (exit 2) when it is invalid or a
    plugin that fails closed failed (:meth:`~harness_core.loader.LoadedConfig.require_complete`:
    a failed ``usage`` or ``prompt-log`` plugin must not send the command to the default store)."""
    from harness_core import ConfigError, load_config

    try:
        return load_config(config).require_complete()
    except ConfigError as exc:
        raise _ConfigProblem(str(exc)) from exc


def _plugin_from_config(config: str | None, plugin_type: type[P], loaded: LoadedConfig | None = None) -> P | None:
    """The first plugin instance of ``plugin_type`` built from plugins.yaml (``loaded``, else
    the config found from ``config``), or ``None``.

    Raises :class:`click.ClickException` (exit 2) when the config is invalid.
    """
    loaded = loaded if loaded is not None else _load(config)
    for plugin in loaded.plugins:
        if isinstance(plugin.instance, plugin_type):
            return plugin.instance
    return None


class _ConfigProblem(click.ClickException):
    exit_code = 2


def usage_ledger(config: str | None, db: str | None) -> UsageLedger:
    """The usage ledger of ``--db``, else of the ``usage`` plugin of plugins.yaml, else the
    default path. Raises :class:`click.ClickException` (exit 2) for an invalid or incomplete config."""
    return _ledger(config, db)


def _ledger(config: str | None, db: str | None) -> UsageLedger:
    if db is not None:
        return UsageLedger(Path(db))
    plugin = _plugin_from_config(config, UsagePlugin)
    return plugin.ledger if plugin is not None else UsageLedger(default_usage_path())


def _store(config: str | None, db: str | None) -> CacheStore:
    if db is not None:
        return CacheStore(Path(db))
    plugin = _plugin_from_config(config, CachePlugin)
    return plugin.store if plugin is not None else CacheStore(default_cache_path())


def prompt_log(config: str | None, db: str | None) -> PromptLog:
    """The prompt log of ``--db``, else of the ``prompt-log`` plugin of plugins.yaml, else the
    default path. Raises :class:`click.ClickException` (exit 2) for an invalid config."""
    return _prompt_log(config, db)[0]


def _prompt_log(config: str | None, db: str | None) -> tuple[PromptLog, str | None]:
    """:func:`prompt_log` and, when plugins.yaml disables the log (``~prompt-log:``), where:
    ``"FILE:LINE"``."""
    if db is not None:
        return PromptLog(Path(db)), None
    loaded = _load(config)
    disabled = next(
        (
            f"{loaded.source}:{entry.line}"
            for entry in loaded.entries
            if entry.key == PROMPT_LOG and entry.state == "disabled"
        ),
        None,
    )
    plugin = _plugin_from_config(config, PromptLogPlugin, loaded)
    return (plugin.log if plugin is not None else PromptLog(default_log_path())), disabled


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6f}"
    return str(value)


_KEYS = (
    ("day", "day"),
    ("requested", "requested"),
    ("route", "route"),
    ("model", "model"),
    ("member", "member"),
    ("operation", "operation"),
)
_TABLE = (
    ("requests", "requests"),
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cache_read", "cache_read_tokens"),
    ("cache_write", "cache_write_tokens"),
    ("reasoning", "reasoning_tokens"),
    ("unknown_usage", "unknown_usage"),
    ("errors", "errors"),
    ("aborted", "aborted"),
    ("cached", "cached"),
    ("cost_usd", "cost"),
    ("unpriced", "unpriced"),
)
_SUMMED = [key for _, key in _TABLE]


def _totals(rows: list[dict[str, Any]], by: tuple[str, ...]) -> dict[str, Any]:
    total: dict[str, Any] = {key: "total" if i == 0 else "" for i, key in enumerate(by)}
    for key in _SUMMED:
        known = [row[key] for row in rows if row[key] is not None]
        total[key] = sum(known) if known else None
    return total


def _table(rows: list[dict[str, Any]], by: tuple[str, ...]) -> str:
    columns = [column for column in _KEYS if column[1] in by] + list(_TABLE)
    cells = [[title for title, _ in columns]] + [[_fmt(row[key]) for _, key in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in cells
    )


@click.command("usage")
@config_option(help=_CONFIG_HELP)
@click.option("--db", type=click.Path(dir_okay=False), help="the usage SQLite file (overrides the config)")
@click.option("--since", help="only streams since YYYY-MM-DD (UTC), an ISO time, or a span back (7d, 12h, 30m)")
@click.option(
    "--by",
    "by_text",
    default="day,route,model",
    show_default=True,
    help="group by these comma-separated columns among day, requested, route, model, member, operation "
    "('' = one total)",
)
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def usage_command(config: str | None, db: str | None, since: str | None, by_text: str, as_json: bool) -> None:
    """Token usage and cost (USD) by UTC day, route and model, from the usage middleware's ledger.

    `route`/`model` are those that served each call; `member` is that `route/model` (a balance
    pool's member, a fallback target); `requested` the route asked for (a pool's name):
    `--by requested,member` breaks a pool's spend down by member. Streams and embedding calls are
    both rows (`--by operation` splits them: `chat`, `embeddings`; an embedding call has input
    tokens only).

    Token sums count the streams that reached a provider and reported usage; `unknown_usage` counts
    those that did not (unknown, not free) and `cached` the cache hits (nothing spent).
    `cost_usd` sums the known costs (the genai-prices table, or the usage config's `prices`);
    `unpriced` counts the rows whose cost is unknown (model not in the table, or no usage).
    """
    by = tuple(name.strip() for name in by_text.split(",") if name.strip())
    start = parse_since(since) if since is not None else None
    ledger = _ledger(config, db)
    if not ledger.path.exists():
        raise _ConfigProblem(f"no usage ledger at {ledger.path} (is the usage middleware enabled?)")
    try:
        rows = ledger.summary(start, by)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--by") from exc
    except sqlite3.Error as exc:
        raise _ConfigProblem(f"cannot read the usage ledger {ledger.path}: {exc}") from exc
    if as_json:
        document = {"path": str(ledger.path), "by": list(by), "rows": rows, "total": _totals(rows, by)}
        click.echo(json.dumps(document, indent=2))
        return
    click.echo(f"usage ledger: {ledger.path}")
    click.echo(_table(rows if not by and rows else [*rows, _totals(rows, by)], by))  # by '': the one row is the total


@click.group("cache")
def cache_command() -> None:
    """Inspect or clear the response cache of the cache middleware."""


@cache_command.command("stats")
@config_option(help=_CONFIG_HELP)
@click.option("--db", type=click.Path(dir_okay=False), help="the cache SQLite file (overrides the config)")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def cache_stats(config: str | None, db: str | None, as_json: bool) -> None:
    """Entries, expired entries, hits and stored bytes of the cache."""
    store = _store(config, db)
    if not store.path.exists():
        raise _ConfigProblem(f"no cache at {store.path} (is the cache middleware enabled?)")
    try:
        stats = store.stats()
    except sqlite3.Error as exc:
        raise _ConfigProblem(f"cannot read the cache {store.path}: {exc}") from exc
    if as_json:
        click.echo(json.dumps(stats))
        return
    for key, value in stats.items():
        click.echo(f"{key}: {value}")


@cache_command.command("clear")
@config_option(help=_CONFIG_HELP)
@click.option("--db", type=click.Path(dir_okay=False), help="the cache SQLite file (overrides the config)")
@click.option("--expired", is_flag=True, help="delete only entries older than the configured ttl")
def cache_clear(config: str | None, db: str | None, expired: bool) -> None:
    """Delete the cached responses (all, or only the expired ones)."""
    store = _store(config, db)
    if not store.path.exists():
        raise _ConfigProblem(f"no cache at {store.path} (is the cache middleware enabled?)")
    try:
        deleted = store.clear(expired_only=expired)
    except sqlite3.Error as exc:
        raise _ConfigProblem(f"cannot clear the cache {store.path}: {exc}") from exc
    click.echo(f"deleted {deleted} cache entr{'y' if deleted == 1 else 'ies'} from {store.path}")


def _target(route: str | None, model: str | None) -> str:
    """``route/model``, or the route alone when no model was given (the adapter's default)."""
    return f"{route or '-'}/{model}" if model else route or "-"


def _describe(entry: LogEntry) -> str:
    """A log entry as text: a header, the served (and requested) route, prompt, reply, numbers."""
    moment = datetime.fromtimestamp(entry.ts, tz=UTC).isoformat(timespec="seconds")
    served = _target(entry.route, entry.model)
    requested = _target(entry.requested_route, entry.requested_model)
    lines = [f"# {moment}  id {entry.id}  conversation {entry.conversation_id}"]
    lines.append(f"route: {served}" + (f" (requested {requested})" if requested != served else ""))
    for attempt in entry.attempts or []:
        failure = attempt.get("failure")
        outcome = "skipped (cooling down)" if attempt.get("skipped") else "served"
        if failure is not None:
            outcome = f"{failure['code']}: {failure['message']}"
        lines.append(f"  attempt {_target(attempt['route'], attempt.get('model'))}: {outcome}")
    if entry.system:
        lines.append(f"system: {entry.system}")
    lines += [f"prompt: {entry.prompt}", f"response: {entry.response}"]
    tokens = f"tokens: {_fmt(entry.input_tokens)} in, {_fmt(entry.output_tokens)} out"
    if entry.cache_read_tokens or entry.reasoning_tokens:
        tokens += f" ({_fmt(entry.cache_read_tokens)} cache read, {_fmt(entry.reasoning_tokens)} reasoning)"
    cost = "cache hit" if entry.cached else f"${entry.cost:.6f}" if entry.cost is not None else "unknown"
    finish = entry.finish_reason or "none"
    if entry.error_code is not None:
        finish += f" {entry.error_code}: {entry.error_message}"
    first = f"{entry.first_chunk_ms:.0f} ms" if entry.first_chunk_ms is not None else "-"
    lines.append(f"{tokens}; cost: {cost}; finish: {finish}; {entry.duration_ms:.0f} ms (first chunk {first})")
    return "\n".join(lines)


@click.command("logs")
@config_option(help=_CONFIG_HELP)
@click.option("--db", type=click.Path(dir_okay=False), help="the prompt-log SQLite file (overrides the config)")
@click.option(
    "-n", "--count", type=click.IntRange(min=0), default=3, show_default=True, help="newest entries (0 = all)"
)
@click.option("-q", "--query", help="only entries whose prompt, system prompt or reply contains this text")
@click.option("--since", help="only entries since YYYY-MM-DD (UTC), an ISO time, or a span back (7d, 12h, 30m)")
@click.option("--cid", help="only the entries of this conversation id")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output (a JSON array, oldest first)")
def logs_command(
    config: str | None,
    db: str | None,
    count: int,
    query: str | None,
    since: str | None,
    cid: str | None,
    as_json: bool,
) -> None:
    """Show the prompt log: every request and reply `harness run` made (oldest of the selection first).

    Each entry: time, ids, the route and model that served it (and the requested ones and every
    fallback attempt when they differ), prompt, reply, tokens, cost in USD (`unknown` when the
    model has no price), finish, duration and time to first chunk. Continue a conversation with
    `harness run --continue` (the newest) or `harness run --cid ID`.
    """
    start = parse_since(since) if since is not None else None
    log, disabled = _prompt_log(config, db)
    off = f"the prompt log is disabled by `~{PROMPT_LOG}:` at {disabled}" if disabled is not None else None
    if not log.path.exists():
        if off is not None:
            raise _ConfigProblem(f"{off}: harness run writes no log (remove the `~` to turn it on)")
        raise _ConfigProblem(f"no prompt log at {log.path} (harness run writes it unless --no-log)")
    if off is not None:
        click.echo(f"note: {off}: these entries were written before", err=True)
    try:
        entries = log.entries(limit=count or None, query=query, since=start, conversation_id=cid)
    except NotThisDatabase as exc:
        raise _ConfigProblem(str(exc)) from exc
    except sqlite3.Error as exc:
        raise _ConfigProblem(f"cannot read the prompt log {log.path}: {exc}") from exc
    if as_json:
        click.echo(json.dumps([msgspec.to_builtins(entry) for entry in entries], indent=2))
        return
    click.echo("\n\n".join(_describe(entry) for entry in entries) if entries else "no entries")
