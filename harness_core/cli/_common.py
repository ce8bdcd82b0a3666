"""Helpers shared by the subcommands: exit codes, output sinks, error lines, loading with reporting."""

from __future__ import annotations

import errno
import os
import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Final, TextIO

from harness_core.cli._logging import redact_logs
from harness_core.config import ConfigError
from harness_core.errors import LlmError
from harness_core.loader import LoadedConfig, load_config
from harness_core.plugininfo import PluginFailure, adapter_failures

__all__ = [
    "ABORT_SIGNALS",
    "EXIT_ABORTED",
    "EXIT_BROKEN_PIPE",
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_USAGE",
    "USAGE_CODES",
    "Sink",
    "describe_error",
    "exit_code_for",
    "isatty",
    "load_for_start",
    "output_failure_code",
    "report_error",
    "resolve_flags",
    "stdout_failure",
    "warn_start_failures",
]

EXIT_OK: Final = 0
EXIT_ERROR: Final = 1
EXIT_USAGE: Final = 2
EXIT_ABORTED: Final = 130
EXIT_BROKEN_PIPE: Final = 141
"""stdout was closed by its reader (EPIPE): 128 + SIGPIPE, the status of a Unix tool killed by SIGPIPE."""

ABORT_SIGNALS: Final = {
    signal.SIGINT: "interrupted by Ctrl-C",
    signal.SIGTERM: "terminated by SIGTERM",
    signal.SIGHUP: "hung up (SIGHUP)",
}
"""The signals that abort a stream (what Ctrl-C, ``timeout``, ``docker stop``, systemd and a closed
terminal send), with the abort reason each gives; a command they stop exits with 128 + the signal."""

USAGE_CODES: Final = frozenset({"CONFIG", "NO_ADAPTER", "UNSUPPORTED"})
"""Error codes that mean the request or the setup is wrong (exit 2), not that a generation failed (exit 1)."""


class Sink:
    """A text stream that remembers whether its output ends a line; every write is redacted and flushed.

    Args:
        stream: the stream written to; ``None`` (Python's ``sys.stdout`` when file descriptor 1
            is closed, e.g. ``harness run x >&-``) makes a sink that has failed from the start.
        name: how messages call the stream (``stdout``).
        redact: applied to every piece of text before it is written (the config's secret scrubber).

    A write that fails (the reader went away: ``BrokenPipeError``; a full disk; a closed stream)
    never raises: the error is kept in :attr:`failure`, later writes are dropped, and the
    stream's file descriptor is pointed at :data:`os.devnull`, so the interpreter's final flush
    of the text still buffered cannot fail again (the practice the Python documentation
    recommends for SIGPIPE, https://docs.python.org/3/library/signal.html#note-on-sigpipe).
    The caller decides what the failure means (``harness run`` aborts the stream).
    """

    def __init__(
        self, stream: TextIO | None, *, name: str = "output", redact: Callable[[str], str] | None = None
    ) -> None:
        self.stream = stream
        self.name = name
        self.redact = redact
        self.at_line_start = True
        self.failure: OSError | None = None if stream is not None else OSError(errno.EBADF, f"{name} is closed")

    def isatty(self) -> bool:
        """Whether the stream is a terminal (``False`` when it is closed or has failed)."""
        return self.failure is None and isatty(self.stream)

    def write(self, text: str) -> None:
        """Write ``text`` (redacted) and flush; a failure is recorded in :attr:`failure`, not raised."""
        stream = self.stream
        if not text or stream is None or self.failure is not None:
            return
        ends_line = text.endswith("\n")
        if self.redact is not None:
            text = self.redact(text)
        try:
            stream.write(text)
            stream.flush()
        except OSError as exc:
            self.failure = exc
            _silence(stream)
            return
        self.at_line_start = ends_line

    def end_line(self) -> None:
        """Finish the current line, if one is open."""
        if not self.at_line_start:
            self.write("\n")


def isatty(stream: TextIO | None) -> bool:
    """Whether ``stream`` is a terminal; ``False`` for ``None`` (a closed standard stream) and a closed file."""
    if stream is None:
        return False
    try:
        return stream.isatty()
    except (OSError, ValueError):  # a closed file object
        return False


def _silence(stream: TextIO) -> None:
    """Point the file descriptor of ``stream`` at ``os.devnull`` (its buffered text goes nowhere)."""
    try:
        fd = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError):  # no file descriptor (an in-memory stream): nothing to flush at exit
        return
    os.dup2(devnull, fd)
    os.close(devnull)


def output_failure_code(out: Sink, err: Sink) -> int:
    """The exit code once ``out`` has failed: a closed pipe stops quietly (141, like a Unix tool
    killed by SIGPIPE); any other write error is reported as one line on ``err`` (exit 1)."""
    failure = out.failure
    if failure is None:
        return EXIT_OK
    if isinstance(failure, BrokenPipeError):
        return EXIT_BROKEN_PIPE
    err.end_line()
    err.write(f"error: cannot write output: {failure.strerror or failure}\n")
    return EXIT_ERROR


_WRITE_ERRNOS: Final = frozenset(
    {errno.EPIPE, errno.ENOSPC, errno.EIO, errno.EFBIG, errno.EDQUOT, errno.EBADF, errno.ECONNRESET}
)
"""What writing to a full disk, a closed pipe or socket, or a closed descriptor raises."""


def stdout_failure(exc: OSError) -> int | None:
    """The exit code when ``exc`` is a failed write of standard output, else ``None``.

    A write error (:data:`_WRITE_ERRNOS`) that names no file is taken as one: a subcommand opens
    its other files by name, so their errors carry it. The rest of the output is then dropped
    (the descriptor points at ``os.devnull``, so the interpreter's last flush cannot fail again)
    and :func:`output_failure_code` reports it on stderr: exit 1, or 141 quietly for a closed pipe.
    """
    if exc.errno not in _WRITE_ERRNOS or exc.filename is not None:
        return None
    out = Sink(None, name="stdout")
    out.failure = exc
    if sys.stdout is not None:  # pragma: no branch - click writes nothing to a closed stdout
        _silence(sys.stdout)
    return output_failure_code(out, Sink(sys.stderr, name="stderr"))


def exit_code_for(code: str) -> int:
    """The exit code of an error code: 2 for :data:`USAGE_CODES`, else 1."""
    return EXIT_USAGE if code in USAGE_CODES else EXIT_ERROR


def describe_error(error: LlmError, *, route: str | None = None, source: str | None = None) -> str:
    """One line naming the error, where it came from and what the provider said, e.g.
    ``SERVER (HTTP 502) from route 'local' (openai:local): 502 Bad Gateway (retry after 7s; request id r1)``.

    ``route`` is the route served, ``source`` the plugins.yaml key owning it; the place is named
    only when the route has an owner (an unknown route is named by the ``NO_ADAPTER`` message).
    """
    status = f" (HTTP {error.status})" if error.status is not None else ""
    place = f" from route {route!r} ({source})" if route is not None and source is not None else ""
    extras = []
    if error.retry_after is not None:
        extras.append(f"retry after {error.retry_after:g}s")
    if error.request_id:
        extras.append(f"request id {error.request_id}")
    tail = f" ({'; '.join(extras)})" if extras else ""
    return f"{error.code}{status}{place}: {error.message}{tail}"


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``, exception groups (e.g. anyio's task groups) flattened."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def report_error(
    note: Callable[[str], None],
    exc: BaseException,
    *,
    route: str | None = None,
    source: str | None = None,
    verbose: int = 0,
    suffix: str = "",
) -> int:
    """Report ``exc`` through ``note`` (writes one line) and return its exit code.

    Exception groups are unwrapped: one ``error: …`` line per exception inside (never a group
    traceback). An :class:`LlmError` is described by :func:`describe_error` (exit code by
    :func:`exit_code_for`); any other exception is a plugin (middleware) or harness fault: exit 2
    (README: "a failed middleware"), its traceback shown with ``verbose``. ``suffix`` is appended
    to every line.
    """
    code = EXIT_OK
    for leaf in _leaves(exc):
        if isinstance(leaf, LlmError):
            text = describe_error(leaf, route=route, source=source)
            leaf_code = exit_code_for(leaf.code)
        else:
            hint = "" if verbose else "; run with -v for the traceback"
            notes = [n for n in getattr(leaf, "__notes__", ()) if n.startswith("raised by middleware plugin ")]
            who = notes[-1].removeprefix("raised by ") if notes else "a plugin"
            text = f"{type(leaf).__name__}: {leaf} ({who} failed{hint})"
            leaf_code = EXIT_USAGE
        note(f"error: {text}{suffix}")
        code = max(code, leaf_code)
    if verbose:
        note("".join(traceback.format_exception(exc)).rstrip("\n"))
    return code


def load_for_start(config: str | None, err: Sink) -> LoadedConfig | None:
    """Load ``config`` for a command that starts the harness (``run``, ``chat``, ``chain``, ``models``).

    Reports problems and plugin failures on ``err`` (which redacts the config's secrets from
    then on). Returns ``None`` (exit 2) on a config problem or when a plugin that fails closed
    failed (:meth:`LoadedConfig.require_complete`, docs/loader.md: silently dropping a redaction
    layer would leak data); adapter plugins that failed are warned about, except those whose
    routes are known (a missing key): using one of their routes is an error naming the cause, the
    other routes work quietly.
    """
    try:
        loaded = load_config(config)
    except ConfigError as exc:
        err.write(f"error: {exc}\n")
        return None
    err.redact = loaded.redact
    redact_logs(loaded.redact)
    try:
        loaded.require_complete()
    except ConfigError as exc:
        err.write(f"error: {exc}\n")
        return None
    for failure in loaded.failures:
        if failure.routes is None:  # routes known: the error names it when one is used
            err.write(f"warning: {failure.unavailable_note()}\n")
    return loaded


def resolve_flags(loaded: LoadedConfig, route: str | None, model: str | None) -> tuple[str | None, str | None]:
    """``(route, model)`` of a command's ``-r``/``-m`` (:meth:`LoadedConfig.resolve_target
    <harness_core.loader.LoadedConfig.resolve_target>`: an alias, or without ``-r`` a
    ``route/model`` id as the gateway reads it)."""
    return loaded.resolve_target(route, model)


def warn_start_failures(
    note: Callable[[str], None], known: Sequence[PluginFailure], failures: Sequence[PluginFailure]
) -> None:
    """Write (``note``) one ``warning:`` line per adapter plugin in ``failures`` (the started
    harness's) that is not in ``known`` (reported before the start): its routes are unavailable,
    the others work. A middleware that fails stops the start instead (an error)."""
    for failure in adapter_failures(failures):
        if failure not in known:
            note(f"warning: {failure.unavailable_note()}")
