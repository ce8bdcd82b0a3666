"""Reading a request before admission: its JSON body (bounded), its ``model`` resolved to a route,
and the route's :class:`~harness_gateway.request.Target`; shared by every endpoint.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import ClientDisconnect, Request

from harness_gateway.errors import GatewayError
from harness_gateway.gateway import Gateway
from harness_gateway.keys import KeyRecord
from harness_gateway.request import Body, ParsedRequest, Target, bad_request, decimal, decode_json
from harness_gateway.runtime import GatewayRuntime

__all__ = ["read_body", "read_request", "require_messages", "route_target"]


async def read_request(
    gateway: Gateway, runtime: GatewayRuntime, request: Request, *, embeddings: bool = False
) -> tuple[KeyRecord | bool | None, Any, tuple[str, str, str]]:
    """Authenticate ``request`` (401), read its JSON body (413, 400) and resolve its ``model``
    (400 without one, 404 for one not served; ``embeddings``: among the embedding routes too,
    :meth:`GatewayRuntime.resolve`): ``(who, body, (route, model, owner))``."""
    who = await gateway.authenticate(request)
    raw = Body(decode_json(await read_body(request, runtime.config.max_body_bytes))).value  # an object, or 400
    requested = raw.get("model")
    if not isinstance(requested, str):
        raise bad_request("model", "this field is required and must be a string")
    return who, raw, runtime.resolve(requested, embeddings=embeddings)


def require_messages(parsed: ParsedRequest, field: str) -> None:
    """Refuse a request without a message (providers answer an empty conversation with an error,
    or with nothing at all).

    Raises:
        GatewayError: 400 naming ``field`` (``messages``, or ``input`` on Responses).
    """
    if not parsed.options.messages:
        raise bad_request(field, "must hold at least one message")


def route_target(runtime: GatewayRuntime, route: str) -> Target:
    """The :class:`~harness_gateway.request.Target` of ``route`` (:meth:`harness_core.Harness.route_target`:
    its wire, whether it takes provider options, the options key ``openai`` of ``openai:work``)."""
    return runtime.harness.route_target(route)


async def read_body(request: Request, limit: int) -> bytes:
    """The JSON request body, refusing more than ``limit`` bytes with a 413.

    Raises:
        GatewayError: 415 naming the ``content-type`` of a body declared as something other than
            JSON (``application/json`` or a ``+json`` type; a request without the header is read
            as JSON, as the providers' APIs do); 413 beyond ``limit``; 400
            (``client_disconnected``) when the connection
            closed before the whole body arrived (the client left, or ``body_timeout`` ran out:
            :mod:`harness_gateway.limits`); nobody reads that answer, but it is counted and logged
            as one line, not as a traceback.
    """
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media and media != "application/json" and not media.endswith("+json"):
        raise GatewayError(
            415,
            f"the request body must be JSON: send content-type: application/json, not {media[:80]!r}",
            code="unsupported_media_type",
            param="content-type",
        )
    declared = request.headers.get("content-length", "")
    too_large = GatewayError(413, f"the request body is larger than {limit} bytes", code="request_too_large")
    if (decimal(declared) or 0) > limit:
        raise too_large
    body = bytearray()
    try:
        async for piece in request.stream():
            body += piece
            if len(body) > limit:
                raise too_large
    except ClientDisconnect:
        raise GatewayError(
            400, "the connection closed before the whole request body arrived", code="client_disconnected"
        ) from None
    return bytes(body)
