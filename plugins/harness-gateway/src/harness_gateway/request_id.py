"""The request-id layer: every HTTP request gets an id, echoed in ``x-request-id`` and logged in
one access line; an exception no endpoint answered gets a 500 here (the one place for it).
"""

from __future__ import annotations

import logging
import re
import time
import uuid

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["RequestIdMiddleware"]

logger = logging.getLogger("harness_gateway")


_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


class RequestIdMiddleware:
    """Gives every HTTP request an id (the client's ``x-request-id`` when sane, else a new one),
    echoes it in the ``x-request-id`` response header and logs one access line with it.

    The access line ends ``-> <status> in <seconds>s``: the status of the response's headers; or,
    when the application was told the client disconnected (``http.disconnect``) before the
    headers were sent, ``-> aborted before the response`` (the gateway's answer went nowhere: a
    generation's ledger row and the console say ``aborted``), followed by the status it chose
    then, if any (``(200 not sent)``).

    An exception that escapes the application before it started its response is answered with a
    plain ``500 Internal Server Error`` (what Starlette's error middleware answers, with the id)
    and raised on, so the ASGI server logs its traceback and closes the connection; one raised
    after the response started is raised on as it is."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope["headers"]).get(b"x-request-id", b"").decode("latin-1")
        request_id = incoming if _REQUEST_ID.match(incoming) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        status = {"code": 0, "gone": 0}  # gone: 1 once the client left before the headers
        started = time.perf_counter()

        async def tagged(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", request_id.encode())]}
            await send(message)

        async def watched() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect" and status["code"] == 0:
                status["gone"] = 1
            return message

        try:
            await self.app(scope, watched, tagged)
        except Exception:
            if status["code"] == 0:  # nothing answered yet: the client gets a 500, not a reset
                await PlainTextResponse("Internal Server Error", status_code=500)(scope, receive, tagged)
            raise
        finally:
            logger.info(
                "request %s %s %s -> %s in %.3fs",
                request_id, scope["method"], scope["path"], _outcome(status["code"], bool(status["gone"])),
                time.perf_counter() - started,
            )  # fmt: skip


def _outcome(code: int, gone: bool) -> str:
    """What the access line says happened: the status sent (``code``), or, when the client left
    before the headers (``gone``), ``aborted before the response`` and the status chosen, if any."""
    if not gone:
        return str(code)
    return "aborted before the response" + (f" ({code} not sent)" if code else "")
