"""Test helpers: a real gateway (uvicorn on a loopback socket, in a thread) over a plugins.yaml."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import uvicorn

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
def serve_gateway(tmp_path: Path, yaml_text: str, *, host: str = "127.0.0.1") -> Iterator[Running]:
    """Run ``harness serve`` on ``yaml_text`` (written to ``tmp_path/plugins.yaml``) until the block exits.

    The listening socket is bound before the thread starts, so clients may connect at once (they
    wait in the backlog until uvicorn accepts).
    """
    config = tmp_path / "plugins.yaml"
    config.write_text(yaml_text, encoding="utf-8")
    app = GatewayServer(str(config), host)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False, timeout_graceful_shutdown=5))
    failure: list[BaseException] = []

    def run() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # surfaced by the test
            failure.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
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
