"""Several worker processes of one ``harness serve`` (``--workers N``, N > 1) and the metrics they share.

:func:`run_workers` creates a fresh, empty metrics directory for the run (under the system's
temporary directory: ``TMPDIR`` chooses where), exports it to the workers as
``PROMETHEUS_MULTIPROC_DIR`` before they start (prometheus-client's multiprocess mode,
https://prometheus.github.io/client_python/multiprocess/), runs uvicorn's worker supervisor until
SIGINT / SIGTERM, and removes the directory when it returns, however it returns. A supervisor killed
with SIGKILL leaves its directory behind; no later run reuses it. Its workers do not outlive it:
each watches its supervisor (:func:`watch_supervisor`) and stops as SIGTERM stops it (the requests
in flight drain) once the supervisor is gone, so no orphan keeps serving, unsupervised, on the port
a restart needs.

A worker whose start fails (a configuration problem: exit code 2; any other fault of its start: 1)
does not log why: it writes a report to a second fresh directory of the run
(:data:`~harness_gateway.start_failure.REPORTS_ENV`, removed at exit as the metrics directory is)
and exits with uvicorn's ``STARTUP_FAILURE``. uvicorn's supervisor then stops every worker and
itself (a worker that cannot start would fail the same way on every restart), and
:func:`run_workers` raises the reported :class:`~harness_gateway.start_failure.StartFailure`:
``harness serve`` shows each distinct problem once, however many workers met it, and exits with its
code. A worker that crashes after it started is replaced, as uvicorn does.

:class:`WorkerSupervisor` is uvicorn's supervisor (https://www.uvicorn.org/deployment/#built-in:
one listening socket shared by the workers, a dead or hung worker replaced, SIGHUP replaces every
worker one by one, SIGTTIN / SIGTTOU add or remove one) that also tells the metrics when a worker
is gone (:class:`WorkerReaper`), so a worker that died with streams in flight stops counting in
``harness_gateway_streams_in_flight``, and whose workers (:class:`WorkerProcess`) shut down as one
process of ``harness serve`` does: the streams still running at ``drain_timeout`` are aborted by
the gateway (:class:`~harness_gateway.shutdown.DrainingServer`), not cancelled by uvicorn.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from prometheus_client.multiprocess import mark_process_dead
from uvicorn import Config, Server
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors import Multiprocess, multiprocess

from harness_gateway.metrics import MULTIPROC_DIR_ENV
from harness_gateway.shutdown import DrainingServer, abort_worker_streams, worker_drain_timeout
from harness_gateway.start_failure import REPORTS_ENV, StartFailure, read_reports

__all__ = [
    "WorkerProcess",
    "WorkerReaper",
    "WorkerSupervisor",
    "remove_directory",
    "run_workers",
    "start_failure",
    "watch_supervisor",
]

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


class WorkerProcess(multiprocess.Process):
    """One worker of :class:`WorkerSupervisor`: uvicorn's, whose server (made in the worker
    process, from the configuration its supervisor pickled) is the gateway's
    :class:`~harness_gateway.shutdown.DrainingServer`, aborting this worker's generations at the
    drain timeout (:func:`~harness_gateway.shutdown.abort_worker_streams`; the drain timeout of
    the worker's current runtime: :func:`~harness_gateway.shutdown.worker_drain_timeout`). uvicorn's own server
    cancelled them at ``timeout_graceful_shutdown`` instead: each recorded ``error``, its body
    cut, a ``CancelledError`` traceback logged."""

    @property
    def server(self) -> Server:
        """The worker's server, made on first use (as uvicorn's is)."""
        if self._server is None:
            self._server = DrainingServer(self.config, abort_worker_streams, worker_drain_timeout)
        return self._server


class WorkerSupervisor(Multiprocess):
    """uvicorn's ``Multiprocess`` supervisor that reaps exited workers from the metrics in ``directory``.

    Workers change only in ``keep_subprocess_alive`` (a dead or hung worker is replaced; one that
    failed to start stops the supervisor) and ``handle_signals`` (SIGHUP, SIGTTIN, SIGTTOU); each
    is followed by :meth:`WorkerReaper.update`. :attr:`failed_start` is the pid of the worker that
    failed to start (uvicorn's ``STARTUP_FAILURE`` exit code), ``None`` while none has. A SIGHUP
    whose new worker fails to start (:meth:`restart_all`) logs the problem it reported in
    ``reports``; the running workers keep serving.
    """

    def __init__(self, config: Config, sockets: list[Any], directory: Path, reports: Path) -> None:
        super().__init__(config, sockets)
        self.reaper = WorkerReaper(directory)
        self.reports = reports
        """Where workers report a failed start (:func:`~harness_gateway.start_failure.write_report`)."""
        self.failed_start: int | None = None

    def run(self) -> None:
        """uvicorn's supervision, every worker a :class:`WorkerProcess`: uvicorn's supervisor makes
        each worker (at the start, to replace one, on SIGHUP or SIGTTIN) with its module's
        ``Process``, which has no setting, so that name is :class:`WorkerProcess` while it runs."""
        uvicorn_process = multiprocess.Process
        multiprocess.Process = WorkerProcess  # type: ignore[misc]
        try:
            super().run()
        finally:
            multiprocess.Process = uvicorn_process  # type: ignore[misc]

    def init_processes(self) -> None:
        super().init_processes()
        self.reap()

    def keep_subprocess_alive(self) -> None:
        super().keep_subprocess_alive()
        # uvicorn keeps a worker that failed to start in its list, and stops (this runs no more)
        self.failed_start = next((p.pid for p in self.processes if p.exitcode == STARTUP_FAILURE), None)
        self.reap()

    def handle_signals(self) -> None:
        super().handle_signals()
        self.reap()

    def restart_all(self) -> None:
        """uvicorn's replacement of every worker (SIGHUP), then the located problem of a new
        worker that failed to start, logged (uvicorn keeps the old workers serving and says only
        that the new one was not ready; the worker wrote why to its report instead of logging)."""
        super().restart_all()
        failures = read_reports(self.reports, None)
        for path in self.reports.glob("*.json"):
            path.unlink()  # shown now: a later failure of the start is reported afresh
        for failure in failures:
            logger.error("a new worker did not start, so the running workers keep serving: %s", failure.message)

    def reap(self) -> None:
        """Reap the workers no longer in the supervisor's list."""
        self.reaper.update(process.pid for process in self.processes)


def run_workers(app: str, workers: int, options: dict[str, Any]) -> None:
    """Serve ``app`` (an import string of an app factory) with ``workers`` processes sharing one
    fresh metrics directory, and reporting a failed start in one fresh report directory, both
    removed at exit. ``options`` are ``uvicorn.Config``'s keyword arguments (host, port, lifespan,
    timeouts …).

    Raises:
        StartFailure: a worker failed to start, so the supervisor stopped: the first distinct
            problem reported, the others (another worker's different problem) on its next lines;
            exit code 3 and a pointer to the log when that worker wrote no report (a fault before
            the app's start, logged by uvicorn).
        OSError: a directory cannot be created; whatever binding the socket raises.
    """
    with contextlib.ExitStack() as cleanup:  # undone in reverse order, however the run ends
        directory = Path(tempfile.mkdtemp(prefix="harness-gateway-metrics-"))
        cleanup.callback(remove_directory, directory)
        reports = Path(tempfile.mkdtemp(prefix="harness-gateway-start-"))
        cleanup.callback(remove_directory, reports, "start report")
        cleanup.callback(_restore, {name: os.environ.get(name) for name in (MULTIPROC_DIR_ENV, REPORTS_ENV)})
        os.environ[MULTIPROC_DIR_ENV] = str(directory)  # inherited by the workers, read at their import
        os.environ[REPORTS_ENV] = str(reports)
        config = Config(app, factory=True, workers=workers, **options)
        logger.info("%d workers share their metrics through %s", workers, directory)
        supervisor = WorkerSupervisor(config, [config.bind_socket()], directory, reports)
        supervisor.run()
        if supervisor.failed_start is not None:
            raise start_failure(reports, supervisor.failed_start)


def _restore(environ: dict[str, str | None]) -> None:
    """Put the variables of ``environ`` back as they were (``None``: unset)."""
    for name, value in environ.items():
        if value is None:
            del os.environ[name]
        else:
            os.environ[name] = value


def start_failure(reports: Path, pid: int) -> StartFailure:
    """Why the workers did not start, from the reports in ``reports`` (worker ``pid`` stopped the
    supervisor): one message per distinct problem, the exit code of ``pid``'s (or of the first);
    exit code 3 (uvicorn's ``STARTUP_FAILURE``) naming ``pid`` when no worker reported one."""
    failures = read_reports(reports, pid)
    if not failures:
        return StartFailure(STARTUP_FAILURE, f"worker {pid} failed to start (its log above says why)")
    return StartFailure(failures[0].exit_code, "\n".join(failure.message for failure in failures))


def remove_directory(directory: Path, what: str = "metrics") -> None:
    """Remove ``directory`` (the run's ``what`` directory) and its files; a failure is logged as a
    warning naming it, not raised (the gateway has stopped; a leftover directory is never reused)."""
    try:
        shutil.rmtree(directory)
    except OSError as exc:
        logger.warning("could not remove the %s directory %s: %s", what, directory, exc)


def watch_supervisor() -> threading.Thread | None:
    """In a worker process (a ``multiprocessing`` child of uvicorn's supervisor): a daemon thread
    that waits for the supervisor to be gone (its end of the pipe every spawned child inherits
    closes: ``multiprocessing.parent_process().sentinel``), then logs it and sends this worker
    SIGTERM, uvicorn's graceful shutdown (the requests in flight drain, up to ``drain_timeout``).
    A supervisor killed with SIGKILL, or by the OOM killer, stops nothing itself: without this its
    workers went on serving, unsupervised, and a restart found the port in use (exit 3).
    Returns the thread, or ``None`` in a process that no ``multiprocessing`` parent started."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return None
    sentinel = parent.sentinel

    def wait() -> None:
        multiprocessing.connection.wait([sentinel])
        logger.error("worker %d: its supervisor (pid %s) is gone; the worker shuts down", os.getpid(), parent.pid)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=wait, name="harness-supervisor-watch", daemon=True)
    thread.start()
    return thread
