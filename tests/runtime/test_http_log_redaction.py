"""While a Harness runs, the HTTP stack's own DEBUG records (httpx, httpcore header dumps) are
scrubbed of the configured secrets: a library caller's handlers never see a key that a redirect's
``Location`` header carries."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import msgspec
import pytest

from harness_core import GenerateOptions, Harness, LlmAdapter, LlmError, Message, Secret, StreamChunk, hookimpl
from harness_core.hookspecs import RegisterAdapter
from harness_core.http.client import make_client
from harness_core.http.errors import error_from_response
from harness_core.secret import HTTP_LOGGERS, MASK, RedactFilter
from harness_core.testing import Reply, ScriptedServer

pytestmark = pytest.mark.anyio

KEY = "sk-" + "redirect-0123456789abcdef"  # built at run time: no key-shaped literal committed


class Config(msgspec.Struct):
    base_url: str
    api_key: Secret


class RedirectedAdapter(LlmAdapter):
    """POSTs to the scripted provider and turns a non-2xx reply into the usual error."""

    def __init__(self, config: Config) -> None:
        self.config = config

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        headers = {"Authorization": f"Bearer {self.config.api_key.get_secret_value()}"}
        async with make_client(headers=headers) as client:
            response = await client.post(f"{self.config.base_url}/v1/chat", json={"model": options.model})
        raise error_from_response(response.status_code, response.headers, response.content)
        yield  # pragma: no cover - an async generator that always raises before its first chunk


class RedirectedPlugin:
    def __init__(self, config: Config) -> None:
        self.config = config

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        register(["proxy"], RedirectedAdapter(self.config))


def redact_filters() -> list[logging.Filter]:
    return [f for name in HTTP_LOGGERS for f in logging.getLogger(name).filters if isinstance(f, RedactFilter)]


async def test_httpcore_header_dumps_are_scrubbed_while_the_harness_runs(caplog: pytest.LogCaptureFixture) -> None:
    location = f"http://127.0.0.1/v1/chat?key={KEY}"
    with ScriptedServer(Reply(307, headers={"Location": location, "content-type": "text/plain"})) as server:
        plugin = RedirectedPlugin(Config(base_url=server.url, api_key=Secret(KEY)))
        options = GenerateOptions(route="proxy", model="m", messages=[Message.user("hi")])
        with caplog.at_level(logging.DEBUG):
            async with Harness([("proxy", plugin)]) as harness:
                assert len(redact_filters()) == len(HTTP_LOGGERS)
                with pytest.raises(LlmError, match=r"redirected to 'http://127\.0\.0\.1/v1/chat\?key=\*{10}'"):
                    await harness.generate(options)
    assert redact_filters() == []  # removed when the harness closed
    headers = [r for r in caplog.records if r.name.startswith("httpcore") and "Location" in r.getMessage()]
    assert headers, "httpcore logged the response headers at DEBUG"
    assert all(MASK in r.getMessage() for r in headers)
    assert KEY not in caplog.text
    assert not [r for r in caplog.records if KEY in r.getMessage()]


async def test_without_a_running_harness_the_loggers_are_left_alone() -> None:
    harness = Harness([])
    assert redact_filters() == []
    async with harness:
        assert len(redact_filters()) == len(HTTP_LOGGERS)
    assert redact_filters() == []
