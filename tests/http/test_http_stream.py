"""``open_sse_stream`` against a scripted server, on asyncio and trio."""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import zlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from harness_core.abort import AbortSignal
from harness_core.errors import LlmError
from harness_core.http import ErrorDetails, make_client, open_sse_stream
from harness_core.sse import SSEEvent
from harness_core.testing.server import Reply, ScriptedServer

pytestmark = pytest.mark.anyio

CASES = Path(__file__).resolve().parents[3] / "shared" / "cases"


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
async def client(server: ScriptedServer) -> AsyncIterator[httpx.AsyncClient]:
    async with make_client(base_url=server.url, read_timeout=30.0) as c:
        yield c


def post(client: httpx.AsyncClient) -> httpx.Request:
    return client.build_request("POST", "/chat", json={"stream": True})


async def collect(client: httpx.AsyncClient, **kwargs: object) -> list[SSEEvent]:
    async with open_sse_stream(client, post(client), **kwargs) as events:  # type: ignore[arg-type]
        return [event async for event in events]


async def test_happy_path_yields_events_and_reuses_the_connection(
    server: ScriptedServer, client: httpx.AsyncClient
) -> None:
    reads = [b"data: a", b"\n\n", b": keep-alive\n\nid: 3\ndata: b\n\ndata: [DONE]"]
    headers = {"content-type": "text/event-stream; charset=latin-1", "x-request-id": "req_1"}
    server.add(Reply(headers=headers, reads=reads), Reply(reads=[b"data: c\n\n"]))
    comments: list[str] = []
    async with open_sse_stream(client, post(client), on_comment=comments.append) as events:
        assert events.status_code == 200
        assert events.request_id == "req_1"
        assert events.headers["x-request-id"] == "req_1"
        got = [event async for event in events]
        assert not events.aborted
        assert [event async for event in events] == []  # exhausted stays exhausted
    assert got == [SSEEvent("a"), SSEEvent("b", id="3"), SSEEvent("[DONE]", id="3", incomplete=True)]
    assert comments == [" keep-alive"]
    assert await collect(client) == [SSEEvent("c")]
    assert server.connections_opened == 1  # the pool got the connection back both times
    assert server.requests[0].json() == {"stream": True}


async def test_utf8_split_across_chunks(server: ScriptedServer, client: httpx.AsyncClient) -> None:
    body = "data: é€😀\n\n".encode()
    server.add(Reply(reads=[body[i : i + 1] for i in range(len(body))]))
    assert await collect(client) == [SSEEvent("é€😀")]


STATUSES = [400, 401, 402, 403, 404, 408, 409, 413, 422, 429, 500, 502, 503, 504, 529]


@pytest.mark.parametrize("status", STATUSES)
async def test_every_error_status_maps_and_never_reaches_the_decoder(
    status: int, server: ScriptedServer, client: httpx.AsyncClient
) -> None:
    from harness_core.http import code_for_status

    body = {"error": {"message": f"failed {status}", "type": "some_type", "code": "some_code"}}
    server.add(Reply.json(status, body, headers={"retry-after": "2", "request-id": "rid"}))
    with pytest.raises(LlmError) as info:
        await collect(client)
    error = info.value
    assert (error.code, error.status, error.message) == (code_for_status(status), status, f"failed {status}")
    assert (error.retry_after, error.request_id, error.provider_type, error.provider_code) == (
        2.0,
        "rid",
        "some_type",
        "some_code",
    )


@pytest.mark.parametrize(
    ("reply", "code", "message"),
    [
        (
            Reply(status=502, headers={"content-type": "text/html"}, reads=[b"<html><title>Bad Gateway</title>"]),
            "SERVER",
            "Bad Gateway",
        ),
        (Reply(status=503, headers={"content-type": "text/plain"}), "OVERLOADED", "HTTP 503 Service Unavailable"),
        (Reply.json(400, [{"error": {"message": "wrapped"}}]), "BAD_REQUEST", "wrapped"),
        (Reply(status=500, reads=[b"\xff\xfe oops"], chunked=False), "SERVER", "\ufffd\ufffd oops"),
        # an SSE-looking error body is still an error body: never parsed as events
        (Reply(status=500, reads=[b"data: {}\n\n"]), "SERVER", "data: {}"),
    ],
)
async def test_error_bodies(
    reply: Reply, code: str, message: str, server: ScriptedServer, client: httpx.AsyncClient
) -> None:
    server.add(reply)
    with pytest.raises(LlmError) as info:
        await collect(client, provider="prov")
    assert (info.value.code, info.value.message, info.value.provider) == (code, message, "prov")


async def test_case_18_raw_429_with_retry_after(server: ScriptedServer, client: httpx.AsyncClient) -> None:
    raw = (CASES / "18-http429-retry-after" / "response.http").read_bytes()
    server.add(Reply(raw=raw))
    with pytest.raises(LlmError) as info:
        await collect(client)
    error = info.value
    assert (error.code, error.retryable, error.status, error.retry_after) == ("RATE_LIMITED", True, 429, 7.0)
    assert error.provider_type == "rate_limited"
    assert "Rate limit exceeded" in error.message


async def test_classifier_refines_http_errors(server: ScriptedServer, client: httpx.AsyncClient) -> None:
    def classify(status: int | None, body: object) -> ErrorDetails | None:
        return ErrorDetails(code="QUOTA") if status == 429 else None

    server.add(Reply.json(429, {"error": {"message": "quota", "type": "insufficient_quota"}}))
    with pytest.raises(LlmError) as info:
        await collect(client, classifier=classify)
    assert info.value.code == "QUOTA"


@pytest.mark.parametrize(
    ("headers", "mentions"),
    [({"content-type": "application/json"}, "application/json"), ({"content-type": ""}, "no content type")],
)
async def test_non_sse_2xx_is_protocol(
    headers: dict[str, str], mentions: str, server: ScriptedServer, client: httpx.AsyncClient
) -> None:
    server.add(Reply(headers=headers, reads=[b'{"choices": []}'], chunked=False))
    with pytest.raises(LlmError) as info:
        await collect(client)
    assert info.value.code == "PROTOCOL"
    assert mentions in info.value.message
    assert info.value.status == 200


async def test_non_sse_2xx_with_empty_body(server: ScriptedServer, client: httpx.AsyncClient) -> None:
    server.add(Reply(status=204, headers={"content-type": "application/json"}, chunked=False))
    with pytest.raises(LlmError) as info:
        await collect(client)
    assert info.value.message == "expected a text/event-stream response, got 'application/json'"


@pytest.mark.parametrize("end", ["abrupt", "reset"])
async def test_early_close_is_network(end: str, server: ScriptedServer, client: httpx.AsyncClient) -> None:
    server.add(Reply(reads=[b"data: a\n\n", b"data: b"], end=end))  # type: ignore[arg-type]
    got: list[SSEEvent] = []

    async def consume() -> None:
        async with open_sse_stream(client, post(client), provider="p") as events:
            async for event in events:
                got.append(event)

    with pytest.raises(LlmError) as info:
        await consume()
    assert info.value.code == "NETWORK"
    assert info.value.retryable
    assert info.value.provider == "p"
    assert got == [SSEEvent("a")]
    assert server.wait_idle()


async def test_connect_error_is_network() -> None:
    with refusing_url() as url:
        async with make_client(base_url=url) as client:
            with pytest.raises(LlmError) as info:
                await collect(client)
    assert info.value.code == "NETWORK"


async def test_read_timeout_is_timeout(server: ScriptedServer) -> None:
    server.add(Reply(reads=[b"data: a\n\n"], end="stall"))
    async with make_client(base_url=server.url, read_timeout=0.2) as client:
        with pytest.raises(LlmError) as info:
            await collect(client)
    assert info.value.code == "TIMEOUT"
    assert server.wait_idle()


async def test_corrupt_gzip_is_protocol(server: ScriptedServer, client: httpx.AsyncClient) -> None:
    server.add(Reply(headers={"content-encoding": "gzip"}, reads=[b"not gzip at all"]))
    with pytest.raises(LlmError) as info:
        await collect(client)
    assert info.value.code == "PROTOCOL"


def raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        ("gzip", gzip.compress(b"data: z\n\n", mtime=0)),
        ("x-gzip", gzip.compress(b"data: z\n\n", mtime=0)),
        ("deflate", zlib.compress(b"data: z\n\n")),
        ("deflate", raw_deflate(b"data: z\n\n")),
        ("gzip, deflate", zlib.compress(gzip.compress(b"data: z\n\n", mtime=0))),
        ("identity", b"data: z\n\n"),
    ],
)
async def test_compressed_bodies_are_decoded(
    encoding: str, body: bytes, server: ScriptedServer, client: httpx.AsyncClient
) -> None:
    pieces = [body[i : i + 3] for i in range(0, len(body), 3)]
    server.add(Reply(headers={"content-encoding": encoding}, reads=pieces))
    assert await collect(client) == [SSEEvent("z")]


async def test_corrupt_deflate_is_protocol(server: ScriptedServer, client: httpx.AsyncClient) -> None:
    server.add(Reply(headers={"content-encoding": "deflate"}, reads=[b"\xff\xff\xff\xff"]))
    with pytest.raises(LlmError) as info:
        await collect(client, provider="p")
    assert (info.value.code, info.value.provider) == ("PROTOCOL", "p")


async def test_unsupported_encoding_is_protocol(server: ScriptedServer, client: httpx.AsyncClient) -> None:
    server.add(Reply(headers={"content-encoding": "br"}, reads=[b"\x0b\x02"]))
    with pytest.raises(LlmError) as info:
        await collect(client, provider="p")
    assert (info.value.code, info.value.provider) == ("PROTOCOL", "p")
    assert "br" in info.value.message


@pytest.mark.parametrize(
    ("encoding", "body", "message"),
    [
        ("gzip", gzip.compress(b'{"error": {"message": "zipped"}}', mtime=0), "zipped"),
        ("br", b'{"error": {"message": "plain"}}', "plain"),  # undecodable: raw bytes kept
        ("gzip", b'{"error": {"message": "not really gzip"}}', "not really gzip"),
    ],
)
async def test_compressed_error_bodies(
    encoding: str, body: bytes, message: str, server: ScriptedServer, client: httpx.AsyncClient
) -> None:
    server.add(
        Reply(status=400, headers={"content-type": "application/json", "content-encoding": encoding}, reads=[body])
    )
    with pytest.raises(LlmError) as info:
        await collect(client)
    assert info.value.message == message


async def test_long_non_sse_body_is_cut(server: ScriptedServer, client: httpx.AsyncClient) -> None:
    server.add(Reply(headers={"content-type": "text/plain"}, reads=[b"y" * 1500, b"y" * 1500, b"y" * 1500]))
    with pytest.raises(LlmError) as info:
        await collect(client)
    assert info.value.message.endswith("y" * 199 + "…")


async def test_oversize_event_is_protocol_and_closes(server: ScriptedServer, client: httpx.AsyncClient) -> None:
    server.add(Reply(reads=[b"data: " + b"x" * 100, b"x" * 100], end="stall"))
    with pytest.raises(LlmError) as info:
        await collect(client, max_event_size=150, provider="p")
    assert (info.value.code, info.value.provider) == ("PROTOCOL", "p")
    assert server.wait_idle()


async def test_abort_before_send_makes_no_request(server: ScriptedServer, client: httpx.AsyncClient) -> None:
    abort = AbortSignal()
    abort.fire()
    async with open_sse_stream(client, post(client), abort=abort) as events:
        assert events.aborted
        assert events.response is None
        assert events.status_code is None
        assert events.request_id is None
        assert [event async for event in events] == []
    assert server.requests == []


async def test_abort_while_stalled_mid_stream(server: ScriptedServer, client: httpx.AsyncClient) -> None:
    server.add(Reply(reads=[b"data: a\n\n"], end="stall"))
    abort = AbortSignal()
    got: list[SSEEvent] = []
    delivered = anyio.Event()
    async with anyio.create_task_group() as tg, open_sse_stream(client, post(client), abort=abort) as events:
        tg.start_soon(fire_on, delivered, abort)  # runs once the next read waits on the stalled server
        async for event in events:
            got.append(event)
            delivered.set()
    assert events.aborted
    assert got == [SSEEvent("a")]
    assert server.wait_idle()  # the response was closed, the connection dropped


class Tap(httpx.AsyncBaseTransport):
    """The real HTTP transport, with two events telling a test how far the client got: ``sent``
    (a request went out) and ``reading`` (the client started reading a response body, so it
    holds the status and headers). Tests fire an abort or a cancellation on these events, never
    after a fixed wait."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.sent = anyio.Event()
        self.reading = anyio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.set()
        response = await self.inner.handle_async_request(request)
        body = _TappedBody(response.stream, self.reading)  # type: ignore[arg-type]
        return httpx.Response(
            response.status_code, headers=response.headers, stream=body, extensions=response.extensions
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class _TappedBody(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, reading: anyio.Event) -> None:
        self.inner = inner
        self.reading = reading

    async def __aiter__(self) -> AsyncIterator[bytes]:
        self.reading.set()
        async for chunk in self.inner:
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
async def tap(server: ScriptedServer) -> AsyncIterator[tuple[Tap, httpx.AsyncClient]]:
    transport = Tap()
    async with make_client(base_url=server.url, read_timeout=30.0, transport=transport) as c:
        yield transport, c


async def fire_on(event: anyio.Event, abort: AbortSignal) -> None:
    await event.wait()
    abort.fire()


async def test_abort_between_reads(server: ScriptedServer, client: httpx.AsyncClient) -> None:
    server.add(Reply(reads=[b"data: a\n\n", b"data: b\n\n"], end="stall"))
    abort = AbortSignal()
    async with open_sse_stream(client, post(client), abort=abort) as events:
        async for _ in events:
            abort.fire()  # the next read sees the signal before touching the network
        assert events.aborted
    assert server.wait_idle()


async def test_abort_while_waiting_for_headers(server: ScriptedServer, tap: tuple[Tap, httpx.AsyncClient]) -> None:
    transport, client = tap
    server.add(Reply(head_delay=300, reads=[b"data: a\n\n"]))  # the head never comes: stop() ends the wait
    abort = AbortSignal()
    async with anyio.create_task_group() as tg:
        tg.start_soon(fire_on, transport.sent, abort)
        async with open_sse_stream(client, post(client), abort=abort) as events:
            assert events.aborted
            assert events.response is None


@pytest.mark.parametrize("status", [200, 500])
async def test_abort_while_reading_an_error_or_non_sse_body(
    status: int, server: ScriptedServer, tap: tuple[Tap, httpx.AsyncClient]
) -> None:
    transport, client = tap
    server.add(Reply(status=status, headers={"content-type": "application/json"}, reads=[b"{"], end="stall"))
    abort = AbortSignal()
    async with anyio.create_task_group() as tg:
        tg.start_soon(fire_on, transport.reading, abort)  # the status is known; the body never ends
        async with open_sse_stream(client, post(client), abort=abort) as events:
            assert events.aborted
            assert events.status_code == status
            assert [event async for event in events] == []
    assert server.wait_idle()


async def test_error_body_cut_by_reset_still_maps_status(server: ScriptedServer, client: httpx.AsyncClient) -> None:
    server.add(Reply(status=500, reads=[b'{"error": {"mess'], end="reset"))
    with pytest.raises(LlmError) as info:
        await collect(client)
    assert (info.value.code, info.value.status) == ("SERVER", 500)


async def test_cancellation_closes_the_response(server: ScriptedServer, client: httpx.AsyncClient) -> None:
    server.add(Reply(reads=[b"data: a\n\n"], end="stall"))
    got: list[SSEEvent] = []
    with anyio.CancelScope() as scope:
        async with open_sse_stream(client, post(client)) as events:
            async for event in events:
                got.append(event)
                scope.cancel()
    assert scope.cancelled_caught
    assert got == [SSEEvent("a")]
    assert server.wait_idle()


async def test_timeout_cancellation_while_stalled(server: ScriptedServer, client: httpx.AsyncClient) -> None:
    server.add(Reply(end="stall"))
    with anyio.move_on_after(0.1) as scope:
        await collect(client)
    assert scope.cancelled_caught
    assert server.wait_idle()


async def test_early_break_closes_the_response(server: ScriptedServer, client: httpx.AsyncClient) -> None:
    """The response never completes (the server stalls after two events), so the connection can
    only end because the early break closed it: a body read to its end would go back to the
    pool instead, which a loaded machine made happen with a finite body."""
    server.add(Reply(reads=[b"data: 0\n\n", b"data: 1\n\n"], end="stall"))
    async with open_sse_stream(client, post(client)) as events:
        async for event in events:
            assert event.data == "0"
            break
    assert server.wait_idle()
    await events.aclose()  # idempotent


async def test_exception_in_consumer_closes_the_response(server: ScriptedServer, client: httpx.AsyncClient) -> None:
    server.add(Reply(reads=[b"data: {}\n\n"], end="stall"))

    async def consume() -> None:
        async with open_sse_stream(client, post(client)) as events:
            async for event in events:
                json.loads(event.data + "}")

    with pytest.raises(json.JSONDecodeError):
        await consume()
    assert server.wait_idle()


async def test_many_streams_leave_no_connection_checked_out(server: ScriptedServer) -> None:
    async with make_client(base_url=server.url, max_connections=1, pool_timeout=5.0) as client:
        for _ in range(20):
            server.add(Reply(reads=[b"data: a\n\n", b"data: b\n\n"], end="stall"))
            async with open_sse_stream(client, post(client)) as events:
                async for _event in events:
                    break
    assert server.wait_idle()


async def test_cancellation_while_reading_an_error_body(
    server: ScriptedServer, tap: tuple[Tap, httpx.AsyncClient]
) -> None:
    transport, client = tap
    server.add(Reply(status=500, reads=[b"{"], end="stall"))
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def cancel_once_reading() -> None:
                await transport.reading.wait()  # the status is known; the body never ends
                scope.cancel()

            tg.start_soon(cancel_once_reading)
            await collect(client)
    assert scope.cancelled_caught
    assert server.wait_idle()


@pytest.mark.parametrize("end", ["eof", "stall"])
async def test_early_break_with_a_buffered_body_releases_the_pool_slot(server: ScriptedServer, end: str) -> None:
    async with make_client(base_url=server.url, max_connections=1, pool_timeout=5.0) as client:
        for _ in range(20):
            server.add(Reply(reads=[b"data: a\n\ndata: b\n\ndata: c\n\n"], end=end))  # type: ignore[arg-type]
            async with open_sse_stream(client, post(client)) as events:
                async for _event in events:
                    break
        server.add(Reply(reads=[b"data: last\n\n"]))
        assert await collect(client) == [SSEEvent("last")]  # the single pool slot is free


async def test_request_bodies_are_sent_whole_or_streamed(server: ScriptedServer, client: httpx.AsyncClient) -> None:
    server.add(Reply(reads=[b"data: a\n\n"]), Reply(reads=[b"data: b\n\n"]))
    assert [e.data for e in await collect(client)] == ["a"]

    async def pieces() -> AsyncIterator[bytes]:
        yield b'{"stream":'
        yield b" true}"

    streamed = client.build_request("POST", "/chat", content=pieces())
    async with open_sse_stream(client, streamed) as events:
        assert [e.data async for e in events] == ["b"]
    assert [r.body for r in server.requests] == [b'{"stream":true}', b'{"stream": true}']


async def test_the_in_memory_body_is_a_plain_async_iterator() -> None:
    from harness_core.http.stream import _BodyBytes

    iterator = aiter(_BodyBytes(b"body"))
    assert aiter(iterator) is iterator
    assert [chunk async for chunk in iterator] == [b"body"]


class _FiringRead:
    """A response body whose read is ended by the abort signal, as a shut-down socket ends it:
    the signal fires during the read, which then ends (``StopAsyncIteration``, a body without
    framing) or fails (``httpx.ReadError``, a body cut short)."""

    def __init__(self, abort: AbortSignal, ending: BaseException) -> None:
        self.abort = abort
        self.ending = ending

    def __aiter__(self) -> _FiringRead:
        return self

    async def __anext__(self) -> bytes:
        self.abort.fire()
        raise self.ending

    async def aclose(self) -> None:
        """Nothing to release."""


class _Socket:
    def __init__(self) -> None:
        self.shut: list[int] = []

    def shutdown(self, how: int) -> None:
        self.shut.append(how)


@pytest.mark.parametrize("ending", [StopAsyncIteration(), httpx.ReadError("connection shut down")])
async def test_a_read_ended_by_the_abort_ends_the_stream_as_aborted(
    ending: BaseException, client: httpx.AsyncClient
) -> None:
    abort = AbortSignal()
    events = open_sse_stream(client, post(client), abort=abort)
    events._raw = _FiringRead(abort, ending)
    events._socket = _Socket()
    with pytest.raises(StopAsyncIteration):
        await events.__anext__()
    assert events.aborted
    await events.aclose()


async def test_an_abort_fired_before_the_body_is_watched_ends_the_stream_at_once(client: httpx.AsyncClient) -> None:
    abort = AbortSignal()
    abort.fire()
    sock = _Socket()

    class Network:
        def get_extra_info(self, info: str) -> object:
            return sock if info == "socket" else None

    events = open_sse_stream(client, post(client), abort=abort)
    events._watch(abort, httpx.Response(200, extensions={"network_stream": Network()}))
    assert events.aborted
    assert events._socket is None  # nothing to shut down later
    events._shut_down()  # a late callback does nothing
    assert sock.shut == []


async def test_the_abort_shuts_the_socket_down_once_and_never_after_the_stream_ended(
    server: ScriptedServer, client: httpx.AsyncClient
) -> None:
    server.add(Reply(reads=[b"data: a\n\n"], end="stall"))
    abort = AbortSignal()
    async with open_sse_stream(client, post(client), abort=abort) as events:
        assert events._socket is not None  # a real connection: aborted by shutting its socket down
        assert [event async for event in _first(events)] == [SSEEvent("a")]
    events._shut_down()  # the stream is over: a late abort leaves the (released) socket alone
    assert not abort.fired


async def _first(events: AsyncIterator[SSEEvent]) -> AsyncIterator[SSEEvent]:
    async for event in events:
        yield event
        return


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
