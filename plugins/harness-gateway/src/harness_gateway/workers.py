"""Several worker processes of one ``harness serve`` (``--workers N``, N > 1) and the metrics they share.

:func:`run_workers` creates a fresh, empty metrics directory for the run (under the system's
temporary directory: ``TMPDIR`` chooses where), exports it to the workers as
``PROMETHEUS_MULTIPROC_DIR`` before they start (prometheus-client's multiprocess mode,
https://prometheus.github.io/client_python/multiprocess/), runs uvicorn's worker supervisor until
SIGINT / SIGTERM, and removes the directory when it returns, however it returns. A supervisor killed
with SIGKILL leaves its directory behind; no later run reuses it.

:class:`WorkerSupervisor` is uvicorn's supervisor (https://www.uvicorn.org/deployment/#built-in:
one listening socket shared by the workers, a dead or hung worker replaced, SIGHUP replaces every
worker one by one, SIGTTIN / SIGTTOU add or remove one) that also tells the metrics when a worker
is gone (:class:`WorkerReaper`), so a worker that died with streams in flight stops counting in
``harness_gateway_streams_in_flight``.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from prometheus_client.multiprocess import mark_process_dead
from uvicorn import Config
from uvicorn.supervisors import Multiprocess

from harness_gateway.metrics import MULTIPROC_DIR_ENV

__all__ = ["WorkerReaper", "WorkerSupervisor", "remove_directory", "run_workers"]

logger = logging.getLogger("uvicorn.error")  # beside the supervisor's own lines (configured by uvicorn.Config)


class WorkerReaper:
    """Marks workers that left the supervisor's list dead in the metrics directory ``directory``.

    :meth:`update` is called with the pids of the live workers after every supervisor step that may
    replace one; a pid seen before and absent now is a worker that exited (crashed, killed after a
    failed health check, replaced on SIGHUP, removed on SIGTTOU): its share of the ``live*`` gauges
    is removed (``prometheus_client.multiprocess.mark_process_dead``), its counters and histograms
    stay in the totals.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.known: set[int] = set()

    def update(self, live: Iterable[int | None]) -> list[int]:
        """Record ``live`` (``None``: a worker not started yet) and reap the rest; the pids reaped."""
        now = {pid for pid in live if pid is not None}
        gone = sorted(self.known - now)
        for pid in gone:
            mark_process_dead(pid, str(self.directory))  # type: ignore[no-untyped-call]
            logger.info("worker %d exited: its streams no longer count as in flight", pid)
        self.known = now
        return gone


class WorkerSupervisor(Multiprocess):
    """uvicorn's ``Multiprocess`` supervisor that reaps exited workers from the metrics in ``directory``.

    Workers change only in ``keep_subprocess_alive`` (a dead or hung worker is replaced) and
    ``handle_signals`` (SIGHUP, SIGTTIN, SIGTTOU); each is followed by :meth:`WorkerReaper.update`.
    """

    def __init__(self, config: Config, sockets: list[Any], directory: Path) -> None:
        super().__init__(config, sockets)
        self.reaper = WorkerReaper(directory)

    def init_processes(self) -> None:
        super().init_processes()
        self.reap()

    def keep_subprocess_alive(self) -> None:
        super().keep_subprocess_alive()
        self.reap()

    def handle_signals(self) -> None:
        super().handle_signals()
        self.reap()

    def reap(self) -> None:
        """Reap the workers no longer in the supervisor's list."""
        self.reaper.update(process.pid for process in self.processes)


def run_workers(app: str, workers: int, options: dict[str, Any]) -> None:
    """Serve ``app`` (an import string of an app factory) with ``workers`` processes sharing one
    fresh metrics directory, removed at exit. ``options`` are ``uvicorn.Config``'s keyword arguments
    (host, port, lifespan, timeouts …).

    Raises:
        OSError: the metrics directory cannot be created; whatever binding the socket raises.
    """
    directory = Path(tempfile.mkdtemp(prefix="harness-gateway-metrics-"))
    previous = os.environ.get(MULTIPROC_DIR_ENV)
    os.environ[MULTIPROC_DIR_ENV] = str(directory)  # inherited by the workers, read at their import
    try:
        config = Config(app, factory=True, workers=workers, **options)
        logger.info("%d workers share their metrics through %s", workers, directory)
        WorkerSupervisor(config, [config.bind_socket()], directory).run()
    finally:
        if previous is None:
            del os.environ[MULTIPROC_DIR_ENV]
        else:
            os.environ[MULTIPROC_DIR_ENV] = previous
        remove_directory(directory)


def remove_directory(directory: Path) -> None:
    """Remove ``directory`` and its files; a failure is logged as a warning naming it, not raised
    (the gateway has stopped; a leftover directory is never reused)."""
    try:
        shutil.rmtree(directory)
    except OSError as exc:
        logger.warning("could not remove the metrics directory %s: %s", directory, exc)
