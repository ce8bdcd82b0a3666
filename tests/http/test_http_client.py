"""``make_client``: what every request carries (Accept-Encoding, the base URL's query) and the
header values it refuses before any request."""

from __future__ import annotations

import httpx
import pytest

from harness_core.errors import LlmError
from harness_core.http import ACCEPT_ENCODING, check_headers, make_client, split_base_url
from harness_core.http.client import _MAX_HEADS, AdapterClient
from harness_core.testing.server import Reply, ScriptedServer

pytestmark = pytest.mark.anyio


async def test_accept_encoding_is_exactly_what_the_decoder_handles(monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx._client

    # a machine with brotli and zstandard installed: httpx alone would advertise them
    monkeypatch.setattr(httpx._client, "ACCEPT_ENCODING", "gzip, deflate, br, zstd")
    with ScriptedServer(Reply(reads=[b"data: a\n\n"]), Reply(reads=[b"data: b\n\n"])) as server:
        async with make_client(base_url=server.url) as client:
            await client.post("/x", content=b"{}")
        async with make_client(base_url=server.url, headers={"Accept-Encoding": "identity"}) as client:
            await client.post("/x", content=b"{}")
    assert server.requests[0].headers["accept-encoding"] == ACCEPT_ENCODING == "gzip, deflate"
    assert server.requests[1].headers["accept-encoding"] == "identity"  # an explicit choice is kept


@pytest.mark.parametrize(
    ("base_url", "path"),
    [
        ("{url}/v1?api-version=2024-10-21", "/v1/chat/completions?api-version=2024-10-21"),
        ("{url}/v1/?api-version=X&b=2#frag", "/v1/chat/completions?api-version=X&b=2"),
        ("{url}/v1/", "/v1/chat/completions"),
    ],
)
async def test_a_base_url_query_is_kept_and_paths_join_before_it(base_url: str, path: str) -> None:
    with ScriptedServer(Reply(reads=[b"data: a\n\n"])) as server:
        async with make_client(base_url=base_url.format(url=server.url)) as client:
            await client.post("/chat/completions", content=b"{}")
    assert server.requests[0].path == path


def test_split_base_url() -> None:
    assert split_base_url("http://h/v1/?q=1") == ("http://h/v1", "q=1")
    assert split_base_url("http://h/v1") == ("http://h/v1", "")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("Bearer sk-abc\r", "header 'authorization': its value ends with whitespace '\\r'"),
        ("Bearer sk-a\nb", "header 'authorization': its value holds the control character '\\n' at position 12"),
        ("Bearer sk-\u00e9", "header 'authorization': its value holds the non-ASCII character U+00E9"),
    ],
)
def test_a_header_that_cannot_be_sent_is_config_at_build(value: str, reason: str) -> None:
    with pytest.raises(LlmError) as caught:
        make_client(base_url="http://127.0.0.1:9", headers={"authorization": value}, provider="openai")
    assert caught.value.code == "CONFIG"
    assert not caught.value.retryable
    assert caught.value.provider == "openai"
    assert reason in caught.value.message
    assert "sk-" not in caught.value.message
    check_headers({"authorization": "Bearer fine-key"})


def test_a_redirect_says_where_it_pointed_and_that_it_was_not_followed() -> None:
    from harness_core.http import error_from_response

    error = error_from_response(307, {"Location": "https://api.example.com/v1/chat/completions"}, b"")
    assert error.code == "PROTOCOL"
    assert error.message == (
        "HTTP 307 Temporary Redirect: the server redirected to 'https://api.example.com/v1/chat/completions'; "
        "redirects are not followed (point base_url at the final address)"
    )
    assert "without a Location" in error_from_response(301, {}, b"moved").message


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("x team", "a header name holds ' ' at position 2"),
        ("Authorization: Bearer sk-abc", "a header name holds ':' at position 14"),
        ("", "a header name is empty"),
        ("x-caf\u00e9", "a header name holds '\\xe9' at position 6"),
    ],
)
def test_a_header_name_that_is_not_a_token_is_config_without_showing_it(name: str, reason: str) -> None:
    with pytest.raises(LlmError) as caught:
        check_headers({"accept": "text/event-stream", name: "v"}, provider="openai")
    assert caught.value.code == "CONFIG"
    assert caught.value.provider == "openai"
    assert caught.value.message.startswith(reason)
    assert "RFC 9110" in caught.value.message
    assert "sk-" not in caught.value.message
    check_headers({"X-Api-Key": "k", "anthropic-version": "2023-06-01", "x!#$%&'*+-.^_`|~1": "v"})


async def test_cookies_a_response_sets_are_sent_back_and_responses_without_any_store_nothing() -> None:
    replies = [
        Reply(reads=[b"data: a\n\n"]),
        Reply(headers=[("set-cookie", "session=s1; Path=/"), ("set-cookie", "lb=b2; Path=/")], reads=[b"data: b\n\n"]),
        Reply(reads=[b"data: c\n\n"]),
        Reply(reads=[b"data: d\n\n"]),
    ]
    with ScriptedServer(*replies) as server:
        async with make_client(base_url=server.url) as client:
            await client.post("/x", content=b"{}")
            assert dict(client.cookies) == {}
            await client.post("/x", content=b"{}")
            assert dict(client.cookies) == {"session": "s1", "lb": "b2"}
            await client.post("/x", content=b"{}")
            client.cookies = {"only": "this"}  # replacing the store keeps it a skipping one
            await client.post("/x", content=b"{}")
    sent = [request.headers.get("cookie") for request in server.requests]
    assert sent[:2] == [None, None]
    assert sent[2] is not None
    assert sorted(sent[2].split("; ")) == ["lb=b2", "session=s1"]
    assert sent[3] == "only=this"


def _same_request(client: httpx.AsyncClient, method: str, url: httpx.URL | str, **kwargs: object) -> httpx.Request:
    """``client.build_request(...)``, asserted equal to httpx's own build of the same request
    (method, URL, head in order, body, extensions)."""
    built = client.build_request(method, url, **kwargs)  # type: ignore[arg-type]
    reference = httpx.AsyncClient.build_request(client, method, url, **kwargs)  # type: ignore[arg-type]
    assert (built.method, built.url, built.headers.raw, built.read(), built.extensions) == (
        reference.method,
        reference.url,
        reference.headers.raw,
        reference.read(),
        reference.extensions,
    )
    return built


async def test_an_adapters_post_is_built_as_httpx_builds_it_and_follows_the_clients_changes() -> None:
    async with make_client(base_url="http://127.0.0.1:9/v1", headers={"authorization": "Bearer k"}) as client:
        url = httpx.URL("http://127.0.0.1:9/v1/chat/completions")
        json_type = {"content-type": "application/json"}
        for body in (b'{"a": 1}', b'{"a": 12}', b'{"a": 1}'):  # the first builds the head, the others reuse it
            request = _same_request(client, "POST", url, content=body, headers=json_type)
            assert request.headers["content-length"] == str(len(body))
        _same_request(client, "POST", httpx.URL("http://other:1/x"), content=b"{}", headers=json_type)  # its own head
        _same_request(client, "POST", url, content=b"{}")  # no request headers
        for n in range(70):  # other headers on every request: the heads kept stay bounded
            _same_request(client, "POST", url, content=b"{}", headers={"idempotency-key": str(n)})
        assert isinstance(client, AdapterClient)
        assert len(client._heads) <= _MAX_HEADS
        _same_request(client, "PUT", url, content=b"{}", headers=json_type)

        client.headers["x-added"] = "later"  # a change of the client's headers is seen at once
        assert _same_request(client, "POST", url, content=b"{}", headers=json_type).headers["x-added"] == "later"
        client.timeout = httpx.Timeout(3.0)
        assert _same_request(client, "POST", url, content=b"{}", headers=json_type).extensions["timeout"]["read"] == 3.0

        # a head the shortcut cannot reproduce (a Content-Length of the caller's, not the body's),
        # and the requests it never takes: httpx's own every time
        for _ in range(2):
            _same_request(client, "POST", url, content=b"{}", headers={"content-length": "9"})
        _same_request(client, "POST", url, content=b"", headers=json_type)
        _same_request(client, "POST", url, content="{}", headers=json_type)
        _same_request(client, "POST", "/chat/completions", content=b"{}", headers=json_type)
        _same_request(client, "POST", httpx.URL("/relative"), content=b"{}", headers=json_type)
        _same_request(client, "POST", url, json={"a": 1})
        _same_request(client, "POST", url, content=b"{}", params={"q": "1"})
        _same_request(client, "POST", url, content=b"{}", timeout=1.0)
        _same_request(client, "POST", url, content=b"{}", extensions={"sni_hostname": "h"})
        client.cookies = {"session": "s"}
        assert _same_request(client, "POST", url, content=b"{}", headers=json_type).headers["cookie"] == "session=s"
    async with make_client(base_url="http://127.0.0.1:9/v1?api-version=1") as client:  # the client's query
        request = _same_request(client, "POST", httpx.URL("http://127.0.0.1:9/v1/x"), content=b"{}")
        assert request.url.params["api-version"] == "1"
