"""Units of the gateway without HTTP clients: config, keys, store, runtime, server lifespan, CLI."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sys
import time
import types
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest
import uvicorn
from click.testing import CliRunner
from gw_helpers import gateway_yaml, serve_gateway, wait_until

from harness_core import AbortSignal, ConnectionString, Secret
from harness_core.cli._app import cli
from harness_core.errors import Failure, LlmError
from harness_core.http import preferred_transport
from harness_core.http import transport as http_transport
from harness_core.loader import load_config
from harness_core.secret import MASK
from harness_core.types import Finish, FinishReason, GenerateOptions, Message, ReasoningBlock, ToolCallBlock
from harness_gateway import runtime as runtime_module
from harness_gateway import server as server_module
from harness_gateway import shutdown
from harness_gateway.anthropic_messages import MessagesStreamEncoder, messages_response, parse_messages_request
from harness_gateway.config import GatewayConfig, GatewayPlugin, endpoint, is_loopback
from harness_gateway.errors import DRAINED, GatewayError
from harness_gateway.keys import LATEST_EXPIRY, MAX_RATE, KeySpec, KeySpecError
from harness_gateway.openai_chat import parse_chat_request
from harness_gateway.relay import Relay
from harness_gateway.request_id import RequestIdMiddleware
from harness_gateway.runtime import ABORT_GRACE, RuntimeHolder, load_runtime
from harness_gateway.server import GatewayServer, announce_worker, worker_app
from harness_gateway.shutdown import DrainingServer, graceful_timeout
from harness_gateway.sqlite import SQLiteStore
from harness_middleware.pricing import Price, PriceBook


def test_config_validation_and_loopback() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"aliases\.fast"):
        msgspec.convert({"aliases": {"fast": "echo"}}, GatewayConfig)
    with pytest.raises(msgspec.ValidationError, match="route/model"):
        msgspec.convert({"prices": {"echo": {"input": 1, "output": 1}}}, GatewayConfig)
    assert GatewayConfig(require_keys=False).keys_required("0.0.0.0") is False
    assert GatewayConfig().keys_required("0.0.0.0") is True
    assert GatewayConfig(host="localhost").keys_required() is False
    assert [is_loopback(h) for h in ("127.0.0.2", "[::1]", "example.org", "10.0.0.1")] == [True, True, False, False]


def test_weak_connection_settings_are_config_errors_naming_the_field() -> None:
    short = "x" * 15
    with pytest.raises(ValueError, match="field 'master_key': must be at least 16 characters") as caught:
        GatewayConfig(master_key=Secret(short))
    assert short not in str(caught.value)
    assert GatewayConfig(master_key=Secret("x" * 16)).master_key is not None
    # a short metrics token is guessable, and as a secret it would be masked out of every reply
    with pytest.raises(
        ValueError, match=r"field 'metrics_token': must be at least 16 characters \(it grants /metrics\)"
    ):
        GatewayConfig(metrics_token=Secret("mock"))
    assert GatewayConfig(metrics_token=Secret("m" * 16)).metrics_token is not None
    with pytest.raises(ValueError, match="field 'limits': the URL's port must be a number") as port:
        GatewayConfig(limits=ConnectionString("redis://:hunter2secret@h:99999"))
    assert "hunter2secret" not in str(port.value)
    with pytest.raises(ValueError, match="field 'database': the URL's port"):
        GatewayConfig(database=ConnectionString("postgresql://u@db:70000/x"))
    assert endpoint("postgresql://u:pw@db.internal:5432/x", "database") == "db.internal:5432"
    assert endpoint("redis://h", "limits") == "h"
    assert endpoint("unix:///run/redis.sock", "limits") == "/run/redis.sock"
    assert endpoint("/var/lib/gw.sqlite", "database") == "/var/lib/gw.sqlite"


def test_key_spec_validation() -> None:
    with pytest.raises(ValueError, match="name must not be empty"):
        KeySpec(name=" ")
    with pytest.raises(ValueError, match="rpm must be a finite positive number"):
        KeySpec(name="k", rpm=0)
    with pytest.raises(ValueError, match="budget must be a finite positive number"):
        KeySpec(name="k", budget=float("inf"))
    assert KeySpec(name="k", expires_at=4e9).expiry(1e9) == 4e9  # 2096: an expiry must be in the future
    assert KeySpec(name="k", expires_days=1).expiry(1e9) == 1e9 + 86400
    assert KeySpec(name="k").expiry(1e9) is None


def test_key_spec_numbers_fit_every_store_and_expiries_a_date_in_the_future() -> None:
    """rpm / tpm fit PostgreSQL's 32-bit INTEGER, an expiry is a date :mod:`datetime` shows (by the
    year 9999) and after now; a number too large for any column is refused naming its field, never an
    OverflowError from the store."""
    edge = KeySpec(name="k", rpm=MAX_RATE, tpm=MAX_RATE, budget=sys.float_info.max, expires_at=LATEST_EXPIRY)
    assert (edge.rpm, edge.tpm, edge.expiry(0)) == (2**31 - 1, 2**31 - 1, 253402300799.0)
    assert KeySpec(name="k", expires_days=36500).expiry(1e9) == 1e9 + 36500 * 86400
    latest = r"9999-12-31 23:59:59 UTC, the latest expiry a key may have"
    cases: list[tuple[str, Any, str]] = [
        ("rpm", 2**31, r"^rpm must be at most 2147483647, what every state store can hold; got 2147483648$"),
        ("tpm", 99999999999999999999999, r"^tpm must be at most 2147483647, .*; got 99999999999999999999999$"),
        ("rpm", 2**63, r"^rpm must be at most 2147483647, .*; got 9223372036854775808$"),
        ("tpm", 10**400, r"^tpm must be at most 2147483647, .*; got 1000+…$"),  # not float(): no OverflowError
        ("rpm", -(10**400), r"^rpm must be a finite positive number, got -1000+…$"),
        ("budget", 10**400, r"^budget must be at most 1\.7976931348623157e\+308, the largest float; got 1000+…$"),
        ("expires_days", 1e9, rf"^expires_days must be at most \d+ days from now: {latest}; got 1000000000\.0$"),
        ("expires_days", 3e6, r"^expires_days must be at most \d+ days from now"),  # the year 10183
        ("expires_at", 1e300, rf"^expires_at must be at most 253402300799: {latest}; got 1e\+300$"),
        ("expires_at", LATEST_EXPIRY + 1, r"^expires_at must be at most 253402300799: .*; got 253402300800\.0$"),
        ("expires_at", 1, r"^expires_at is in the past: 1 is 1970-01-01 00:00:01 UTC, before now \(\d{4}-.* UTC\);"),
        ("expires_at", time.time() - 1, r"^expires_at is in the past: "),
        ("expires_at", float("inf"), r"^expires_at must be a finite positive number, got inf$"),
    ]
    for field, value, message in cases:
        with pytest.raises(KeySpecError, match=message) as caught:
            KeySpec(name="k", **{field: value})
        assert caught.value.field == field
        assert f"{field} {caught.value.reason}" == str(caught.value)  # the reason: the message without its field
        assert len(str(caught.value)) < 300  # a value of any length is quoted cut


def test_store_revoked_meanwhile_unavailable_and_close(tmp_path: Path) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "s.sqlite")
        await store.migrate()
        assert await store.migrate() == 5  # idempotent
        plain, _ = await store.create_key(KeySpec(name="k"))
        key = await store.authenticate(plain)
        assert key is not None
        await store.revoke("k")
        with pytest.raises(GatewayError) as caught:
            await store.admit(key, "mock", "echo")
        assert caught.value.status == 401
        await store.aclose()
        await store.aclose()
        broken = SQLiteStore(tmp_path)  # a directory: sqlite cannot open it
        with pytest.raises(GatewayError) as down:
            await broken.ping()
        assert down.value.status == 503
        assert down.value.retry_after == 1.0

    anyio.run(main)


def test_runtime_refuses_a_failed_middleware_and_drains_with_a_bound(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"plugins:\n  usage: {{path: '{tmp_path}'}}\n  mock: {{}}\n")
    blocked = tmp_path / "blocked.yaml"  # the default ledger path is checked when the plugin is built
    blocked.write_text("plugins:\n  usage: {}\n  mock: {}\n")
    (tmp_path / "not-a-folder").write_text("x")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "not-a-folder"))
    good = tmp_path / "good.yaml"
    good.write_text("plugins:\n  gateway: {drain_timeout: 0}\n  mock: {}\n")

    async def main() -> None:
        # an unusable usage path is refused when the config is validated (a located CONFIG error)
        with pytest.raises(LlmError, match=r"bad\.yaml:2, plugin 'usage': usage path .* is a directory"):
            await load_runtime(bad)
        with pytest.raises(
            LlmError, match=r"blocked\.yaml:2: plugin 'usage' failed to start: .*usage path .* is not a folder"
        ):
            await load_runtime(blocked)
        runtime = await load_runtime(good)
        holder = RuntimeHolder(runtime)
        cancelled = anyio.Event()
        borrowed = anyio.Event()
        abort = AbortSignal()
        aborted = anyio.Event()

        async def stuck() -> None:
            async with holder.use():
                borrowed.set()
                try:
                    await anyio.sleep_forever()
                finally:
                    cancelled.set()

        async def abortable() -> None:  # a generation: it ends when its abort signal fires
            async with holder.use() as current:
                current.aborts.add(abort)
                await abort.wait()
                current.aborts.discard(abort)
                aborted.set()

        close = runtime.aclose

        async def failing_close() -> None:  # closes the harness (nothing left running), then fails
            await close()
            raise RuntimeError("close failed")

        before = AbortSignal()  # fired before the drain (the console): not the drain's
        before.fire("aborted by an operator from the console")
        runtime.aborts.add(before)
        async with anyio.create_task_group() as group:
            group.start_soon(abortable)
            group.start_soon(stuck)
            await borrowed.wait()
            runtime.aclose = failing_close  # type: ignore[method-assign]
            await holder.retire(runtime)  # the drain timeout (0) passed: aborted first, then cancelled
            await cancelled.wait()
        assert aborted.is_set()
        assert abort.reason == "the gateway's drain timeout passed"
        assert runtime.drained == {abort}  # its generation ends with the drain's error (DRAINED, 503)
        assert before.reason == "aborted by an operator from the console"
        assert runtime.in_flight == 0

    monkeypatch.setattr(runtime_module, "ABORT_GRACE", 0.05)  # the stuck one outlives it
    with caplog.at_level(logging.WARNING, "harness_gateway"):
        anyio.run(main)
    assert "aborting the generations still running after the drain timeout" in caplog.text
    assert "cancelling 1 request(s)" in caplog.text
    assert "closing the old runtime failed" in caplog.text


def test_abort_streams_without_a_gateway_or_streams_does_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = tmp_path / "plugins.yaml"
    config.write_text(gateway_yaml("", db=tmp_path / "gw.sqlite"))
    app = GatewayServer(str(config), "127.0.0.1")
    app.abort_streams()  # not started: nothing to abort

    async def main() -> None:
        await app.start()
        try:
            app.abort_streams()  # started, nothing running
        finally:
            await app.stop()

    with caplog.at_level(logging.WARNING, "harness_gateway"):
        anyio.run(main)
    assert "aborting" not in caplog.text


async def lifespan(app: GatewayServer) -> list[dict[str, Any]]:
    """Drive the ASGI lifespan protocol: startup, then shutdown; the messages the app sent."""
    sent: list[dict[str, Any]] = []
    incoming = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])

    async def receive() -> dict[str, Any]:
        return next(incoming)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app({"type": "lifespan"}, receive, send)
    return sent


def test_lifespan_startup_failure_names_the_problem(tmp_path: Path) -> None:
    config = tmp_path / "plugins.yaml"
    config.write_text("plugins:\n  gateway: {port: -1}\n")
    app = GatewayServer(str(config), "127.0.0.1")
    sent = anyio.run(lifespan, app)
    assert sent[0]["type"] == "lifespan.startup.failed"
    assert "field 'port'" in sent[0]["message"]
    anyio.run(app.stop)  # nothing started: nothing to stop


def test_lifespan_with_watch_and_logging(tmp_path: Path) -> None:
    config = tmp_path / "plugins.yaml"
    config.write_text(gateway_yaml("", db=tmp_path / "gw.sqlite"))
    app = GatewayServer(str(config), "127.0.0.1", watch=True, log_level="warning")
    sent = anyio.run(lifespan, app)
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert logging.getLogger("harness_gateway").level == logging.WARNING
    logging.getLogger("harness_gateway").handlers = []
    logging.getLogger("harness_gateway").propagate = True
    logging.getLogger("harness_gateway").setLevel(logging.NOTSET)


def test_a_serving_process_freezes_its_heap_after_startup_and_each_reload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []
    settled = anyio.Event()
    settle = server_module.settle_heap

    def counted() -> None:
        settle()
        calls.append(gc.get_freeze_count())
        if len(calls) == 2:  # after startup, then after the first settled request
            settled.set()

    monkeypatch.setattr(server_module, "settle_heap", counted)
    config = tmp_path / "plugins.yaml"
    config.write_text(gateway_yaml("", db=tmp_path / "gw.sqlite"))
    app = GatewayServer(str(config), "127.0.0.1", freeze_heap=True)

    async def main() -> None:
        started = anyio.Event()
        sent: list[dict[str, Any]] = []
        stop = anyio.Event()
        messages = iter([{"type": "lifespan.startup"}, None])

        async def receive() -> dict[str, Any]:
            message = next(messages)
            if message is None:
                await stop.wait()
                return {"type": "lifespan.shutdown"}
            return message

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)
            if message["type"] == "lifespan.startup.complete":
                started.set()

        async with anyio.create_task_group() as group:
            group.start_soon(app, {"type": "lifespan"}, receive, send)
            await started.wait()
            assert gc.get_freeze_count() > 0  # the started gateway is out of the collector's reach
            assert app.gateway is not None
            warmed: list[list[int]] = [[] for _ in range(1000)]  # what a first request builds (1,000 tracked objects)
            app.gateway.first_settled.set()  # the first request was settled: the heap is settled again
            with anyio.fail_after(10):
                await settled.wait()
            # frozen: tracked, and in none of the collector's generations (gc.get_objects lists
            # those only). (A count compared with the one before is not exact: frozen objects
            # freed meanwhile leave the permanent generation.)
            tracked = {id(obj) for obj in gc.get_objects()}
            assert all(gc.is_tracked(obj) and id(obj) not in tracked for obj in warmed)
            first = app.gateway.holder.current
            gc.unfreeze()
            config.write_text("plugins:\n  gateway: {port: -1}\n")
            assert await app.reload(app.gateway) is False  # an invalid file: nothing replaced, nothing frozen
            assert gc.get_freeze_count() == 0
            config.write_text(gateway_yaml("    aliases: {new: mock/echo}", db=tmp_path / "gw.sqlite"))
            assert await app.reload(app.gateway) is True
            assert app.gateway.holder.current is not first
            assert gc.get_freeze_count() > 0  # settled again once the old runtime was closed
            assert "read only at start" not in caplog.text  # only aliases changed: applied at once
            config.write_text(gateway_yaml("    drain_timeout: 1\n    lease: 9", db=tmp_path / "gw.sqlite"))
            assert await app.reload(app.gateway) is True
            assert app.drain_timeout() == 1  # the shutdown drains for the reloaded value
            assert "gateway setting(s) lease changed but are read only at start" in caplog.text
            stop.set()
        assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]

    thresholds = gc.get_threshold()
    try:
        anyio.run(main)
        assert gc.get_threshold() == (server_module.YOUNG_COLLECTION_AT, *thresholds[1:])
    finally:
        gc.unfreeze()  # the rest of the test session collects as usual
        gc.set_threshold(*thresholds)


def test_starts_without_its_database(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = tmp_path / "plugins.yaml"
    config.write_text(f"plugins:\n  gateway: {{database: '{tmp_path}'}}\n  mock: {{}}\n")
    with caplog.at_level(logging.WARNING, "harness_gateway"):
        sent = anyio.run(lifespan, GatewayServer(str(config), "127.0.0.1"))
    assert sent[0]["type"] == "lifespan.startup.complete"
    assert f"gateway started WITHOUT its state store (SQLite state store {tmp_path}; database at {tmp_path})" in (
        caplog.text
    )
    assert "gateway ready" not in caplog.text


def test_the_database_path_is_shown_and_only_a_urls_password_masked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    database = tmp_path / "state.sqlite"
    config = tmp_path / "plugins.yaml"
    config.write_text(f"plugins:\n  gateway: {{database: '{database}'}}\n  mock: {{}}\n")
    with caplog.at_level(logging.INFO, "harness_gateway"):
        sent = anyio.run(lifespan, GatewayServer(str(config), "127.0.0.1"))
    assert sent[0]["type"] == "lifespan.startup.complete"
    assert f"SQLite state store {database}" in caplog.text
    loaded = load_config(str(config))
    assert loaded.redact(f"store {database}") == f"store {database}"
    url = "postgresql://harness:pa%24%24word@db.example:5432/gw"
    config.write_text(f"plugins:\n  gateway: {{database: '{url}'}}\n  mock: {{}}\n")
    loaded = load_config(str(config))
    assert loaded.redact(url) == f"postgresql://harness:{MASK}@db.example:5432/gw"
    assert loaded.redact("pa$$word") == MASK
    gateway = loaded.plugins[0].instance
    assert isinstance(gateway, GatewayPlugin)
    assert repr(gateway.config.database) == f"Secret('{MASK}')"


def test_reload_when_the_file_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_module, "_WATCH_INTERVAL", 0.01)
    with serve_gateway(tmp_path, gateway_yaml("", db=tmp_path / "gw.sqlite"), watch=True) as running:
        holder = running.gateway.holder
        first = holder.current
        running.config.write_text(gateway_yaml("    aliases: {new: mock/echo}", db=tmp_path / "gw.sqlite"))
        wait_until(lambda: holder.current is not first)
        assert holder.current.config.aliases == {"new": "mock/echo"}
        running.config.unlink()  # a missing file: the watcher keeps looking, the runtime stays
        assert server_module._mtime(running.config) is None


def test_watch_without_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HARNESS_CONFIG", raising=False)
    monkeypatch.setattr("platformdirs.user_config_dir", lambda name: str(tmp_path / "none"))
    with caplog.at_level(logging.WARNING, "harness_gateway"):
        anyio.run(GatewayServer(None, "127.0.0.1", watch=True).reload_on_change, None)  # type: ignore[arg-type]
    assert "nothing to watch" in caplog.text


def test_worker_app_and_several_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, int, dict[str, Any]]] = []
    monkeypatch.setattr("harness_gateway.workers.run_workers", lambda app, n, kw: calls.append((app, n, kw)))
    for name in (
        server_module.ENV_CONFIG,
        server_module.ENV_HOST,
        server_module.ENV_WATCH,
        server_module.ENV_LOG_LEVEL,
    ):
        monkeypatch.setenv(name, "")  # restored after the test: serve() sets them for its workers
    monkeypatch.setattr(http_transport, "_preferred", ["httpcore"])  # serve() prefers aiohttp process-wide
    server_module.serve("cfg.yaml", "0.0.0.0", 9000, 3, watch=True, drain_timeout=4, log_level="debug")
    app, workers, options = calls[0]
    assert (app, workers) == ("harness_gateway.server:worker_app", 3)
    # uvicorn's bound in each worker is the one process's: the drain timeout, then ABORT_GRACE for
    # the generations the gateway aborted then (harness_gateway.shutdown); it cancelled them at 4
    assert (options["port"], options["timeout_graceful_shutdown"]) == (9000, 4 + ABORT_GRACE)
    assert options["callback_notify"] is announce_worker  # uvicorn calls it once the worker's server listens
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "/run/metrics")  # what run_workers gives every worker
    worker = worker_app()
    assert (worker.config_path, worker.host, worker.watch, worker.log_level) == ("cfg.yaml", "0.0.0.0", True, "debug")
    assert worker.metrics_dir == "/run/metrics"
    assert worker.freeze_heap  # a worker process serves nothing else: its heap is settled after startup
    assert not worker.announce_at_start  # its lifespan ends before its server listens: not ready yet
    announced: list[GatewayServer] = []
    monkeypatch.setattr(worker, "announce", lambda: announced.append(worker))
    anyio.run(announce_worker)  # the server's first tick: the worker says it is ready
    anyio.run(announce_worker)  # every later one (each timeout_notify seconds): nothing more
    assert announced == [worker]
    aborted: list[GatewayServer] = []
    monkeypatch.setattr(worker, "abort_streams", lambda: aborted.append(worker))
    shutdown.abort_worker_streams()  # its server's drain timeout passed (harness_gateway.workers.WorkerProcess)
    assert aborted == [worker]
    assert os.environ[server_module.ENV_CONFIG] == "cfg.yaml"
    assert preferred_transport() == "aiohttp"  # a serving process relays over aiohttp


def test_a_draining_server_aborts_at_the_drain_timeout_before_uvicorn_cancels() -> None:
    """The one owner of the shutdown's timing (harness serve's process and each worker): the
    abort at the drain timeout, uvicorn's bound ABORT_GRACE later."""
    config = uvicorn.Config("harness_gateway.server:worker_app", timeout_graceful_shutdown=graceful_timeout(0.5))  # type: ignore[arg-type]
    assert config.timeout_graceful_shutdown == 0.5 + ABORT_GRACE
    assert DrainingServer(config, lambda: None).drain_timeout == 0.5


def test_a_draining_server_drains_for_the_current_drain_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The drain timeout read when the shutdown starts (the current runtime's: a reload may have
    changed it) replaces the one uvicorn's config was made with; ``None`` (no app started) keeps it."""
    config = uvicorn.Config("harness_gateway.server:worker_app", timeout_graceful_shutdown=graceful_timeout(30))  # type: ignore[arg-type]
    bounds: list[float | None] = []

    async def uvicorn_shutdown(self: uvicorn.Server, sockets: object = None) -> None:
        bounds.append(self.config.timeout_graceful_shutdown)

    monkeypatch.setattr(uvicorn.Server, "shutdown", uvicorn_shutdown)
    asyncio.run(DrainingServer(config, lambda: None, lambda: None).shutdown())
    asyncio.run(DrainingServer(config, lambda: None, lambda: 0.5).shutdown())
    assert bounds == [30 + ABORT_GRACE, 0.5 + ABORT_GRACE]
    monkeypatch.setattr(shutdown, "_worker_apps", [])
    assert shutdown.worker_drain_timeout() is None  # a worker whose app was not made yet
    app = GatewayServer(None, "127.0.0.1")
    assert app.drain_timeout() is None  # not started
    shutdown.worker_serves(app)
    assert shutdown.worker_drain_timeout() is None


def test_cli_errors(tmp_path: Path) -> None:
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text("plugins:\n  gateway: {workers: 0}\n")
    for args in (["keys", "list", "-c", str(invalid)], ["-c", str(invalid), "keys", "list"]):  # -c before or after
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2
        assert "field 'workers'" in result.output
    no_gateway = tmp_path / "plain.yaml"
    no_gateway.write_text(f"plugins:\n  mock: {{}}\n  gateway: {{database: '{tmp_path}'}}\n")
    down = CliRunner().invoke(cli, ["keys", "list", "-c", str(no_gateway)])
    assert down.exit_code == 1
    assert "unavailable" in down.output
    empty = CliRunner().invoke(cli, ["keys", "create", "-c", str(no_gateway), "--name", " "])
    assert empty.exit_code == 2
    assert "error: --name: must not be empty" in empty.output  # KeySpec's reason, named by the option
    forged = CliRunner().invoke(cli, ["keys", "create", "-c", str(no_gateway), "--name", "a\nb"])
    assert forged.exit_code == 2
    assert "--name: must be printable text, without control characters (found U+000A)" in forged.output


def test_cli_without_a_gateway_entry_uses_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("harness_gateway.cli.default_database_path", lambda: tmp_path / "default.sqlite")
    plain = tmp_path / "plain.yaml"
    plain.write_text("plugins:\n  mock: {}\n")
    result = CliRunner().invoke(cli, ["keys", "list", "-c", str(plain), "--json"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "[]"
    assert (tmp_path / "default.sqlite").exists()


def test_request_id_layer_passes_other_scopes() -> None:
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    anyio.run(RequestIdMiddleware(app), {"type": "lifespan"}, None, None)  # type: ignore[arg-type]
    assert seen == ["lifespan"]


def test_translator_corners() -> None:
    assert MessagesStreamEncoder("m", "m").feed(object()) == b""  # type: ignore[arg-type]  # unknown kinds pass
    parsed = parse_messages_request(
        {
            "model": "r/m",
            "max_tokens": 1,
            "messages": [{"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}]}],
        }
    )
    assert parsed.options.messages[0].content == [ReasoningBlock("t")]
    assert parsed.options.messages[0].replay_state is None
    finish = Finish(reason=FinishReason(kind="tool-calls"))
    bad = Message(role="assistant", content=[ToolCallBlock("t", "f", "{bad")])
    with pytest.raises(GatewayError, match="not a JSON object"):
        messages_response("m", "m", bad, None, finish)
    stop = parse_chat_request({"model": "r/m", "messages": [{"role": "user", "content": "x"}], "stop": ["a", "b"]})
    assert stop.options.stop == ["a", "b"]
    with pytest.raises(GatewayError, match=r"messages\[0\]: expected an object, got null"):
        parse_chat_request({"model": "r/m", "messages": [None]})


def test_top_level_aliases_serve_the_gateway_too(tmp_path: Path) -> None:
    config = tmp_path / "plugins.yaml"
    config.write_text(
        "plugins:\n  gateway: {aliases: {both: mock/echo}}\n  mock: {}\n"
        "aliases: {full: mock/echo, plain: echo, both: mock/other}\n"
        "defaults: {route: mock, model: echo}\n"
    )
    bare = tmp_path / "bare.yaml"
    bare.write_text("plugins:\n  mock: {}\naliases: {plain: echo}\n")
    two = tmp_path / "two.yaml"
    two.write_text("plugins:\n  mock: {routes: [a, b]}\naliases: {plain: echo}\n")

    async def main() -> None:
        runtime = await load_runtime(config)
        try:
            assert runtime.aliases == {"full": "mock/echo", "plain": "mock/echo", "both": "mock/echo"}
            assert runtime.resolve("plain") == ("mock", "echo", "mock")
        finally:
            await runtime.aclose()
        without_default = await load_runtime(bare)
        try:
            assert without_default.aliases == {
                "plain": "mock/echo"
            }  # the only route served: the default, as on the CLI
        finally:
            await without_default.aclose()
        two_routes = await load_runtime(two)
        try:
            assert two_routes.aliases == {}  # no default route: a plain model id cannot be served
        finally:
            await two_routes.aclose()

    anyio.run(main)


def test_a_ledger_row_that_cannot_be_settled_is_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The reply still reaches the client; the ledger failure is logged with the request id and cost."""

    async def refuse(self: SQLiteStore, *args: Any, **kwargs: Any) -> None:
        raise GatewayError(503, "the store went away", code="store_unavailable")

    monkeypatch.setattr(SQLiteStore, "settle", refuse)
    with (
        caplog.at_level(logging.ERROR, "harness_gateway"),
        serve_gateway(tmp_path, gateway_yaml(db=tmp_path / "gw.sqlite")) as running,
    ):
        body = {"model": "mock/echo", "messages": [{"role": "user", "content": "hi"}]}
        reply = httpx.post(running.url + "/v1/chat/completions", json=body, timeout=30)
        assert reply.status_code == 200
        assert reply.json()["choices"][0]["message"]["content"] == "hi"
        wait_until(lambda: "could not settle ledger row" in caplog.text)
    assert "the store went away" in caplog.text


def test_admission_decides_the_budget_cases_without_a_race() -> None:
    """The budget branches of ``decide``, each reached directly (no concurrent requests needed)."""
    from harness_gateway.keys import KeyRecord
    from harness_gateway.store import decide

    def key(spent: float) -> KeyRecord:
        return KeyRecord(
            id="k", name="k", routes=None, budget=10.0, rpm=None, tpm=None,
            expires_at=None, created_at=0.0, revoked_at=None, spent=spent,
        )  # fmt: skip

    quiet = (0, 0.0, 0, 0.0, 0, 0.0, None, None)  # nothing running, no request priced yet
    assert decide(key(0.0), quiet, 100.0) == 0.0
    spent = decide(key(10.0), quiet, 100.0)
    assert isinstance(spent, GatewayError)
    assert (spent.status, spent.retry_after, spent.retryable) == (429, None, False)  # no retry cures it
    assert spent.headers() == {"x-should-retry": "false"}
    assert "has spent its budget" in spent.message
    running = (1, 0.0, 0, 0.0, 1, 0.0, None, 103.5)  # one running (lease ends at 103.5), nothing priced yet
    near = decide(key(0.0), running, 100.0)
    assert isinstance(near, GatewayError)
    assert (near.status, near.retry_after, near.retryable) == (429, 3.5, True)  # the real wait: its lease
    assert near.headers() == {"retry-after": "4"}
    assert "runs one request at a time while the cost of its requests is unknown" in near.message
    spent_while_running = decide(key(10.0), running, 100.0)  # nothing the running ones free can cure it
    assert isinstance(spent_while_running, GatewayError)
    assert (spent_while_running.code, spent_while_running.retryable) == ("insufficient_quota", False)
    reserving = (1, 0.0, 0, 0.0, 1, 0.5, 0.5, 103.5)  # one running reserves 0.5; 0.5 the most a request cost
    near = decide(key(9.5), reserving, 100.0)  # fits once the running one ends
    assert isinstance(near, GatewayError)
    assert (near.code, near.retry_after) == ("budget_exceeded", 3.5)
    assert near.message.startswith("key 'k' is near its budget of $10: $0.5 is unspent, its running requests reserve")
    assert decide(key(9.0), reserving, 100.0, 0.5) == 0.5  # a bound fitting the room exactly is admitted
    too_big = decide(key(9.0), quiet, 100.0, 1.5)  # a bound above what the spend leaves: never
    assert isinstance(too_big, GatewayError)
    assert (too_big.code, too_big.retryable, too_big.retry_after) == ("insufficient_quota", False, None)
    assert too_big.message.startswith("key 'k' has $1 left of its budget of $10 and this request may cost $1.5")
    raise_it = '(`harness keys update k --budget <USD>`, or `PATCH /admin/keys/k` with `{"budget": <USD>}`)'
    assert too_big.message.endswith(
        f"lower the output limit or shorten the input, or have an admin raise the key's budget {raise_it}"
    )
    assert spent.message.endswith(f"not retryable with this key until an admin raises its budget {raise_it}")
    # a route/model without a price: the cure is its price (max_tokens bounds no unpriced request)
    price_it = (
        "local/llama has no price, so no request to it has a cost known before it runs (`max_tokens` cannot bound"
        " it): give it one in the gateway's `prices` (plugins.yaml `gateway: {prices: {local/llama: {input: <USD>,"
        " output: <USD>}}}`, per million tokens; 0 for a self-hosted model)"
    )
    learnt = (0, 0.0, 0, 0.0, 0, 0.0, 1.5, None)  # nothing running; the key's costliest request cost 1.5
    unpriced = decide(key(9.0), learnt, 100.0, None, 0.0, unpriced="local/llama")
    assert isinstance(unpriced, GatewayError)
    assert (unpriced.code, unpriced.retryable) == ("insufficient_quota", False)
    assert unpriced.message == (
        "key 'k' has $1 left of its budget of $10 and this request may cost $1.5 (the most a request of this key"
        f" has cost, reserved for a request of unknown cost): not retryable as sent; {price_it}, or have an admin"
        f" raise the key's budget {raise_it}"
    )
    priced = decide(key(9.0), learnt, 100.0, None, 0.0)
    assert isinstance(priced, GatewayError)
    assert "set `max_tokens` (`max_output_tokens` on /v1/responses) so its cost is known" in priced.message
    waiting = decide(key(0.0), running, 100.0, unpriced="local/llama")
    assert isinstance(waiting, GatewayError)
    assert waiting.code == "budget_exceeded"
    assert waiting.message.endswith(f"retry when the running one ends; {price_it}")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_producer_cancelled_while_it_waits_for_room_leaves_the_outbox_usable() -> None:
    """The client went away while the producer waited for the sender (backpressure): the
    cancelled wait stays cancelled, and the sender still takes what was queued (CI's coverage
    saw this branch only when a run happened to abort during backpressure)."""
    import asyncio

    from harness_gateway.relay import _Outbox

    box = _Outbox()
    box.parts.append(b"data: 1\n\n")
    started = asyncio.Event()

    async def produce() -> None:
        started.set()
        await box.room()

    producer = asyncio.get_running_loop().create_task(produce())
    await started.wait()
    await asyncio.sleep(0)  # (one turn: the producer now awaits its room future)
    producer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await producer
    body, end = await box.take(keepalive=60.0)
    assert (body, end) == (b"data: 1\n\n", None)
    box.end(GatewayError(499, "client went away"))
    body, end = await box.take(keepalive=60.0)
    assert body == b""
    assert end is not None
    assert end.status == 499


def test_the_usage_so_far_is_recorded_only_when_it_grew() -> None:
    """:meth:`Relay.record_so_far` (called by the process's usage recorder every second): a
    stream that streamed nothing since the last record writes nothing, one that grew writes its
    estimate, one that ended writes nothing (it is being settled). Called directly: whether two
    recorder ticks fall between two chunks of a real stream depends on the machine's timing."""
    written: list[tuple[str, Any, float]] = []

    async def record(ticket: str, usage: Any, cost: float) -> None:
        written.append((ticket, usage, cost))

    relay: Any = types.SimpleNamespace(
        done=anyio.Event(), output_chars=8, usage=None, recorded=(0, None), options=GenerateOptions(),
        runtime=types.SimpleNamespace(prices=PriceBook({"r/m": Price(input=1.0, output=1.0)}, use_table=False)),
        member=lambda: ("r", "m"), gateway=types.SimpleNamespace(store=types.SimpleNamespace(record=record)),
        ticket="t1", request_id="q1",
    )  # fmt: skip

    async def main() -> None:
        await Relay.record_so_far(relay)
        await Relay.record_so_far(relay)  # nothing streamed since: not written again
        relay.output_chars = 12
        await Relay.record_so_far(relay)
        relay.done.set()
        relay.output_chars = 40
        await Relay.record_so_far(relay)  # ended: the settlement writes the row

    anyio.run(main)
    assert [(ticket, usage.output_tokens) for ticket, usage, _ in written] == [("t1", 2), ("t1", 3)]


def test_an_aborted_finish_is_shown_with_the_gateways_public_failure(caplog: pytest.LogCaptureFixture) -> None:
    """:meth:`Relay.shown_abort`: an abort the gateway's signal did not fire (the route or its
    upstream ended the stream ``aborted`` on its own) is shown with a stable message naming the
    route and the request, its detail logged; one the gateway fired shows the gateway's reason,
    and the drain's (the signal in ``runtime.drained``) is :data:`DRAINED`."""
    abort = AbortSignal()
    relay: Any = types.SimpleNamespace(
        abort=abort, runtime=types.SimpleNamespace(drained=set()), route="up", request_id="r1"
    )
    detail = Failure(code="ABORTED", message="cancelled at http://10.0.0.7:8000/internal")
    with caplog.at_level(logging.WARNING, "harness_gateway"):
        upstream = Relay.shown_abort(relay, Finish(FinishReason(kind="aborted", failure=detail)))
        bare = Relay.shown_abort(relay, Finish(FinishReason(kind="aborted")))
    assert upstream.reason.failure is not None
    assert upstream.reason.failure.message == (
        "route 'up' aborted the generation; details are in the gateway's log (request r1)"
    )
    assert "request r1: route 'up' aborted the generation: cancelled at http://10.0.0.7:8000/internal" in caplog.text
    assert "request r1: route 'up' aborted the generation: no reason given" in caplog.text
    assert bare.reason.failure == upstream.reason.failure
    abort.fire("aborted by an operator from the console")
    console = Relay.shown_abort(relay, Finish(FinishReason(kind="aborted", failure=detail)))
    assert console.reason.failure == Failure(code="ABORTED", message="aborted by an operator from the console")
    relay.runtime.drained.add(abort)
    drained = Relay.shown_abort(relay, Finish(FinishReason(kind="aborted", failure=detail)))
    assert drained.reason.failure == Failure(code="ABORTED", message=DRAINED, retryable=True)


def test_an_anthropic_model_object_carries_the_token_limits_its_adapter_knows() -> None:
    from harness_core import ModelInfo
    from harness_gateway.endpoints import ListedModel, _anthropic_model

    known = ListedModel("big/m", "big", ModelInfo(model="m", context_window=200_000, max_output_tokens=8192))
    assert _anthropic_model(known) == {
        "type": "model",
        "id": "big/m",
        "display_name": "big/m",
        "created_at": "1970-01-01T00:00:00Z",
        "max_input_tokens": 200_000,
        "max_tokens": 8192,
    }
    assert "max_tokens" not in _anthropic_model(ListedModel("a", "alias of big/m"))
    assert "max_input_tokens" not in _anthropic_model(ListedModel("big/n", "big", ModelInfo(model="n")))


def test_decimal_reads_ascii_digits_only() -> None:
    from harness_gateway.request import decimal

    assert decimal("20") == 20
    assert decimal("007") == 7
    for text in ("", "-1", "1.5", " 2", "\u00b2", "\u0662", "\uff12"):  # '²', Arabic-Indic and fullwidth two
        assert decimal(text) is None


def test_the_keys_table_shows_a_small_spend_as_it_is() -> None:
    from harness_gateway.cli import _usd

    assert [_usd(v) for v in (0.0, 3e-05, 0.0001234, 24.0, 1.5)] == ["0", "0.00003", "0.0001234", "24", "1.5"]
