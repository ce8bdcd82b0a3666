"""The endpoints beside the generations: ``POST /v1/messages/count_tokens``, ``GET /v1/models``
(and ``/v1/models/{id}``),
``GET /healthz`` and ``GET /metrics``; each a function of the :class:`~harness_gateway.gateway.Gateway`
and the request (the routing table is :mod:`harness_gateway.routes`).
"""

from __future__ import annotations

import logging
from typing import Any, Final

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from harness_core import LlmError, ModelInfo
from harness_core.middleware import snippet
from harness_gateway.anthropic_messages import ANTHROPIC_MESSAGES, parse_messages_request
from harness_gateway.auth import allowed, presented_key
from harness_gateway.dialect import Dialect
from harness_gateway.errors import GatewayError, from_failure, public_failure
from harness_gateway.gateway import Gateway
from harness_gateway.intake import read_request, require_messages, route_target
from harness_gateway.keys import KeyRecord
from harness_gateway.metrics import CONTENT_TYPE
from harness_gateway.openai_chat import OPENAI_CHAT
from harness_gateway.openai_responses import OPENAI_RESPONSES
from harness_gateway.request import ParsedRequest, decimal, single_query
from harness_gateway.runtime import GatewayRuntime

__all__ = [
    "ANTHROPIC_PAGE",
    "ListedModel",
    "count_tokens",
    "counted_tokens",
    "healthz",
    "list_models",
    "metrics",
    "model_ids",
    "responses_input_tokens",
    "retrieve_model",
]

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
    """``GET /v1/models``: the models the caller's key may use (:func:`model_ids`).

    As an OpenAI model list (https://platform.openai.com/docs/api-reference/models/list:
    ``{"object": "list", "data": [{"id", "object": "model", "created", "owned_by"}]}``), or, when
    the request carries ``anthropic-version`` (the anthropic SDKs send it), as Anthropic's page
    (https://docs.anthropic.com/en/api/models-list: ``{"data": [{"type": "model", "id",
    "display_name", "created_at", "max_input_tokens"?, "max_tokens"?}], "has_more", "first_id",
    "last_id"}``, paged by ``limit`` (1-1000, default 20), ``after_id`` and ``before_id``), with
    errors in that dialect's shape: 401 without a valid key, 400 naming a bad query parameter."""
    dialect = _models_dialect(request)
    try:
        who = await gateway.authenticate(request)
        async with gateway.holder.use() as runtime:
            listed = await model_ids(runtime, who)
        if dialect is ANTHROPIC_MESSAGES:
            return JSONResponse(_anthropic_page(listed, request))
    except GatewayError as error:
        return dialect.error_response(error)
    data = [_openai_model(model) for model in listed]
    return JSONResponse({"object": "list", "data": data})


async def retrieve_model(gateway: Gateway, request: Request) -> Response:
    """``GET /v1/models/{model_id}``: one model of :func:`list_models`'s list (an id may hold
    ``/``: ``mock/echo``), as OpenAI's model object
    (https://platform.openai.com/docs/api-reference/models/retrieve) or, with
    ``anthropic-version``, Anthropic's (https://docs.anthropic.com/en/api/models). 404
    ``model_not_found`` for an id the caller's key may not use or that is not listed, 401 without
    a valid key; errors in the dialect's shape."""
    dialect = _models_dialect(request)
    wanted = request.path_params["model_id"]
    try:
        who = await gateway.authenticate(request)
        async with gateway.holder.use() as runtime:
            listed = await model_ids(runtime, who)
        found = next((model for model in listed if model.id == wanted), None)
        if found is None:
            raise GatewayError(
                404,
                f"model {snippet(repr(wanted))} is not listed here"
                " (GET /v1/models lists the models this caller may use)",
                code="model_not_found",
                param="model",
            )
    except GatewayError as error:
        return dialect.error_response(error)
    return JSONResponse(_anthropic_model(found) if dialect is ANTHROPIC_MESSAGES else _openai_model(found))


class ListedModel(msgspec.Struct, frozen=True):
    """One entry of the gateway's model list: its ``id`` (``route/model`` or an alias), who serves
    it (``owned_by``: the route's plugin, or ``alias of route/model``) and what its adapter says
    of it (``info``; an alias's is its target's, ``None`` when its target is not listed)."""

    id: str
    owned_by: str
    info: ModelInfo | None = None


def _models_dialect(request: Request) -> Dialect:
    return ANTHROPIC_MESSAGES if "anthropic-version" in request.headers else OPENAI_CHAT


def _openai_model(model: ListedModel) -> dict[str, Any]:
    return {"id": model.id, "object": "model", "created": 0, "owned_by": model.owned_by}


def _anthropic_model(model: ListedModel) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": "model",
        "id": model.id,
        "display_name": model.id,
        "created_at": "1970-01-01T00:00:00Z",  # unknown: the epoch, as OpenAI's ``created`` 0
    }
    info = model.info
    if info is not None and info.context_window is not None:
        body["max_input_tokens"] = info.context_window
    if info is not None and info.max_output_tokens is not None:
        body["max_tokens"] = info.max_output_tokens
    return body


ANTHROPIC_PAGE: Final = 20
"""Models per page of Anthropic's list when the request sets no ``limit`` (its API's default)."""


def _anthropic_page(listed: list[ListedModel], request: Request) -> dict[str, Any]:
    """Anthropic's page of ``listed`` for the query of ``request`` (``limit``, ``after_id``,
    ``before_id``: the ids of the page's neighbours).

    Raises:
        GatewayError: 400 naming ``limit`` (not an integer of 1-1000), a cursor that is no id of
            the list, ``after_id`` given with ``before_id``, or a parameter given twice.
    """
    query = single_query(request.query_params.multi_items())
    raw = query.get("limit")
    limit = ANTHROPIC_PAGE
    if raw is not None:
        limit = decimal(raw) or 0
        if not 1 <= limit <= 1000:
            raise GatewayError(400, f"limit: expected an integer of 1-1000, got {raw[:40]!r}", param="limit")
    ids = [model.id for model in listed]

    def cursor(name: str) -> int | None:
        value = query.get(name)
        if value is None:
            return None
        if value not in ids:
            raise GatewayError(400, f"{name}: {value[:200]!r} is not the id of a listed model", param=name)
        return ids.index(value)

    after, before = cursor("after_id"), cursor("before_id")
    if after is not None and before is not None:
        raise GatewayError(400, "after_id and before_id cannot be combined: page one way", param="after_id")
    if before is not None:  # the page just before that model
        start = max(0, before - limit)
        page, has_more = listed[start:before], start > 0
    else:
        start = 0 if after is None else after + 1
        page, has_more = listed[start : start + limit], start + limit < len(listed)
    return {
        "data": [_anthropic_model(model) for model in page],
        "has_more": has_more,
        "first_id": page[0].id if page else None,
        "last_id": page[-1].id if page else None,
    }


async def model_ids(runtime: GatewayRuntime, who: KeyRecord | bool | None) -> list[ListedModel]:
    """Every model ``who`` may use: each route's listed models as ``route/model``, then each
    embedding route's embedding models (those not listed already; a route that cannot list its
    models is logged and skipped), then the aliases, each with what its target's adapter says of
    it (``info``). An alias spelled as a ``route/model`` id replaces that entry: a request for the
    id goes to the alias's target (:meth:`GatewayRuntime.resolve` reads aliases first)."""
    listed = await _route_models(runtime, who)
    known = {model.id: model for model in listed}
    aliases: list[ListedModel] = []
    for alias, target in runtime.aliases.items():
        route = target.partition("/")[0]
        if not isinstance(who, KeyRecord) or who.allows(route):
            found = known.get(target)
            aliases.append(ListedModel(alias, f"alias of {target}", found.info if found is not None else None))
    return [model for model in listed if model.id not in runtime.aliases] + aliases


async def _route_models(runtime: GatewayRuntime, who: KeyRecord | bool | None) -> list[ListedModel]:
    """The ``route/model`` entries of :func:`model_ids` (every route's, then the embedding routes')."""
    harness = runtime.harness
    ids: list[ListedModel] = []
    for route, owner in harness.routes().items():
        if isinstance(who, KeyRecord) and not who.allows(route):
            continue
        try:
            listed = await harness.list_models(route)
        except LlmError as exc:
            logger.warning("GET /v1/models: route %r cannot list its models: %s", route, exc)
            continue
        ids += [ListedModel(f"{route}/{info.model}", owner, info) for info in listed]
    for route, owner in harness.embed_routes().items():  # as OpenAI's list holds its embedding models
        if isinstance(who, KeyRecord) and not who.allows(route):
            continue
        try:
            embedders = await harness.list_embedding_models(route)
        except LlmError as exc:
            logger.warning("GET /v1/models: route %r cannot list its embedding models: %s", route, exc)
            continue
        listed_ids = {model.id for model in ids}
        ids += [
            ListedModel(f"{route}/{info.model}", owner, info)
            for info in embedders
            if f"{route}/{info.model}" not in listed_ids
        ]
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
    metrics token is presented (``missing_api_key`` without a key, as on every endpoint;
    ``invalid_api_key`` for another)."""
    if not gateway.may_scrape(request):
        error = GatewayError(
            401, "/metrics requires the master key or the metrics token (Authorization: Bearer <token>)",
            code="invalid_api_key" if presented_key(request) is not None else "missing_api_key",
        )  # fmt: skip
        return OPENAI_CHAT.error_response(error)
    return Response(gateway.metrics.render(), media_type=CONTENT_TYPE)
