"""Fixtures: the tests' FastMCP server over streamable HTTP on 127.0.0.1, an OpenAI-wire
ScriptedServer, and configs."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

FAKE = Path(__file__).with_name("fake_server.py")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    """The URL of the fake server's streamable-HTTP endpoint (a subprocess, stopped after)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(FAKE), "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the fake MCP HTTP server did not come up") from None
                time.sleep(0.05)  # polling for the port to open, bounded by the deadline
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
