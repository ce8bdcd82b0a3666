"""``harness serve`` and ``harness keys`` (entry-point group ``harness.commands``).

Both read the ``gateway`` entry of plugins.yaml (``-c/--config``, else the usual search of
:func:`harness_core.loader.find_config`). Exit codes: 0 success, 2 configuration or usage error
(located config problems are printed; for ``serve`` also one found by the gateway's start, such as
a route nothing serves), 1 the state store failed (``keys``) or the gateway's start failed
otherwise (``serve``), 3 the port is in use (uvicorn's ``STARTUP_FAILURE``): docs/gateway.md,
"Exit codes".
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio
import click
import msgspec

from harness_core.cli import config_option
from harness_gateway.config import GatewayConfig, GatewayPlugin, default_database_path
from harness_gateway.database import store_from_spec
from harness_gateway.errors import GatewayError
from harness_gateway.keys import (
    MAX_RATE,
    KeyChange,
    KeyRecord,
    KeySpec,
    KeySpecError,
    shown_time,
    split_routes,
    unserved_routes,
)
from harness_gateway.store import SqlStore

if TYPE_CHECKING:
    from harness_core import LoadedConfig

__all__ = ["keys_command", "serve_command"]

T = TypeVar("T")

_CONFIG_HELP = "plugins.yaml with the `gateway` entry (default: the usual search)"
_KEY_OPTIONS = {"expires_days": "--expires"}  # a KeySpec field whose option is not `--<field>`


class _UsageProblem(click.ClickException):
    exit_code = 2


def _start_problem(message: str, exit_code: int) -> click.ClickException:
    """The gateway's start failed: shown as ``error: <message>``, exit ``exit_code`` (click's
    exit code is a class attribute: one subclass per code)."""
    problem: type[click.ClickException] = type("StartProblem", (click.ClickException,), {"exit_code": exit_code})
    return problem(message)


def _checked(config: str | None) -> LoadedConfig:
    """plugins.yaml loaded completely, else :class:`click.ClickException` (exit 2) with every
    located problem (:func:`gateway_config`): the list ``harness config check`` prints
    (:func:`harness_core.loader.check.load_complete`)."""
    from harness_core import ConfigError, load_complete

    try:
        return anyio.run(load_complete, config)
    except ConfigError as exc:
        raise _UsageProblem(str(exc)) from exc


def _settings(loaded: LoadedConfig) -> GatewayConfig:
    for plugin in loaded.plugins:
        if isinstance(plugin.instance, GatewayPlugin):
            return plugin.instance.config
    return GatewayConfig()


def gateway_config(config: str | None) -> GatewayConfig:
    """The validated ``gateway`` config of plugins.yaml (defaults when the entry is absent).

    Raises :class:`click.ClickException` (exit 2) with every located problem when the file is
    invalid (an unset ``${{ env.X }}`` in the ``gateway`` entry included) or a plugin that fails
    closed failed (:meth:`~harness_core.loader.LoadedConfig.require_complete`): ``serve`` and
    ``keys`` never run on defaults standing in for a config that could not be loaded.
    """
    return _settings(_checked(config))


def _served_routes(config: str | None) -> set[str]:
    """The routes the gateway of ``config`` serves (generation and embedding routes), read from a
    started harness of that config (no request is sent).

    Raises :class:`click.ClickException` (exit 2) with every located problem when the file is
    missing or invalid, as every command does (:func:`gateway_config`), never a traceback.
    """
    from harness_core import Harness

    loaded = _checked(config)

    async def main() -> set[str]:
        async with Harness.from_loaded(loaded) as harness:
            return {*harness.routes(), *harness.embed_routes()}

    return anyio.run(main)


def _with_store(config: str | None, work: Callable[[SqlStore], Awaitable[T]]) -> T:
    settings = gateway_config(config)
    database = settings.database.get_secret_value() if settings.database is not None else None
    store = store_from_spec(database, default_database_path(), timeout=settings.db_timeout)

    async def main() -> T:
        try:
            await store.migrate()
            return await work(store)
        finally:
            await store.aclose()

    try:
        return anyio.run(main)
    except GatewayError as exc:
        # what was asked cannot be done (a 4xx: a live key of that name) is a usage problem, exit 2
        # like an unknown key or route; the store failing (unavailable, 5xx) exits 1
        problem = _UsageProblem if exc.status < 500 else click.ClickException
        raise problem(exc.message) from exc


@click.command("serve")
@config_option(help=_CONFIG_HELP)
@click.option("--host", help="address to listen on (default: the config's, else 127.0.0.1)")
@click.option("--port", type=click.IntRange(0, 65535), help="port (default: the config's, else 8000)")
@click.option("--workers", type=click.IntRange(1, 256), help="worker processes (default: the config's, else 1)")
@click.option("--reload", "watch", is_flag=True, help="reload when the config file changes (SIGHUP always reloads)")
@click.option("--log-level", default="info", type=click.Choice(["critical", "error", "warning", "info", "debug"]))
def serve_command(
    config: str | None, host: str | None, port: int | None, workers: int | None, watch: bool, log_level: str
) -> None:
    """Serve the OpenAI- and Anthropic-compatible gateway: /v1/chat/completions, /v1/responses,
    /v1/embeddings, /v1/messages (with count_tokens), /v1/models (and /{id}), /healthz, /metrics, /admin/keys
    and the console (docs/gateway.md).

    Exits 2 on a configuration problem (found before the start or by it: the located problems,
    shown once), 1 when the start failed otherwise, 3 when the port is in use."""
    from harness_gateway.server import serve
    from harness_gateway.start_failure import StartFailure

    loaded = _checked(config)
    settings = _settings(loaded)
    try:
        serve(
            config,
            host or settings.host,
            settings.port if port is None else port,
            workers or settings.workers,
            watch=watch,
            drain_timeout=settings.drain_timeout,
            log_level=log_level,
            loop=settings.loop,
            http=settings.http,
            limits=settings.connection_limits(),
        )
    except StartFailure as exc:
        raise _start_problem(loaded.redact(exc.message), exc.exit_code) from None


@click.group("keys")
def keys_command() -> None:
    """Create, list, update and revoke gateway API keys (only their hashes are stored)."""


@keys_command.command("create")
@config_option(help=_CONFIG_HELP)
@click.option("--name", required=True, help="a label for the key")
@click.option("--routes", help="comma-separated routes the key may use (default: all)")
@click.option("--budget", type=click.FloatRange(min=0, min_open=True), help="USD the key may spend in total")
@click.option("--rpm", type=click.IntRange(min=1), help=f"requests per minute (at most {MAX_RATE})")
@click.option("--tpm", type=click.IntRange(min=1), help=f"tokens (input + output) per minute (at most {MAX_RATE})")
@click.option(
    "--expires", type=click.FloatRange(min=0, min_open=True), help="days until the key expires (by the year 9999)"
)
def keys_create(
    config: str | None,
    name: str,
    routes: str | None,
    budget: float | None,
    rpm: int | None,
    tpm: int | None,
    expires: float | None,
) -> None:
    """Create a key and print it once (it cannot be shown again)."""
    route_list = split_routes(routes) if routes is not None else None
    try:
        spec = KeySpec(name=name, routes=route_list, budget=budget, rpm=rpm, tpm=tpm, expires_days=expires)
    except KeySpecError as exc:  # KeySpec owns the rules (ranges included): named here by the option
        raise _UsageProblem(f"{_KEY_OPTIONS.get(exc.field, '--' + exc.field)}: {exc.reason}") from exc
    if route_list is not None:
        problem = spec.unserved(_served_routes(config))
        if problem is not None:
            raise _UsageProblem(f"--routes: {problem}")
    plain, record = _with_store(config, lambda store: store.create_key(spec))
    click.echo(plain)
    click.echo(f"created key {record.id} ({record.name}); store it now: it is not shown again", err=True)


def _when(moment: float | None) -> str:
    """``moment`` (unix seconds) as the table shows it: ``2030-01-31 12:00`` (UTC), ``-`` for
    ``None`` (:func:`~harness_gateway.keys.shown_time`: never an error)."""
    return "-" if moment is None else shown_time(moment, "%Y-%m-%d %H:%M")


def _usd(amount: float) -> str:
    """An amount of USD as the table shows it: up to 8 decimals, no trailing zeros (``0.00003``,
    ``24``), never ``0.0000`` for a spend that is not zero."""
    return f"{amount:.8f}".rstrip("0").rstrip(".") or "0"


def _row(key: KeyRecord) -> list[str]:
    state = "revoked" if key.revoked_at is not None else "expired" if not key.usable() else "active"
    budget = f"{_usd(key.spent)}/{_usd(key.budget)}" if key.budget is not None else f"{_usd(key.spent)}/-"
    return [
        key.id, key.name, state, ",".join(key.routes) if key.routes is not None else "*", budget,
        str(key.rpm or "-"), str(key.tpm or "-"), _when(key.created_at), _when(key.expires_at),
    ]  # fmt: skip


@keys_command.command("list")
@config_option(help=_CONFIG_HELP)
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def keys_list(config: str | None, as_json: bool) -> None:
    """Every key (never its value): id, name, state, routes, spend/budget, limits."""
    keys: list[KeyRecord] = _with_store(config, lambda store: store.list_keys())
    if as_json:
        click.echo(json.dumps(msgspec.to_builtins(keys), indent=2))
        return
    cells: list[list[str]] = [["id", "name", "state", "routes", "spent/budget", "rpm", "tpm", "created", "expires"]]
    cells += [_row(key) for key in keys]
    widths = [max(len(line[i]) for line in cells) for i in range(len(cells[0]))]
    for line in cells:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())


class _Removable(click.ParamType[Any]):
    """An option's value, or ``none`` (any case) for "remove this limit" (:data:`_REMOVE`)."""

    def __init__(self, kind: click.ParamType[Any]) -> None:
        self.kind = kind
        self.name = f"{kind.name}|none"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.strip().lower() == "none":
            return _REMOVE
        return self.kind.convert(value, param, ctx)


_REMOVE: Final = object()
"""What an option of :class:`_Removable` is given as ``none``: the limit is removed."""


@keys_command.command("update")
@config_option(help=_CONFIG_HELP)
@click.argument("key")
@click.option("--name", help="a new label for the key")
@click.option("--routes", help="comma-separated routes the key may use (none: every route)")
@click.option(
    "--budget",
    type=_Removable(click.FloatRange(min=0, min_open=True)),
    help="USD it may spend in total (none: unlimited)",
)
@click.option("--rpm", type=_Removable(click.IntRange(min=1)), help="requests per minute (none: unlimited)")
@click.option("--tpm", type=_Removable(click.IntRange(min=1)), help="tokens per minute (none: unlimited)")
@click.option(
    "--expires",
    type=_Removable(click.FloatRange(min=0, min_open=True)),
    help="days from now until it expires (none: never)",
)
def keys_update(
    config: str | None,
    key: str,
    name: str | None,
    routes: str | None,
    budget: Any,
    rpm: Any,
    tpm: Any,
    expires: Any,
) -> None:
    """Change the live key with this id (or this name): only the options given; its value, id and
    spend are kept. A budget below what it spent leaves it spent; one above admits it again."""

    def given(value: Any) -> Any:
        return msgspec.UNSET if value is None else None if value is _REMOVE else value

    route_list: Any = msgspec.UNSET
    if routes is not None:
        route_list = None if routes.strip().lower() == "none" else split_routes(routes)
    change = KeyChange(
        name=given(name), routes=route_list, budget=given(budget), rpm=given(rpm), tpm=given(tpm),
        expires_days=given(expires),
    )  # fmt: skip
    if not change.changes():
        raise _UsageProblem("nothing to change: give --name, --routes, --budget, --rpm, --tpm or --expires")
    if isinstance(route_list, list):
        problem = unserved_routes(route_list, _served_routes(config))
        if problem is not None:
            raise _UsageProblem(f"--routes: {problem}")

    async def update(store: SqlStore) -> KeyRecord | None:
        try:
            return await store.update_key(key, change)
        except KeySpecError as exc:  # KeySpec owns the rules: named here by the option
            raise _UsageProblem(f"{_KEY_OPTIONS.get(exc.field, '--' + exc.field)}: {exc.reason}") from exc

    changed = _with_store(config, update)
    if changed is None:
        raise _UsageProblem(f"no live key with id or name {key!r}")
    click.echo(f"updated key {changed.id} ({changed.name}): {', '.join(change.changes())}")


@keys_command.command("revoke")
@config_option(help=_CONFIG_HELP)
@click.argument("key")
def keys_revoke(config: str | None, key: str) -> None:
    """Revoke the live key with this id (or this name: names are unique among live keys)."""
    count: Any = _with_store(config, lambda store: store.revoke(key))
    if not count:
        raise _UsageProblem(f"no live key with id or name {key!r}")
    click.echo(f"revoked {count} key{'s' if count != 1 else ''}")
