"""The endpoints beside the generations: ``POST /v1/messages/count_tokens``, ``GET /v1/models``,
``GET /healthz`` and ``GET /metrics``; each a function of the :class:`~harness_gateway.gateway.Gateway`
and the request (the routing table is :mod:`harness_gateway.routes`).
"""

from __future__ import annotations

import logging

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from harness_core import LlmError
from harness_gateway.anthropic_messages import ANTHROPIC_MESSAGES, parse_messages_request
from harness_gateway.auth import allowed
from harness_gateway.errors import GatewayError, from_failure, public_failure
from harness_gateway.gateway import Gateway
from harness_gateway.intake import read_request, require_messages, route_target
from harness_gateway.keys import KeyRecord
from harness_gateway.metrics import CONTENT_TYPE
from harness_gateway.openai_chat import OPENAI_CHAT
from harness_gateway.openai_responses import OPENAI_RESPONSES
from harness_gateway.request import ParsedRequest
from harness_gateway.runtime import GatewayRuntime

__all__ = ["count_tokens", "counted_tokens", "healthz", "list_models", "metrics", "model_ids", "responses_input_tokens"]

logger = logging.getLogger("harness_gateway")


async def count_tokens(gateway: Gateway, request: Request) -> Response:
    """``POST /v1/messages/count_tokens``: ``{"input_tokens": n}`` for a Messages body (without
    ``max_tokens``), counted by the adapter of the requested route
    (:meth:`harness_core.Harness.count_tokens`). Authenticated (401), parsed (400), resolved
    (404) and checked against the key's routes (403) like a generation; not admitted, recorded
    or billed. An adapter that cannot count answers its ``UNSUPPORTED`` error; a provider error
    maps as for a generation."""
    async with gateway.holder.use() as runtime:
        try:
            who, raw, (route, model, owner) = await read_request(gateway, runtime, request)
            parsed = parse_messages_request(raw, owner, model, target=route_target(runtime, route), counting=True)
            require_messages(parsed, "messages")
            allowed(who, route)
            counted = await counted_tokens(runtime, parsed, route, model)
        except GatewayError as error:
            return ANTHROPIC_MESSAGES.error_response(error)
    return JSONResponse({"input_tokens": counted})


async def responses_input_tokens(gateway: Gateway, request: Request) -> Response:
    """``POST /v1/responses/input_tokens`` (OpenAI's input-token count):
    ``{"object": "response.input_tokens", "input_tokens": n}`` for a Responses body (its
    ``previous_response_id`` chain included), counted by the adapter of the requested route.
    Keys, route permissions and errors as for :func:`count_tokens`, in OpenAI's error shape; not
    admitted, recorded or billed."""
    async with gateway.holder.use() as runtime:
        try:
            who, raw, (route, model, owner) = await read_request(gateway, runtime, request)
            parsed = OPENAI_RESPONSES.parse(raw, owner, model, target=route_target(runtime, route))
            parsed = await OPENAI_RESPONSES.resolve(gateway.store, who, parsed)
            require_messages(parsed, OPENAI_RESPONSES.messages_field)
            allowed(who, route)
            counted = await counted_tokens(runtime, parsed, route, model)
        except GatewayError as error:
            return OPENAI_RESPONSES.error_response(error)
    return JSONResponse({"object": "response.input_tokens", "input_tokens": counted})


async def counted_tokens(runtime: GatewayRuntime, parsed: ParsedRequest, route: str, model: str) -> int:
    """The input tokens of ``parsed`` on ``route`` / ``model`` (:meth:`harness_core.Harness.count_tokens`).

    Raises:
        GatewayError: the adapter's error as for a generation (``UNSUPPORTED`` when it cannot
            count), a transport failure's detail replaced by a stable message.
    """
    options = msgspec.structs.replace(parsed.options, route=route, model=model)
    try:
        return await runtime.harness.count_tokens(options)
    except LlmError as exc:
        failure = exc.to_failure()
        raise from_failure(public_failure(failure, route, "count_tokens") or failure) from None


async def list_models(gateway: Gateway, request: Request) -> Response:
    """``GET /v1/models``: the models the caller's key may use, as an OpenAI model list (errors in
    Anthropic's shape when the request carries ``anthropic-version``)."""
    dialect = ANTHROPIC_MESSAGES if "anthropic-version" in request.headers else OPENAI_CHAT
    try:
        who = await gateway.authenticate(request)
    except GatewayError as error:
        return dialect.error_response(error)
    async with gateway.holder.use() as runtime:
        ids = await model_ids(runtime, who)
    data = [{"id": name, "object": "model", "created": 0, "owned_by": owner} for name, owner in ids]
    return JSONResponse({"object": "list", "data": data})


async def model_ids(runtime: GatewayRuntime, who: KeyRecord | bool | None) -> list[tuple[str, str]]:
    """``(id, owned_by)`` of every model ``who`` may use: each route's listed models as
    ``route/model``, then each embedding route's embedding models (those not listed already; a
    route that cannot list its models is logged and skipped), then the aliases."""
    harness = runtime.harness
    ids: list[tuple[str, str]] = []
    for route, owner in harness.routes().items():
        if isinstance(who, KeyRecord) and not who.allows(route):
            continue
        try:
            listed = await harness.list_models(route)
        except LlmError as exc:
            logger.warning("GET /v1/models: route %r cannot list its models: %s", route, exc)
            continue
        ids += [(f"{route}/{info.model}", owner) for info in listed]
    for route, owner in harness.embed_routes().items():  # as OpenAI's list holds its embedding models
        if isinstance(who, KeyRecord) and not who.allows(route):
            continue
        try:
            embedders = await harness.list_embedding_models(route)
        except LlmError as exc:
            logger.warning("GET /v1/models: route %r cannot list its embedding models: %s", route, exc)
            continue
        listed_ids = {name for name, _ in ids}
        ids += [(f"{route}/{info.model}", owner) for info in embedders if f"{route}/{info.model}" not in listed_ids]
    for alias, target in runtime.aliases.items():
        route = target.partition("/")[0]
        if not isinstance(who, KeyRecord) or who.allows(route):
            ids.append((alias, f"alias of {target}"))
    return ids


async def healthz(gateway: Gateway, request: Request) -> Response:
    """``GET /healthz``: 200 ``{"status": "ok", "in_flight": n}``; 503 while the state store is unreachable."""
    try:
        await gateway.store.ping()
    except GatewayError as error:
        return OPENAI_CHAT.error_response(error)
    return JSONResponse({"status": "ok", "in_flight": gateway.holder.current.in_flight})


async def metrics(gateway: Gateway, request: Request) -> Response:
    """``GET /metrics``: Prometheus text; 401 when protected and neither the master key nor the
    metrics token is presented."""
    if not gateway.may_scrape(request):
        error = GatewayError(
            401, "/metrics requires the master key or the metrics token (Authorization: Bearer <token>)",
            code="invalid_api_key",
        )  # fmt: skip
        return OPENAI_CHAT.error_response(error)
    return Response(gateway.metrics.render(), media_type=CONTENT_TYPE)
