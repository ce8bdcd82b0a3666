"""The floor of a Python gateway on the harness gateway's stack: what any relay written on uvicorn
(httptools, the asyncio loop) and an aiohttp upstream client costs, with none of the harness's
work, so the gateway's own cost can be read beside it (issue 25: which targets the stack allows).

``python -m bench.floor MODE PORT UPSTREAM`` serves ``POST /v1/chat/completions`` (OpenAI Chat
Completions, https://platform.openai.com/docs/api-reference/chat) on ``127.0.0.1:PORT`` by
sending the request's body as it is to ``UPSTREAM/v1/chat/completions`` through one pooled
``aiohttp.ClientSession`` and relaying its answer (``GET /healthz`` answers 200). ``MODE``:

- ``bytes``: every read of the upstream body goes out as it came (no parsing): the floor of a
  streaming relay;
- ``json``: every read is cut into its whole SSE events (``data: …`` lines, RFC-less: the
  WHATWG HTML living standard's event-stream format), each event's JSON decoded and encoded
  again (msgspec) before the read's events go out together: the least a relay that looks at
  every chunk does (a gateway that masks, counts usage, or translates does more).

No authentication, no ledger, no limits, no metrics, no console: nothing a gateway must do. Used
by ``bench.gateway compare --gateways floor-bytes floor-json …``; never part of the tests.
"""

from __future__ import annotations

import sys
from typing import Any

import aiohttp
import msgspec
import uvicorn

__all__ = ["app"]

_MODE = "bytes"
_UPSTREAM = ""
_session: aiohttp.ClientSession | None = None
_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


async def _read_body(receive: Any) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


def _reencode(data: bytes, rest: bytes) -> tuple[bytes, bytes]:
    """The whole events of ``rest + data`` decoded and encoded again, and the partial tail."""
    data = rest + data
    cut = data.rfind(b"\n\n") + 2
    if cut < 2:
        return b"", data
    out = []
    for event in data[: cut - 2].split(b"\n\n"):
        payload = event[6:]
        out.append(b"data: " + (payload if payload == b"[DONE]" else _encode(_decode(payload))) + b"\n\n")
    return b"".join(out), data[cut:]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The ASGI application (https://asgi.readthedocs.io/en/latest/specs/www.html)."""
    global _session
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                _session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if _session is not None:
                    await _session.close()
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["path"] == "/healthz":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
        return
    body = await _read_body(receive)
    assert _session is not None
    headers = {"content-type": "application/json", "authorization": "Bearer floor"}
    async with _session.post(_UPSTREAM + "/v1/chat/completions", data=body, headers=headers) as answer:
        kind = answer.headers.get("content-type", "application/json").encode()
        await send({"type": "http.response.start", "status": answer.status, "headers": [(b"content-type", kind)]})
        rest = b""
        async for data in answer.content.iter_any():
            if _MODE == "json":
                data, rest = _reencode(data, rest)
                if not data:
                    continue
            await send({"type": "http.response.body", "body": data, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def main(argv: list[str]) -> None:
    """``MODE PORT UPSTREAM``: serve until SIGINT / SIGTERM."""
    global _MODE, _UPSTREAM
    _MODE, port, _UPSTREAM = argv[0], int(argv[1]), argv[2].rstrip("/")
    if _MODE not in ("bytes", "json"):
        raise SystemExit(f"bench.floor: MODE must be bytes or json, not {_MODE!r}")
    uvicorn.run(app, host="127.0.0.1", port=port, http="httptools", loop="asyncio", log_level="warning",
                access_log=False)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
