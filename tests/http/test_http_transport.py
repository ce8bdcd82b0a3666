"""``transport:``: which transport a client gets (auto / httpcore / aiohttp, per event loop), and
the aiohttp transport's faults classified as httpcore's are."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib.util
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator

import aiohttp
import httpx
import pytest

from harness_core.errors import LlmError
from harness_core.http import (
    error_from_exception,
    make_client,
    make_transport,
    open_sse_stream,
    prefer_transport,
    preferred_transport,
    resolve_transport,
)
from harness_core.http.aiohttp_transport import (
    AiohttpTransport,
    _reraise,
    aiohttp_headers,
    client_timeout,
    map_exception,
)
from harness_core.http.finishing import body_received
from harness_core.testing.server import Reply, ScriptedServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def aiohttp_preferred() -> Iterator[None]:
    before = preferred_transport()
    prefer_transport("aiohttp")
    yield
    prefer_transport(before)


@pytest.fixture
def no_httpx_aiohttp(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "httpx_aiohttp" else real(name))


def test_auto_is_httpcore_where_a_process_prefers_it() -> None:
    assert preferred_transport() == "httpcore"  # the root conftest's choice, as the CLI's
    assert resolve_transport("auto") == "httpcore"
    assert resolve_transport("httpcore") == "httpcore"


def test_auto_is_aiohttp_for_a_library_user_and_httpcore_in_the_command_line() -> None:
    """A fresh process (a library user's) prefers aiohttp; ``harness_core.cli.main`` (the console
    script) prefers httpcore before any subcommand runs."""
    code = (
        "import contextlib\n"
        "from harness_core.http import preferred_transport\n"
        "from harness_core.cli import main\n"
        "print(preferred_transport())\n"
        "with contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "print(preferred_transport())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    lines = done.stdout.strip().splitlines()
    assert (lines[0], lines[-1]) == ("aiohttp", "httpcore")


@pytest.mark.usefixtures("aiohttp_preferred")
async def test_auto_follows_the_preference_on_asyncio_only(anyio_backend: str) -> None:
    expected = "aiohttp" if anyio_backend == "asyncio" else "httpcore"
    assert resolve_transport("auto") == expected


@pytest.mark.usefixtures("aiohttp_preferred", "no_httpx_aiohttp")
def test_auto_without_httpx_aiohttp_is_httpcore() -> None:
    assert resolve_transport("auto") == "httpcore"


def test_aiohttp_outside_an_event_loop_is_accepted() -> None:
    assert resolve_transport("aiohttp") == "aiohttp"


async def test_aiohttp_is_refused_on_trio_naming_the_loop(anyio_backend: str) -> None:
    if anyio_backend == "asyncio":
        assert resolve_transport("aiohttp") == "aiohttp"
        return
    with pytest.raises(LlmError) as caught:
        resolve_transport("aiohttp", provider="openai")
    assert (caught.value.code, caught.value.provider) == ("CONFIG", "openai")
    assert "asyncio only, not trio" in str(caught.value)


@pytest.mark.usefixtures("no_httpx_aiohttp")
def test_aiohttp_without_httpx_aiohttp_says_what_to_install() -> None:
    with pytest.raises(LlmError) as caught:
        resolve_transport("aiohttp", provider="openai")
    assert caught.value.code == "CONFIG"
    assert "pip install 'harness-core[aiohttp]'" in str(caught.value)


def test_an_unknown_transport_is_config() -> None:
    with pytest.raises(LlmError) as caught:
        make_client(base_url="http://127.0.0.1:9", backend="h2", provider="acme")
    assert caught.value.code == "CONFIG"
    assert "transport: expected one of auto, httpcore, aiohttp, got 'h2'" in str(caught.value)


def test_prefer_transport_refuses_other_names() -> None:
    with pytest.raises(ValueError, match="not 'auto'"):
        prefer_transport("auto")  # type: ignore[arg-type]


def test_make_transport() -> None:
    limits = httpx.Limits(max_connections=7)
    assert make_transport("httpcore", limits=limits) is None
    transport = make_transport("aiohttp", limits=limits)
    assert isinstance(transport, AiohttpTransport)
    assert transport.limits.max_connections == 7


# ----------------------------------------------------------------------------- on the wire (asyncio)

BODY = "data: café\n\ndata: 😀\n\n".encode()


ON_ASYNCIO = pytest.mark.parametrize("anyio_backend", ["asyncio"])


async def _events(server: ScriptedServer, **client: object) -> list[str]:
    async with make_client(base_url=server.url, backend="aiohttp", **client) as http:  # type: ignore[arg-type]
        request = http.build_request("POST", "/v1/x", content=b"{}")
        async with open_sse_stream(http, request, provider="acme") as events:
            return [event.data async for event in events]


@ON_ASYNCIO
@pytest.mark.parametrize("split", range(1, len(BODY)))
async def test_an_sse_body_over_aiohttp_at_every_split(split: int) -> None:
    with ScriptedServer(Reply(reads=[BODY[:split], BODY[split:]])) as server:
        assert await _events(server) == ["café", "😀"]


async def _first_events(http: httpx.AsyncClient) -> tuple[str, bool]:
    """The first event of one stream, closed right after it, and whether the transport said the
    whole body had arrived when it was closed."""
    request = http.build_request("POST", "/v1/x", content=b"{}")
    async with open_sse_stream(http, request, provider="acme") as events:
        first = await events.__anext__()
        assert events.response is not None
        return first.data, body_received(events.response)


@ON_ASYNCIO
async def test_a_stream_closed_early_after_its_whole_body_arrived_keeps_its_connection() -> None:
    """The consumer stops at the first event (as an adapter stops at ``[DONE]``); the body had
    arrived whole (one write with its Content-Length), so closing reads only buffered bytes and the
    connection goes back to the pool: the second stream is served on the same connection."""
    whole = Reply(reads=[BODY], chunked=False)
    with ScriptedServer(whole, whole) as server:
        async with make_client(base_url=server.url, backend="aiohttp") as http:
            assert await _first_events(http) == ("café", True)
            assert await _first_events(http) == ("café", True)
        assert server.connections_opened == 1


@ON_ASYNCIO
async def test_a_stream_closed_before_its_body_arrived_is_cut_without_waiting() -> None:
    """The rest of the body never comes (the upstream stalls): the transport says so, and closing
    cancels the pending read instead of waiting for it, and drops the connection."""
    with ScriptedServer(Reply(reads=[b"data: a\n\n"], end="stall")) as server:
        async with make_client(base_url=server.url, backend="aiohttp") as http:
            assert await _first_events(http) == ("a", False)
        assert server.wait_idle()


@ON_ASYNCIO
async def test_a_truncated_body_over_aiohttp_is_network() -> None:
    with ScriptedServer(Reply(reads=[b"data: a\n\n"], end="abrupt")) as server, pytest.raises(LlmError) as caught:
        await _events(server)
    assert (caught.value.code, caught.value.provider) == ("NETWORK", "acme")


@ON_ASYNCIO
async def test_a_refused_connection_over_aiohttp_is_network() -> None:
    with refusing_url() as url:
        async with make_client(base_url=url, backend="aiohttp") as http:
            request = http.build_request("POST", "/v1/x", content=b"{}")
            with pytest.raises(LlmError) as caught:
                async with open_sse_stream(http, request, provider="acme"):
                    pass  # pragma: no cover - the connection is refused
    assert caught.value.code == "NETWORK"


@ON_ASYNCIO
async def test_a_read_timeout_over_aiohttp_is_timeout() -> None:
    with ScriptedServer(Reply(reads=[b"data: a\n\n"], end="stall")) as server, pytest.raises(LlmError) as caught:
        await _events(server, read_timeout=0.05)
    assert caught.value.code == "TIMEOUT"


def _request() -> httpx.Request:
    return httpx.Request("POST", "http://127.0.0.1:9/v1/x")


@pytest.mark.parametrize(
    ("fault", "mapped"),
    [
        (aiohttp.ConnectionTimeoutError("connect"), httpx.ConnectTimeout),
        (aiohttp.SocketTimeoutError(), httpx.ReadTimeout),
        (TimeoutError(), httpx.ReadTimeout),
        (aiohttp.ServerDisconnectedError(), httpx.RemoteProtocolError),
        (aiohttp.ClientPayloadError("cut"), httpx.RemoteProtocolError),
        (aiohttp.ClientOSError(104, "reset"), httpx.ReadError),
        (OSError("gone"), httpx.ReadError),
        (aiohttp.InvalidURL("ftp://h"), httpx.UnsupportedProtocol),
    ],
)
def test_aiohttp_faults_map_like_httpcore(fault: BaseException, mapped: type[httpx.HTTPError]) -> None:
    exc = map_exception(fault, _request())
    assert type(exc) is mapped
    assert str(exc)  # never empty: it becomes the LlmError's message
    assert error_from_exception(exc).code in {"TIMEOUT", "NETWORK", "PROTOCOL", "CONFIG"}


def test_other_exceptions_are_not_transport_faults() -> None:
    assert map_exception(ValueError("bug"), _request()) is None


def test_an_exception_that_is_no_transport_fault_passes_unchanged() -> None:
    bug = ValueError("a bug")
    with pytest.raises(ValueError, match="a bug") as caught:
        _reraise(bug, _request())
    assert caught.value is bug


def test_a_transport_fault_is_raised_mapped_and_chained() -> None:
    fault = aiohttp.ServerDisconnectedError()
    with pytest.raises(httpx.RemoteProtocolError) as caught:
        _reraise(fault, _request())
    assert caught.value.__cause__ is fault


async def test_an_explicit_transport_wins_over_the_backend() -> None:
    mock = httpx.MockTransport(lambda request: httpx.Response(204))
    async with make_client(base_url="http://acme.test", transport=mock, backend="aiohttp") as http:
        assert (await http.get("/x")).status_code == 204


# ----------------------------------------------------------------------------- the request as sent

SENT_HEADERS = [(b"x-note", "café ☕".encode()), (b"x-tag", b"a"), (b"x-tag", b"b"), (b"x-plain", b"ascii")]


async def _sent(backend: str, server: ScriptedServer, **request: object) -> httpx.Response:
    async with make_client(base_url=server.url, backend=backend) as http:
        built = http.build_request("POST", "/v1/x", **request)  # type: ignore[arg-type]
        response = await http.send(built)
        await response.aread()
        return response


async def _heads(*backends: str, content: bytes, headers: list[tuple[bytes, bytes]]) -> list[bytes]:
    """The request head (request line and header lines, as bytes) each backend sends for one
    ``POST`` with ``headers``, read by a local server that answers ``204``."""
    heads: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(await reader.readuntil(b"\r\n\r\n"))
        await reader.readexactly(len(content))
        writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    async with server:
        for backend in backends:
            async with make_client(base_url=url, backend=backend) as http:
                response = await http.post("/v1/x", content=content, headers=headers)
                assert response.status_code == 204
    return heads


@ON_ASYNCIO
@pytest.mark.parametrize(("content", "content_type"), [(b"", None), (b"{}", None), (b"{}", b"application/json")])
async def test_the_request_head_is_the_one_httpcore_sends(content: bytes, content_type: bytes | None) -> None:
    """Byte for byte: header names in their case, UTF-8 values as given, a repeated header on two
    lines, no header aiohttp would add (its ``Content-Type: application/octet-stream``)."""
    headers = SENT_HEADERS + ([(b"Content-Type", content_type)] if content_type else [])
    over_httpcore, over_aiohttp = await _heads("httpcore", "aiohttp", content=content, headers=headers)
    assert over_aiohttp == over_httpcore
    lines = over_aiohttp.split(b"\r\n")
    assert [line for line in lines if line.startswith(b"x-tag")] == [b"x-tag: a", b"x-tag: b"]
    assert "x-note: café ☕".encode() in lines
    assert f"Content-Length: {len(content)}".encode() in lines
    assert [line for line in lines if line.lower().startswith(b"content-type")] == (
        [b"Content-Type: " + content_type] if content_type else []
    )


def test_aiohttp_headers_keep_every_line_in_order() -> None:
    headers = aiohttp_headers(httpx.Headers([(b"X-Tag", b"a"), (b"Other", b"1"), (b"x-tag", b"b")]))
    assert list(headers.items()) == [("X-Tag", "a"), ("Other", "1"), ("x-tag", "b")]
    assert headers.getall("x-tag") == ["a", "b"]


def test_aiohttp_headers_not_utf8_are_decoded_as_httpx_decodes_them() -> None:
    raw = httpx.Headers([(b"x-name", b"caf\xe9"), (b"x-utf8", "é".encode())])
    headers = aiohttp_headers(raw)
    assert raw.encoding == "iso-8859-1"
    assert dict(headers.items()) == dict(raw.items()) == {"x-name": "café", "x-utf8": "Ã©"}


@ON_ASYNCIO
async def test_a_streamed_request_body_is_sent_chunked() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b'{"a":'
        yield b"1}"

    with ScriptedServer(Reply.json(200, {})) as server:
        await _sent("aiohttp", server, content=body())
    received = server.requests[-1]
    assert received.body == b'{"a":1}'
    assert received.headers["transfer-encoding"] == "chunked"  # once: httpx's own header is not sent twice
    assert "content-length" not in received.headers


@ON_ASYNCIO
async def test_an_empty_request_body_is_sent_with_a_zero_length() -> None:
    with ScriptedServer(Reply.json(200, {})) as server:
        await _sent("aiohttp", server, content=b"")
    received = server.requests[-1]
    assert (received.body, received.headers["content-length"]) == (b"", "0")
    assert "transfer-encoding" not in received.headers


@ON_ASYNCIO
async def test_the_response_keeps_its_raw_headers_status_and_reason() -> None:
    headers = [("x-tag", "a"), ("x-tag", "b"), ("x-note", "café")]
    reply = Reply(status=201, headers=headers, reads=[b"ok"], chunked=False)
    with ScriptedServer(reply) as server:
        response = await _sent("aiohttp", server, content=b"{}")
    assert (response.status_code, response.reason_phrase, response.http_version) == (201, "Created", "HTTP/1.1")
    assert response.headers.get_list("x-tag") == ["a", "b"]
    assert (b"x-note", b"caf\xe9") in response.headers.raw  # as received, not re-encoded
    assert response.content == b"ok"


@ON_ASYNCIO
async def test_a_status_line_without_a_reason_gets_httpxs_phrase() -> None:
    with ScriptedServer(Reply(raw=b"HTTP/1.1 204\r\ncontent-length: 0\r\n\r\n")) as server:
        response = await _sent("aiohttp", server, content=b"{}")
    assert (response.status_code, response.reason_phrase, response.content) == (204, "No Content", b"")


async def _through_proxy(proxy_url: str, *, aiohttp_transport: bool) -> None:
    if aiohttp_transport:
        http = httpx.AsyncClient(transport=AiohttpTransport(proxy=httpx.Proxy(proxy_url)))
    else:
        http = httpx.AsyncClient(proxy=proxy_url, trust_env=False)
    async with http:
        response = await http.post("http://upstream.test/v1/x", content=b"{}")
    assert response.status_code == 200


@ON_ASYNCIO
@pytest.mark.parametrize("credentials", ["j%C3%BCrgen:p%C3%A4ss%40word@", ""])
async def test_a_proxy_gets_the_absolute_url_and_its_credentials_as_over_httpcore(credentials: str) -> None:
    ok = Reply.json(200, {})
    with ScriptedServer(ok, ok) as proxy:
        proxy_url = proxy.url.replace("http://", f"http://{credentials}")
        await _through_proxy(proxy_url, aiohttp_transport=False)
        await _through_proxy(proxy_url, aiohttp_transport=True)
    over_httpcore, over_aiohttp = proxy.requests
    assert over_aiohttp.path == over_httpcore.path == "http://upstream.test/v1/x"
    assert over_aiohttp.headers["host"] == "upstream.test"
    sent = over_aiohttp.headers.get("proxy-authorization")
    assert sent == over_httpcore.headers.get("proxy-authorization")
    assert sent == ("Basic " + base64.b64encode("jürgen:päss@word".encode()).decode() if credentials else None)


@ON_ASYNCIO
async def test_the_environments_proxy_is_used_as_over_httpcore(monkeypatch: pytest.MonkeyPatch) -> None:
    """``HTTP_PROXY`` (read when the transport is made) carries a request over aiohttp as httpx's
    own transport carries it (the default transport ignored it: a provider behind a proxy was
    unreachable), remembered per origin; ``trust_env=False`` ignores it."""
    ok = Reply.json(200, {})
    with ScriptedServer(ok, ok, ok) as proxy:
        for name in ("HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "https_proxy", "all_proxy", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("http_proxy", proxy.url)
        monkeypatch.delenv("HTTP_PROXY", raising=False)
        async with httpx.AsyncClient(trust_env=True) as over_httpcore:
            assert (await over_httpcore.post("http://upstream.test/v1/x", content=b"{}")).status_code == 200
        transport = AiohttpTransport()
        async with httpx.AsyncClient(transport=transport) as over_aiohttp:
            for _ in range(2):  # the second from what was remembered
                assert (await over_aiohttp.post("http://upstream.test/v1/x", content=b"{}")).status_code == 200
        async with httpx.AsyncClient(transport=AiohttpTransport(trust_env=False)) as ignoring:
            with pytest.raises(httpx.ConnectError):  # straight to upstream.test, which does not resolve
                await ignoring.post("http://upstream.test/v1/x", content=b"{}")
    assert [r.path for r in proxy.requests] == ["http://upstream.test/v1/x"] * 3
    assert [r.headers["host"] for r in proxy.requests] == ["upstream.test"] * 3


@ON_ASYNCIO
async def test_no_proxy_sends_its_hosts_direct(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host ``NO_PROXY`` names goes direct over aiohttp, as over httpcore: the proxy (a port that
    refuses) is never tried for it."""
    with refusing_url() as dead, ScriptedServer(Reply.json(200, {}), Reply.json(200, {})) as upstream:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "NO_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("http_proxy", dead)
        monkeypatch.setenv("no_proxy", "localhost,127.0.0.1")
        async with httpx.AsyncClient(trust_env=True) as over_httpcore:
            assert (await over_httpcore.post(upstream.url + "/v1/x", content=b"{}")).status_code == 200
        async with httpx.AsyncClient(transport=AiohttpTransport()) as over_aiohttp:
            assert (await over_aiohttp.post(upstream.url + "/v1/x", content=b"{}")).status_code == 200
    assert [r.path for r in upstream.requests] == ["/v1/x", "/v1/x"]


def test_one_client_timeout_per_distinct_timeouts() -> None:
    timeout = client_timeout(1.0, 2.0, 3.0)
    assert (timeout.sock_connect, timeout.sock_read, timeout.connect, timeout.total) == (1.0, 2.0, 3.0, None)
    assert client_timeout(1.0, 2.0, 3.0) is timeout
    assert client_timeout(1.0, 2.0, None) is not timeout


@ON_ASYNCIO
async def test_a_pool_timeout_over_aiohttp_is_connect_timeout_naming_the_limit() -> None:
    """The one connection is held by a stalled stream: the second request waits for a free one
    (``pool``: aiohttp's ``connect``) and times out as aiohttp reports it."""
    with ScriptedServer(Reply(reads=[b"data: a\n\n"], end="stall")) as server:
        async with make_client(base_url=server.url, backend="aiohttp", max_connections=1, pool_timeout=0.05) as http:
            held = await http.send(http.build_request("POST", "/v1/x", content=b"{}"), stream=True)
            with pytest.raises(httpx.TimeoutException) as caught:
                await http.post("/v1/x", content=b"{}")
            await held.aclose()
    assert error_from_exception(caught.value).code == "TIMEOUT"


@contextlib.contextmanager
def refusing_url() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` where nothing listens, while the block runs: the port is bound,
    never listened on, so a connection is refused and no other test's server (a parallel worker's)
    can take the port meanwhile, as it could a closed server's."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        holder.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{holder.getsockname()[1]}"
    finally:
        holder.close()
