"""A ``base_url`` with ``user:password@`` (RFC 3986 userinfo): sent as HTTP Basic auth on both
transports, never in the URL, and its password is a secret (masked under ``-v`` too)."""

from __future__ import annotations

import base64
import secrets

import pytest

from harness_core.errors import LlmError
from harness_core.http import basic_auth, basic_auth_of, make_client
from harness_core.kit import HttpProviderConfig
from harness_core.secret import secrets_of
from harness_core.testing.server import Reply, ScriptedServer

pytestmark = pytest.mark.anyio


def _userinfo(server: ScriptedServer, user: str, password: str) -> str:
    return server.url.replace("http://", f"http://{user}:{password}@") + "/v1"


@pytest.mark.parametrize(("backend", "anyio_backend"), [("httpcore", "asyncio"), ("aiohttp", "asyncio")])
async def test_userinfo_is_sent_as_basic_auth_on_both_transports(backend: str) -> None:
    password = "pw-" + secrets.token_hex(8) + "%40x"  # a percent-encoded @ in it
    with ScriptedServer(Reply(reads=[b"data: a\n\n"])) as server:
        async with make_client(base_url=_userinfo(server, "al%20ice", password), backend=backend) as client:
            await client.post("/chat/completions", content=b"{}")
    request = server.requests[0]
    expected = base64.b64encode(f"al ice:{password.replace('%40', '@')}".encode()).decode()
    assert request.headers["authorization"] == f"Basic {expected}"
    assert request.path == "/v1/chat/completions"


def test_basic_auth_of_leaves_a_url_without_userinfo_alone() -> None:
    assert basic_auth_of("http://h:8/v1") == ("http://h:8/v1", None)
    assert basic_auth_of("http://u@h/v1") == ("http://h/v1", "Basic " + base64.b64encode(b"u:").decode())


def test_userinfo_next_to_an_authorization_header_is_config() -> None:
    with pytest.raises(LlmError) as caught:
        make_client(base_url="http://u:p@127.0.0.1:9", headers={"Authorization": "Bearer x"}, provider="acme")
    assert caught.value.code == "CONFIG"
    assert "base_url holds a user:password" in str(caught.value)
    assert caught.value.provider == "acme"


def test_the_password_is_a_secret_of_the_config() -> None:
    password = "pw-" + secrets.token_hex(8)
    config = HttpProviderConfig(base_url=f"https://u:{password}@proxy.example/v1")
    redactor = secrets_of(config)
    assert password in redactor
    assert password not in redactor(f"https://u:{password}@proxy.example/v1")
    assert HttpProviderConfig(base_url="https://proxy.example/v1").secret_parts() == ()


def test_basic_auth_encodes_utf8_and_decodes_nothing() -> None:
    assert basic_auth("u", "p") == "Basic dTpw"
    assert basic_auth("jürgen", "a%40b") == "Basic " + base64.b64encode("jürgen:a%40b".encode()).decode()
