"""The generation relay: one admitted generation streamed (SSE) or collected for the client in its
dialect, the upstream aborted when the client leaves, the ledger row recorded and settled.

:class:`Generation` is the ASGI response of one generation request (authenticated, parsed,
resolved, checked and admitted first); :class:`Relay` runs it once admitted. The dialect object
(:mod:`harness_gateway.dialect`) parses, encodes and shapes errors: this module is written once
for every dialect.

The gateway runs on asyncio (uvicorn, with its ``asyncio`` or ``uvloop`` loop), so a request's
helper tasks (the client watch, the stream's sender) are asyncio tasks and its wake-ups asyncio
futures, tied to the request by the anyio cancel scopes they cancel: an anyio task group costs
~40 µs per request with a task that ends, ~90 µs with one it cancels, against ~6 and ~14 µs for
the asyncio task (BENCHMARKS.md, issue 25, cost per request). The core under it stays on anyio.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Final

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Message, Receive, Scope, Send

import harness_gateway.accounting as accounting
from harness_core import (
    AbortSignal,
    BlockAssembler,
    Failure,
    Finish,
    FinishReason,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    Usage,
    open_record,
)
from harness_gateway.accounting import settle_row, start_watches
from harness_gateway.auth import allowed
from harness_gateway.dialect import Dialect, Ending
from harness_gateway.errors import GatewayError, finish_error, public_abort, public_failure
from harness_gateway.files import located_refusal, noting_places
from harness_gateway.gateway import Gateway
from harness_gateway.intake import read_request, require_messages, route_target
from harness_gateway.keys import KeyRecord
from harness_gateway.observe import RunEnd, RunWatch
from harness_gateway.request import ParsedRequest
from harness_gateway.runtime import ABORT_GRACE, GatewayRuntime
from harness_gateway.spend import estimated_usage, generation_bound, generation_floor, is_priced, request_cost
from harness_gateway.sse import KEEPALIVE
from harness_gateway.store import Status

__all__ = ["ABORT_GRACE", "RELAY_BUFFER", "Generation", "Relay"]

logger = logging.getLogger("harness_gateway")


RELAY_BUFFER: Final = 64
"""Events a stream's producer queues for its sender before it waits (and other streams run):
the events of one upstream read go out in writes of at most this many. Events never wait for
more to come: the first one queued wakes the sender, which runs once the producer awaits the
next upstream read, so each read's events leave together and at once (:class:`_Outbox`)."""


_STREAM_HEADERS: Final = {"cache-control": "no-cache", "x-accel-buffering": "no"}
_CONTENT: Final = (TextDelta, ReasoningDelta, ToolCallDelta)


class Generation(Response):
    """One generation request in ``dialect``, run as its own ASGI response (streaming or not)."""

    def __init__(self, gateway: Gateway, request: Request, dialect: Dialect) -> None:
        super().__init__()
        self.gateway = gateway
        self.request = request
        self.dialect = dialect
        self.request_id: str = request.scope.get("state", {}).get("request_id") or uuid.uuid4().hex
        self.disconnected = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with self.gateway.holder.use() as runtime:
            try:
                route, model, key, parsed = await self.prepare(runtime)
                bound, floor, priced = None, 0.0, True  # what a budgeted key reserves (priced only then: the hot path)
                if key is not None and key.budget is not None:
                    bound = generation_bound(runtime.prices, route, model, parsed.options)
                    if bound is None:
                        floor = generation_floor(runtime.prices, route, model, parsed.options)
                        priced = floor > 0 or is_priced(runtime.prices, route, model)  # (a floor is a price)
                redacted = runtime.redact(model)  # no key kept
                ticket = await self.gateway.store.admit(key, route, redacted, bound=bound, floor=floor, priced=priced)
            except GatewayError as error:
                self.count("-", "-", str(self.dialect.error_status(error)))  # as answered: 402 on Messages
                await self.dialect.error_response(error)(scope, receive, send)
                return
            run = Relay(self, runtime, route, model, ticket, parsed, key)
            await run.serve(receive, send)

    async def prepare(self, runtime: GatewayRuntime) -> tuple[str, str, KeyRecord | None, ParsedRequest]:
        """Authenticate, read and resolve the request (the checks before admission)."""
        who, raw, (route, model, owner) = await read_request(self.gateway, runtime, self.request)
        with noting_places() as places:  # where each file was: a route's refusal of one names it
            parsed = self.dialect.parse(raw, owner, model, target=route_target(runtime, route))
        if places:
            parsed = msgspec.structs.replace(parsed, files=tuple(places))
        parsed = await self.dialect.resolve(self.gateway.store, who, parsed)
        require_messages(parsed, self.dialect.messages_field)
        return route, model, allowed(who, route), parsed

    def count(self, route: str, model: str, status: str) -> None:
        self.gateway.metrics.requests.labels(self.dialect.name, route, model, status).inc()


class Relay:
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
            route=route,
            model=model,
            abort=self.abort,
            metadata={"request_id": generation.request_id, "gateway_ticket": ticket},
        )
        self.options, self.record = open_record(self.options)  # the core fills it (fallback: attempts)
        self.key = key
        self.failure: Failure | None = None
        self.refused: str | None = None
        """The request field of the file the route refused (:meth:`shown_finish`): the ``param``
        of the error answered (:meth:`answer`)."""
        self.started = time.perf_counter()
        self.first_token: float | None = None
        self.usage: Any = None
        self.status: Status = "error"
        self.done = asyncio.Event()
        self.finished = False
        """The stream's finish was seen: a disconnect after it aborts nothing."""
        self.output_chars = 0
        """Characters of content streamed so far (for :func:`estimated_usage`)."""
        self.recorded: tuple[int, Any] = (0, None)
        """``(output_chars, usage)`` when the usage so far was last recorded (:meth:`record_so_far`)."""
        self.request_id = generation.request_id
        self.public_id = generation.dialect.id_prefix + ticket
        """The id the client sees (``chatcmpl-…``, ``msg_…``, ``resp_…``): the ledger row's, made by
        the gateway. Never the request id, which a client may choose (``x-request-id``): a stored
        Response's id must be unique, and one key must not take the id of another's."""
        self.labels = (route, self.gateway.metrics.model_label(route, model))
        """The metric labels: ``model`` is ``other`` until the route streams content for a model
        it never served before (:meth:`served`); every metric but the in-flight gauge is recorded
        when the stream ends (:meth:`settle`)."""

    async def serve(self, receive: Receive, send: Send) -> None:
        """Stream or collect the generation to ``send`` while :meth:`watch` waits for the client
        to leave; the process's :class:`~harness_gateway.recorder.UsageRecorder` records its
        usage so far meanwhile (:meth:`record_so_far`)."""
        metrics, recorder = self.gateway.metrics, self.gateway.recorder
        metrics.in_flight.labels(*self.labels).inc()
        recorder.add(self, accounting.RECORD_EVERY)
        self.runtime.aborts.add(self.abort)  # aborted at the drain timeout (RuntimeHolder.retire)
        lingering = anyio.CancelScope()  # cancelled by the watch when an aborted stream does not end
        watch = asyncio.get_running_loop().create_task(self.watch(receive, lingering))
        try:
            with lingering:
                if self.parsed.stream:
                    await self.stream(send)
                else:
                    await self.collect(send)
        finally:
            watch.cancel()  # (it waits for the client's disconnect: nothing to wait for)
            self.runtime.aborts.discard(self.abort)
            self.runtime.drained.discard(self.abort)
            recorder.discard(self)
            metrics.in_flight.labels(*self.labels).dec()

    async def watch(self, receive: Receive, scope: anyio.CancelScope) -> None:
        """Abort the upstream stream when the client disconnects; cancel it (``scope``) if it
        lingers. Run as its own task by :meth:`serve`, which cancels it when the request ends. A
        ``receive`` that fails (a bug or a server fault) is logged and cancels the request: it can
        no longer be watched."""
        try:
            await receive()  # the body was read: the only message left is http.disconnect (ASGI HTTP spec)
        except Exception:
            logger.exception("request %s: watching the client failed; the request is cancelled", self.request_id)
            scope.cancel()
            return
        if self.finished:  # the client left after the whole answer: nothing to abort
            return
        self.generation.disconnected = True
        logger.info("request %s: client disconnected, aborting the upstream stream", self.generation.request_id)
        self.abort.fire("the client disconnected")
        with anyio.move_on_after(ABORT_GRACE):
            await self.done.wait()
        scope.cancel()

    async def chunks(
        self, on_chunk: Callable[[StreamChunk], Awaitable[None] | None], settled: Callable[[], None] | None = None
    ) -> None:
        """Run the harness stream, passing every chunk on, then settle the ledger row (shielded),
        call ``settled`` and tell the observers how it ended.

        ``on_chunk`` handles one chunk synchronously and returns ``None``, or an awaitable when
        it must wait (room in a buffer, a dialect's conclusion): a text delta, the common chunk,
        costs no coroutine of its own. ``settled``: the row is settled (the stream's answer may
        end: :meth:`stream` holds its last events until then)."""
        watches = self.watch_start()
        try:
            async with self.runtime.harness.stream(self.options) as stream:
                async for chunk in stream:
                    kind = type(chunk)
                    if kind is TextDelta or kind is ReasoningDelta:  # the hot path: exact types first
                        self.output_chars += len(chunk.text)  # type: ignore[union-attr]
                        if self.first_token is None:
                            self.first_token = time.perf_counter() - self.started
                            self.served()
                    else:
                        chunk = self.noted(chunk)
                    for watch in watches:
                        watch.chunk(chunk)
                    waiting = on_chunk(chunk)
                    if waiting is not None:
                        await waiting
        finally:
            # no finish: cancelled because the client went away (aborted) or by a bug (error)
            self.status = self.status if self.finished else "aborted" if self.generation.disconnected else "error"
            latency = time.perf_counter() - self.started
            with anyio.CancelScope(shield=True):
                cost = await self.settle()
                if settled is not None:
                    settled()
                await self.watch_end(watches, cost, latency)
            self.done.set()

    def noted(self, chunk: StreamChunk) -> StreamChunk:
        """Note a chunk that is not a text or reasoning delta of the exact types (content,
        usage, the finish) as :meth:`chunks` does; the chunk to pass on (a finish's transport
        failure replaced by :meth:`shown_finish`, an aborted one's failure by :meth:`shown_abort`)."""
        if isinstance(chunk, _CONTENT):
            self.output_chars += len(chunk.arguments_delta if isinstance(chunk, ToolCallDelta) else chunk.text)
            if self.first_token is None:
                self.first_token = time.perf_counter() - self.started
                self.served()
        elif isinstance(chunk, Usage):
            self.usage = chunk.usage
        elif isinstance(chunk, Finish):
            if chunk.reason.kind == "aborted":
                chunk = self.shown_abort(chunk)
            elif chunk.reason.failure is not None:
                chunk = self.shown_finish(chunk, chunk.reason.failure)
            self.finished = True
            kind = chunk.reason.kind
            self.failure = chunk.reason.failure
            self.status = "error" if kind == "error" else "aborted" if kind == "aborted" else "complete"
        return chunk

    def member(self) -> tuple[str, str]:
        """``(route, model)`` that serves the stream: a ``fallback`` target or ``balance`` member
        noted by the middleware, else the requested ones. Spend is priced by it."""
        record = self.record
        return record.served_route or self.route, record.served_model or self.model

    def ending(self, finish: Finish) -> Ending:
        """What :meth:`Dialect.conclude` is told about how this generation ended."""
        route, model = self.member()
        retention = self.runtime.config.responses.retention_seconds
        source = self.runtime.harness.route_owner(route)
        return Ending(
            store=self.gateway.store, retention=retention, parsed=self.parsed, route=route, model=model,
            source=source, finish=finish, redact=self.runtime.redact,
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

    async def record_so_far(self) -> None:
        """Record the usage so far in the ledger row when it grew since the last record (the
        reported usage, else :func:`estimated_usage`), so a process killed mid-stream is charged
        it; nothing once the stream has ended (:attr:`done`: it is being settled). A store fault
        is logged and the stream goes on. Called every :data:`RECORD_EVERY` seconds while the
        request runs by the process's :class:`~harness_gateway.recorder.UsageRecorder` (one task
        for every request, not one each: BENCHMARKS.md, issue 25, cost per request)."""
        if self.done.is_set():
            return
        seen = (self.output_chars, self.usage)
        if seen == self.recorded:
            return
        self.recorded = seen
        usage = self.usage if self.usage is not None else estimated_usage(self.options, self.output_chars)
        cost = request_cost(self.runtime.prices, *self.member(), usage)
        try:
            await self.gateway.store.record(self.ticket, usage, cost)
        except GatewayError as exc:
            logger.warning("request %s: could not record its usage so far: %s", self.request_id, exc)

    def shown_finish(self, chunk: Finish, failure: Failure) -> Finish:
        """``chunk`` as clients, observers and the console see it: a transport failure's detail
        (upstream URL, OS error) goes to the server log and a stable message replaces it
        (:func:`~harness_gateway.errors.public_failure`); a route's refusal of a file of the
        request names the field that held it and the route asked for
        (:func:`~harness_gateway.files.located_refusal`; the field is noted in :attr:`refused`)."""
        located = located_refusal(failure, self.parsed.files, self.route, self.parsed.model)
        if located is not None:
            self.refused, shown = located
            # the model and route are shown as every output shows them: a secret in them masked
            shown = msgspec.structs.replace(shown, message=self.runtime.redact(shown.message))
        else:
            public = public_failure(failure, self.route, self.generation.request_id)
            if public is None:
                return chunk
            shown = public
            logger.warning("request %s: route %r: %s", self.generation.request_id, self.route, failure.message)
        return msgspec.structs.replace(chunk, reason=msgspec.structs.replace(chunk.reason, failure=shown))

    def answer(self, reason: FinishReason) -> GatewayError | None:
        """The error the client's answer ends with (:func:`~harness_gateway.errors.finish_error`),
        ``param`` naming the refused file's field when the route refused one (:attr:`refused`)."""
        failed = finish_error(reason)
        if failed is not None and self.refused is not None:
            failed.param = self.refused
        return failed

    def shown_abort(self, chunk: Finish) -> Finish:
        """An aborted finish ``chunk`` as clients, observers and the console see it: its failure
        replaced by :func:`~harness_gateway.errors.public_abort` (the gateway's drain, the reason
        the gateway fired this request's signal with, or a stable message for an abort upstream,
        whose detail goes to the server log), so the client's answer ends with its dialect's
        error, never a complete reply."""
        abort, failure = self.abort, chunk.reason.failure
        reason = abort.reason if abort.fired else None
        if reason is None:
            detail = failure.message if failure is not None else "no reason given"
            logger.warning("request %s: route %r aborted the generation: %s", self.request_id, self.route, detail)
        shown = public_abort(reason, self.route, self.request_id, drained=abort in self.runtime.drained)
        return msgspec.structs.replace(chunk, reason=msgspec.structs.replace(chunk.reason, failure=shown))

    def watch_start(self) -> list[RunWatch]:
        """Tell the gateway's observers that this generation starts; their watches."""
        return start_watches(self, self.generation.request_id, self.generation.dialect.name)

    async def watch_end(self, watches: list[RunWatch], cost: float, latency: float) -> None:
        """Tell every watch how the generation ended (an observer's fault is logged, never raised)."""
        record = self.record
        attempts = tuple(
            f"{a.route}/{a.model}: {a.failure.code if a.failure else 'skipped (cooling down)'}"
            for a in record.attempts
            if a.failure is not None or a.skipped
        )
        end = RunEnd(
            status=self.status,
            usage=self.usage,
            cost=cost,
            first_token_s=self.first_token,
            latency_s=latency,
            served_route=record.served_route or self.route,
            served_model=record.served_model or self.model,
            attempts=attempts,
            failure=self.failure,
        )
        for watch in watches:
            try:
                await watch.ended(end)
            except Exception:
                logger.exception("request %s: an observer failed at the end of the stream", self.generation.request_id)

    def charged(self) -> Any:
        """The usage this generation is charged when it ends now (:meth:`settle`): the reported
        one, else, for a stream that did not complete and streamed content, what it streamed
        (:func:`estimated_usage`); ``None`` when it has neither. What a failed stream's answer
        shows as its usage (the Responses ``response.failed``), so the client is shown what its
        key is charged."""
        if self.usage is None and self.status != "complete" and self.output_chars:
            return estimated_usage(self.options, self.output_chars)
        return self.usage

    async def settle(self) -> float:
        """Record metrics and settle the ledger row; the cost charged (USD).

        A stream that ended early after streaming content (the client's disconnect, the drain
        timeout of a shutdown or reload, an upstream cut, a bug) and reported no usage (an
        aborted upstream stream has none) is charged what it streamed (:func:`estimated_usage`),
        as a process killed mid-stream is: never nothing. One that completed without a usage is
        charged 0, and :func:`request_cost` says so."""
        self.usage = self.charged()
        runtime, gateway = self.runtime, self.gateway
        cost = request_cost(runtime.prices, *self.member(), self.usage, completed=self.status == "complete")
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

        await self.chunks(assembler.feed)
        finish = assembler.finish
        assert finish is not None, "the runtime ends every stream with one finish"
        dialect = self.generation.dialect
        response: Response
        failed = self.answer(finish)  # an aborted answer is an error too (503 for the drain), never a 200
        if failed is not None:
            response = dialect.error_response(failed)
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
        dialect = self.generation.dialect
        encoder = dialect.encoder(self.public_id, self.parsed.model, self.parsed)
        outbox = _Outbox()
        begun = flushed = False
        # How the answer ends (its last events and _LAST, or an error before any output), held
        # until the ledger row is settled (:meth:`chunks` calls ``release``): a client may send
        # its next request the moment it sees its answer end, and the key's budget must no
        # longer count this one as running then (it did, and refused that request as waiting).
        last: list[bytes] = []
        ending: list[GatewayError] = []

        def release() -> None:
            for data in last:
                outbox.put(data)
            if ending:
                outbox.end(ending[0])

        def feed(chunk: StreamChunk) -> Awaitable[None] | None:
            nonlocal begun, flushed
            if not begun:
                failed = self.answer(chunk.reason) if isinstance(chunk, Finish) else None
                if failed is not None:
                    ending.append(failed)  # failed or aborted before any output: an HTTP error
                    return None
                begun = True
                outbox.put(encoder.start())
            if type(chunk) is Finish:
                return finished(chunk)
            data = encoder.feed(chunk)
            if data:
                outbox.put(data)
            if not flushed and isinstance(chunk, _CONTENT):
                flushed = True  # the first token goes out now, not with the next batch
                return outbox.flush()
            return outbox.room() if len(outbox.parts) >= RELAY_BUFFER else None

        async def finished(chunk: Finish) -> None:
            if self.status != "complete" and self.usage is None:  # failed or aborted: the usage it is charged
                self.usage = self.charged()
                if self.usage is not None:
                    encoder.feed(Usage(self.usage))  # (``b""``: a usage has no event of its own)
            await dialect.conclude(self.ending(chunk), encoder)
            last.append(encoder.feed(chunk))  # (``b""`` joins as nothing: the end comes with it)
            ending.append(_LAST)

        keepalive = self.runtime.config.keepalive

        stopped = anyio.CancelScope()  # cancelled when sending fails: nothing more can go out

        async def deliver() -> None:  # the sender: its own task, so the upstream request starts at once
            try:
                await send_all()
            except Exception:  # a bug or a server fault (uvicorn's send ignores a gone client)
                logger.exception("request %s: sending the stream failed; the stream is stopped", self.request_id)
                stopped.cancel()

        async def send_all() -> None:
            body, end = await outbox.take(keepalive)
            if not body and end is not None and end is not _LAST:
                await dialect.error_response(end)({"type": "http"}, _no_receive, send)
                return
            headers = [(b"content-type", b"text/event-stream; charset=utf-8")]
            headers += [(k.encode(), v.encode()) for k, v in _STREAM_HEADERS.items()]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            while end is None:  # nothing queued after ``keepalive`` seconds: a keep-alive
                await send({"type": "http.response.body", "body": body or KEEPALIVE, "more_body": True})
                body, end = await outbox.take(keepalive)
            if end is not _LAST:  # failed before any output, after a keep-alive went out
                body += encoder.error(end)
            # the last events and the end of the body in one message: one write (chunked: the
            # last chunk and the terminating zero-length one, RFC 9112 section 7.1)
            await send({"type": "http.response.body", "body": body, "more_body": False})

        sender = asyncio.get_running_loop().create_task(deliver())
        try:
            with stopped:
                await self.chunks(feed, release)
                outbox.end(_LAST)  # (the runtime ends every stream with a finish, which ended it already)
                await sender  # the last writes
        finally:
            sender.cancel()  # (it ended already, unless the producer failed or was cancelled)


_LAST: Final = GatewayError(500, "the terminal event was sent")
"""Ends the outbox after the finish's events: the response ends there, no keep-alive may follow.
Both are queued once the ledger row is settled (:meth:`Relay.stream`)."""


class _Outbox:
    """The encoded events of one stream that its sender has not sent yet, in order, and how the
    stream ended (:meth:`end`). The producer queues events (:meth:`put`) without a checkpoint:
    the first one wakes a waiting sender, which runs only once the producer awaits its next
    upstream read, so the events of one read leave in one write (:meth:`take` joins them) and
    none waits for a later read; the producer waits for room (:meth:`room`,
    :data:`RELAY_BUFFER` events) so other streams run."""

    __slots__ = ("_end", "_ready", "_room", "parts")

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self._end: GatewayError | None = None
        self._ready: asyncio.Future[None] | None = None  # the sender waits on it for something to send
        self._room: asyncio.Future[None] | None = None  # the producer waits on it for the sender

    def put(self, data: bytes) -> None:
        """Queue ``data`` (encoded events) and wake the sender if it waits (it runs at the
        producer's next checkpoint; a sender already woken costs nothing more)."""
        self.parts.append(data)
        if self._ready is not None:
            self._wake()

    def end(self, how: GatewayError) -> None:
        """The stream ended (:data:`_LAST`, or an error before any output); the first end counts."""
        if self._end is None:
            self._end = how
        self._wake()

    def _wake(self) -> None:
        ready, self._ready = self._ready, None
        if ready is not None:
            _resolve(ready)

    async def flush(self) -> None:
        """Let the sender take what is queued now (the first token), then go on."""
        self._wake()
        await asyncio.sleep(0)

    async def room(self) -> None:
        """Wait until the sender took the queued events (called when :data:`RELAY_BUFFER` are queued)."""
        self._wake()
        room = self._room = asyncio.get_running_loop().create_future()
        await room

    async def take(self, keepalive: float) -> tuple[bytes, GatewayError | None]:
        """Everything queued, joined (``b""`` after ``keepalive`` seconds of silence), and how
        the stream ended when it did (``None`` while it goes on)."""
        if not self.parts and self._end is None:
            loop = asyncio.get_running_loop()
            ready = self._ready = loop.create_future()
            timer = loop.call_later(keepalive, _resolve, ready)
            try:
                await ready
            finally:
                timer.cancel()
                self._ready = None
        parts, self.parts = self.parts, []
        room, self._room = self._room, None
        if room is not None:
            _resolve(room)
        return b"".join(parts), self._end


def _resolve(waiter: asyncio.Future[None]) -> None:
    """Wake whoever waits on ``waiter`` (a wake-up already given, or a cancelled wait, stays as it is)."""
    if not waiter.done():
        waiter.set_result(None)


def _finish_of(assembler: BlockAssembler) -> Finish:
    """The :class:`Finish` chunk (with ``replay_state``) the assembler saw."""
    return Finish(reason=assembler.finish, replay_state=assembler.replay_state)  # type: ignore[arg-type]


async def _no_receive() -> Message:  # pragma: no cover - plain responses never read the request
    return {"type": "http.disconnect"}
