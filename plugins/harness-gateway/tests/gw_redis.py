"""A throwaway Redis for tests: Debian's ``redis-server`` on a free 127.0.0.1 port, nothing saved,
its files in a temp dir; ready once it answers ``PING``. Missing program: skip, or fail under
``CI=true`` (:func:`gw_servers.missing`; ``.ci/run`` installs ``redis-server``)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from gw_servers import free_port, missing

READY_WITHIN = 30.0
"""Seconds a started server may take to answer ``PING`` (a bound, not a sleep: polled)."""


def _pong(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` with its data in ``root``: :meth:`start`, :meth:`stop`, ``url``."""

    def __init__(self, root: Path) -> None:
        found = shutil.which("redis-server")
        if found is None:
            missing("redis-server is not installed; apt-get install redis-server")
        self.program = found
        self.root = root
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server and wait until it answers ``PING`` (at most :data:`READY_WITHIN` s).

        Raises:
            RuntimeError: it exited or did not answer in time (its log in the message).
        """
        log = self.root / "redis.log"
        argv = [self.program, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        argv += ["--dir", str(self.root), "--logfile", str(log)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + READY_WITHIN
        while not _pong(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                text = log.read_text(errors="replace") if log.exists() else ""
                raise RuntimeError(f"redis-server on port {self.port} did not start: {text[-2000:]}")
            time.sleep(0.02)  # polling readiness within the bound above, not a timed assertion

    def stop(self) -> None:
        """Kill the server (nothing is saved) and wait for it to exit."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=30)
            self.proc = None


@contextlib.contextmanager
def running_redis() -> Iterator[str]:
    """A throwaway ``redis-server`` in a directory of its own under /tmp for the ``with`` block:
    yields its ``redis://127.0.0.1:PORT/0`` URL; stopped and its directory removed after."""
    root = Path(tempfile.mkdtemp(prefix="harness-redis-"))
    try:
        server = RedisServer(root)
        server.start()
        try:
            yield server.url
        finally:
            server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
