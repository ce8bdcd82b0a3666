"""``POST /v1/embeddings`` served: :class:`Embedding` (the ASGI response: read, resolved, checked,
admitted) and :class:`EmbeddingRun` (the admitted call, settled like a generation). The wire
format is :mod:`harness_gateway.openai_embeddings`.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Final

import anyio
import anyio.lowlevel
import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

import harness_gateway.accounting as accounting
from harness_core import (
    AbortSignal,
    Failure,
    Finish,
    FinishKind,
    FinishReason,
    LlmError,
    StreamChunk,
    TokenUsage,
    Usage,
    plugin_name,
)
from harness_core.kit import abort_reason
from harness_core.middleware import Aborted, race
from harness_gateway.accounting import settle_row, start_watches
from harness_gateway.auth import allowed
from harness_gateway.errors import GatewayError, from_failure, public_failure
from harness_gateway.gateway import Gateway
from harness_gateway.intake import read_request
from harness_gateway.keys import KeyRecord
from harness_gateway.observe import RunEnd, RunWatch
from harness_gateway.openai_embeddings import EMBEDDINGS, EmbeddingRequest, embeddings_body, parse_embeddings_request
from harness_gateway.request import Target
from harness_gateway.runtime import GatewayRuntime
from harness_gateway.spend import embedding_bound, embedding_usage, estimated_embedding_usage, request_cost
from harness_gateway.store import Status

__all__ = ["EMBEDDINGS_API", "Embedding", "EmbeddingRun"]

logger = logging.getLogger("harness_gateway")


EMBEDDINGS_API: Final = "embeddings"
"""The ``api`` label of ``POST /v1/embeddings`` in metrics, and its ``dialect`` for observers and the console."""


class Embedding(Response):
    """One ``POST /v1/embeddings`` request (:mod:`harness_gateway.openai_embeddings`), run as its
    own ASGI response: authenticated (401), read (413, 400), its model resolved as for chat (404),
    its key's routes checked (403), admitted by the store (429, 503) and settled like a generation,
    through the same owners; the vectors come from :meth:`harness_core.Harness.embed` (the
    ``llm_embed`` middleware and the route's embedder). Errors are OpenAI error objects."""

    def __init__(self, gateway: Gateway, request: Request) -> None:
        super().__init__()
        self.gateway = gateway
        self.request = request
        self.request_id: str = request.scope.get("state", {}).get("request_id", uuid.uuid4().hex)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gateway = self.gateway
        async with gateway.holder.use() as runtime:
            try:
                who, raw, (route, model, owner) = await read_request(gateway, runtime, self.request, embeddings=True)
                target = Target(route, None, plugin_name(owner), takes_options=False)  # no embed options
                parsed = parse_embeddings_request(raw, target=target)
                key = allowed(who, route)
                bound, priced = None, True  # what a budgeted key reserves for it (priced only then: the hot path)
                if key is not None and key.budget is not None:
                    bound = embedding_bound(runtime.prices, route, model, parsed.options.inputs)
                    priced = bound is not None  # (an embedding has a bound whenever it has a price)
                redacted = runtime.redact(model)  # no key kept
                ticket = await gateway.store.admit(key, route, redacted, bound=bound, priced=priced)
            except GatewayError as error:
                gateway.metrics.requests.labels(EMBEDDINGS_API, "-", "-", str(EMBEDDINGS.error_status(error))).inc()
                await EMBEDDINGS.error_response(error)(scope, receive, send)
                return
            run = EmbeddingRun(self, runtime, route, model, ticket, parsed, key)
            response = await run.serve(receive)
            await response(scope, receive, send)


class EmbeddingRun:
    """One admitted embedding call: runs it (aborted when the client leaves or an operator aborts
    it from the console), records its estimated usage should it run past :data:`RECORD_EVERY`
    seconds, settles its ledger row and tells the observers."""

    def __init__(
        self,
        call: Embedding,
        runtime: GatewayRuntime,
        route: str,
        model: str,
        ticket: str,
        parsed: EmbeddingRequest,
        key: KeyRecord | None,
    ) -> None:
        self.call = call
        self.gateway = call.gateway
        self.runtime = runtime
        self.route = route
        self.model = model
        self.ticket = ticket
        self.parsed = parsed
        self.key = key
        self.options = msgspec.structs.replace(parsed.options, route=route, model=model)
        self.abort = AbortSignal()
        self.status: Status = "error"
        self.usage: TokenUsage | None = None
        self.failure: Failure | None = None
        self.disconnected = False
        self.started = time.perf_counter()

    async def serve(self, receive: Receive) -> Response:
        """Embed, settle the ledger row (shielded) and build the client's response."""
        metrics = self.gateway.metrics
        labels = (self.route, metrics.model_label(self.route, self.model))
        metrics.in_flight.labels(*labels).inc()
        watches = self.watch_start()
        response: Response | None = None
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self.watch, receive)
                group.start_soon(self.record_usage)
                response = await self.embed()
                group.cancel_scope.cancel()
        finally:
            metrics.in_flight.labels(*labels).dec()
            # no response: cancelled (a drain timeout, the server stopping) after the client left or not
            self.status = self.status if response is not None else "aborted" if self.disconnected else "error"
            with anyio.CancelScope(shield=True):
                latency = time.perf_counter() - self.started
                completed = self.status == "complete"
                cost = request_cost(self.runtime.prices, self.route, self.model, self.usage, completed=completed)
                labels = (self.route, metrics.model_label(self.route, self.model))  # served by now, if it was
                metrics.ended(
                    EMBEDDINGS_API, labels, (self.route, self.model), self.status,
                    latency=latency, first_token=None, cost=cost, usage=self.usage,
                )  # fmt: skip
                await settle_row(
                    self.gateway, self.runtime, self.ticket, self.status, self.usage, cost, self.call.request_id
                )
                await self.watch_end(watches, cost, latency)
        assert response is not None, "set unless the call was cancelled, and then the cancellation propagates"
        return response

    async def embed(self) -> Response:
        """The call through :meth:`harness_core.Harness.embed`, raced against the abort signal."""
        harness = self.runtime.harness
        try:
            outcome = await race(self.abort, lambda: harness.embed(self.options))
        except LlmError as exc:
            failure = exc.to_failure()
            shown = public_failure(failure, self.route, self.call.request_id)
            if shown is not None:
                logger.warning("request %s: route %r: %s", self.call.request_id, self.route, failure.message)
            self.failure = shown or failure
            return EMBEDDINGS.error_response(from_failure(self.failure))
        if isinstance(outcome, Aborted):
            self.status = "aborted"
            self.failure = LlmError("ABORTED", abort_reason(self.abort)).to_failure()
            return EMBEDDINGS.error_response(from_failure(self.failure))
        self.status = "complete"
        self.usage = embedding_usage(outcome.usage)
        self.gateway.metrics.served(self.route, self.model)
        return Response(embeddings_body(self.parsed, outcome), media_type="application/json")

    async def watch(self, receive: Receive) -> None:
        """Abort the call when the client disconnects."""
        await receive()  # the body was read: the only message left is http.disconnect (ASGI HTTP spec)
        self.disconnected = True
        logger.info("request %s: client disconnected, aborting the embedding call", self.call.request_id)
        self.abort.fire("the client disconnected")

    async def record_usage(self) -> None:
        """After :data:`RECORD_EVERY` seconds still running, record the call's estimated usage
        (:func:`estimated_embedding_usage`) in its ledger row, so a process killed meanwhile is
        charged about what it asked for; a store fault is logged and the call goes on."""
        await anyio.sleep(accounting.RECORD_EVERY)
        usage = estimated_embedding_usage(self.options.inputs)
        try:
            await self.gateway.store.record(
                self.ticket, usage, request_cost(self.runtime.prices, self.route, self.model, usage)
            )
        except GatewayError as exc:
            logger.warning("request %s: could not record its usage so far: %s", self.call.request_id, exc)

    def watch_start(self) -> list[RunWatch]:
        """Tell the gateway's observers that this call starts; their watches."""
        return start_watches(self, self.call.request_id, EMBEDDINGS_API)

    async def watch_end(self, watches: list[RunWatch], cost: float, latency: float) -> None:
        """Tell every watch how the call ended: a ``Usage`` chunk (when known) and a ``Finish``,
        then the :class:`RunEnd` (an observer's fault is logged, never raised)."""
        kind: FinishKind = "stop" if self.status == "complete" else "aborted" if self.status == "aborted" else "error"
        chunks: list[StreamChunk] = [Usage(self.usage)] if self.usage is not None else []
        chunks.append(Finish(reason=FinishReason(kind=kind, failure=self.failure)))
        end = RunEnd(
            status=self.status,
            usage=self.usage,
            cost=cost,
            first_token_s=None,
            latency_s=latency,
            served_route=self.route,
            served_model=self.model,
            attempts=(),
            failure=self.failure,
        )
        for watch in watches:
            try:
                for chunk in chunks:
                    watch.chunk(chunk)
                await watch.ended(end)
            except Exception:
                logger.exception("request %s: an observer failed at the end of an embedding call", self.call.request_id)
