"""Chaos: an upstream that hangs, resets and sends garbage, before and in the middle of its stream,
under 100 concurrent streaming clients in both dialects (docs/chaos.md).

The upstream is a raw asyncio server on 127.0.0.1 speaking just enough of OpenAI's Chat
Completions stream; the user's prompt names how each reply misbehaves. The gateway's provider
entry has a 1 s read timeout and a 0.25 s keep-alive, so a hung upstream is a stream with
keep-alives flowing that the read timeout must end. Every client must get a well-formed terminal:
a shaped error status, or a 200 stream whose last event is the dialect's end (``[DONE]`` after a
finish or an error chunk; ``message_stop`` or ``event: error``).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from chaos_helpers import record_figures
from gw_helpers import gateway_yaml, ledger_rows, serve_gateway, wait_until

pytestmark = pytest.mark.chaos

CLIENTS = 100
MODES = ("ok", "hang-head", "hang-mid", "reset-mid", "garbage-mid", "garbage-head")
"""How a reply misbehaves: ``ok`` streams a whole answer; ``hang-head`` reads the request and
never answers; ``hang-mid`` sends one chunk and goes silent; ``reset-mid`` sends one chunk and
resets the connection (RST); ``garbage-mid`` sends one chunk then a data line that is not JSON;
``garbage-head`` answers bytes that are not HTTP."""


def _chunk(content: str | None, finish: str | None = None) -> bytes:
    delta = {"role": "assistant", "content": content} if content is not None else {}
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    data = {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}
    return b"data: " + json.dumps(data).encode() + b"\n\n"


_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"


class ChaosUpstream:
    """The misbehaving upstream, served by an event loop in its own thread: ``url``, ``modes``
    (a Counter of the replies given) and ``open`` (connections not yet closed by either side)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.modes: Counter[str] = Counter()
        self.open = 0
        self.url = ""

    def __enter__(self) -> ChaosUpstream:
        self.thread.start()
        started = asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=1024)
        self.server = asyncio.run_coroutine_threadsafe(started, self.loop).result(30)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        async def close() -> None:
            self.server.close()
            await self.server.wait_closed()

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
            assert length is not None, head
            body = await reader.readexactly(int(length.group(1)))
            mode = next(m for m in MODES if f"chaos:{m}".encode() in body)
            self.modes[mode] += 1
            await self._reply(mode, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the gateway went away first: that is what a hung reply waits for
        finally:
            self.open -= 1
            writer.close()

    async def _reply(self, mode: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if mode == "garbage-head":
            writer.write(b"\x00\xff banana \xfe\r\n\r\n")
            await writer.drain()
            return
        if mode == "hang-head":
            await reader.read()  # until the gateway closes its end
            return
        writer.write(_HEAD + _chunk("one "))
        await writer.drain()
        if mode == "ok":
            writer.write(_chunk("two") + _chunk(None, "stop") + b"data: [DONE]\n\n")
        elif mode == "hang-mid":
            await reader.read()
        elif mode == "reset-mid":
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST
        else:  # garbage-mid
            writer.write(b"data: {this is not json\n\n")
        await writer.drain()


def _verdict(dialect: str, status: int, body: bytes) -> str:
    """How a client's answer ended, or an assertion error naming what is malformed."""
    if status != 200:
        error = json.loads(body)["error"]  # a shaped error body in both dialects
        assert error["message"], body
        if dialect == "anthropic":
            assert json.loads(body)["type"] == "error", body
        return f"status {status}"
    text = body.decode()
    if dialect == "openai":
        events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
        if events[-1] != "[DONE]":  # an in-stream error is the last event: no [DONE] after it
            last = json.loads(events[-1])
            assert last["error"]["message"], text[-300:]
            return "stream error event"
        assert all("error" not in json.loads(e) for e in events[:-1]), text[-300:]
        assert any(json.loads(e)["choices"] and json.loads(e)["choices"][0]["finish_reason"] for e in events[:-1])
        return "complete"
    names = re.findall(r"^event: (\S+)$", text, re.M)
    assert names[-1] in ("message_stop", "error"), text[-300:]
    return "complete" if names[-1] == "message_stop" else "stream error event"


async def _client(http: httpx.AsyncClient, url: str, number: int) -> tuple[str, str, str, float]:
    mode = MODES[number % len(MODES)]
    dialect = "openai" if (number // len(MODES)) % 2 == 0 else "anthropic"  # every mode in both dialects
    messages = [{"role": "user", "content": f"chaos:{mode} #{number}"}]
    if dialect == "openai":
        path, request = "/v1/chat/completions", {"model": "up/m", "messages": messages, "stream": True}
    else:
        path, request = "/v1/messages", {"model": "up/m", "max_tokens": 64, "messages": messages, "stream": True}
    began = time.monotonic()
    async with http.stream("POST", url + path, json=request) as response:
        body = await response.aread()
    return mode, dialect, _verdict(dialect, response.status_code, body), time.monotonic() - began


async def _burst(url: str) -> list[tuple[str, str, str, float]]:
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    # a client that waits 30 s for one read has hung (the provider's read timeout is 1 s)
    async with httpx.AsyncClient(timeout=30, limits=limits) as http:
        return list(await asyncio.gather(*(_client(http, url, n) for n in range(CLIENTS))))


@pytest.fixture
def upstream() -> Iterator[ChaosUpstream]:
    with ChaosUpstream() as server:
        yield server


def test_hung_reset_and_garbage_upstreams_end_every_client_well(tmp_path: Path, upstream: ChaosUpstream) -> None:
    db = tmp_path / "gw.sqlite"
    extra = (
        f"  openai:up: {{base_url: '{upstream.url}/v1', api_key: dummy-key, routes: [up],"
        " timeout: {connect: 5, read: 1, write: 5}}"
    )
    began = time.monotonic()
    with serve_gateway(tmp_path, gateway_yaml("    keepalive: 0.25", extra, db=db)) as running:
        results = asyncio.run(_burst(running.url))
        elapsed = time.monotonic() - began
        assert httpx.get(running.url + "/healthz", timeout=30).status_code == 200  # still healthy after
        assert upstream.modes == Counter(MODES[n % len(MODES)] for n in range(CLIENTS))
        wait_until(lambda: upstream.open == 0)  # the gateway closed every upstream connection, hung ones included
        rows = ledger_rows(db)
    outcomes = Counter(f"{mode} / {dialect}: {verdict}" for mode, dialect, verdict, _ in results)
    for mode, _, verdict, _ in results:  # what each fault must look like to the client
        if mode == "ok":
            assert verdict == "complete"
        elif mode in ("hang-mid", "reset-mid", "garbage-mid"):
            assert verdict == "stream error event", (mode, verdict)
        else:  # nothing reached the client yet: a shaped status, or an error event after a keep-alive
            assert verdict != "complete", (mode, verdict)
    assert len(rows) == CLIENTS
    statuses = Counter(row["status"] for row in rows)
    assert statuses == {"complete": upstream.modes["ok"], "error": CLIENTS - upstream.modes["ok"]}
    record_figures(
        "upstream",
        {
            "clients": CLIENTS,
            "provider_read_timeout_s": 1,
            "outcomes": dict(sorted(outcomes.items())),
            "slowest_client_s": round(max(r[3] for r in results), 2),
            "slowest_hung_client_s": round(max(r[3] for r in results if r[0].startswith("hang")), 2),
            "ledger": dict(statuses),
            "running_rows_after": sum(1 for row in rows if row["status"] == "running"),
            "healthz_after": 200,
            "whole_test_s": round(elapsed, 1),
        },
    )
