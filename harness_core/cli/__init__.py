"""The ``harness`` command line (console script ``harness = "harness_core.cli:main"``).

Subcommands: ``run``, ``chat``, ``plugins``, ``config check``, ``chain``, ``models``, ``tools``, ``embed``,
``embed-multi``, ``similar``, plus those plugins declare in the
entry-point group ``harness.commands``. ``harness --help`` and ``harness plugins`` stay fast:
only :mod:`click` is imported up front; everything else loads inside the subcommand that needs
it, and plugin subcommands are listed from entry-point metadata without importing them.

A plugin's subcommand takes ``-c/--config`` with :func:`config_option`, so ``harness -c FILE sub``
and ``harness sub -c FILE`` both reach it (:func:`group_config` reads the group's value).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from harness_core.cli._config_option import CONFIG_HELP, config_option, group_config

__all__ = ["CONFIG_HELP", "config_option", "group_config", "main"]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``harness`` command line with ``argv`` (default ``sys.argv[1:]``); exits the process.

    ``transport: auto`` means httpcore here (:func:`harness_core.http.prefer_transport`): a
    one-shot command relays too few chunks to repay aiohttp's import; ``harness serve`` prefers
    aiohttp again."""
    from harness_core.cli._app import cli
    from harness_core.http.transport import prefer_transport

    prefer_transport("httpcore")
    _deprecations_as_warning_lines()
    cli.main(args=list(argv) if argv is not None else None, prog_name="harness")


def _deprecations_as_warning_lines() -> None:
    """Show each :class:`FutureWarning` (harness's deprecations aimed at command-line users, such as
    ``defaults.provider`` in plugins.yaml) as one ``warning: …`` line on stderr, as the CLI's own
    notes are, instead of Python's two lines naming a harness source file; other warnings keep
    Python's form."""
    import sys
    import warnings

    python_form = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if issubclass(category, FutureWarning):
            (file if file is not None else sys.stderr).write(f"warning: {message}\n")
        else:
            python_form(message, category, filename, lineno, file, line)

    warnings.showwarning = show
