"""The gateway's routing table (:func:`routes`), the dialects it serves (:data:`DIALECTS`) and the
JSON 404 / 405 of any other path or method (:func:`unknown_endpoint`).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from harness_gateway.admin import admin_routes
from harness_gateway.anthropic_messages import ANTHROPIC_MESSAGES
from harness_gateway.console import console_routes
from harness_gateway.dialect import Dialect
from harness_gateway.embedding import Embedding
from harness_gateway.endpoints import (
    count_tokens,
    healthz,
    list_models,
    metrics,
    responses_input_tokens,
    retrieve_model,
)
from harness_gateway.errors import GatewayError
from harness_gateway.gateway import Gateway
from harness_gateway.openai_chat import OPENAI_CHAT
from harness_gateway.openai_embeddings import PATH as EMBEDDINGS_PATH
from harness_gateway.openai_responses import OPENAI_RESPONSES
from harness_gateway.relay import Generation
from harness_gateway.responses_store import responses_routes

__all__ = ["DIALECTS", "routes", "served_endpoints", "unknown_endpoint"]

DIALECTS: Final[tuple[Dialect, ...]] = (OPENAI_CHAT, ANTHROPIC_MESSAGES, OPENAI_RESPONSES)
"""The dialects served, each at its ``POST`` endpoint (:mod:`harness_gateway.dialect`)."""


def routes(gateway: Gateway) -> list[BaseRoute]:
    """The routing table of ``gateway``: each dialect's ``POST`` endpoint, the endpoints of
    :mod:`harness_gateway.endpoints`, the stored responses, embeddings, ``/admin`` and the console."""

    def generation(dialect: Dialect) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return Generation(gateway, request, dialect)

        return endpoint

    def bound(handler: Callable[[Gateway, Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await handler(gateway, request)

        return endpoint

    async def embedding(request: Request) -> Response:
        return Embedding(gateway, request)

    return [
        *(Route(dialect.path, generation(dialect), methods=["POST"]) for dialect in DIALECTS),
        Route("/v1/messages/count_tokens", bound(count_tokens), methods=["POST"]),
        Route("/v1/responses/input_tokens", bound(responses_input_tokens), methods=["POST"]),  # before /{id}
        *responses_routes(gateway),
        Route(EMBEDDINGS_PATH, embedding, methods=["POST"]),
        Route("/v1/models", bound(list_models), methods=["GET"]),
        Route("/v1/models/{model_id:path}", bound(retrieve_model), methods=["GET"]),
        Route("/healthz", bound(healthz), methods=["GET"]),
        Route("/metrics", bound(metrics), methods=["GET"]),
        *admin_routes(gateway),
        *console_routes(gateway),
    ]


async def unknown_endpoint(request: Request, exc: Exception) -> Response:
    """Starlette's 404 (no route) and 405 (a route, another method) as a JSON error in the dialect
    the path implies: Anthropic's under ``/v1/messages``, OpenAI's elsewhere; the 405 keeps its
    ``allow`` header."""
    path = request.url.path
    dialect = next((d for d in DIALECTS if d.owns(path)), OPENAI_CHAT)
    what = f"{request.method} {path[:200]}"
    headers = dict(getattr(exc, "headers", None) or {})
    if getattr(exc, "status_code", 404) == 405:
        error = GatewayError(
            405, f"{what}: method not allowed (allowed: {headers.get('Allow', '')})", code="method_not_allowed"
        )
    else:
        served = served_endpoints(request.app.routes)
        error = GatewayError(404, f"{what}: no such endpoint (served: {served})", code="unknown_endpoint")
    response = dialect.error_response(error)
    response.headers.update(headers)
    return response


_CONVERTER: Final = re.compile(r"\{(\w+):\w+\}")
"""A path parameter with Starlette's converter (``{model_id:path}``)."""


def served_endpoints(table: Sequence[BaseRoute]) -> str:
    """The endpoints of the routing table ``table``, for the 404 message: ``METHODS path`` per
    route, in the table's order (``POST /v1/chat/completions, …, GET, DELETE
    /v1/responses/{response_id}, …, GET /console``; a parameter without its converter), read
    from the table itself so the list is never short of a route; the console's pages beyond
    ``/console`` are left to it."""
    shown: list[str] = []
    for route in table:
        path, methods = getattr(route, "path", ""), getattr(route, "methods", None) or ()
        if not methods or path.startswith("/console/"):
            continue
        verbs = ", ".join(m for m in ("GET", "POST", "DELETE", "PUT", "PATCH") if m in methods)
        shown.append(f"{verbs} " + _CONVERTER.sub(r"{\1}", path))  # {model_id:path} reads {model_id}
    return "; ".join(dict.fromkeys(shown))
