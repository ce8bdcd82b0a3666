"""The console's HTTP routes under ``/console``: pages, the Live event stream, forms.

Pages (server-rendered, Jinja2; charts drawn by a vendored Chart.js from ``/console/static``):

    ``GET  /console/spend``             cost and tokens per hour/day by key, route, model or member; budgets
    ``GET  /console/traffic``           requests, errors by code, latency and TTFT percentiles, fallbacks
    ``GET  /console/live``              streams in flight; ``GET /console/live/events`` is their SSE feed
    ``POST /console/live/{id}/abort``   abort one (operator)
    ``GET  /console/requests[/{id}]``   recent requests; one request's messages and chunk timeline
                                        (``{id}``: its ticket, or the ``x-request-id`` the gateway answered)
    ``GET  /console/keys``              keys; ``POST /console/keys`` creates one (shown once),
                                        ``POST /console/keys/{id}/budget`` sets its budget,
                                        ``POST /console/keys/{id}/revoke`` revokes one
    ``GET|POST /console/login``, ``POST /console/logout``

Access rules: :mod:`harness_gateway.console.auth`. Without a master key every ``/console`` URL
answers 404 saying how to turn the console on. Every response carries a Content-Security-Policy
that allows only the console's own scripts and styles, and ``cache-control: no-store``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from typing import Any, Final
from urllib.parse import quote

import anyio
import jinja2
import msgspec
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from harness_core import Redactor, mask_strings
from harness_gateway.console.auth import (
    LOGIN_COOKIE,
    SESSION_COOKIE,
    SESSION_SECONDS,
    csrf_token,
    new_login_token,
    new_session,
    same,
    session_digest,
    valid_session,
)
from harness_gateway.console.live import ConsoleObserver
from harness_gateway.console.records import Records, RecordStore
from harness_gateway.console.sessions import MemorySessions, Sessions, StoreSessions
from harness_gateway.console.stats import BUCKETS, GROUPS, TOKEN_KINDS, spend, traffic
from harness_gateway.errors import GatewayError
from harness_gateway.keys import KeyChange, KeySpec, KeySpecError, mask_keys, shown_time, split_routes
from harness_gateway.request import decimal
from harness_gateway.sse import sse_event
from harness_gateway.store import SqlStore

__all__ = ["LIVE_LIFETIME", "Console", "FormError", "console_routes", "key_spec"]

_HEADERS: Final = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self';"
        " frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}
LIVE_LIFETIME: Final = 300.0
"""Seconds one Live event stream lasts before the browser is told to reconnect."""
_FILTERS: Final = ("status", "route", "request_id")
_STATUSES: Final = ("complete", "error", "aborted")
_LIVE_TICK: Final = 1.0  # seconds between two Live snapshots when nothing changes (elapsed time moves)
_LIVE_MIN_GAP: Final = 0.2  # seconds: changes closer than this are sent together

_CONTROLS: Final = {
    **{code: 0x2400 + code for code in range(0x20) if chr(code) not in "\t\n\r"},
    0x7F: 0x2421,
    **dict.fromkeys(range(0x80, 0xA0), 0xFFFD),
}
"""What :func:`_shown` replaces: a C0 control (but tab, line feed and carriage return) and DEL by
its Unicode control picture (U+0000 → ␀ U+2400), a C1 control by U+FFFD."""


def _shown(value: Any) -> Any:
    """A template's output ``value`` as a page shows it (Jinja's ``finalize``, before escaping):
    a text without control characters (:data:`_CONTROLS`), which HTML cannot carry (a parse error;
    browsers drop a NUL or show U+FFFD) and escaping leaves in place, though a record holds what a
    client sent (a model id with a NUL); markup the console built, and other values, unchanged."""
    if isinstance(value, str) and not hasattr(value, "__html__"):  # markup (``| safe``) has __html__
        return value.translate(_CONTROLS)
    return value


_ENV: Final = jinja2.Environment(
    loader=jinja2.PackageLoader("harness_gateway.console", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    finalize=_shown,
)


def _number(value: Any, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def _usd(value: Any) -> str:
    return "–" if value is None else f"${value:,.6f}".rstrip("0").rstrip(".") if value else "$0"


def _when(value: float | None) -> str:
    """``value`` (unix seconds) as the pages show it: ``2030-01-31 12:00:00 UTC``, ``–`` for
    ``None`` (:func:`~harness_gateway.keys.shown_time`: never an error, a 500)."""
    return "–" if value is None else shown_time(value)


_ENV.filters.update(number=_number, usd=_usd, when=_when, tojson_safe=lambda v: json.dumps(v).replace("<", "\\u003c"))


class FormError(ValueError):
    """A form field with a bad value (its message names the field)."""


class Console:
    """The console's pages over request records; Live and Keys when given what they need.

    Args:
        master: the secret that signs people in (the gateway's master key, or the token
            ``harness console`` made); sessions and CSRF tokens are derived from it.
        records: where Spend, Traffic and the inspector read requests.
        store: the gateway's state store: the Keys page and the budgets on Spend (``None``: no Keys page).
        served: the routes a new key may name (the Keys form refuses others, as ``/admin/keys``
            does; ``None``: not checked).
        observer: the streams in flight: the Live page (``None``: no Live page).
        sessions: where sign-in sessions live, so signing out ends them (default: this process's
            memory; the gateway passes its state store).

    What the request pages show passes :attr:`mask` (``master`` and the gateway's key format,
    :func:`~harness_gateway.keys.mask_keys`) even when the records were stored masked already:
    the local console shows a prompt log written by processes that knew neither.
    """

    def __init__(
        self,
        master: str,
        records: Records,
        *,
        store: SqlStore | None = None,
        observer: ConsoleObserver | None = None,
        sessions: Sessions | None = None,
        served: Callable[[], Collection[str]] | None = None,
    ) -> None:
        self.master = master
        self._served = served
        self.sessions: Sessions = sessions if sessions is not None else MemorySessions()
        self.records = records
        secrets = Redactor()
        secrets.add(master)
        self.mask: Callable[[str], str] = lambda text: mask_keys(secrets(text))
        """Masks the sign-in secret and every gateway key in text the pages show from records."""
        self._store = store
        self._observer = observer

    @property
    def store(self) -> SqlStore:
        """The state store (its routes exist only when there is one)."""
        assert self._store is not None, "the Keys routes are registered only with a store"
        return self._store

    @property
    def observer(self) -> ConsoleObserver:
        """The streams in flight (its routes exist only when there is one)."""
        assert self._observer is not None, "the Live routes are registered only with an observer"
        return self._observer

    # ------------------------------------------------------------------ access

    async def session_of(self, request: Request) -> str | None:
        """The caller's session (cookie value, or the master key sent as a bearer token), or
        ``None``: a cookie counts when it is signed with the master key, not expired and still in
        :attr:`sessions` (not signed out). Kept on ``request.state`` for :meth:`render`.

        Raises:
            GatewayError: 503 when the session store cannot be read.
        """
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        session: str | None = None
        if scheme.lower() == "bearer" and same(value.strip(), self.master):
            session = value.strip()
        else:
            cookie = request.cookies.get(SESSION_COOKIE)
            if cookie and valid_session(self.master, cookie) and await self.sessions.alive(session_digest(cookie)):
                session = cookie
        request.state.console_session = session
        return session

    def render(self, request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        """An HTML page, with the security headers and the session's CSRF token (the session
        :meth:`session_of` found for ``request``; none before it ran: the sign-in page)."""
        session: str | None = getattr(request.state, "console_session", None)
        page = _ENV.get_template(template).render(
            request_path=request.url.path,
            csrf=csrf_token(self.master, session) if session else "",
            signed_in=session is not None,
            show_live=self._observer is not None,
            show_keys=self._store is not None,
            **context,
        )
        return HTMLResponse(page, status_code=status, headers=_HEADERS)

    def guard(self, handler: Callable[[Request], Awaitable[Response]], *, form: bool = False) -> Callable[..., Any]:
        """``handler`` behind the session check (GET: redirect to the login page; POST: 403) and,
        for forms, the CSRF check; a store outage is a 503 page."""

        async def guarded(request: Request) -> Response:
            try:
                session = await self.session_of(request)
            except GatewayError as error:
                return self.render(request, "error.html", error.status, title="Unavailable", message=error.message)
            if session is None:
                if request.method == "GET":
                    target = quote(request.url.path, safe="/")
                    return RedirectResponse(f"/console/login?next={target}", status_code=303, headers=_HEADERS)
                return self.render(request, "error.html", 403, title="Not signed in", message="Sign in first.")
            if form:
                data = await request.form()
                token = data.get("csrf")
                if not isinstance(token, str) or not same(token, csrf_token(self.master, session)):
                    message = "The form's CSRF token is missing or wrong: reload the page and submit it again."
                    return self.render(request, "error.html", 403, title="Form refused", message=message)
            try:
                return await handler(request)
            except GatewayError as error:
                return self.render(request, "error.html", error.status, title="Unavailable", message=error.message)

        return guarded

    # ------------------------------------------------------------------ login

    async def login(self, request: Request) -> Response:
        target: str = request.query_params.get("next", "/console/spend")
        if not target.startswith("/console/") or target.startswith("//"):
            target = "/console/spend"
        response: Response
        if request.method == "GET":
            fresh = new_login_token()
            response = self.render(request, "login.html", title="Sign in", token=fresh, next=target, failed=False)
            response.set_cookie(LOGIN_COOKIE, fresh, path="/console/login", httponly=True, samesite="strict")
            return response
        data = await request.form()
        token, key = data.get("csrf"), data.get("master_key")  # str, or UploadFile for a file part
        cookie = request.cookies.get(LOGIN_COOKIE, "")
        if not isinstance(token, str) or not cookie or not same(token, cookie):
            message = "The sign-in form expired: reload it and sign in again."
            return self.render(request, "error.html", 403, title="Form refused", message=message)
        if not isinstance(key, str) or not same(key, self.master):
            fresh = new_login_token()
            response = self.render(request, "login.html", 401, title="Sign in", token=fresh, next=target, failed=True)
            response.set_cookie(LOGIN_COOKIE, fresh, path="/console/login", httponly=True, samesite="strict")
            return response
        session = new_session(self.master)
        try:
            await self.sessions.add(session_digest(session), time.time() + SESSION_SECONDS)
        except GatewayError as error:
            return self.render(request, "error.html", error.status, title="Unavailable", message=error.message)
        response = RedirectResponse(target, status_code=303, headers=_HEADERS)
        response.set_cookie(
            SESSION_COOKIE,
            session,
            max_age=SESSION_SECONDS,
            path="/console",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        response.delete_cookie(LOGIN_COOKIE, path="/console/login")
        return response

    async def logout(self, request: Request) -> Response:
        cookie = request.cookies.get(SESSION_COOKIE)
        if cookie:  # a script signed in with the master key has no session to end
            await self.sessions.remove(session_digest(cookie))
        response = RedirectResponse("/console/login", status_code=303, headers=_HEADERS)
        response.delete_cookie(SESSION_COOKIE, path="/console")
        return response

    # ------------------------------------------------------------------ pages

    async def spend_page(self, request: Request) -> Response:
        bucket = request.query_params.get("bucket", "hour")
        by = request.query_params.get("by", "model")
        if bucket not in BUCKETS or by not in GROUPS:
            return self.render(
                request, "error.html", 400, title="Bad query",
                message=f"bucket must be one of {', '.join(BUCKETS)} and by one of {', '.join(GROUPS)}",
            )  # fmt: skip
        now = time.time()
        since = now - (48 * 3600 if bucket == "hour" else 30 * 86400)
        rows = mask_strings(await self.records.since(since), self.mask)
        data = spend(rows, since=since, now=now, bucket=bucket, by=by)  # type: ignore[arg-type]
        keys = await self._store.list_keys() if self._store is not None else []
        budgets = [
            {"name": k.name, "budget": k.budget, "spent": k.spent, "percent": min(100.0, 100 * k.spent / k.budget)}
            for k in keys
            if k.budget is not None and k.revoked_at is None
        ]
        return self.render(
            request, "spend.html", title="Spend", data=data, bucket=bucket, by=by, budgets=budgets,
            kinds=TOKEN_KINDS, groups=GROUPS, buckets=list(BUCKETS),
        )  # fmt: skip

    async def traffic_page(self, request: Request) -> Response:
        hours = decimal(request.query_params.get("hours", "24")) or 0
        if not 1 <= hours <= 720:
            return self.render(request, "error.html", 400, title="Bad query", message="hours must be 1 to 720")
        now = time.time()
        since = now - hours * 3600
        data = traffic(mask_strings(await self.records.since(since), self.mask), since=since, now=now)
        return self.render(request, "traffic.html", title="Traffic", data=data, hours=hours)

    async def live_page(self, request: Request) -> Response:
        return self.render(request, "live.html", title="Live", streams=self.observer.snapshot())

    async def live_events(self, request: Request) -> Response:
        """``text/event-stream``: an ``event: streams`` with the JSON list of streams in flight at
        once, on every change (at most every 0.2 s) and every second (elapsed times move). Each
        response ends after :data:`LIVE_LIFETIME` seconds (EventSource reconnects by itself), so an
        open page never holds a connection for long (graceful shutdown waits for open ones)."""

        async def events() -> AsyncIterator[bytes]:
            yield b"retry: 2000\n\n"
            ends = anyio.current_time() + LIVE_LIFETIME
            while True:
                payload = json.dumps(self.observer.snapshot()).encode()
                yield sse_event("streams", payload)
                if anyio.current_time() >= ends:  # the browser reconnects (``retry``)
                    return
                with anyio.move_on_after(_LIVE_TICK):
                    await self.observer.wait_change()
                await anyio.sleep(_LIVE_MIN_GAP)

        headers = {**_HEADERS, "x-accel-buffering": "no"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    async def live_abort(self, request: Request) -> Response:
        ticket = request.path_params["ticket"]
        if not self.observer.abort(ticket, "an operator"):
            message = f"Stream {ticket} is no longer in flight."
            return self.render(request, "error.html", 404, title="Not in flight", message=message)
        return RedirectResponse("/console/live", status_code=303, headers=_HEADERS)

    async def requests_page(self, request: Request) -> Response:
        """The newest 200 requests, filtered by ``status``, ``route`` and ``request_id`` (exact)."""
        match = {
            name: request.query_params[name].strip() for name in _FILTERS if request.query_params.get(name, "").strip()
        }
        if match.get("status", "complete") not in _STATUSES:
            message = f"status must be one of {', '.join(_STATUSES)}"
            return self.render(request, "error.html", 400, title="Bad query", message=message)
        rows = mask_strings(await self.records.recent(200, **match), self.mask)
        return self.render(request, "requests.html", title="Requests", rows=rows, match=match, statuses=_STATUSES)

    async def request_page(self, request: Request) -> Response:
        """One request by its ticket (the ledger row id: the links of the request list); an id
        that is no ticket is looked up as an ``x-request-id`` (what a client has: the gateway
        echoes it in that header): one request with it redirects (303) to its ticket's page, several
        (a client may reuse its own id) to the request list filtered by it; none is a 404."""
        ticket = request.path_params["ticket"]
        found = await self.records.get(ticket)
        if found is None:
            named = await self.records.recent(2, request_id=ticket)
            if len(named) == 1:
                target = f"/console/requests/{quote(named[0]['id'], safe='')}"
                return RedirectResponse(target, status_code=303, headers=_HEADERS)
            if named:
                target = f"/console/requests?request_id={quote(ticket, safe='')}"
                return RedirectResponse(target, status_code=303, headers=_HEADERS)
            message = (
                f"No request {ticket} is recorded, by ticket or x-request-id "
                f"(the console keeps the newest {self.records.keep})."
            )
            return self.render(request, "error.html", 404, title="Not found", message=message)
        row, detail = mask_strings(found, self.mask)
        return self.render(request, "request.html", title=f"Request {row['request_id']}", row=row, detail=detail)

    async def keys_page(
        self,
        request: Request,
        *,
        created: dict[str, Any] | None = None,
        error: str = "",
        values: dict[str, str] | None = None,
    ) -> Response:
        keys = await self.store.list_keys()
        status = 201 if created else 400 if error else 200
        form = values or {}
        return self.render(
            request, "keys.html", status, title="Keys", keys=keys, created=created, error=error, form=form
        )

    async def keys_create(self, request: Request) -> Response:
        data = await request.form()
        values = {k: v for k, v in data.items() if isinstance(v, str) and k != "csrf"}
        try:
            spec = key_spec(values)
            problem = spec.unserved(self._served()) if self._served is not None else None
            if problem is not None:
                raise FormError(f"routes: {problem}")
        except FormError as exc:
            return await self.keys_page(request, error=str(exc), values=values)
        plain, record = await self.store.create_key(spec)
        return await self.keys_page(request, created={"key": plain, "name": record.name, "id": record.id})

    async def keys_budget(self, request: Request) -> Response:
        """``POST /console/keys/{id}/budget``: set a live key's budget to the form's ``budget``
        (USD; empty: unlimited) through :meth:`~harness_gateway.store.SqlStore.update_key`, then
        back to the keys page; a value a key may not have is the page again with the error."""
        key_id = request.path_params["key"]
        data = await request.form()
        try:
            typed = data.get("budget")
            if not isinstance(typed, str):  # absent (or a file): never read as "unlimited"
                raise FormError("budget: missing (leave the field empty for an unlimited budget)")
            budget = _form_number({"budget": typed}, "budget", float)
            changed = await self.store.update_key(key_id, KeyChange(budget=budget))
        except FormError as exc:
            return await self.keys_page(request, error=str(exc))
        except KeySpecError as exc:
            return await self.keys_page(request, error=f"budget: {exc.reason}")
        if changed is None:
            return self.render(request, "error.html", 404, title="Not found", message=f"No live key {key_id}.")
        return RedirectResponse("/console/keys", status_code=303, headers=_HEADERS)

    async def keys_revoke(self, request: Request) -> Response:
        key_id = request.path_params["key"]
        if not await self.store.revoke(key_id):
            return self.render(request, "error.html", 404, title="Not found", message=f"No live key {key_id}.")
        return RedirectResponse("/console/keys", status_code=303, headers=_HEADERS)

    def routes(self) -> list[BaseRoute]:
        """The ``/console`` routes."""
        guard = self.guard

        async def home(request: Request) -> Response:
            return RedirectResponse("/console/spend", status_code=303)

        routes: list[BaseRoute] = [
            Route("/console", home, methods=["GET"]),
            Route("/console/login", self.login, methods=["GET", "POST"]),
            Route("/console/logout", guard(self.logout, form=True), methods=["POST"]),
            Route("/console/spend", guard(self.spend_page), methods=["GET"]),
            Route("/console/traffic", guard(self.traffic_page), methods=["GET"]),
            Route("/console/requests", guard(self.requests_page), methods=["GET"]),
            Route("/console/requests/{ticket}", guard(self.request_page), methods=["GET"]),
            Mount("/console/static", StaticFiles(packages=[("harness_gateway.console", "static")]), name="static"),
        ]
        if self._observer is not None:
            routes += [
                Route("/console/live", guard(self.live_page), methods=["GET"]),
                Route("/console/live/events", guard(self.live_events), methods=["GET"]),
                Route("/console/live/{ticket}/abort", guard(self.live_abort, form=True), methods=["POST"]),
            ]
        if self._store is not None:
            routes += [
                Route("/console/keys", guard(self.keys_page), methods=["GET"]),
                Route("/console/keys", guard(self.keys_create, form=True), methods=["POST"]),
                Route("/console/keys/{key}/budget", guard(self.keys_budget, form=True), methods=["POST"]),
                Route("/console/keys/{key}/revoke", guard(self.keys_revoke, form=True), methods=["POST"]),
            ]
        return routes


def key_spec(form: dict[str, str]) -> KeySpec:
    """The :class:`KeySpec` of the key form (empty fields = no limit).

    Raises:
        FormError: naming the field: an empty name, a non-number, or a value out of range.
    """
    values: dict[str, Any] = {"name": form.get("name", "").strip()}
    if form.get("routes", "").strip():
        values["routes"] = split_routes(form["routes"])
    for field, kind in (("budget", float), ("rpm", int), ("tpm", int), ("expires_days", float)):
        number = _form_number(form, field, kind)
        if number is not None:
            values[field] = number
    try:
        return msgspec.convert(values, KeySpec)
    except (msgspec.ValidationError, ValueError) as exc:
        raise FormError(str(exc)) from None


def _form_number(form: dict[str, str], field: str, kind: type[int] | type[float]) -> int | float | None:
    """The number typed in ``field`` of a key form (``None``: left empty, no limit).

    Raises:
        FormError: naming the field: not a (whole) number, or not finite.
    """
    text = form.get(field, "").strip()
    if not text:
        return None
    try:
        number = kind(text)
    except ValueError:
        expected = "a whole number" if kind is int else "a number"
        raise FormError(f"{field}: expected {expected}, got {text!r}") from None
    if isinstance(number, float) and not math.isfinite(number):
        raise FormError(f"{field}: expected a finite number, got {text!r}")
    return number


def console_routes(gateway: Any) -> list[BaseRoute]:
    """The console's routes for ``gateway``: its pages when a master key is configured, else a
    404 at every ``/console`` URL that says how to turn it on."""
    if gateway.master_key is None:

        async def off(request: Request) -> Response:
            message = "The console is off: set `master_key` in the gateway entry of plugins.yaml to turn it on."
            return PlainTextResponse(message, status_code=404)

        return [Route("/console", off), Route("/console/{rest:path}", off, methods=["GET", "POST"])]
    records = RecordStore(gateway.store)
    observer = ConsoleObserver(records, lambda: gateway.holder.current.redact)
    gateway.observers.append(observer)
    gateway.writers.append(records.writer)  # its writer task runs in the gateway's lifespan
    sessions = StoreSessions(records)
    console = Console(
        gateway.master_key,
        records,
        store=gateway.store,
        observer=observer,
        sessions=sessions,
        served=gateway.served_routes,
    )
    return console.routes()
