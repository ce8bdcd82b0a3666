"""The gateway's ASGI application (Starlette): endpoints, keys, admission, streaming.

Endpoints:
    ``POST /v1/chat/completions``  OpenAI Chat Completions (:mod:`harness_gateway.openai_chat`)
    ``POST /v1/messages``          Anthropic Messages (:mod:`harness_gateway.anthropic_messages`)
    ``POST /v1/messages/count_tokens``  the input tokens of a Messages body, counted by the route's
                                   adapter (:func:`count_tokens`; keys and route permissions apply,
                                   nothing is admitted or billed)
    ``POST /v1/responses``         OpenAI Responses (:mod:`harness_gateway.openai_responses`)
    ``GET`` / ``DELETE /v1/responses/{id}``, ``GET /v1/responses/{id}/input_items``  stored
                                   responses (:mod:`harness_gateway.responses_store`)
    ``POST /v1/embeddings``        OpenAI Embeddings (:mod:`harness_gateway.openai_embeddings`,
                                   :class:`Embedding`): keys, admission, ledger and metrics as
                                   for a generation
    ``GET  /v1/models``            every route's models as ``route/model``, plus the aliases
    ``GET  /healthz``              200 ``{"status": "ok"}``; 503 while the state store is unreachable
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

import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Final

import anyio
import anyio.lowlevel
import msgspec
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from harness_core import (
    AbortSignal,
    BlockAssembler,
    Failure,
    Finish,
    FinishKind,
    FinishReason,
    LlmError,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    TokenUsage,
    ToolCallDelta,
    Usage,
)
from harness_core.kit import abort_reason
from harness_core.middleware import Aborted, race
from harness_gateway.anthropic_messages import ANTHROPIC_MESSAGES, parse_messages_request
from harness_gateway.console import console_routes
from harness_gateway.dialect import Dialect, Ending
from harness_gateway.errors import GatewayError, from_failure, public_failure
from harness_gateway.keys import KeyRecord, KeySpec
from harness_gateway.metrics import CONTENT_TYPE, GatewayMetrics
from harness_gateway.observe import Observer, RunEnd, RunInfo, RunWatch
from harness_gateway.openai_chat import OPENAI_CHAT
from harness_gateway.openai_embeddings import PATH as EMBEDDINGS_PATH
from harness_gateway.openai_embeddings import EmbeddingRequest, embeddings_body, parse_embeddings_request
from harness_gateway.openai_responses import OPENAI_RESPONSES
from harness_gateway.request import Body, ParsedRequest, Target, bad_request, decode_json
from harness_gateway.responses_store import responses_routes
from harness_gateway.runtime import GatewayRuntime, RuntimeHolder
from harness_gateway.spend import embedding_usage, estimated_embedding_usage, estimated_usage, request_cost
from harness_gateway.sse import KEEPALIVE
from harness_gateway.store import SqlStore, Status
from harness_middleware.notes import open_notes

__all__ = [
    "ABORT_GRACE",
    "DIALECTS",
    "EMBEDDINGS_API",
    "RECORD_EVERY",
    "RELAY_BUFFER",
    "Embedding",
    "Gateway",
    "build_app",
]

logger = logging.getLogger("harness_gateway")

ABORT_GRACE: Final = 2.0
"""Seconds an aborted stream may take to end (and report its partial usage) before it is cancelled."""

RECORD_EVERY: Final = 1.0
"""Seconds between two records of a running stream's usage so far in its ledger row (only when it
grew): what a reaper charges should this process die (:meth:`SqlStore.record`)."""

RELAY_BUFFER: Final = 64
"""Events a stream's producer queues for its sender before it waits (and other streams run):
the events of one upstream read go out in writes of at most this many."""

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_STREAM_HEADERS: Final = {"cache-control": "no-cache", "x-accel-buffering": "no"}
_CONTENT: Final = (TextDelta, ReasoningDelta, ToolCallDelta)
_encode = msgspec.json.Encoder().encode


class Gateway:
    """The state one gateway process serves with: the runtime holder, the store, metrics, policy.

    Args:
        holder: the current runtime (swapped on reload).
        store: keys, limits and ledger.
        keys_required: refuse requests without a valid key (401).
        master_key: the admin key, or ``None`` (then ``/admin`` always answers 401).
        metrics: what ``/metrics`` serves (default: this process's own counts).
        metrics_protected: ``/metrics`` answers 401 without the master key or ``metrics_token``.
        metrics_token: a bearer token that may read ``/metrics`` (and nothing else), or ``None``.
    """

    def __init__(
        self,
        holder: RuntimeHolder,
        store: SqlStore,
        *,
        keys_required: bool,
        master_key: str | None,
        metrics: GatewayMetrics | None = None,
        metrics_protected: bool = False,
        metrics_token: str | None = None,
    ) -> None:
        self.holder = holder
        self.metrics_protected = metrics_protected
        self.metrics_token = metrics_token
        self.store = store
        self.keys_required = keys_required
        self.master_key = master_key
        self.metrics = metrics if metrics is not None else GatewayMetrics()
        self.observers: list[Observer] = []
        """Told about every generation (:mod:`harness_gateway.observe`); the console registers here."""
        self._migrated = False

    async def ensure_store(self) -> None:
        """Apply the store's migrations once (retried on every request while the database is down).

        Raises:
            GatewayError: 503 while the database cannot be reached.
        """
        if not self._migrated:
            await self.store.migrate()
            self._migrated = True

    # ------------------------------------------------------------------ auth

    async def authenticate(self, request: Request) -> KeyRecord | bool | None:
        """The caller's key record; ``True`` for the master key; ``None`` when anonymous is allowed.

        A key this gateway issued and then revoked (or that expired) is refused even where keys are
        optional (loopback): revoking must take effect everywhere. An unknown or missing key is
        anonymous there, since SDKs always send some key.

        Raises:
            GatewayError: 401 for a revoked or expired key; where keys are required, also for a
                missing or unknown one.
        """
        await self.ensure_store()
        presented = _presented_key(request)
        if presented is not None and self.master_key is not None and _same(presented, self.master_key):
            return True
        record = await self.store.authenticate(presented) if presented else None
        if record is not None:
            if record.usable():
                return record
            state = "revoked" if record.revoked_at is not None else "expired"
            raise GatewayError(401, f"this API key has been {state}", code="invalid_api_key")
        if not self.keys_required:
            return None
        if presented is None:
            raise GatewayError(
                401, "an API key is required (Authorization: Bearer <key> or x-api-key)", code="missing_api_key"
            )
        raise GatewayError(401, "invalid API key", code="invalid_api_key")

    def may_scrape(self, request: Request) -> bool:
        """Whether ``request`` may read ``/metrics``: always when unprotected, else with the master
        key or the metrics token (compared in constant time; the state store is not asked, so a
        scrape works while the database is down)."""
        if not self.metrics_protected:
            return True
        presented = _presented_key(request)
        return presented is not None and any(
            secret is not None and _same(presented, secret) for secret in (self.master_key, self.metrics_token)
        )


def _presented_key(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    key = request.headers.get("x-api-key", "").strip()
    return key or None


def _same(a: str, b: str) -> bool:
    import hmac

    return hmac.compare_digest(a.encode(), b.encode())


# ---------------------------------------------------------------------- generation


class Generation(Response):
    """One generation request in ``dialect``, run as its own ASGI response (streaming or not)."""

    def __init__(self, gateway: Gateway, request: Request, dialect: Dialect) -> None:
        super().__init__()
        self.gateway = gateway
        self.request = request
        self.dialect = dialect
        self.request_id: str = request.scope.get("state", {}).get("request_id", uuid.uuid4().hex)
        self.disconnected = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with self.gateway.holder.use() as runtime:
            try:
                route, model, key, parsed = await self.prepare(runtime)
                ticket = await self.gateway.store.admit(key, route, runtime.redact(model))  # the ledger keeps no key
            except GatewayError as error:
                self.count("-", "-", str(error.status))
                await self.dialect.error_response(error)(scope, receive, send)
                return
            run = _Run(self, runtime, route, model, ticket, parsed, key)
            await run.serve(receive, send)

    async def prepare(self, runtime: GatewayRuntime) -> tuple[str, str, KeyRecord | None, ParsedRequest]:
        """Authenticate, read and resolve the request (the checks before admission)."""
        who, raw, (route, model, owner) = await read_request(self.gateway, runtime, self.request)
        parsed = self.dialect.parse(raw, owner, model, target=route_target(runtime, route, owner))
        parsed = await self.dialect.resolve(self.gateway.store, who, parsed)
        require_messages(parsed, self.dialect.messages_field)
        return route, model, allowed(who, route), parsed

    def count(self, route: str, model: str, status: str) -> None:
        self.gateway.metrics.requests.labels(self.dialect.name, route, model, status).inc()


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


def route_target(runtime: GatewayRuntime, route: str, owner: str) -> Target:
    """The :class:`~harness_gateway.request.Target` of ``route`` served by plugins.yaml key ``owner``
    (``openai:work`` → options key ``openai``, the entry-point name)."""
    return Target(route, runtime.harness.route_wire(route), owner.partition(":")[0])


def allowed(who: KeyRecord | bool | None, route: str) -> KeyRecord | None:
    """The key record of ``who`` (``None`` without keys).

    Raises:
        GatewayError: 403 when the key may not use ``route``.
    """
    key = who if isinstance(who, KeyRecord) else None
    if key is not None and not key.allows(route):
        raise GatewayError(
            403, f"key {key.name!r} may not use route {route!r}", code="route_not_allowed", param="model"
        )
    return key


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
            parsed = parse_messages_request(
                raw, owner, model, target=route_target(runtime, route, owner), counting=True
            )
            require_messages(parsed, "messages")
            allowed(who, route)
            options = msgspec.structs.replace(parsed.options, provider=route, model=model)
            try:
                counted = await runtime.harness.count_tokens(options)
            except LlmError as exc:
                failure = exc.to_failure()
                raise from_failure(public_failure(failure, route, "count_tokens") or failure) from None
        except GatewayError as error:
            return ANTHROPIC_MESSAGES.error_response(error)
    return JSONResponse({"input_tokens": counted})


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
    if declared.isdigit() and int(declared) > limit:
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


async def settle_row(
    gateway: Gateway,
    runtime: GatewayRuntime,
    ticket: str,
    status: Status,
    usage: TokenUsage | None,
    cost: float,
    request_id: str,
) -> None:
    """Settle ledger row ``ticket`` (:meth:`SqlStore.settle`, bounded by twice ``db_timeout``);
    when the store fails or is too slow, keep the settlement for a retry (:meth:`SqlStore.defer`)
    and log it as an error naming the request, the row, its status and its cost (USD). Never raises."""
    try:
        with anyio.fail_after(runtime.config.db_timeout * 2):
            await gateway.store.settle(ticket, status, usage, cost)
    except (GatewayError, TimeoutError) as exc:
        gateway.store.defer(ticket, status, usage, cost)  # retried once the store answers
        logger.error(
            "request %s: could not settle ledger row %s (%s, %.6f USD), retried later: %s",
            request_id, ticket, status, cost, exc,
        )  # fmt: skip


def start_watches(run: _Run | _EmbedRun, request_id: str, dialect: str) -> list[RunWatch]:
    """Tell the gateway's observers that ``run`` (a generation or an embedding call, of API
    ``dialect``) starts; their watches, in observer order. The one place a :class:`RunInfo` is built."""
    key = run.key
    info = RunInfo(
        ticket=run.ticket,
        request_id=request_id,
        dialect=dialect,
        key_id=key.id if key is not None else None,
        key_name=key.name if key is not None else None,
        route=run.route,
        model=run.model,
        options=run.options,
        abort=run.abort,
        started_at=time.time(),
    )
    return [observer.started(info) for observer in run.gateway.observers]


class _Run:
    """One admitted generation: streams or collects it, watches the client, settles the ledger row."""

    def __init__(
        self,
        generation: Generation,
        runtime: GatewayRuntime,
        route: str,
        model: str,
        ticket: str,
        parsed: ParsedRequest,
        key: KeyRecord | None = None,
    ) -> None:
        self.generation = generation
        self.gateway = generation.gateway
        self.runtime = runtime
        self.route = route
        self.model = model
        self.ticket = ticket
        self.parsed = parsed
        self.abort = AbortSignal()
        self.options = msgspec.structs.replace(
            parsed.options,
            provider=route,
            model=model,
            abort=self.abort,
            metadata={"request_id": generation.request_id, "gateway_ticket": ticket},
        )
        self.options, self.notes = open_notes(self.options)  # fallback reports its attempts here
        self.key = key
        self.failure: Failure | None = None
        self.started = time.perf_counter()
        self.first_token: float | None = None
        self.usage: Any = None
        self.status: Status = "error"
        self.done = anyio.Event()
        self.finished = False
        """The stream's finish was seen: a disconnect after it aborts nothing."""
        self.output_chars = 0
        """Characters of content streamed so far (for :func:`estimated_usage`)."""
        self.public_id = generation.dialect.id_prefix + generation.request_id
        self.labels = (route, self.gateway.metrics.model_label(route, model))
        """The metric labels: ``model`` is ``other`` until the route streams content for a model
        it never served before (:meth:`served`); every metric but the in-flight gauge is recorded
        when the stream ends (:meth:`settle`)."""

    async def serve(self, receive: Receive, send: Send) -> None:
        metrics = self.gateway.metrics
        metrics.in_flight.labels(*self.labels).inc()
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self.watch, receive, group.cancel_scope)
                group.start_soon(self.record_usage)
                if self.parsed.stream:
                    await self.stream(send)
                else:
                    await self.collect(send)
                group.cancel_scope.cancel()
        finally:
            metrics.in_flight.labels(*self.labels).dec()

    async def watch(self, receive: Receive, scope: anyio.CancelScope) -> None:
        """Abort the upstream stream when the client disconnects; cancel it if it lingers."""
        await receive()  # the body was read: the only message left is http.disconnect (ASGI HTTP spec)
        if self.finished:  # the client left after the whole answer: nothing to abort
            return
        self.generation.disconnected = True
        logger.info("request %s: client disconnected, aborting the upstream stream", self.generation.request_id)
        self.abort.fire("the client disconnected")
        with anyio.move_on_after(ABORT_GRACE):
            await self.done.wait()
        scope.cancel()

    async def chunks(self, on_chunk: Callable[[StreamChunk], Awaitable[None]]) -> None:
        """Run the harness stream, passing every chunk on, then settle the ledger row (shielded)."""
        watches = self.watch_start()
        try:
            async with self.runtime.harness.stream(self.options) as stream:
                async for chunk in stream:
                    if type(chunk) is Finish and chunk.reason.failure is not None:
                        chunk = self.shown_finish(chunk, chunk.reason.failure)
                    for watch in watches:
                        watch.chunk(chunk)
                    if isinstance(chunk, _CONTENT):
                        self.output_chars += len(
                            chunk.arguments_delta if isinstance(chunk, ToolCallDelta) else chunk.text
                        )
                        if self.first_token is None:
                            self.first_token = time.perf_counter() - self.started
                            self.served()
                    if isinstance(chunk, Usage):
                        self.usage = chunk.usage
                    elif isinstance(chunk, Finish):
                        self.finished = True
                        kind = chunk.reason.kind
                        self.failure = chunk.reason.failure
                        self.status = "error" if kind == "error" else "aborted" if kind == "aborted" else "complete"
                    await on_chunk(chunk)
        finally:
            # no finish: cancelled because the client went away (aborted) or by a bug (error)
            self.status = self.status if self.finished else "aborted" if self.generation.disconnected else "error"
            latency = time.perf_counter() - self.started
            with anyio.CancelScope(shield=True):
                cost = await self.settle()
                await self.watch_end(watches, cost, latency)
            self.done.set()

    def member(self) -> tuple[str, str]:
        """``(route, model)`` that serves the stream: a ``fallback`` target or ``balance`` member
        noted by the middleware, else the requested ones. Spend is priced by it."""
        notes = self.notes
        return notes.served_route or self.route, notes.served_model or self.model

    def ending(self, finish: Finish) -> Ending:
        """What :meth:`Dialect.conclude` is told about how this generation ended."""
        route, model = self.member()
        retention = self.runtime.config.responses.retention_seconds
        source = self.runtime.harness.routes().get(route)
        return Ending(
            store=self.gateway.store, retention=retention, parsed=self.parsed, route=route, model=model,
            source=source, finish=finish,
        )  # fmt: skip

    def served(self) -> None:
        """The route streamed content for the model: it keeps its own ``model`` label from now on
        (:meth:`GatewayMetrics.served`), and this stream moves to it in the in-flight gauge."""
        metrics = self.gateway.metrics
        metrics.served(self.route, self.model)
        metrics.served(*self.member())
        labels = (self.route, metrics.model_label(self.route, self.model))
        if labels != self.labels:
            metrics.in_flight.labels(*self.labels).dec()
            metrics.in_flight.labels(*labels).inc()
            self.labels = labels

    async def record_usage(self) -> None:
        """Every :data:`RECORD_EVERY` seconds while the request runs, record its usage so far in
        its ledger row when it grew (the reported usage, else :func:`estimated_usage`), so a
        process killed mid-stream is charged it; a store fault is logged and the stream goes on."""
        store, prices = self.gateway.store, self.runtime.prices
        seen: tuple[int, Any] = (0, None)
        while True:
            await anyio.sleep(RECORD_EVERY)
            if (self.output_chars, self.usage) == seen:
                continue
            seen = (self.output_chars, self.usage)
            usage = self.usage if self.usage is not None else estimated_usage(self.options, self.output_chars)
            try:
                await store.record(self.ticket, usage, request_cost(prices, *self.member(), usage))
            except GatewayError as exc:
                logger.warning("request %s: could not record its usage so far: %s", self.generation.request_id, exc)

    def shown_finish(self, chunk: Finish, failure: Failure) -> Finish:
        """``chunk`` as clients, observers and the console see it: a transport failure's detail
        (upstream URL, OS error) goes to the server log and a stable message replaces it
        (:func:`~harness_gateway.errors.public_failure`)."""
        shown = public_failure(failure, self.route, self.generation.request_id)
        if shown is None:
            return chunk
        logger.warning("request %s: route %r: %s", self.generation.request_id, self.route, failure.message)
        return msgspec.structs.replace(chunk, reason=msgspec.structs.replace(chunk.reason, failure=shown))

    def watch_start(self) -> list[RunWatch]:
        """Tell the gateway's observers that this generation starts; their watches."""
        return start_watches(self, self.generation.request_id, self.generation.dialect.name)

    async def watch_end(self, watches: list[RunWatch], cost: float, latency: float) -> None:
        """Tell every watch how the generation ended (an observer's fault is logged, never raised)."""
        notes = self.notes
        attempts = tuple(
            f"{a.route}/{a.model}: {a.failure.code if a.failure else 'skipped (cooling down)'}"
            for a in notes.attempts
            if a.failure is not None or a.skipped
        )
        end = RunEnd(
            status=self.status,
            usage=self.usage,
            cost=cost,
            first_token_s=self.first_token,
            latency_s=latency,
            served_route=notes.served_route or self.route,
            served_model=notes.served_model or self.model,
            attempts=attempts,
            failure=self.failure,
        )
        for watch in watches:
            try:
                await watch.ended(end)
            except Exception:
                logger.exception("request %s: an observer failed at the end of the stream", self.generation.request_id)

    async def settle(self) -> float:
        """Record metrics and settle the ledger row; the cost charged (USD)."""
        runtime, gateway = self.runtime, self.gateway
        cost = request_cost(runtime.prices, *self.member(), self.usage)
        gateway.metrics.ended(
            self.generation.dialect.name, self.labels, self.member(), self.status,
            latency=time.perf_counter() - self.started,
            first_token=self.first_token,  # observed with the final labels (the model may be served now)
            cost=cost, usage=self.usage,
        )  # fmt: skip
        await settle_row(gateway, runtime, self.ticket, self.status, self.usage, cost, self.generation.request_id)
        return cost

    # ------------------------------------------------------------------ non-streaming

    async def collect(self, send: Send) -> None:
        assembler = BlockAssembler()

        async def feed(chunk: StreamChunk) -> None:
            assembler.feed(chunk)

        await self.chunks(feed)
        finish = assembler.finish
        assert finish is not None, "the runtime ends every stream with one finish"
        dialect = self.generation.dialect
        response: Response
        if finish.kind == "error" and finish.failure is not None:
            response = dialect.error_response(from_failure(finish.failure))
        else:
            message = assembler.message(route=self.route)
            try:
                ended = _finish_of(assembler)
                body = dialect.response(self.public_id, self.parsed, message, assembler.usage, ended)
                await dialect.conclude(self.ending(ended), body)
                response = JSONResponse(body)
            except GatewayError as error:
                response = dialect.error_response(error)
        await response({"type": "http"}, _no_receive, send)

    # ------------------------------------------------------------------ streaming

    async def stream(self, send: Send) -> None:
        encoder = self.generation.dialect.encoder(self.public_id, self.parsed.model, self.parsed)
        out, pending = anyio.create_memory_object_stream[bytes | GatewayError](RELAY_BUFFER)
        state: dict[str, bool] = {"started": False, "flushed": False}

        async def produce() -> None:
            async with out:

                async def feed(chunk: StreamChunk) -> None:
                    if not state["started"]:
                        if (
                            isinstance(chunk, Finish)
                            and chunk.reason.kind == "error"
                            and chunk.reason.failure is not None
                        ):
                            await out.send(
                                from_failure(chunk.reason.failure)
                            )  # failed before any output: an HTTP error
                            return
                        state["started"] = True
                        await _put(out, encoder.start())
                    if isinstance(chunk, Finish):
                        await self.generation.dialect.conclude(self.ending(chunk), encoder)
                    data = encoder.feed(chunk)
                    if data:
                        await _put(out, data)
                    if isinstance(chunk, Finish):
                        await _put(out, _LAST)
                    elif not state["flushed"] and isinstance(chunk, _CONTENT):
                        state["flushed"] = True  # the first token goes out now, not with the next batch
                        await anyio.lowlevel.checkpoint()

                await self.chunks(feed)

        keepalive = self.runtime.config.keepalive

        async def deliver() -> None:  # the sender: its own task, so the upstream request starts at once
            async with pending:
                first = await _receive(pending, keepalive)
                if isinstance(first, GatewayError):
                    await self.generation.dialect.error_response(first)({"type": "http"}, _no_receive, send)
                    return
                headers = [(b"content-type", b"text/event-stream; charset=utf-8")]
                headers += [(k.encode(), v.encode()) for k, v in _STREAM_HEADERS.items()]
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                item: bytes | GatewayError | None = first
                while item is not _LAST:
                    if isinstance(item, GatewayError):  # failed before any output, after a keep-alive went out
                        await send({"type": "http.response.body", "body": encoder.error(item), "more_body": True})
                        break  # the error is the terminal event
                    body, following = (KEEPALIVE, None) if item is None else _ready(pending, item)
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                    item = following if following is not None else await _receive(pending, keepalive)
                await send({"type": "http.response.body", "body": b"", "more_body": False})

        async with anyio.create_task_group() as group:
            group.start_soon(deliver)
            await produce()


_LAST: Final = GatewayError(500, "the terminal event was sent")
"""Sent after the finish's events: the response ends there, no keep-alive may follow, and the
ledger is settled after the client has its whole answer."""


async def _receive(pending: Any, keepalive: float) -> bytes | GatewayError | None:
    """The next item; ``None`` after ``keepalive`` seconds of silence.

    The runtime ends every stream with one finish, after which :data:`_LAST` comes: the channel
    never runs dry before it (``anyio.EndOfStream`` would mean a broken contract, and propagates).
    """
    with anyio.move_on_after(keepalive):
        item: bytes | GatewayError = await pending.receive()
        return item
    return None


async def _put(out: Any, item: bytes | GatewayError) -> None:
    """Queue ``item`` for the sender without a checkpoint while the buffer has room, so the
    events of one upstream read reach the sender together (:func:`_ready` joins them)."""
    try:
        out.send_nowait(item)
    except anyio.WouldBlock:
        await out.send(item)


def _ready(pending: Any, body: bytes) -> tuple[bytes, bytes | GatewayError | None]:
    """``body`` joined with the bytes already queued behind it (one write for the client instead
    of one per event; nothing waits for more), and the first queued item that is not bytes
    (``None`` when the queue ran empty)."""
    parts = [body]
    while True:
        try:
            item: bytes | GatewayError = pending.receive_nowait()
        except anyio.WouldBlock:
            return b"".join(parts), None
        if not isinstance(item, bytes):
            return b"".join(parts), item
        parts.append(item)


def _finish_of(assembler: BlockAssembler) -> Finish:
    """The :class:`Finish` chunk (with ``replay_state``) the assembler saw."""
    return Finish(reason=assembler.finish, replay_state=assembler.replay_state)  # type: ignore[arg-type]


async def _no_receive() -> Message:  # pragma: no cover - plain responses never read the request
    return {"type": "http.disconnect"}


# ---------------------------------------------------------------------- embeddings


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
                parsed = parse_embeddings_request(raw, target=Target(route, None, owner.partition(":")[0]))
                key = allowed(who, route)
                ticket = await gateway.store.admit(key, route, runtime.redact(model))  # the ledger keeps no key
            except GatewayError as error:
                gateway.metrics.requests.labels(EMBEDDINGS_API, "-", "-", str(error.status)).inc()
                await OPENAI_CHAT.error_response(error)(scope, receive, send)
                return
            run = _EmbedRun(self, runtime, route, model, ticket, parsed, key)
            response = await run.serve(receive)
            await response(scope, receive, send)


class _EmbedRun:
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
        self.options = msgspec.structs.replace(parsed.options, provider=route, model=model)
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
                cost = request_cost(self.runtime.prices, self.route, self.model, self.usage)
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
            return OPENAI_CHAT.error_response(from_failure(self.failure))
        if isinstance(outcome, Aborted):
            self.status = "aborted"
            self.failure = LlmError("ABORTED", abort_reason(self.abort)).to_failure()
            return OPENAI_CHAT.error_response(from_failure(self.failure))
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
        await anyio.sleep(RECORD_EVERY)
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


# ---------------------------------------------------------------------- other endpoints


def build_app(gateway: Gateway) -> Starlette:
    """The Starlette application of ``gateway`` (wrapped in the request-id layer)."""

    def generation(dialect: Dialect) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return Generation(gateway, request, dialect)

        return endpoint

    async def counting(request: Request) -> Response:
        return await count_tokens(gateway, request)

    async def embedding(request: Request) -> Response:
        return Embedding(gateway, request)

    async def models(request: Request) -> Response:
        dialect = ANTHROPIC_MESSAGES if "anthropic-version" in request.headers else OPENAI_CHAT
        try:
            who = await gateway.authenticate(request)
        except GatewayError as error:
            return dialect.error_response(error)
        async with gateway.holder.use() as runtime:
            ids = await _model_ids(runtime, who)
        data = [{"id": name, "object": "model", "created": 0, "owned_by": owner} for name, owner in ids]
        return JSONResponse({"object": "list", "data": data})

    async def healthz(request: Request) -> Response:
        try:
            await gateway.store.ping()
        except GatewayError as error:
            return OPENAI_CHAT.error_response(error)
        return JSONResponse({"status": "ok", "in_flight": gateway.holder.current.in_flight})

    async def metrics(request: Request) -> Response:
        if not gateway.may_scrape(request):
            error = GatewayError(
                401, "/metrics requires the master key or the metrics token (Authorization: Bearer <token>)",
                code="invalid_api_key",
            )  # fmt: skip
            return OPENAI_CHAT.error_response(error)
        return Response(gateway.metrics.render(), media_type=CONTENT_TYPE)

    routes = [
        *(Route(dialect.path, generation(dialect), methods=["POST"]) for dialect in DIALECTS),
        Route("/v1/messages/count_tokens", counting, methods=["POST"]),
        *responses_routes(gateway),
        Route(EMBEDDINGS_PATH, embedding, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        *admin_routes(gateway),
        *console_routes(gateway),
    ]
    app = Starlette(routes=routes, exception_handlers={404: unknown_endpoint, 405: unknown_endpoint})
    return RequestIdMiddleware(app)  # type: ignore[return-value]


DIALECTS: Final[tuple[Dialect, ...]] = (OPENAI_CHAT, ANTHROPIC_MESSAGES, OPENAI_RESPONSES)
"""The dialects served, each at its ``POST`` endpoint (:mod:`harness_gateway.dialect`)."""

_ENDPOINTS: Final = ", ".join(
    [
        *(f"POST {dialect.path}" for dialect in DIALECTS),
        "POST /v1/messages/count_tokens",
        f"POST {EMBEDDINGS_PATH}",
        "GET /v1/models",
    ]
)


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
        error = GatewayError(404, f"{what}: no such endpoint (served: {_ENDPOINTS})", code="unknown_endpoint")
    response = dialect.error_response(error)
    response.headers.update(headers)
    return response


async def _model_ids(runtime: GatewayRuntime, who: KeyRecord | bool | None) -> list[tuple[str, str]]:
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
    for alias, target in runtime.aliases.items():
        route = target.partition("/")[0]
        if not isinstance(who, KeyRecord) or who.allows(route):
            ids.append((alias, f"alias of {target}"))
    return ids


def admin_routes(gateway: Gateway) -> list[Route]:
    """``/admin/keys``: create, list and revoke keys with the master key."""

    async def admin(request: Request) -> Response:
        try:
            who = await gateway.authenticate(request) if _presented_key(request) else None
            if who is not True:
                raise GatewayError(401, "the master key is required for /admin", code="invalid_api_key")
            if request.method == "GET":
                keys = await gateway.store.list_keys()
                return JSONResponse({"data": [msgspec.to_builtins(k) for k in keys]})
            if request.method == "DELETE":
                revoked = await gateway.store.revoke(request.path_params["key"])
                if not revoked:
                    raise GatewayError(404, f"no live key {request.path_params['key']!r}", code="key_not_found")
                return JSONResponse({"revoked": revoked})
            raw = decode_json(await read_body(request, 64 * 1024))
            try:
                spec = msgspec.convert(raw, KeySpec)
            except (msgspec.ValidationError, ValueError) as exc:
                raise bad_request("", f"invalid key spec: {exc}") from None
            plain, record = await gateway.store.create_key(spec)
            return JSONResponse({"key": plain, **msgspec.to_builtins(record)}, status_code=201)
        except GatewayError as error:
            return OPENAI_CHAT.error_response(error)

    return [
        Route("/admin/keys", admin, methods=["GET", "POST"]),
        Route("/admin/keys/{key}", admin, methods=["DELETE"]),
    ]


class RequestIdMiddleware:
    """Gives every HTTP request an id (the client's ``x-request-id`` when sane, else a new one),
    echoes it in the ``x-request-id`` response header and logs one access line with it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope["headers"]).get(b"x-request-id", b"").decode("latin-1")
        request_id = incoming if _REQUEST_ID.match(incoming) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        status = {"code": 0}
        started = time.perf_counter()

        async def tagged(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", request_id.encode())]}
            await send(message)

        try:
            await self.app(scope, receive, tagged)
        finally:
            logger.info(
                "request %s %s %s -> %s in %.3fs",
                request_id, scope["method"], scope["path"], status["code"], time.perf_counter() - started,
            )  # fmt: skip
