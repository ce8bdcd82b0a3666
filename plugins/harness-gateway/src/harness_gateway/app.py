"""The gateway's ASGI application (Starlette): endpoints, keys, admission, streaming.

Endpoints:
    ``POST /v1/chat/completions``  OpenAI Chat Completions (:mod:`harness_gateway.openai_chat`)
    ``POST /v1/messages``          Anthropic Messages (:mod:`harness_gateway.anthropic_messages`)
    ``POST /v1/messages/count_tokens``  the input tokens of a Messages body, counted by the route's
                                   adapter (:func:`count_tokens`; keys and route permissions apply,
                                   nothing is admitted or billed)
    ``POST /v1/responses/input_tokens``  OpenAI's input-token count of a Responses body, counted
                                   as count_tokens (:func:`~harness_gateway.endpoints.responses_input_tokens`)
    ``POST /v1/responses``         OpenAI Responses (:mod:`harness_gateway.openai_responses`)
    ``GET`` / ``DELETE /v1/responses/{id}``, ``GET /v1/responses/{id}/input_items``  stored
                                   responses (:mod:`harness_gateway.responses_store`)
    ``POST /v1/embeddings``        OpenAI Embeddings (:mod:`harness_gateway.openai_embeddings`,
                                   :class:`Embedding`): keys, admission, ledger and metrics as
                                   for a generation
    ``GET  /v1/models``            every route's models (embedding models too) as ``route/model``, plus the aliases
                                   (Anthropic's page with ``anthropic-version``); ``/v1/models/{id}`` one of them
    ``GET  /healthz``              200 ``{"status": "ok", "in_flight": n}``; 503 while the state store is unreachable
    ``GET  /metrics``              Prometheus text (the master key or ``metrics_token`` when protected)
    ``/admin/keys``                ``GET`` list, ``POST`` create (body: a :class:`~harness_gateway.keys.KeySpec`),
                                   ``DELETE /admin/keys/{id or name}`` revoke; master key only

Every generation goes through :meth:`harness_core.Harness.stream` of the current runtime: the
same middleware chain and adapters as ``harness run``. A request is authenticated (401), parsed
(400), its model resolved (404), the key's routes checked (403), then admitted by the state store
(429 with ``retry-after`` over a rate or near a budget, a non-retryable quota answer for a spent
budget, 503 when the store is down), which opens its ledger row; the stream's usage so far is
recorded in it every :data:`RECORD_EVERY` seconds (what a reaper charges should this process
die, docs/gateway.md#leases-a-killed-gateway-strands-no-budget); the row is settled with the
stream's usage and cost however the stream ends — complete, failed, or aborted because the
client went away (the upstream stream is aborted at once, then cancelled if it does not end
within :data:`ABORT_GRACE` seconds).

Any other path or method is a JSON 404 / 405 in the dialect the path implies
(:func:`unknown_endpoint`). Connections are bounded before any of this runs
(:mod:`harness_gateway.limits`).

Every response carries ``x-request-id`` (the client's, when it sent a sane one); streams carry
``X-Accel-Buffering: no`` and ``cache-control: no-cache``, and an SSE comment after
``keepalive`` seconds of silence.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Final

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

import harness_gateway.relay as relay  # not `Generation` itself: that name moved here (a warning)
from harness_core import moved_names
from harness_gateway.dialect import Dialect
from harness_gateway.gateway import Gateway
from harness_gateway.request_id import RequestIdMiddleware
from harness_gateway.routes import DIALECTS as _DIALECTS  # moved too
from harness_gateway.routes import routes, unknown_endpoint

__all__ = ["Gateway", "GatewayApp", "build_app"]


class GatewayApp:
    """The gateway's ASGI application: a generation request (``POST`` to a dialect's path,
    :data:`~harness_gateway.routes.DIALECTS`) is run as its :class:`~harness_gateway.relay.Generation`
    at once; every other request and the lifespan go to ``fallback`` (the Starlette application of
    every route). Starlette's layers (its error and exception middleware, the router's match of
    every route, the endpoint wrapper) would cost a generation ~5 % of the gateway's CPU per short
    request for nothing it uses (BENCHMARKS.md, issue 25, cost per request): a generation answers
    its own errors in its dialect, and an unexpected exception is answered by the request-id layer
    around this app (:class:`~harness_gateway.request_id.RequestIdMiddleware`). A request under a
    ``root_path`` (mounted below a prefix) always goes through the router, which strips it."""

    def __init__(self, gateway: Gateway, fallback: ASGIApp) -> None:
        self.gateway = gateway
        self.fallback = fallback
        self.generations: dict[str, Dialect] = {dialect.path: dialect for dialect in _DIALECTS}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            dialect = self.generations.get(scope["path"])
            if dialect is not None:
                await relay.Generation(self.gateway, Request(scope, receive), dialect)(scope, receive, send)
                return
        await self.fallback(scope, receive, send)


def build_app(gateway: Gateway) -> RequestIdMiddleware:
    """The ASGI application of ``gateway``: :class:`GatewayApp` over the Starlette application of
    :func:`~harness_gateway.routes.routes`, wrapped in the request-id layer
    (:class:`~harness_gateway.request_id.RequestIdMiddleware`). Its ASGI lifespan runs the usage
    recorder (:attr:`Gateway.recorder`) and the write-behind writers (:attr:`Gateway.writers`,
    flushed at its end); ``harness serve`` runs the lifespan of
    :class:`~harness_gateway.server.GatewayServer` instead, which starts them too."""

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as group:
            await group.start(gateway.recorder.run)
            for writer in gateway.writers:
                await group.start(writer.run)
            yield
            group.cancel_scope.cancel()
        await gateway.flush_writers()

    app = Starlette(
        routes=routes(gateway), exception_handlers={404: unknown_endpoint, 405: unknown_endpoint}, lifespan=lifespan
    )
    return RequestIdMiddleware(GatewayApp(gateway, app))


_MOVED: Final = {
    "ABORT_GRACE": "harness_gateway.relay",
    "RELAY_BUFFER": "harness_gateway.relay",
    "Generation": "harness_gateway.relay",
    "RECORD_EVERY": "harness_gateway.accounting",
    "settle_row": "harness_gateway.accounting",
    "start_watches": "harness_gateway.accounting",
    "DIALECTS": "harness_gateway.routes",
    "EMBEDDINGS_API": "harness_gateway.embedding",
    "Embedding": "harness_gateway.embedding",
    "admin_routes": "harness_gateway.admin",
    "count_tokens": "harness_gateway.endpoints",
    "allowed": "harness_gateway.auth",
    "read_body": "harness_gateway.intake",
    "read_request": "harness_gateway.intake",
    "require_messages": "harness_gateway.intake",
    "route_target": "harness_gateway.intake",
}
"""Names this module held before it was split, and their modules now."""


__getattr__ = moved_names(__name__, _MOVED)
"""A moved name still reads from here, with a ``DeprecationWarning`` naming its module now
(the core's one rule for old import paths)."""
