"""Messages of plugins that fail to start are redacted with the config's secrets."""

from __future__ import annotations

from typing import Any

import pytest

from harness_core import Harness, hookimpl

pytestmark = pytest.mark.anyio

SECRET = "sk-test-0000-secret"


class LeakyAdapterPlugin:
    @hookimpl
    def register_adapter(self, register: Any) -> None:
        raise ValueError(f"cannot connect to http://[{SECRET}]/v1")


async def test_failure_messages_and_logs_are_masked(caplog: pytest.LogCaptureFixture) -> None:
    async with Harness([("leaky", LeakyAdapterPlugin())], redact=lambda text: text.replace(SECRET, "****")) as h:
        (failure,) = h.failures
    assert failure.message == "ValueError: cannot connect to http://[****]/v1"
    assert "plugin 'leaky' failed to start: ValueError: cannot connect to http://[****]/v1" in caplog.messages


async def test_without_redact_the_message_is_kept() -> None:
    async with Harness([("leaky", LeakyAdapterPlugin())]) as h:
        assert SECRET in h.failures[0].message
