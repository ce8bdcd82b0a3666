"""Fixtures of every gateway test: no ``harness serve`` outlives the test that started it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from gw_helpers import Process


@pytest.fixture(autouse=True)
def _no_gateway_left_running() -> Iterator[None]:
    """Kill every process group of a :class:`~gw_helpers.Process` the test started and left
    running, however the test ended: a test that failed before its own stop (or whose stop
    failed) left a supervisor and its workers serving for hours, holding their port. A test
    that stopped its gateways itself is not affected (their groups are gone: nothing is sent)."""
    before = len(Process.started)
    try:
        yield
    finally:
        left = Process.started[before:]
        del Process.started[before:]
        for process in left:
            process.kill()
