"""Files a middleware writes as it runs (a trace, a ledger, a log): checked at start, failures logged.

Two rules every writing middleware keeps (see docs/hooks.md, "Middleware that write files"):

- **A path that cannot be written is a config problem, found at start.** :func:`check_output_file`
  runs when the plugin's config is validated, so ``harness config check`` and ``harness plugins``
  report it with the plugin, the field and the YAML line, instead of every ``harness run``
  failing after the reply was printed.
- **A write that fails at run time is logged, never raised into the caller's stream** (the disk
  filled up, the folder was removed): :class:`WriteFailureLog` logs the first failure once at
  ``ERROR`` with its reason, later ones at ``DEBUG``, and says when writing works again.

And one for what they hold (prompts, replies, spend, keys' hashes): **a file or folder they
create is private to the user**: :func:`private_file` (mode 0600) in folders made by
:func:`private_dir` (mode 0700), for every SQLite database and log of the project.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["WriteFailureLog", "check_output_file", "private_dir", "private_file", "write_in_thread"]

PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700


def private_dir(path: Path) -> Path:
    """Create the folder ``path`` and each missing parent with mode 0700 (readable by the user
    only; ``mkdir(parents=True)`` gives the parents the default mode) and return it. Folders that
    exist are left as they are (their mode is the user's choice). Raises :class:`OSError` when a
    folder cannot be created (a file in the way: :class:`FileExistsError`)."""
    missing: list[Path] = []
    folder = path
    while not folder.is_dir():
        missing.append(folder)
        folder = folder.parent  # ends at the root, which is a folder
    for created in reversed(missing):  # exist_ok: another process may make it meanwhile (a file still raises)
        created.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
    return path


def private_file(path: Path) -> Path:
    """Make sure the file ``path`` exists, creating it empty with mode 0600 (its missing folders
    with :func:`private_dir`), and return it. An existing file (or folder) is left as it is: SQLite then
    opens the empty file as a new database and creates its ``-wal`` / ``-shm`` files with the
    database's mode. Raises :class:`OSError` when the file cannot be created."""
    private_dir(path.parent)
    if not path.exists():  # a folder in the way is left to the caller to report (SQLite names it)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE_MODE))
    return path


def check_output_file(path: Path, what: str, *, example: str = "") -> Path:
    """Check that ``path`` can be appended to, or created with its missing parent folders, and
    return it. Leaves nothing behind: an existing file is opened for appending and closed
    unchanged; the nearest existing folder is probed by creating and removing an empty folder
    (``os.access`` is no test: it says yes to root, also on read-only or virtual file systems
    such as ``/proc``).

    Args:
        path: the file (relative paths are relative to the current directory).
        what: how messages name the file, e.g. ``"usage path"``.
        example: a file name suggested when ``path`` is a folder, e.g. ``"usage.sqlite"``.

    Raises:
        ValueError: ``path`` is a folder, cannot be opened for appending, or cannot be created
            (the message names the path, the folder and the system's reason).
    """
    if path.is_dir():
        hint = f"; expected a file such as {example}" if example else "; expected a file"
        raise ValueError(f"{what} {str(path)!r} is a directory{hint}")
    if path.exists():
        try:
            with path.open("ab"):
                pass
        except OSError as exc:
            raise ValueError(f"{what} {str(path)!r} cannot be written: {exc.strerror or exc}") from None
        return path
    folder = path.absolute().parent
    while not folder.exists():
        folder = folder.parent  # ends at the root, which exists
    if not folder.is_dir():
        raise ValueError(f"{what} {str(path)!r} cannot be created: {str(folder)!r} is not a folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".harness-probe-", dir=folder))
    except OSError as exc:
        reason = exc.strerror or str(exc)
        where = str(folder)
        raise ValueError(f"{what} {str(path)!r} cannot be created: cannot write in {where!r} ({reason})") from None
    return path


class WriteFailureLog:
    """Reports the write failures of one writer on ``logger`` without flooding it.

    The first failure (and the first after a success) is logged at ``ERROR`` naming ``what`` and
    the reason; further failures in a row at ``DEBUG`` (with the traceback); the success that
    ends a run of failures at ``WARNING``, with how many writes were lost. Thread-safe enough
    for its purpose: a race can at worst log one extra line.

    Args:
        logger: where to log (the middleware's module logger).
        what: the writer, e.g. ``"usage: recording in /path/usage.sqlite"``.
    """

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self.logger = logger
        self.what = what
        self.failures = 0
        """Failures in a row (0 after a success)."""

    def failed(self, exc: BaseException) -> None:
        """Report ``exc``, the failure of one write (its data is lost)."""
        self.failures += 1
        if self.failures == 1:
            self.logger.error(
                "%s failed: %s: %s (the data is not written; further failures are logged at DEBUG)",
                self.what,
                type(exc).__name__,
                exc,
            )
        else:
            self.logger.debug("%s failed again", self.what, exc_info=exc)

    def succeeded(self) -> None:
        """Report a write that worked (logged only when it ends a run of failures)."""
        if self.failures:
            self.logger.warning("%s works again after %d failed writes", self.what, self.failures)
            self.failures = 0


async def write_in_thread(
    write: Callable[[], object],
    *,
    bound: float,
    failures: WriteFailureLog,
    errors: tuple[type[Exception], ...] = (OSError,),
) -> None:
    """Run ``write`` (a blocking write) in a worker thread, shielded from cancellation and bounded
    by ``bound`` seconds: what a middleware writes after a stream ended must be written even when
    the caller was cancelled, and must not hold it up for long (a write that outlasts ``bound`` is
    abandoned). A failure of one of the ``errors`` types, or the timeout, is reported to
    ``failures`` (logged, never raised into the caller's stream); other exceptions propagate.
    """
    import anyio
    import anyio.to_thread

    with anyio.move_on_after(bound, shield=True) as scope:
        try:
            await anyio.to_thread.run_sync(write, abandon_on_cancel=True)
        except errors as exc:
            failures.failed(exc)
            return
    if scope.cancelled_caught:
        failures.failed(TimeoutError(f"the write took over {bound:g}s"))
    else:
        failures.succeeded()
