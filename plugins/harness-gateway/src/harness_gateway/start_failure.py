"""Why a gateway did not start, the exit code of ``harness serve`` for it, and how a worker tells its supervisor.

A start that raises (:meth:`harness_gateway.server.GatewayServer.start`: the config read again,
the routes checked, the runtime started) is kept as a :class:`StartFailure`: a configuration
problem (a :class:`~harness_core.ConfigError`, or any ``LlmError`` with code ``CONFIG``: every
problem located by plugin, field and YAML line) exits :data:`EXIT_CONFIG` (2, what the command's
own check of the file exits), shown as that check shows it, without a traceback; any other
exception of the start exits :data:`EXIT_START` (1), named with its type (its traceback with
``--log-level debug``). A port in use is not one of them: uvicorn exits 3 (``STARTUP_FAILURE``)
before the app starts (docs/gateway.md, "Exit codes").

With ``--workers N`` the workers start in their own processes: a worker whose start fails writes
its :class:`StartFailure` to the run's report directory (:func:`write_report`, one JSON file
named by its pid, :data:`REPORTS_ENV` names the directory) instead of logging it, and exits
(uvicorn's 3); the supervisor, which stops on a worker that failed to start, reads the reports
(:func:`read_reports`) and ``harness serve`` shows each distinct problem once and exits with its
code (:mod:`harness_gateway.workers`).
"""

from __future__ import annotations

import json
import logging
import os
import traceback
from pathlib import Path
from typing import Final

from harness_core import LlmError

__all__ = ["EXIT_CONFIG", "EXIT_START", "REPORTS_ENV", "StartFailure", "read_reports", "write_report"]

logger = logging.getLogger("harness_gateway")

EXIT_CONFIG: Final = 2
"""``harness serve``'s exit code for a configuration problem (the same as its check of the file before the start)."""
EXIT_START: Final = 1
"""``harness serve``'s exit code for any other failure of the gateway's start (a plugin's start raised …)."""
REPORTS_ENV: Final = "HARNESS_GATEWAY_START_REPORTS"
"""The directory where a worker process writes why its start failed (set by
:func:`~harness_gateway.workers.run_workers`)."""


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``, exception groups (anyio's task groups) flattened."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def _is_config(exc: BaseException) -> bool:
    return isinstance(exc, LlmError) and exc.code == "CONFIG"


class StartFailure(Exception):
    """The gateway did not start: ``exit_code`` (:data:`EXIT_CONFIG` or :data:`EXIT_START`; 3 for
    a worker that failed without a report) and ``message``, the text ``harness serve`` shows once
    (``error: <message>``)."""

    def __init__(self, exit_code: int, message: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.message = message

    @classmethod
    def of(cls, exc: BaseException, *, traceback_shown: bool = False) -> StartFailure:
        """The failure of a start that raised ``exc``: :data:`EXIT_CONFIG` with ``str(exc)`` (the
        located problems, as the check of the file shows them) when every exception in it is a
        configuration problem; else :data:`EXIT_START`, ``the gateway cannot start: <type>:
        <text>`` per exception, followed by the traceback when ``traceback_shown``."""
        leaves = _leaves(exc)
        if all(_is_config(leaf) for leaf in leaves):
            return cls(EXIT_CONFIG, "\n".join(str(leaf) for leaf in leaves))
        lines = [
            str(leaf) if _is_config(leaf) else f"the gateway cannot start: {type(leaf).__name__}: {leaf}"
            for leaf in leaves
        ]
        if traceback_shown:
            lines.append("".join(traceback.format_exception(exc)).rstrip("\n"))
        else:
            lines[-1] += " (--log-level debug shows the traceback)"
        return cls(EXIT_START, "\n".join(lines))


def write_report(directory: Path, failure: StartFailure) -> None:
    """Write ``failure`` as this process's report in ``directory`` (``<pid>.json``: ``exit_code``,
    ``message``), for the supervisor to show. A report that cannot be written is logged here
    instead (the failure is never lost)."""
    path = directory / f"{os.getpid()}.json"
    try:
        path.write_text(json.dumps({"exit_code": failure.exit_code, "message": failure.message}), encoding="utf-8")
    except OSError as exc:
        logger.error("%s\n(the report of this worker could not be written to %s: %s)", failure.message, path, exc)


def read_reports(directory: Path, first: int | None) -> list[StartFailure]:
    """The failures reported in ``directory``, the one of worker ``first`` (the pid that stopped
    the supervisor) first, then the others by pid; one per distinct message (workers failing
    alike are shown once).

    Raises:
        OSError: a report cannot be read; ValueError or KeyError: a report is not one
            :func:`write_report` writes (not JSON, a field missing).
    """
    paths = sorted(directory.glob("*.json"), key=lambda path: (path.stem != str(first), int(path.stem)))
    found: dict[str, StartFailure] = {}
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))
        failure = StartFailure(int(data["exit_code"]), str(data["message"]))
        found.setdefault(failure.message, failure)
    return list(found.values())
