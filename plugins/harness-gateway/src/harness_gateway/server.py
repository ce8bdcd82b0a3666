"""``harness serve``: the gateway as an ASGI application with a lifespan, served by uvicorn.

:class:`GatewayServer` is the ASGI application: on startup it reads ``plugins.yaml`` (the
``gateway`` entry and every plugin), starts the runtime, opens the state store and applies its
migrations; while running it reloads on SIGHUP (and, with ``watch``, when the file changes); on
shutdown it drains streams in flight (uvicorn's graceful shutdown: those still running at
``drain_timeout`` are aborted, :mod:`harness_gateway.shutdown`) and closes the runtime and the
store. With several workers every worker process builds its own (:func:`worker_app`, configured
through environment variables by :func:`serve`) and drains as one process does, and ``/metrics``
reports the counts of all of them (:mod:`harness_gateway.workers`).

uvicorn: https://www.uvicorn.org/settings/ ; ASGI lifespan:
https://asgi.readthedocs.io/en/latest/specs/lifespan.html
"""

from __future__ import annotations

import functools
import gc
import logging
import operator
import os
import signal
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Literal

import anyio
from anyio.abc import TaskStatus

from harness_core import RedactFilter, find_config
from harness_core.http import prefer_transport
from harness_gateway.app import build_app
from harness_gateway.balance_state import StoreBalanceState
from harness_gateway.config import (
    ConnectionLimits,
    GatewayConfig,
    default_database_path,
    endpoint,
    start_only_changes,
)
from harness_gateway.database import store_from_spec
from harness_gateway.errors import GatewayError
from harness_gateway.gateway import Gateway
from harness_gateway.metrics import MULTIPROC_DIR_ENV, GatewayMetrics
from harness_gateway.responses_store import purge_forever
from harness_gateway.runtime import GatewayRuntime, RuntimeHolder, load_runtime
from harness_gateway.start_failure import REPORTS_ENV, StartFailure, write_report
from harness_gateway.store import SqlStore
from harness_middleware.balance import share_state

__all__ = [
    "ENV_CONFIG",
    "ENV_HOST",
    "ENV_LOG_LEVEL",
    "ENV_WATCH",
    "YOUNG_COLLECTION_AT",
    "GatewayServer",
    "announce_worker",
    "serve",
    "settle_heap",
    "worker_app",
]

logger = logging.getLogger("harness_gateway")

ENV_CONFIG: Final = "HARNESS_GATEWAY_CONFIG"
ENV_HOST: Final = "HARNESS_GATEWAY_HOST"
ENV_WATCH: Final = "HARNESS_GATEWAY_WATCH"
ENV_LOG_LEVEL: Final = "HARNESS_GATEWAY_LOG_LEVEL"
_WATCH_INTERVAL: Final = 1.0  # seconds between two looks at the config file's modification time


def _nothing() -> None:
    """Nothing to undo (the server never started)."""


class GatewayServer:
    """The gateway ASGI app: ``config`` is the plugins.yaml path (``None``: the usual search),
    ``host`` the address served (it decides whether keys are required by default), ``watch``
    reloads when the file changes, ``metrics_dir`` is the metrics directory the workers of one
    ``harness serve`` share (``None``: this process's own counts; see :class:`GatewayMetrics`),
    ``freeze_heap`` settles the heap after startup, after the first request and after every
    reload (:func:`settle_heap`; set by :func:`serve` and :func:`worker_app`, whose process
    serves nothing else).

    A start that raises is kept in :attr:`start_failure` (:class:`StartFailure`: exit code and
    message) and the lifespan answers ``lifespan.startup.failed``: with the message, which the
    ASGI server logs, when ``on_start_failure`` is ``None`` (an embedding); else without one, and
    ``on_start_failure`` is called with it (:func:`serve` shows it once and exits with its code;
    a worker reports it to its supervisor: :func:`harness_gateway.start_failure.write_report`)."""

    def __init__(
        self,
        config: str | None,
        host: str,
        *,
        watch: bool = False,
        log_level: str | None = None,
        metrics_dir: str | None = None,
        freeze_heap: bool = False,
        announce_at_start: bool = True,
        on_start_failure: Callable[[StartFailure], None] | None = None,
    ) -> None:
        self.config_path = config
        self.on_start_failure = on_start_failure
        self.start_failure: StartFailure | None = None
        """Why the start failed (``None`` until it did)."""
        self.freeze_heap = freeze_heap
        self.announce_at_start = announce_at_start
        self._announcement: tuple[int, str] = (logging.ERROR, "the gateway did not start")
        self.metrics_dir = metrics_dir
        self.log_level = log_level
        self.host = host
        self.watch = watch
        self.gateway: Gateway | None = None
        self.started: GatewayConfig | None = None
        """The ``gateway`` config the server started with: what its start-only settings
        (:data:`~harness_gateway.config.START_ONLY`) keep until a restart."""
        self.app: Any = None
        self._unshare: Callable[[], None] = _nothing
        """Removes the store-backed balance state registered at start (:mod:`harness_gateway.balance_state`)."""
        self.ready = threading.Event()
        """Set once startup finished (for code that embeds the server in a thread)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
            return
        assert self.app is not None, "the server did not start (lifespan startup failed)"
        await self.app(scope, receive, send)

    async def start(self) -> Gateway:
        """Load the runtime, open and migrate the store, build the app; a fault after the runtime
        started closes it again before it is raised (``ConfigError``: the config or its routes;
        whatever else the start raised)."""
        runtime = await load_runtime(self.config_path)
        try:
            return await self._build(runtime)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await runtime.aclose()
            raise

    async def _build(self, runtime: GatewayRuntime) -> Gateway:
        if self.log_level is not None:
            configure_logging(self.log_level, runtime.redact)
        runtime.warn_unavailable()
        config = runtime.config
        database = config.database.get_secret_value() if config.database is not None else None
        limits = config.limits.get_secret_value() if config.limits is not None else None
        store: SqlStore = store_from_spec(
            database, default_database_path(), timeout=config.db_timeout, lease=config.lease, limits=limits
        )
        master = config.master_key.get_secret_value() if config.master_key is not None else None
        token = config.metrics_token.get_secret_value() if config.metrics_token is not None else None
        gateway = Gateway(
            RuntimeHolder(runtime),
            store,
            keys_required=config.keys_required(self.host),
            master_key=master,
            metrics=GatewayMetrics(self.metrics_dir),
            metrics_protected=config.metrics_protected(self.host),
            metrics_token=token,
        )
        if gateway.metrics_protected and master is None and token is None:
            logger.warning(
                "/metrics answers 401 to every scrape: set metrics_token (or master_key), or metrics_require_key: false"
            )
        try:
            await gateway.ensure_store()
            await store.ping()  # the limits store too (Redis): migrating asked only the SQL database
        except GatewayError as exc:  # serve anyway (docs/gateway.md): requests get 503 until the store is back
            where = ", ".join(
                f"{name} at {endpoint(value, name)}"
                for name, value in (("database", database or str(default_database_path())), ("limits", limits))
                if value is not None
            )
            self._announcement = (
                logging.WARNING,
                f"gateway started WITHOUT its state store ({store.description}; {where}): {exc.message}; "
                "requests get 503 until it answers",
            )
        else:
            keys = "required" if gateway.keys_required else "optional"
            routes = len(runtime.harness.routes())
            self._announcement = (logging.INFO, f"gateway ready: {routes} route(s), keys {keys}, {store.description}")
        self.gateway = gateway
        self.started = config
        self._unshare = share_state(StoreBalanceState(store))  # pools' limits hold for every worker and host
        self.app = build_app(gateway)
        if self.announce_at_start:
            self.announce()
        return gateway

    def announce(self) -> None:
        """Log the outcome of the start: ``gateway ready: …`` (routes, keys, the store), or a
        warning when the state store did not answer. :func:`serve` calls it once uvicorn's
        server listens (a port in use then exits 3 without a ``ready`` line); a worker process
        once its server listens on the socket its supervisor bound (:func:`announce_worker`);
        an embedding that passes ``announce_at_start`` at the end of the start-up."""
        level, text = self._announcement
        logger.log(level, "%s", text)

    def abort_streams(self) -> None:
        """Abort every generation running on the current runtime (the drain timeout of a shutdown
        passed: :class:`~harness_gateway.shutdown.DrainingServer`, in the one process of
        :func:`serve` or in each worker, :func:`~harness_gateway.shutdown.abort_worker_streams`);
        each ends as a client's disconnect does, but its client gets the drain's error. Logged with the count."""
        if self.gateway is not None and (
            count := self.gateway.holder.current.abort_all("the gateway is shutting down")
        ):
            logger.warning("aborting %d generation(s) still running after the drain timeout", count)

    def drain_timeout(self) -> float | None:
        """The drain timeout of the current runtime (a reload may have changed it), what the
        shutdown's :class:`~harness_gateway.shutdown.DrainingServer` waits; ``None`` before the start."""
        return self.gateway.holder.current.config.drain_timeout if self.gateway is not None else None

    async def stop(self) -> None:
        """Drain and close the runtime, write what the write-behind queues hold (the console's
        records), then settle what a store fault deferred and close the store."""
        gateway = self.gateway
        if gateway is None:
            return
        await gateway.holder.retire(gateway.holder.current)
        self._unshare()
        await gateway.flush_writers()  # after the drain: the streams that ended in it queued theirs
        await gateway.store.drain()  # settlements a store fault deferred: one last try
        await gateway.store.aclose()

    async def lifespan(self, receive: Any, send: Any) -> None:
        await receive()  # lifespan.startup
        try:
            gateway = await self.start()
        except Exception as exc:  # kept and reported once (StartFailure), never lost
            failure = self.start_failure = StartFailure.of(exc, traceback_shown=self.log_level == "debug")
            if self.on_start_failure is None:
                await send({"type": "lifespan.startup.failed", "message": failure.message})
                return
            self.on_start_failure(failure)
            await send({"type": "lifespan.startup.failed", "message": ""})  # shown once, by the caller
            return
        async with anyio.create_task_group() as group:
            await group.start(gateway.store.maintain)  # leases renewed, dead processes' rows settled
            await group.start(gateway.recorder.run)  # running generations' usage so far in their rows
            for writer in gateway.writers:  # the console's request records, written in batches
                await group.start(writer.run)
            current = operator.attrgetter("current.config.responses.retention_seconds")
            retention = functools.partial(current, gateway.holder)  # the runtime of each tick (reloads)
            await group.start(  # expired stored responses deleted, the live ones' expiry following the config
                functools.partial(purge_forever, gateway.store, retention=retention)
            )
            if threading.current_thread() is threading.main_thread():  # signal handlers need the main thread
                group.start_soon(self.reload_on_sighup, gateway)
            if self.watch:
                await group.start(self.reload_on_change, gateway)  # returns once the file's state is known
            if self.freeze_heap:
                settle_heap()
                group.start_soon(self.settle_when_warm, gateway)
            await send({"type": "lifespan.startup.complete"})
            self.ready.set()
            await receive()  # lifespan.shutdown
            group.cancel_scope.cancel()
        await self.stop()
        await send({"type": "lifespan.shutdown.complete"})

    async def reload_on_sighup(self, gateway: Gateway) -> None:
        with anyio.open_signal_receiver(signal.SIGHUP) as signals:
            async for _ in signals:
                logger.info("SIGHUP: reloading %s", self.config_path or "the configuration")
                await self.reload(gateway)

    async def reload_on_change(
        self, gateway: Gateway, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Reload whenever the config file changes (checked every second); started with ``TaskGroup.start``."""
        path = find_config(self.config_path)
        seen = _mtime(path) if path is not None else None
        task_status.started()
        if path is None:  # the built-in default: no file to watch
            logger.warning("--reload: no plugins.yaml was found, so there is nothing to watch")
            return
        while True:
            await anyio.sleep(_WATCH_INTERVAL)
            now = _mtime(path)
            if now != seen:
                seen = now
                logger.info("%s changed: reloading", path)
                await self.reload(gateway)

    async def settle_when_warm(self, gateway: Gateway) -> None:
        """Settle the heap again once the first request was settled
        (:attr:`Gateway.first_settled`): what its route imported and built on first use (the
        HTTP client and its transport, the price table: ~45,000 objects on the OpenAI route)
        joins the frozen part."""
        await gateway.first_settled.wait()
        settle_heap()

    async def reload(self, gateway: Gateway) -> bool:
        """Re-read the configuration and swap the runtime (:meth:`RuntimeHolder.reload`: the old
        one drained and closed; an invalid file keeps it), then, with ``freeze_heap``, settle the
        heap again (the old runtime's objects become collectable). Returns whether it was replaced.

        A replaced runtime whose start-only settings (:data:`~harness_gateway.config.START_ONLY`)
        differ from the ones the server started with logs one warning naming them (never their
        values): they take effect at the next start, every other setting at once."""
        started = gateway.holder.current.config if self.started is None else self.started
        replaced = await gateway.holder.reload(self.config_path)
        if replaced and (changed := start_only_changes(started, gateway.holder.current.config)):
            logger.warning(
                "reload: gateway setting(s) %s changed but are read only at start: they take effect at "
                "the next start of harness serve (until then the values it started with stay in force)",
                ", ".join(changed),
            )
        if replaced and self.freeze_heap:
            settle_heap()
        return replaced


YOUNG_COLLECTION_AT: Final = 7000
"""Allocations (less deallocations) of tracked objects between two collections of the youngest
generation in a serving process (CPython's default: 700). With 128 requests in flight most of a
request's objects are still alive at a collection every 700, so each is walked and promoted, and
walked again in the older generations; at 7,000 most have been freed first. Measured by the
collector's own thread CPU over 2,048 short requests at C=128: 0.77 -> 0.54 s (BENCHMARKS.md)."""


def settle_heap() -> None:
    """Collect the garbage, then move every object left (modules, plugins, the runtime: what a
    serving process keeps for its whole life) out of the cyclic garbage collector's reach
    (:func:`gc.freeze`), after undoing an earlier freeze (:func:`gc.unfreeze`, so what a reload
    replaced is collected). A full collection then walks only what was allocated since, instead
    of the ~90,000 objects of a started gateway on every full pass (measured in BENCHMARKS.md,
    issue 25, cost per request). Objects frozen stay freed by reference counting; only their
    cycles wait for the next settle. The youngest generation is collected every
    :data:`YOUNG_COLLECTION_AT` allocations (the older ones keep CPython's thresholds).
    https://docs.python.org/3/library/gc.html#gc.freeze"""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_AT, middle, oldest)


def configure_logging(level: str, redact: Callable[[str], str]) -> None:
    """Send the gateway's log records (request lines, reloads, store faults) to stderr at ``level``,
    every record scrubbed of the configuration's secrets."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(process)d]: %(message)s"))
    handler.addFilter(RedactFilter(redact))
    root = logging.getLogger("harness_gateway")
    root.handlers = [handler]
    root.setLevel(level.upper())
    root.propagate = False


def _mtime(path: Path) -> tuple[int, int, int] | None:
    """What tells a changed file: modification time, size and inode (editors replace files);
    ``None`` when it is missing. The size catches two writes within one clock tick."""
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_mtime_ns, found.st_size, found.st_ino


def _long_lived_process() -> None:
    """A serving process pays aiohttp's import once and gains on every chunk relayed: providers
    with ``transport: auto`` use it here (measured in BENCHMARKS.md, "The transport")."""
    prefer_transport("aiohttp")


def worker_app() -> GatewayServer:
    """The app of one worker process (``uvicorn --factory``), configured by :func:`serve`'s
    environment; a start that fails is written to the report directory of the run
    (:data:`~harness_gateway.start_failure.REPORTS_ENV`, set by
    :func:`~harness_gateway.workers.run_workers`), for the supervisor to show once; without it
    the message goes in the lifespan's ``startup.failed``, logged by uvicorn."""
    from harness_gateway.shutdown import worker_serves
    from harness_gateway.workers import watch_supervisor

    _long_lived_process()
    watch_supervisor()  # a supervisor killed with SIGKILL stops its workers too
    reports = os.environ.get(REPORTS_ENV)
    app = GatewayServer(
        os.environ.get(ENV_CONFIG) or None,
        os.environ.get(ENV_HOST, "127.0.0.1"),
        watch=bool(os.environ.get(ENV_WATCH)),
        log_level=os.environ.get(ENV_LOG_LEVEL, "info"),
        metrics_dir=os.environ.get(MULTIPROC_DIR_ENV) or None,
        freeze_heap=True,
        announce_at_start=False,  # announced once its server listens: announce_worker
        on_start_failure=functools.partial(write_report, Path(reports)) if reports else None,
    )
    _unannounced[:] = [app]
    worker_serves(app)  # what its server's drain aborts (harness_gateway.shutdown.abort_worker_streams)
    return app


_unannounced: list[GatewayServer] = []
"""The app of this worker process (:func:`worker_app`) until :func:`announce_worker` announced it."""


async def announce_worker() -> None:
    """uvicorn's ``callback_notify`` in a worker process (set by :func:`serve`): the first call
    announces the worker's start (:meth:`GatewayServer.announce`: ``gateway ready: …``); the
    later ones (every ``timeout_notify`` seconds) do nothing.

    uvicorn calls it from its server's main loop, which runs once the server's start-up is over:
    the app's start (the lifespan), then the listening on the socket the supervisor bound; the
    loop's first tick calls it (uvicorn's last notification is at time 0 until then). The
    supervisor only binds it (``uvicorn.Config.bind_socket``), each worker's server listens on it
    after its own lifespan, so until the first worker got there a connection to the port was
    refused: a ``ready`` line logged at the end of the lifespan, as before, came before that and
    a health check that followed it could meet a refused connection."""
    while _unannounced:
        _unannounced.pop().announce()


def serve(
    config: str | None,
    host: str,
    port: int,
    workers: int,
    *,
    watch: bool,
    drain_timeout: float,
    log_level: str,
    loop: str = "auto",
    http: Literal["auto", "h11", "httptools"] = "auto",
    limits: ConnectionLimits | None = None,
) -> None:
    """Run uvicorn until SIGINT / SIGTERM, then drain: the streams still running after
    ``drain_timeout`` seconds are aborted, in the one process or in each worker alike
    (:class:`~harness_gateway.shutdown.DrainingServer`).

    ``loop`` / ``http`` are uvicorn's settings of the same names (``auto``: uvloop and httptools
    when installed, else asyncio and h11); the HTTP protocol enforces ``limits`` (default: the
    defaults of :class:`~harness_gateway.config.ConnectionLimits`; :mod:`harness_gateway.limits`).
    Providers with ``transport: auto`` use aiohttp in the serving process(es). Several workers
    share one fresh metrics directory, removed at exit (:func:`harness_gateway.workers.run_workers`).

    Raises:
        StartFailure: the gateway's start failed (a worker's, with several; exit code 2 for a
            configuration problem, 1 for another fault of the start; docs/gateway.md, "Exit
            codes"); its message has not been shown.
        SystemExit: uvicorn's own exit (3, ``STARTUP_FAILURE``: the port is in use)."""
    import uvicorn

    from harness_gateway.limits import protocol_options
    from harness_gateway.shutdown import DrainingServer, graceful_timeout
    from harness_gateway.workers import run_workers

    _long_lived_process()

    common: dict[str, Any] = {
        "host": host,
        "port": port,
        "lifespan": "on",
        "log_level": log_level,
        "timeout_graceful_shutdown": graceful_timeout(drain_timeout),  # the drain's, in every process
        "access_log": False,  # the gateway logs one line per request, with its id
        "server_header": False,
        "loop": loop,
        **protocol_options(limits if limits is not None else ConnectionLimits(), http),
    }
    if workers > 1:
        os.environ[ENV_CONFIG] = config or ""
        os.environ[ENV_HOST] = host
        os.environ[ENV_WATCH] = "1" if watch else ""
        os.environ[ENV_LOG_LEVEL] = log_level
        # each worker says it is ready once its server listens (announce_worker)
        run_workers("harness_gateway.server:worker_app", workers, {**common, "callback_notify": announce_worker})
    else:
        failures: list[StartFailure] = []
        app = GatewayServer(
            config,
            host,
            watch=watch,
            log_level=log_level,
            announce_at_start=False,
            freeze_heap=True,
            on_start_failure=failures.append,
        )

        class AnnouncingServer(DrainingServer):
            """The gateway's server (:class:`~harness_gateway.shutdown.DrainingServer`: its
            shutdown is the drain), which runs the app's start (the lifespan) before it binds the
            socket: the start is announced (:meth:`GatewayServer.announce`) only once it is bound;
            a bind failure is logged by uvicorn, which exits 3 (``STARTUP_FAILURE``)."""

            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                await super().startup(sockets)
                app.announce()

        try:
            AnnouncingServer(uvicorn.Config(app, **common), app.abort_streams, app.drain_timeout).run()
        except SystemExit:  # uvicorn's STARTUP_FAILURE (3): the app's start, or the bind, failed
            if failures:
                raise failures[0] from None
            raise
