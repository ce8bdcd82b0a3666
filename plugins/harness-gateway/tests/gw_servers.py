"""What the tests that start a real server program share (``gw_postgres``, ``gw_redis``): a free
127.0.0.1 port, and the rule for a program that is not installed: the tests skip with the reason,
except under ``CI=true`` where they fail (CI must run them; ``.ci/run`` installs the programs)."""

from __future__ import annotations

import os
import socket
from typing import NoReturn

import pytest


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def missing(reason: str) -> NoReturn:
    """Skip the test because a server program is missing (``reason`` says which and how to install
    it); fail instead under ``CI=true``."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason + " — required under CI")
    pytest.skip(reason)
