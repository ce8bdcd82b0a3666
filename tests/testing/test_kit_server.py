"""ScriptedServer: framing, scripting, recording, shutdown; from asyncio, trio, threads, subprocesses."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading

import anyio
import httpx
import pytest

from harness_core.testing.server import RecordedRequest, Reply, ScriptedServer


@pytest.mark.anyio
async def test_each_read_arrives_as_its_own_piece() -> None:
    reads = [b"data: a", b"\n", b"\n", b"data: \xc3", b"\xa9\n\n"]
    with ScriptedServer(Reply(reads=reads, delay=0.001)) as server:
        async with (
            httpx.AsyncClient() as client,
            client.stream("POST", server.url + "/v1/x", content=b"hi") as response,
        ):
            assert response.status_code == 200
            assert response.headers["content-type"] == "text/event-stream"
            assert response.headers["transfer-encoding"] == "chunked"
            assert [piece async for piece in response.aiter_raw()] == reads
    assert server.requests == [
        RecordedRequest("POST", "/v1/x", server.requests[0].headers, b"hi"),
    ]
    assert server.requests[0].headers["content-length"] == "2"


@pytest.mark.anyio
async def test_pauses_content_length_and_custom_headers() -> None:
    reply = Reply(
        status=201,
        headers=[("Content-Type", "application/json"), ("x-a", "1"), ("x-a", "2")],
        reads=[b'{"a"', 0.01, b": 1}"],
        chunked=False,
    )
    with ScriptedServer(reply) as server:
        async with httpx.AsyncClient() as client:
            response = await client.get(server.url + "/p?q=1")
    assert (response.status_code, response.json()) == (201, {"a": 1})
    assert response.headers.get_list("x-a") == ["1", "2"]
    assert response.headers["content-length"] == "8"
    assert server.requests[0].method == "GET"
    assert server.requests[0].path == "/p?q=1"


def test_reply_json_and_unknown_status_phrase() -> None:
    with ScriptedServer(Reply.json(499, {"error": "x"}, headers={"x-request-id": "r"})) as server:
        response = httpx.post(server.url, json={"k": [1]})
    assert (response.status_code, response.reason_phrase, response.json()) == (499, "Unknown", {"error": "x"})
    assert response.headers["x-request-id"] == "r"
    assert server.requests[0].json() == {"k": [1]}


def test_routes_take_precedence_and_are_not_consumed() -> None:
    models = Reply.json(200, {"data": [{"id": "m"}]})
    with ScriptedServer(Reply(reads=[b"data: q\n\n"]), routes={("GET", "/v1/models"): models}) as server:
        server.route("get", "/v1/other", Reply.json(200, {"other": True}))
        with httpx.Client(base_url=server.url) as client:
            assert client.get("/v1/models?x=1").json() == {"data": [{"id": "m"}]}
            assert client.get("/v1/models").json() == {"data": [{"id": "m"}]}
            assert client.get("/v1/other").json() == {"other": True}
            assert server.pending == 1
            assert client.post("/v1/chat").text == "data: q\n\n"
            assert server.pending == 0
            missing = client.post("/v1/chat")
    assert missing.status_code == 500
    assert "no scripted response left for POST /v1/chat" in missing.text
    assert "pending=0" in repr(server)


def test_chunked_request_bodies_are_recorded() -> None:
    def body() -> object:
        yield b"ab"
        yield b"cd"

    with ScriptedServer(Reply(reads=[b"ok"])) as server, httpx.Client() as client:
        client.post(server.url, content=body())  # type: ignore[arg-type]
    assert server.requests[0].body == b"abcd"
    assert server.requests[0].headers["transfer-encoding"] == "chunked"


def test_raw_response_is_written_verbatim() -> None:
    raw = b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nretry-after: 7\r\n\r\n{}"
    with ScriptedServer(Reply(raw=raw, reads=[b"ignored"])) as server:
        response = httpx.post(server.url)
    assert (response.status_code, response.headers["retry-after"], response.content) == (429, "7", b"{}")


@pytest.mark.parametrize(("end", "error"), [("abrupt", httpx.RemoteProtocolError), ("reset", httpx.ReadError)])
def test_abrupt_and_reset_endings(end: str, error: type[Exception]) -> None:
    with ScriptedServer(Reply(reads=[b"data: a\n\n"], end=end)) as server, pytest.raises(error):  # type: ignore[arg-type]
        httpx.post(server.url)


def test_abrupt_with_content_length() -> None:
    with (
        ScriptedServer(
            Reply(headers={"content-length": "100"}, reads=[b"part"], chunked=False, end="abrupt")
        ) as server,
        pytest.raises(httpx.RemoteProtocolError),
    ):
        httpx.post(server.url)  # 4 of the 100 declared bytes, then the connection closes


@pytest.mark.anyio
async def test_stall_holds_until_the_client_leaves() -> None:
    with ScriptedServer(Reply(reads=[b"data: a\n\n"], end="stall")) as server:
        async with httpx.AsyncClient() as client:
            with anyio.move_on_after(0.2) as scope:
                async with client.stream("POST", server.url) as response:
                    async for _ in response.aiter_raw():
                        pass
            assert scope.cancelled_caught
        assert server.wait_idle()
        assert server.open_connections == 0
        assert server.connections_opened == 1


def test_stop_releases_stalled_and_delayed_connections() -> None:
    server = ScriptedServer(
        Reply(reads=[b"x"], end="stall"),
        Reply(headers={"content-length": "9"}, reads=[b"y"], delay=60, chunked=False),
        Reply(head_delay=60),
    ).start()
    socks = []
    for _ in range(3):
        sock = socket.create_connection(("127.0.0.1", int(server.url.rsplit(":", 1)[1])))
        sock.sendall(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
        socks.append(sock)
    socks[0].recv(1000)
    assert not server.wait_idle(timeout=0.05)
    server.stop()  # returns: every thread joined
    server.stop()  # idempotent
    for sock in socks:
        sock.close()
    assert server.open_connections == 0
    assert not any(t.name.startswith("ScriptedServer") for t in threading.enumerate())


def test_client_that_stops_reading_does_not_block_stop() -> None:
    server = ScriptedServer(Reply(reads=[b"z" * 65536] * 200)).start()
    sock = socket.create_connection(("127.0.0.1", int(server.url.rsplit(":", 1)[1])))
    sock.sendall(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
    sock.recv(10)
    server.stop()
    sock.close()


def test_garbage_and_oversized_requests_close_the_connection() -> None:
    with ScriptedServer() as server:
        port = int(server.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"X" * 70_000)
            assert sock.recv(10) == b""
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"POST / HTTP/1.1\r\ncontent-length: 10\r\n\r\nabc")
            sock.shutdown(socket.SHUT_WR)  # EOF before the whole body
            assert sock.recv(10) == b""
        assert server.wait_idle()
    assert server.requests == []


def test_invalid_replies_and_double_start() -> None:
    with pytest.raises(ValueError, match="unknown end"):
        Reply(end="later")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty read"):
        Reply(reads=[b"a", b""])
    server = ScriptedServer().start()
    with pytest.raises(RuntimeError, match="already started"):
        server.start()
    server.stop()
    ScriptedServer().stop()  # never started: nothing to do


def test_usable_from_a_subprocess() -> None:
    with ScriptedServer(Reply(reads=[b"data: ", b"sub\n\n"])) as server:
        code = f"import httpx; print(httpx.post({server.url!r}).text, end='')"
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout == "data: sub\n\n"


@pytest.mark.anyio
async def test_add_from_the_event_loop_and_header_pairs() -> None:
    assert Reply().header_pairs() == [("content-type", "text/event-stream")]
    with ScriptedServer() as server:
        server.add(Reply(reads=[b"1"]), Reply(reads=[b"2"]))
        async with httpx.AsyncClient(base_url=server.url) as client:
            assert [(await client.post("/")).text for _ in range(2)] == ["1", "2"]


def test_raw_socket_trailers_and_chatter_during_a_stall() -> None:
    with ScriptedServer(Reply(reads=[b"ok"], end="stall")) as server:
        port = int(server.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(
                b"POST /t HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\nx-trailer: 1\r\n\r\n"
            )
            received = b""
            while b"2\r\nok\r\n" not in received:
                received += sock.recv(1000)
            sock.sendall(b"still here")  # the stalled server keeps holding
            assert not server.wait_idle(timeout=0.05)
        assert server.wait_idle()
    assert server.requests[0].body == b"abc"
