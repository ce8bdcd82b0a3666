"""``harness console``: serve the console over the local usage ledger and prompt log.

Exit codes: 0 after Ctrl-C, 2 for a usage error (a path that is a directory, a bad config:
click and the prompt-log plugin say which).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import click

from harness_core.cli import config_option
from harness_gateway.config import is_loopback
from harness_gateway.console.local import local_app
from harness_middleware.cli import prompt_log, usage_ledger

__all__ = ["TOKEN_ENV", "console_command"]

TOKEN_ENV = "HARNESS_CONSOLE_TOKEN"


@click.command("console")
@config_option(help="plugins.yaml naming the usage ledger's and the prompt log's paths")
@click.option(
    "--usage",
    "usage_path",
    type=click.Path(dir_okay=False),
    help="usage ledger (default: the config's, else the usual one)",
)
@click.option(
    "--log", "log_path", type=click.Path(dir_okay=False), help="prompt log (default: the config's, else the usual one)"
)
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on")
@click.option("--port", default=8001, show_default=True, type=click.IntRange(0, 65535), help="port")
def console_command(config: str | None, usage_path: str | None, log_path: str | None, host: str, port: int) -> None:
    """Browse spend, traffic and logged requests of this machine (no gateway needed).

    Reads the usage ledger (`usage` middleware) and the prompt log (`prompt-log` middleware) and
    serves the console at http://HOST:PORT/console until Ctrl-C. Sign in with the token printed
    at start-up (or the one in $HARNESS_CONSOLE_TOKEN).
    """
    import uvicorn

    usage = usage_ledger(config, usage_path).path  # the config's `usage` entry, as `harness usage` reads it
    log = Path(log_path) if log_path else prompt_log(config, None).path
    token = os.environ.get(TOKEN_ENV)
    if not token:
        token = secrets.token_urlsafe(24)
        click.echo(f"sign-in token (shown once): {token}", err=True)
    if not is_loopback(host):
        click.echo(f"warning: serving the console beyond loopback ({host}); use HTTPS in front of it", err=True)
    click.echo(f"harness console: http://{host}:{port}/console  (ledger {usage}, log {log})", err=True)
    settings: dict[str, Any] = {"host": host, "port": port, "log_level": "warning", "server_header": False}
    uvicorn.run(local_app(usage, log, token), **settings)
