"""Test helpers: a real gateway (uvicorn on a loopback socket, in a thread) over a plugins.yaml."""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import anthropic
import anyio
import httpx
import openai
import uvicorn

from harness_gateway.config import ConnectionLimits
from harness_gateway.console.records import RecordStore
from harness_gateway.errors import GatewayError
from harness_gateway.keys import KeyRecord, KeySpec
from harness_gateway.limits import protocol_options
from harness_gateway.server import GatewayServer
from harness_gateway.sqlite import SQLiteStore
from harness_gateway.store import SqlStore


class Running:
    """A gateway serving in a background thread: ``url``, ``server`` (the ASGI app) and ``config``."""

    def __init__(self, url: str, app: GatewayServer, config: Path) -> None:
        self.url = url
        self.app = app
        self.config = config

    @property
    def gateway(self):  # type: ignore[no-untyped-def]
        assert self.app.gateway is not None
        return self.app.gateway


@contextlib.contextmanager
def serve_gateway(
    tmp_path: Path,
    yaml_text: str,
    *,
    host: str = "127.0.0.1",
    watch: bool = False,
    limits: ConnectionLimits | None = None,
) -> Iterator[Running]:
    """Run ``harness serve`` on ``yaml_text`` (written to ``tmp_path/plugins.yaml``) until the block exits;
    ``limits``: uvicorn's protocol under these connection limits (as ``harness serve`` runs it).

    The listening socket is bound before the thread starts, so clients may connect at once (they
    wait in the backlog until uvicorn accepts).
    """
    config = tmp_path / "plugins.yaml"
    config.write_text(yaml_text, encoding="utf-8")
    app = GatewayServer(str(config), host, watch=watch)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    port = sock.getsockname()[1]
    options = protocol_options(limits, "h11") if limits is not None else {}
    settings = uvicorn.Config(
        app, lifespan="on", log_level="warning", access_log=False, timeout_graceful_shutdown=5, **options
    )
    server = uvicorn.Server(settings)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # surfaced by the test
            failure.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        assert app.ready.wait(30), f"the gateway did not start: {failure}"
        yield Running(f"http://127.0.0.1:{port}", app, config)
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
    assert not thread.is_alive(), "the gateway did not stop"
    assert not failure, failure


def gateway_yaml(gateway: str = "", extra: str = "", *, db: Path) -> str:
    """A plugins.yaml with the mock provider and a ``gateway`` entry (``gateway`` lines indented by 4)."""
    return f"""\
plugins:
  gateway:
    database: {db}
{gateway}
  mock: {{}}
{extra}
defaults: {{route: mock, model: echo}}
"""


class Clients:
    """SDK clients of one gateway, all closed when the test ends (no socket left to the GC)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.opened: list[Any] = []

    def openai(self, key: str = "unused-on-loopback") -> openai.OpenAI:
        client = openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0)
        self.opened.append(client)
        return client

    def anthropic(self, key: str = "unused-on-loopback") -> anthropic.Anthropic:
        client = anthropic.Anthropic(base_url=self.url, api_key=key, max_retries=0)
        self.opened.append(client)
        return client

    def close(self) -> None:
        for client in self.opened:
            client.close()


@contextlib.contextmanager
def error_records(name: str = "uvicorn.error") -> Iterator[list[logging.LogRecord]]:
    """The ERROR records of logger ``name`` while the block runs (uvicorn's logger is where an
    exception in the app is logged with its traceback; it does not reach pytest's caplog)."""
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Collect(logging.ERROR)
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


def wait_until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Wait for ``condition`` to hold (checked every few ms); fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.005)


class Process:
    """`harness serve -c config --port 0 *args` in a subprocess (environment: ours plus ``env``).

    Its log lines arrive in a queue (read by a thread; :meth:`wait_for` takes them in order) and
    are all kept in ``seen``.

    It leads a process group of its own, which its workers (``--workers N``) join: :meth:`kill`
    ends them all. Every one started is listed in :attr:`started`; the folder's ``conftest.py``
    kills what a test left running, however it ended (a failed test used to leave a supervisor
    and its workers serving, holding their port).
    """

    started: ClassVar[list[Process]] = []
    """Every one started in this test process, in order (the ``conftest.py`` fixture empties it)."""

    def __init__(self, config: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "harness_core.cli", "serve", "-c", str(config), "--port", "0", *args],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            start_new_session=True,  # its own process group, which its workers join: kill() ends every one
        )
        Process.started.append(self)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.url = self.wait_for(r"running on (http://\S+)").group(1)

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.seen.append(line)
            self.lines.put(line)

    def wait_for(self, pattern: str) -> re.Match[str]:
        """The next log line matching ``pattern`` (fails after 60 s without one)."""
        while True:
            line = self.lines.get(timeout=60)
            found = re.search(pattern, line)
            if found:
                return found

    def logged(self, pattern: str) -> list[re.Match[str]]:
        """Every log line so far matching ``pattern``, in order."""
        return [found for line in list(self.seen) if (found := re.search(pattern, line))]

    def stop(self) -> None:
        """SIGTERM, then wait for the exit (uvicorn re-raises the signal after draining)."""
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(60) in (0, -signal.SIGTERM)
        self.reader.join(10)
        assert self.process.stderr is not None
        self.process.stderr.close()

    def kill(self) -> None:
        """SIGKILL to every process of its group still running (the supervisor, its workers, a
        worker orphaned by a supervisor killed before), then reap the supervisor and close the
        log pipe. Nothing is sent once the pipe reached its end: every process that held it
        (each of the group) has exited, and the group's id may since name another group."""
        if self.reader.is_alive():
            with contextlib.suppress(ProcessLookupError):  # the last ones exited meanwhile
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(60)
        self.reader.join(60)  # the pipe's end: the last of the group is gone
        assert self.process.stderr is not None
        self.process.stderr.close()


def openai_sse(*pieces: str, usage: dict[str, int] | None = None) -> list[bytes]:
    """OpenAI chat-completion chunk events with ``pieces`` of content (then a finish, the usage
    and ``[DONE]`` when ``usage`` is given)."""
    import json

    chunks: list[dict[str, Any]] = [{"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [
        {"index": 0, "delta": {"role": "assistant", "content": piece}, "finish_reason": None}
    ]} for piece in pieces]  # fmt: skip
    if usage is None:
        return [f"data: {json.dumps(c)}\n\n".encode() for c in chunks]
    chunks.append({"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [
        {"index": 0, "delta": {}, "finish_reason": "stop"}
    ]})  # fmt: skip
    chunks.append({"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [], "usage": usage})
    return [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]


class GatedUpstream:
    """An OpenAI-compatible upstream on 127.0.0.1 that streams ``pieces`` one event at a time,
    each after the test let it (:meth:`release`): what a slow model does. :attr:`held` lists the
    pieces it waited for longer than :data:`GATE_BOUND` seconds (none when every one was let go);
    :attr:`requested` is set once the request was read (the gateway waits on the stream)."""

    GATE_BOUND = 10.0

    def __init__(self, pieces: list[str]) -> None:
        self.events = openai_sse(*pieces)
        self.gates = [threading.Event() for _ in self.events]
        self.gates[0].set()  # the first event goes at once
        self.held: list[int] = []
        self.requested = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> GatedUpstream:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for gate in self.gates:
            gate.set()
        self.listener.close()
        self.thread.join(timeout=10)

    def release(self, index: int) -> None:
        """Let event ``index`` go."""
        self.gates[index].set()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(65536)
            length = int(
                next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
            )
            body = head.split(b"\r\n\r\n", 1)[1]
            while len(body) < length:
                body += conn.recv(65536)
            self.requested.set()
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            done = b"data: [DONE]\n\n"
            with contextlib.suppress(OSError):  # the gateway went away (it cut the stream): done
                for index, event in enumerate(self.events):
                    if not self.gates[index].wait(self.GATE_BOUND):
                        self.held.append(index)
                    conn.sendall(b"%x\r\n%s\r\n" % (len(event), event))
                conn.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))


LEASE_YAML = """\
plugins:
  gateway:
    require_keys: true
    database: {database}
    lease: {lease}
    prices: {{slow/m: {{input: 100000, output: 100000}}}}   # 0.1 USD per token
  openai:slow: {{base_url: '{upstream}/v1', api_key: provider-test-credential, routes: [slow]}}
"""


def killed_mid_stream(tmp_path: Path, database: str, store: Callable[[], Any], *, restart: bool) -> float:
    """``kill -9`` a ``harness serve`` process while it streams (a scripted upstream on 127.0.0.1
    that sends three pieces and then stalls), then let another process of the same store settle the
    stranded row: one already running (``restart=False``) or one started after the kill.

    Checks that before the kill the key's next request is a retryable 429 naming the lease's wait;
    after it, that the row is settled as ``lost`` with the usage recorded while it streamed, the key
    charged exactly that, and the key admitted again. ``store()`` opens a store on ``database``.
    Returns the seconds from the kill to the settled row (waited for, with a deadline).
    """
    import anyio
    import httpx

    from harness_core.testing import Reply, ScriptedServer
    from harness_gateway.keys import KeySpec

    lease = 2.0
    done = openai_sse("fine", usage={"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4})
    upstream = ScriptedServer(Reply(reads=openai_sse("still ", "going ", "on "), end="stall"), Reply(reads=done))

    async def in_store(work: Callable[[Any], Any]) -> Any:
        opened = store()
        try:
            await opened.migrate()
            return await work(opened)
        finally:
            await opened.aclose()

    def read(work: Callable[[Any], Any]) -> Any:
        return anyio.run(in_store, work)

    with upstream:
        config = tmp_path / "plugins.yaml"
        config.write_text(LEASE_YAML.format(database=database, lease=lease, upstream=upstream.url), encoding="utf-8")
        key, record = read(lambda s: s.create_key(KeySpec(name="five", budget=5.0)))
        victim = Process(config)
        other = None if restart else Process(config)
        body = {"model": "slow/m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        auth = {"authorization": f"Bearer {key}"}
        streamed = threading.Event()
        cut: list[BaseException] = []

        def stream() -> None:
            try:
                url = victim.url + "/v1/chat/completions"
                with httpx.stream("POST", url, json=body, headers=auth, timeout=120) as reply:  # it stalls
                    for line in reply.iter_lines():
                        if "on " in line:
                            streamed.set()
            except httpx.HTTPError as exc:  # the process died under the stream: expected
                cut.append(exc)

        def ledger() -> list[dict[str, Any]]:
            rows: list[dict[str, Any]] = read(lambda s: s.ledger(record.id))
            return rows

        client = threading.Thread(target=stream, daemon=True)
        client.start()
        try:
            assert streamed.wait(60), "the stream never started"
            # its usage so far is recorded: "still going on " is 15 characters, 4 tokens at 4 per token
            wait_until(lambda: ledger()[0]["output_tokens"] == 4, timeout=60)
            partial = ledger()[0]
            assert partial["status"] == "running"
            assert partial["input_tokens"] > 0
            assert partial["cost"] > 0
            near = httpx.post((other or victim).url + "/v1/chat/completions", json=body, headers=auth, timeout=30)
            assert near.status_code == 429, near.text  # one request runs and none has settled yet
            assert (
                "runs one request at a time while the cost of its requests is unknown"
                in near.json()["error"]["message"]
            )
            assert 1 <= int(near.headers["retry-after"]) <= lease  # the lease's wait, not a constant
            victim.process.kill()  # SIGKILL: no drain, no settlement
            killed = time.monotonic()
            victim.process.wait(30)
            if other is None:
                other = Process(config)
            wait_until(lambda: ledger()[0]["status"] == "lost", timeout=30)
            settled = time.monotonic() - killed
            lost = ledger()[0]
            assert lost["cost"] >= partial["cost"] > 0  # the usage recorded while it streamed
            spent = read(lambda s: s.list_keys())[0].spent
            assert abs(spent - lost["cost"]) < 1e-9  # charged exactly that, once
            again = httpx.post(other.url + "/v1/chat/completions", json=body, headers=auth, timeout=30)
            assert again.status_code == 200, again.text  # the key is admitted again
            client.join(30)
            assert cut or not client.is_alive()
        finally:
            for process in (victim, other):
                if process is not None and process.process.poll() is None:
                    process.stop()
            victim.reader.join(10)
            assert victim.process.stderr is not None
            victim.process.stderr.close()
        return settled


def console_rows(running: Running, admin: httpx.Client, limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` console records of the gateway ``running`` (on SQLite), newest first.

    The console's Requests page is read first through ``admin`` (a client with the master key):
    the gateway waits there for the records its process queued (they are written behind), so
    every request answered before this call is then in the file; the rows are read with a store
    of this thread's own (the gateway's store belongs to its own event loop and thread)."""
    assert admin.get(running.url + "/console/requests").status_code == 200

    async def read() -> list[dict[str, Any]]:
        store = SQLiteStore(running.gateway.store.path)
        try:
            return await RecordStore(store).recent(limit)
        finally:
            await store.aclose()

    return anyio.run(read)


def stored_key(db: Path, name: str, budget: float | None = None) -> str:
    """A new virtual key ``name`` (``budget`` USD) in the SQLite store at ``db`` (migrated first): its secret."""

    async def create() -> str:
        store = SQLiteStore(db)
        try:
            await store.migrate()
            return (await store.create_key(KeySpec(name=name, budget=budget)))[0]
        finally:
            await store.aclose()

    return anyio.run(create)


def store_expiries(db: Path, expiries: dict[str, float]) -> None:
    """Write ``expires_at`` (unix seconds, by key name) into the stored keys of the SQLite store
    at ``db`` as a database of an older gateway may hold them (no ``KeySpec`` check)."""

    async def write(tx: Any) -> None:
        for name, moment in expiries.items():
            await tx.run("UPDATE gateway_keys SET expires_at = ? WHERE name = ?", moment, name)

    async def main() -> None:
        store = SQLiteStore(db)
        try:
            await store.transaction(write)
        finally:
            await store.aclose()

    anyio.run(main)


def ledger_rows(db: Path) -> list[dict[str, Any]]:
    """Every ledger row of the SQLite store at ``db`` (read with a store of its own)."""

    async def read() -> list[dict[str, Any]]:
        store = SQLiteStore(db)
        try:
            return await store.ledger()
        finally:
            await store.aclose()

    return anyio.run(read)


async def burst(
    stores: list[Any], key: KeyRecord, count: int, now: float, bound: float | None = None, floor: float = 0.0
) -> list[Any]:
    """``count`` admissions of ``key`` at once (``bound``, ``floor``: :meth:`SqlStore.admit`'s), alternating
    between ``stores`` (two hosts of one state): tickets, or the :class:`GatewayError` of each
    refusal."""
    results: list[Any] = []

    async def one(store: Any) -> None:
        try:
            results.append(await store.admit(key, "mock", "echo", now=now, bound=bound, floor=floor))
        except GatewayError as exc:
            results.append(exc)

    async with anyio.create_task_group() as group:
        for number in range(count):
            group.start_soon(one, stores[number % 2])
    return results


async def open_key(store: SqlStore, now: float | None = None) -> KeyRecord:
    """A new key of ``store`` (migrated first) without limits or budget: what a test admits when it
    needs a running ledger row (a request without a key has none until it ends)."""
    await store.migrate()
    return (await store.create_key(KeySpec(name=f"open-{os.urandom(4).hex()}"), now=now))[1]
