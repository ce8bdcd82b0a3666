"""The benchmark's loopback server: raw asyncio, HTTP/1.1 keep-alive, chunked transfer encoding.

Built for the purpose so that it is never the bottleneck: every response body is generated once
(per format and scenario, see :mod:`bench.streams`), framed as one ``Transfer-Encoding: chunked``
chunk per SSE event (RFC 9112 §7.1, so the client parses the framing of every event as it would
from a real provider), cached, and written with one ``write`` call. Paced and stalled scenarios
write event by event with the pauses in between.

Run it in its own process so that it shares neither the event loop nor the GIL of the consumer
being measured::

    python -m bench.server [--port 0]     # prints "PORT <n>" on stdout, stops on SIGTERM/SIGINT

Routes: ``POST …/chat/completions`` (OpenAI format) and ``POST …/messages`` (Anthropic format);
the scenario is the ``model`` field of the JSON request body. Anything else gets a 404.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys

from bench.streams import PACE_S, STALL_S, events, parse_scenario

__all__ = ["main", "serve"]

_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n"
    b"cache-control: no-cache\r\nx-request-id: req_bench\r\n\r\n"
)
_END = b"0\r\n\r\n"
_cache: dict[tuple[str, str], list[bytes]] = {}


def _framed(fmt: str, name: str) -> list[bytes]:
    """The events of a scenario, each framed as one chunked-encoding chunk (memoised)."""
    key = (fmt, name)
    if key not in _cache:
        _cache[key] = [b"%x\r\n%s\r\n" % (len(e), e) for e in events(fmt, name)]
    return _cache[key]


def _first_delta_position(fmt: str) -> int:
    """How many events precede and include the first text delta of a stream."""
    return {"openai": 2, "anthropic": 4}.get(fmt, 1)  # openai: role, delta; anthropic: start, block,
    # ping, delta; gemini: the first event holds the first delta


def _simple(status: str, body: bytes) -> bytes:
    return b"HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        status.encode(),
        len(body),
        body,
    )


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            parts.append(await reader.readexactly(size + 2))
            if size == 0:
                return b"".join(p[:-2] for p in parts)
    return await reader.readexactly(int(headers.get("content-length", "0")))


def _route(method: str, path: str, body: bytes) -> tuple[str, str]:
    """(format, scenario name) of a request: OpenAI and Anthropic name the scenario in the body's
    ``model``, Gemini in the path (``/v1beta/models/{name}:streamGenerateContent?alt=sse``)."""
    if method != "POST":
        return "", ""
    if ":streamGenerateContent" in path:
        return "gemini", path.rpartition("/models/")[2].partition(":")[0]
    fmt = "openai" if path.endswith("/chat/completions") else "anthropic" if path.endswith("/messages") else ""
    try:
        return fmt, json.loads(body)["model"] if fmt else ""
    except (ValueError, KeyError, TypeError):
        return fmt, ""


async def _send_on_schedule(writer: asyncio.StreamWriter, framed: list[bytes], gap_s: float) -> None:
    """The head and the first event at once, then event ``i`` at ``gap_s``·``i`` seconds after
    the first on the event loop's clock (absolute deadlines: a write that comes late does not push
    the later ones back, so two events leave ≥ ``gap_s`` apart unless the loop itself fell behind)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    writer.write(_HEAD)
    for i, frame in enumerate(framed):
        wait = start + i * gap_s - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        writer.write(frame)
        await writer.drain()
    writer.write(_END)


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if line:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
            body = await _read_body(reader, headers)
            fmt, name = _route(method, path, body)
            try:
                scenario = parse_scenario(name)
                framed = _framed(fmt, name)
            except (ValueError, KeyError, TypeError):
                writer.write(_simple("404 Not Found", b'{"error": {"message": "no such scenario or route"}}'))
                await writer.drain()
                continue
            if scenario.gap_ms:
                await _send_on_schedule(writer, framed, scenario.gap_ms / 1000)
            elif scenario.kind == "paced":
                writer.write(_HEAD)
                for frame in framed:
                    await asyncio.sleep(PACE_S)
                    writer.write(frame)
                    await writer.drain()
                writer.write(_END)
            elif scenario.kind == "stall":
                cut = _first_delta_position(fmt)
                writer.write(_HEAD + b"".join(framed[:cut]))
                await writer.drain()
                await asyncio.sleep(STALL_S)
                writer.write(b"".join(framed[cut:]) + _END)
            else:
                writer.write(_HEAD + b"".join(framed) + _END)
            await writer.drain()
            if headers.get("connection", "").lower() == "close":
                return
    except ConnectionError:
        return
    finally:
        writer.close()


async def serve(port: int = 0) -> None:
    """Serve on 127.0.0.1:``port`` (0 = any free port) until SIGTERM/SIGINT; prints ``PORT <n>``."""
    server = await asyncio.start_server(_handle, "127.0.0.1", port, backlog=4096, limit=1 << 20)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    bound = server.sockets[0].getsockname()[1]
    print(f"PORT {bound}", flush=True)
    async with server:
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    """Command-line entry: ``python -m bench.server [--port N]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        import resource

        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):  # pragma: no cover - best effort on other platforms
        print("could not raise the open-file limit", file=sys.stderr)
    asyncio.run(serve(args.port))


if __name__ == "__main__":
    main()
