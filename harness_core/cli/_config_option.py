"""The ``-c/--config`` option every ``harness`` subcommand takes, built-in or from a plugin.

``harness -c FILE SUB …`` and ``harness SUB -c FILE …`` both name the plugins.yaml of ``SUB`` (the
subcommand's own wins). A plugin's subcommand (entry-point group ``harness.commands``) gets the
same behaviour by declaring its option with :func:`config_option`. Only :mod:`click` is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

__all__ = ["CONFIG_HELP", "config_option", "group_config"]

F = TypeVar("F", bound=Callable[..., Any])

CONFIG_HELP = (
    "plugins.yaml to use (default: $HARNESS_CONFIG, ./plugins.yaml, ./config/plugins.yaml, "
    "the user config dir, else the built-in mock setup)"
)
"""The help text of ``-c/--config`` where a command says nothing more specific."""


def group_config(ctx: click.Context) -> str | None:
    """The ``-c`` given to the ``harness`` group (``harness -c FILE sub``), else ``None``."""
    given = ctx.find_root().params.get("config")
    return given if isinstance(given, str) else None


def _subcommand_config(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A subcommand's own ``-c``, else the one given to the ``harness`` group."""
    return value if value is not None else group_config(ctx)


def config_option(help: str = CONFIG_HELP) -> Callable[[F], F]:
    """The ``-c/--config FILE`` option of a subcommand: the command's ``config`` parameter is the
    path given after the subcommand, else the one given before it (``harness -c FILE sub``), else
    ``None`` (the usual search of :func:`harness_core.loader.find_config`)::

        @click.command("usage")
        @config_option(help="plugins.yaml to read the ledger path from")
        def usage(config: str | None) -> None: ...
    """
    option: Callable[[F], F] = click.option(
        "-c", "--config", "config", type=click.Path(dir_okay=False), callback=_subcommand_config, help=help
    )
    return option
