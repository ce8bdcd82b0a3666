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
from typing import Any

import anthropic
import openai
import uvicorn

from harness_gateway.config import ConnectionLimits
from harness_gateway.limits import protocol_options
from harness_gateway.server import GatewayServer


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
defaults: {{provider: mock, model: echo}}
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
    """

    def __init__(self, config: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "harness_core.cli", "serve", "-c", str(config), "--port", "0", *args],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )
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
