"""Log output of the ``harness`` command: one line per record on stderr.

Plugin failures and adapter bugs are logged with their tracebacks (docs/runtime.md: ``INTERNAL`` is
logged with its traceback). On a terminal a user wants the message, not forty lines of stack:
tracebacks are shown with ``-v``; ``-vv`` also shows debug records.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from harness_core.plugininfo import REPORTED

__all__ = ["configure_logging", "redact_logs"]


class _Formatter(logging.Formatter):
    """``harness: LEVEL: message [logger]``; the traceback only when asked for."""

    def __init__(self, tracebacks: bool) -> None:
        super().__init__("harness: %(levelname)s: %(message)s [%(name)s]")
        self._tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        if self._tracebacks or not record.exc_info:
            return super().format(record)
        text = super().format(logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None}))
        return f"{text} (run with -v for the traceback)"


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is at the time of the record (test runners swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # pragma: no cover - logging's own policy for a broken stream
            self.handleError(record)


def _not_reported(record: logging.LogRecord) -> bool:
    """Whether ``record`` is not a plugin failure the command reports itself (its ``error:`` line)."""
    return not getattr(record, REPORTED, False)


def configure_logging(verbose: int) -> None:
    """Send log records to stderr: warnings and errors by default, info with ``-v`` (and
    tracebacks), debug with ``-vv``. Replaces any handler a previous call installed.

    A plugin failure the command reports itself (a record marked
    :data:`~harness_core.plugininfo.REPORTED`) is logged only with ``-v``, for its traceback."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_harness_cli", False)]:
        root.removeHandler(handler)
    handler = _StderrHandler()
    handler.setFormatter(_Formatter(tracebacks=verbose > 0))
    handler._harness_cli = True  # type: ignore[attr-defined]
    if not verbose:
        handler.addFilter(_not_reported)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose > 1 else logging.INFO if verbose == 1 else logging.WARNING)


def redact_logs(redact: Callable[[str], str]) -> None:
    """Scrub the config's secrets from every record the CLI's handler writes, tracebacks included."""
    from harness_core.secret import RedactFilter

    for handler in logging.getLogger().handlers:
        if getattr(handler, "_harness_cli", False):
            handler.addFilter(RedactFilter(redact))
