"""The console without a browser: access rules, forms, queries, records, timelines, statistics.

The pages are requested over real HTTP from a gateway served by uvicorn (``serve_gateway``); the
pure pieces (sessions, percentiles, buckets, the timeline, bounded records) are called directly.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from gw_helpers import Clients, console_rows, gateway_yaml, serve_gateway, store_expiries

from harness_core.abort import AbortSignal
from harness_core.errors import Failure
from harness_core.types import (
    BlockEnd,
    BlockStart,
    FileBlock,
    Finish,
    FinishReason,
    GenerateOptions,
    Message,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
)
from harness_gateway.console import auth, pages
from harness_gateway.console.live import ConsoleObserver
from harness_gateway.console.pages import FormError, key_spec
from harness_gateway.console.records import DETAIL_LIMIT, RecordStore, bounded_detail
from harness_gateway.console.sessions import StoreSessions
from harness_gateway.console.stats import percentile, spend, traffic
from harness_gateway.console.timeline import MAX_EVENTS, TEXT_LIMIT, Timeline, mask_text
from harness_gateway.errors import GatewayError
from harness_gateway.keys import mask_keys, new_key
from harness_gateway.observe import RunEnd, RunInfo
from harness_gateway.sqlite import SQLiteStore

MASTER = "mk-console-unit-0123456789"
HI = [{"role": "user", "content": "hi there"}]


FAKE_KEY = "sk-" + "abcdefghijklmnopqrstuvwx1234"  # built at run time: no key-shaped literal committed


def console_yaml(tmp_path: Path, extra: str = "", gateway: str = "") -> str:
    return gateway_yaml(f"    master_key: {MASTER}\n{gateway}", extra, db=tmp_path / "gw.sqlite")


def admin(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"authorization": f"Bearer {MASTER}"}, timeout=30)


def browser(url: str, cookies: dict[str, str] | None = None) -> httpx.Client:
    """A client of the console at ``url``, as a person's browser (cookies kept). Its timeout is a
    hang guard, as :func:`admin`'s: with httpx's default (5 s) a page timed out in a loaded xdist
    worker, where a full collection of the test process's heap pauses every thread (the
    in-process gateway's too) for seconds."""
    return httpx.Client(base_url=url, cookies=cookies, timeout=30)


async def _sessions(db: Path) -> list[tuple[Any, ...]]:
    """The rows of ``console_sessions`` in the SQLite file ``db``, read with a store of its own."""
    store = SQLiteStore(db)
    try:
        return await store.transaction(lambda tx: tx.all("SELECT digest FROM console_sessions"), write=False)
    finally:
        await store.aclose()


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page)
    assert found is not None
    return found.group(1)


# ---------------------------------------------------------------------- access


def test_console_is_off_without_a_master_key(tmp_path: Path) -> None:
    with serve_gateway(tmp_path, gateway_yaml(db=tmp_path / "gw.sqlite")) as running, browser(running.url) as http:
        for path in ("/console", "/console/spend", "/console/static/console.js"):
            response = http.get(path)
            assert response.status_code == 404
            assert "set `master_key`" in response.text
        assert http.post("/console/keys").status_code == 404


def test_sign_in_session_cookie_and_csrf(tmp_path: Path) -> None:
    with serve_gateway(tmp_path, console_yaml(tmp_path)) as running, browser(running.url) as http:
        home = http.get("/console")
        assert home.status_code == 303
        assert home.headers["location"] == "/console/spend"
        first = http.get("/console/spend")
        assert first.status_code == 303
        assert first.headers["location"] == "/console/login?next=/console/spend"
        assert http.post("/console/keys", data={"name": "x"}).status_code == 403  # no session: refused
        login = http.get("/console/login?next=//evil.example/")
        assert login.headers["content-security-policy"].startswith("default-src 'self'")
        token = re.search(r'name="csrf" value="([^"]+)"', login.text).group(1)  # type: ignore[union-attr]
        forged = http.post("/console/login", data={"csrf": "forged", "master_key": MASTER})  # the cookie is right
        assert forged.status_code == 403
        wrong = http.post("/console/login", data={"csrf": token, "master_key": "nope"})
        assert wrong.status_code == 401
        assert MASTER not in wrong.text
        token = re.search(r'name="csrf" value="([^"]+)"', wrong.text).group(1)  # type: ignore[union-attr]
        ok = http.post("/console/login?next=//evil.example/", data={"csrf": token, "master_key": MASTER})
        assert ok.status_code == 303
        assert ok.headers["location"] == "/console/spend"  # never off-site
        session = http.cookies[auth.SESSION_COOKIE]
        assert MASTER not in session
        assert "httponly" in ok.headers["set-cookie"].lower()
        assert "samesite=strict" in ok.headers["set-cookie"].lower()
        page = http.get("/console/keys")
        assert page.status_code == 200
        assert page.headers["cache-control"] == "no-store"
        csrf = csrf_of(page.text)
        refused = http.post("/console/keys", data={"name": "x", "csrf": "0" * 64})
        assert refused.status_code == 403
        assert "CSRF" in refused.text
        assert http.post("/console/keys", data={"name": "x"}).status_code == 403  # no token at all
        created = http.post("/console/keys", data={"name": "made-here", "csrf": csrf, "routes": "mock"})
        assert created.status_code == 201
        assert "made-here" in created.text
        unknown = http.post("/console/keys", data={"name": "typo", "csrf": csrf, "routes": "mock, mokc"})
        assert unknown.status_code == 400  # refused as /admin/keys and harness keys create refuse it
        assert "routes: &#39;mokc&#39; (did you mean &#39;mock&#39;?) not served by this gateway" in unknown.text
        nothing = http.post("/console/keys", data={"name": "empty", "csrf": csrf, "routes": " , "})
        assert nothing.status_code == 400  # a key with no route could use nothing (it was listed as "all")
        assert "routes must name at least one route" in nothing.text
        out = http.post("/console/logout", data={"csrf": csrf})
        assert out.status_code == 303
        assert auth.SESSION_COOKIE not in http.cookies
        assert http.get("/console/keys").status_code == 303


def test_sessions_are_hmacs_of_the_master_key() -> None:
    value = auth.new_session(MASTER, now=1000)
    assert auth.valid_session(MASTER, value, now=1000 + 60)
    assert not auth.valid_session(MASTER, value, now=1000 + auth.SESSION_SECONDS)  # expired
    assert not auth.valid_session(MASTER, value, now=999)  # from the future
    assert not auth.valid_session("another-master-key", value, now=1001)
    assert not auth.valid_session(MASTER, None)
    assert not auth.valid_session(MASTER, "abc.def")
    assert not auth.valid_session(MASTER, "1000..def")  # no nonce
    assert not auth.valid_session(MASTER, "\u00b2.nonce.mac")  # a digit int() refuses: no 500
    assert not auth.valid_session(MASTER, "\u0662.nonce.mac")  # an Arabic-Indic two
    assert not auth.valid_session(MASTER, value.replace(".", ".0", 1), now=1001)
    assert auth.new_session(MASTER, now=1000) != value  # a fresh nonce each time
    assert auth.session_digest(value) != value
    assert len(auth.session_digest(value)) == 64
    assert auth.csrf_token(MASTER, value) != auth.csrf_token(MASTER, auth.new_session(MASTER, now=1001))
    assert len(auth.new_login_token()) >= 22


# ---------------------------------------------------------------------- pages and forms


def test_a_keys_budget_is_set_from_the_keys_page(tmp_path: Path) -> None:
    settings = "    prices: {mock/echo: {input: 1000000, output: 1000000}}\n"  # 1 USD a token
    with serve_gateway(tmp_path, console_yaml(tmp_path, gateway=settings)) as running, admin(running.url) as http:
        csrf = auth.csrf_token(MASTER, MASTER)
        made = http.post("/admin/keys", json={"name": "capped", "budget": 2}).json()  # one "hi" request
        chat = {"model": "mock/echo", "messages": [{"role": "user", "content": "hi"}]}
        user = {"authorization": f"Bearer {made['key']}"}
        assert httpx.post(running.url + "/v1/chat/completions", json=chat, headers=user).status_code == 200
        assert httpx.post(running.url + "/v1/chat/completions", json=chat, headers=user).status_code == 429
        page = http.get("/console/keys").text
        assert f'action="/console/keys/{made["id"]}/budget"' in page
        assert f'id="budget-{made["id"]}" name="budget" value="2.0"' in page  # the budget, to edit
        raised = http.post(f"/console/keys/{made['id']}/budget", data={"csrf": csrf, "budget": "4"})
        assert (raised.status_code, raised.headers["location"]) == (303, "/console/keys")
        assert httpx.post(running.url + "/v1/chat/completions", json=chat, headers=user).status_code == 200
        for typed, shown in (("-1", "budget: must be a finite positive number"), ("lots", "budget: expected a number")):
            refused = http.post(f"/console/keys/{made['id']}/budget", data={"csrf": csrf, "budget": typed})
            assert refused.status_code == 400
            assert shown in refused.text
        unlimited = http.post(f"/console/keys/{made['id']}/budget", data={"csrf": csrf, "budget": " "})
        assert unlimited.status_code == 303
        [key] = [k for k in http.get("/admin/keys").json()["data"] if k["name"] == "capped"]
        assert (key["budget"], key["spent"]) == (None, 4.0)
        absent = http.post(f"/console/keys/{made['id']}/budget", data={"csrf": csrf})  # no field: not "unlimited"
        assert (absent.status_code, "budget: missing" in absent.text) == (400, True)
        assert http.post("/console/keys/nope/budget", data={"csrf": csrf, "budget": "1"}).status_code == 404
        assert http.post(f"/console/keys/{made['id']}/budget", data={"budget": "1"}).status_code == 403  # no token


def test_pages_answer_bad_queries_and_unknown_ids_with_located_errors(tmp_path: Path) -> None:
    with serve_gateway(tmp_path, console_yaml(tmp_path)) as running, admin(running.url) as http:
        bad = http.get("/console/spend?bucket=week")
        assert bad.status_code == 400
        assert "bucket must be one of hour, day" in bad.text
        assert http.get("/console/spend?by=colour").status_code == 400
        assert "hours must be 1 to 720" in http.get("/console/traffic?hours=0").text
        assert http.get("/console/traffic?hours=abc").status_code == 400
        assert http.get("/console/traffic?hours=%C2%B2").status_code == 400  # '²': isdigit, not int
        assert http.get("/console/traffic?hours=2").status_code == 200
        missing = http.get("/console/requests/nope")
        assert missing.status_code == 404
        assert "No request nope is recorded" in missing.text
        csrf = auth.csrf_token(MASTER, MASTER)
        gone = http.post("/console/live/nope/abort", data={"csrf": csrf})
        assert gone.status_code == 404
        assert "no longer in flight" in gone.text
        assert http.post("/console/keys/nope/revoke", data={"csrf": csrf}).status_code == 404
        invalid = http.post("/console/keys", data={"csrf": csrf, "name": " ", "budget": "2"})
        assert invalid.status_code == 400
        assert "name must not be empty" in invalid.text
        assert 'value="2"' in invalid.text  # the form keeps what was typed
        with http.stream("GET", "/console/live/events") as events:
            assert events.headers["content-type"].startswith("text/event-stream")
            lines = events.iter_lines()
            assert next(lines) == "retry: 2000"
            assert next(line for line in lines if line.startswith("event:")) == "event: streams"
            assert next(lines) == "data: []"


def test_the_keys_page_shows_a_stored_expiry_no_date_shows(tmp_path: Path) -> None:
    """A database written before expiries were bounded may hold one (``expires_at: 1e300``, or
    8.64e13 from ``expires_days: 1e9``): the Keys page shows it as far future; it was a 500. The
    form refuses such an expiry now, as ``/admin/keys`` does."""
    with serve_gateway(tmp_path, console_yaml(tmp_path)) as running, admin(running.url) as http:
        for name in ("days", "huge"):
            assert http.post("/admin/keys", json={"name": name}).status_code == 201
        store_expiries(tmp_path / "gw.sqlite", {"days": 8.64e13, "huge": 1e300})
        page = http.get("/console/keys")
        assert page.status_code == 200
        assert "<td>far future (8.64e+13)</td>" in page.text
        assert "<td>far future (1e+300)</td>" in page.text
        csrf = auth.csrf_token(MASTER, MASTER)
        refused = http.post("/console/keys", data={"csrf": csrf, "name": "later", "expires_days": "1e9"})
        assert refused.status_code == 400
        assert "expires_days must be at most" in refused.text
    assert pages._when(-1e300) == "far past (-1e+300)"  # no date either (no version stores one)
    assert (pages._when(0.0), pages._when(None)) == ("1970-01-01 00:00:00 UTC", "–")


def test_live_event_streams_end_after_their_lifetime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pages, "LIVE_LIFETIME", 0.0)
    with serve_gateway(tmp_path, console_yaml(tmp_path)) as running, admin(running.url) as http:
        body = http.get("/console/live/events").text  # returns: the response ended
    assert body == "retry: 2000\n\nevent: streams\ndata: []\n\n"


def test_a_store_outage_is_a_503_page(tmp_path: Path) -> None:
    with serve_gateway(tmp_path, console_yaml(tmp_path)) as running, admin(running.url) as http:

        async def down(*args: Any, **kwargs: Any) -> Any:
            raise GatewayError(503, "the gateway's SQLite state store is unavailable", code="store_unavailable")

        running.gateway.store.transaction = down
        page = http.get("/console/requests")
        assert page.status_code == 503
        assert "state store is unavailable" in page.text


def _sign_in(http: httpx.Client) -> str:
    login = http.get("/console/login")
    token = re.search(r'name="csrf" value="([^"]+)"', login.text).group(1)  # type: ignore[union-attr]
    assert http.post("/console/login", data={"csrf": token, "master_key": MASTER}).status_code == 303
    return http.cookies[auth.SESSION_COOKIE]


def test_signing_out_ends_a_copied_session_cookie(tmp_path: Path) -> None:
    with serve_gateway(tmp_path, console_yaml(tmp_path)) as running:
        with browser(running.url) as http, browser(running.url) as thief:
            copied = _sign_in(http)
            thief.cookies.set(auth.SESSION_COOKIE, copied, path="/console")
            assert thief.get("/console/spend").status_code == 200  # a copy works while the session lives
            with browser(running.url) as elsewhere:
                other = _sign_in(elsewhere)  # a second session is not affected
            csrf = csrf_of(http.get("/console/spend").text)
            assert http.post("/console/logout", data={"csrf": csrf}).status_code == 303
            refused = thief.get("/console/spend")
            assert refused.status_code == 303
            assert refused.headers["location"].startswith("/console/login")
            with browser(running.url, {auth.SESSION_COOKIE: other}) as second:
                assert second.get("/console/spend").status_code == 200
            stored = anyio.run(_sessions, running.gateway.store.path)  # a store of this thread's own
            assert [row[0] for row in stored] == [auth.session_digest(other)]  # digests only, the signed-out one gone
        with admin(running.url) as script:  # signed in with the master key itself: nothing to end
            out = script.post("/console/logout", data={"csrf": auth.csrf_token(MASTER, MASTER)})
            assert out.status_code == 303


def test_a_session_store_outage_is_a_503_page(tmp_path: Path) -> None:
    with serve_gateway(tmp_path, console_yaml(tmp_path)) as running, browser(running.url) as http:
        _sign_in(http)
        login = http.get("/console/login")
        token = re.search(r'name="csrf" value="([^"]+)"', login.text).group(1)  # type: ignore[union-attr]

        async def down(*args: Any, **kwargs: Any) -> Any:
            raise GatewayError(503, "the gateway's SQLite state store is unavailable", code="store_unavailable")

        running.gateway.store.transaction = down
        page = http.get("/console/spend")
        assert page.status_code == 503
        assert "state store is unavailable" in page.text
        signing_in = http.post("/console/login", data={"csrf": token, "master_key": MASTER})
        assert signing_in.status_code == 503


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_memory_sessions_expire_and_end() -> None:
    from harness_gateway.console.sessions import MemorySessions

    now = [1000.0]
    live = MemorySessions(clock=lambda: now[0])
    await live.add("a", 1010.0)
    await live.add("b", 2000.0)
    assert await live.alive("a")
    assert await live.alive("b")
    await live.remove("b")
    await live.remove("unknown")
    assert not await live.alive("b")
    now[0] = 1010.0
    assert not await live.alive("a")  # expired
    await live.add("c", 3000.0)  # drops the expired one
    assert await live.alive("c")
    assert not await live.alive("a")


def test_the_pages_mask_the_sign_in_secret_and_gateway_keys(tmp_path: Path) -> None:
    from harness_gateway.console.local import LocalRecords
    from harness_gateway.keys import new_key

    console = pages.Console("local-sign-in-token", LocalRecords(tmp_path / "u.sqlite", tmp_path / "l.sqlite"))
    assert console.mask(f"{new_key()} and local-sign-in-token") == "********** and **********"


def test_key_form_errors_name_the_field() -> None:
    assert key_spec({"name": "a", "budget": "1.5", "rpm": "3", "tpm": "", "expires_days": "2"}).rpm == 3
    with pytest.raises(FormError, match=r"rpm: expected a whole number, got '1\.5'"):
        key_spec({"name": "a", "rpm": "1.5"})
    with pytest.raises(FormError, match="budget: expected a number, got 'lots'"):
        key_spec({"name": "a", "budget": "lots"})
    with pytest.raises(FormError, match="budget: expected a finite number"):
        key_spec({"name": "a", "budget": "inf"})
    with pytest.raises(FormError, match="tpm must be a finite positive number"):
        key_spec({"name": "a", "tpm": "-4"})
    with pytest.raises(FormError, match="tpm must be at most 2147483647, what every state store can hold"):
        key_spec({"name": "a", "tpm": "99999999999999999999999"})  # was a 500 (SQLite's OverflowError)


def test_fallbacks_and_errors_reach_traffic_and_the_inspector(tmp_path: Path) -> None:
    extra = """\
  mock:broken: {routes: [broken], error: OVERLOADED}
  mock:down: {routes: [down], error: AUTH}
  fallback: {targets: {broken: [mock]}, cooldown: 0}"""
    with serve_gateway(tmp_path, console_yaml(tmp_path, extra)) as running, admin(running.url) as http:
        clients = Clients(running.url)
        try:
            clients.openai().chat.completions.create(model="broken/echo", messages=HI)  # type: ignore[arg-type]
            with pytest.raises(Exception, match="scripted mock error"):
                clients.openai().chat.completions.create(model="down/echo", messages=HI)  # type: ignore[arg-type]
        finally:
            clients.close()
        page = http.get("/console/traffic").text
        assert "broken/echo: OVERLOADED" in page
        assert "AUTH" in page
        rows = console_rows(running, http, 5)
        served = next(r for r in rows if r["route"] == "broken")
        assert (served["served_route"], served["attempts"]) == ("mock", ["broken/echo: OVERLOADED"])
        errors = http.get("/console/requests?status=error").text
        assert "down/echo" in errors
        assert "broken/echo" not in errors
        by_id = http.get(f"/console/requests?request_id={served['request_id']}&route=+broken+").text
        assert by_id.count('href="/console/requests/') == 1
        assert http.get("/console/requests?status=lost").status_code == 400
        detail = http.get(f"/console/requests/{served['id']}").text
        assert "Fallback attempts before the served target: broken/echo: OVERLOADED" in detail


def test_the_request_page_finds_a_request_by_its_x_request_id(tmp_path: Path) -> None:
    body = {"model": "mock/echo", "messages": HI}
    with serve_gateway(tmp_path, console_yaml(tmp_path)) as running, admin(running.url) as http:
        sent = httpx.post(running.url + "/v1/chat/completions", json=body, timeout=30)
        assert sent.status_code == 200
        request_id = sent.headers["x-request-id"]  # what the client has: the ticket is the console's own
        for _ in range(2):  # a client may send its own id, and reuse it
            reused = httpx.post(
                running.url + "/v1/chat/completions", json=body, headers={"x-request-id": "job-7"}, timeout=30
            )
            assert reused.headers["x-request-id"] == "job-7"
        rows = console_rows(running, http, 5)
        ticket = next(row["id"] for row in rows if row["request_id"] == request_id)
        assert ticket != request_id
        one = http.get(f"/console/requests/{request_id}", follow_redirects=False)
        assert (one.status_code, one.headers["location"]) == (303, f"/console/requests/{ticket}")
        page = http.get(f"/console/requests/{request_id}", follow_redirects=True)  # the ticket's page
        assert page.status_code == 200
        assert f"Request {request_id}" in page.text
        several = http.get("/console/requests/job-7", follow_redirects=False)
        assert (several.status_code, several.headers["location"]) == (303, "/console/requests?request_id=job-7")
        listed = http.get("/console/requests/job-7", follow_redirects=True).text
        assert listed.count('href="/console/requests/') == 2
        missing = http.get("/console/requests/job-8")
        assert missing.status_code == 404
        assert "No request job-8 is recorded, by ticket or x-request-id" in missing.text


def test_an_observer_that_fails_is_logged_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def started(self, info: RunInfo) -> Broken:
            return self

        def chunk(self, chunk: object) -> None:
            pass

        async def ended(self, end: RunEnd) -> None:
            raise RuntimeError("observer bug")

    with serve_gateway(tmp_path, console_yaml(tmp_path)) as running:
        running.gateway.observers.append(Broken())
        clients = Clients(running.url)
        try:
            with caplog.at_level(logging.ERROR, logger="harness_gateway"):
                reply = clients.openai().chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
        finally:
            clients.close()
    assert reply.choices[0].message.content == "hi there"
    assert "an observer failed at the end of the stream" in caplog.text


# ---------------------------------------------------------------------- records


def _row(ticket: str, started_at: float, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": ticket, "request_id": ticket, "dialect": "openai", "key_id": None, "key_name": None,
        "route": "mock", "model": "echo", "served_route": "mock", "served_model": "echo",
        "started_at": started_at, "status": "complete", "first_token_ms": 1.0, "latency_ms": 2.0,
        "input_tokens": 1, "output_tokens": 2, "cache_read_tokens": None, "cache_write_tokens": None,
        "reasoning_tokens": None, "cost": 0.5, "error_code": None, "error_message": None, "attempts": [],
    }  # fmt: skip
    return {**row, **changes}


class _LockedStore(SQLiteStore):
    migration_lock = "SELECT 1"  # PostgreSQL takes an advisory lock here


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_records_keep_the_newest_and_migrate_once(tmp_path: Path) -> None:
    store = _LockedStore(tmp_path / "gw.sqlite")
    try:
        records = RecordStore(store, keep=3)
        assert await records.migrate() == 3
        assert await records.migrate() == 3  # already in place
        assert await RecordStore(store).migrate() == 3  # another process: the version table says so
        for i in range(5):
            await records.insert(_row(f"r{i}", 100.0 + i), {"timeline": []})
        assert [r["id"] for r in await records.recent(10)] == ["r4", "r3", "r2"]
        assert [r["id"] for r in await records.since(103.0)] == ["r3", "r4"]
        await records.insert(_row("r5", 200.0, status="error", route="other"), {"timeline": []})
        assert [r["id"] for r in await records.recent(10, status="error", route="other")] == ["r5"]
        assert await records.recent(10, status="error", route="mock") == []
        with pytest.raises(ValueError, match="cannot filter requests by 'colour'"):
            await records.recent(10, colour="red")
        assert await records.get("r0") is None
        found = await records.get("r4")
        assert found is not None
        assert found[1] == {"timeline": []}
    finally:
        await store.aclose()


def test_details_are_bounded() -> None:
    events = [{"t": i, "event": "block-start", "pad": "x" * 200} for i in range(3000)]
    text = bounded_detail({"timeline": events, "messages": []})
    assert len(text) <= DETAIL_LIMIT
    kept = json.loads(text)
    assert kept["timeline_cut"] + len(kept["timeline"]) == 3000
    assert kept["timeline"][0]["t"] == 0  # the beginning is kept
    huge = bounded_detail({"timeline": [], "messages": [{"text": "y" * DETAIL_LIMIT}]})
    assert json.loads(huge) == {"timeline": [], "timeline_cut": 0, "messages": [], "messages_cut": True}
    # compact JSON, UTF-8 as it is; a lone surrogate (which UTF-8 cannot carry) written escaped
    assert bounded_detail({"messages": [{"text": "é"}]}) == '{"messages":[{"text":"é"}]}'
    lone = bounded_detail({"messages": [{"text": "a\ud800b"}]})
    assert "\\ud800" in lone
    assert json.loads(lone) == {"messages": [{"text": "a\ud800b"}]}
    with pytest.raises(TypeError):
        bounded_detail({"messages": [object()]})


# ---------------------------------------------------------------------- timeline


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_timeline_events_rates_and_masking() -> None:
    clock = _Clock()
    timeline = Timeline(clock)
    clock.now = 0.010
    timeline.feed(BlockStart(index=0, block_type="text"))
    for i in range(3):
        clock.now = 0.5 + i * 0.4  # seconds 0, 0 and 1
        timeline.feed(TextDelta(index=0, text="ab"))
    timeline.feed(BlockEnd(index=0, block=TextBlock("ababab")))
    timeline.feed(BlockStart(index=1, block_type="tool-call", id="c9", name="lookup_hunter2"))
    call = ToolCallBlock(id="c9", name="lookup_hunter2", arguments='{"q": "hunter2"}')
    timeline.feed(BlockEnd(index=1, block=call))
    timeline.feed(Usage(usage=TokenUsage(input_tokens=3, output_tokens=4, reasoning_tokens=1)))
    failure = Failure(code="OVERLOADED", message="busy, says hunter2", status=529)
    timeline.feed(Finish(reason=FinishReason(kind="error", failure=failure)))
    options = GenerateOptions(
        system="you are " + FAKE_KEY,
        messages=[
            Message(
                role="user", content=[TextBlock("use the db password hunter2"), FileBlock("image/png", data=b"\x89PNG")]
            ),
            Message(role="tool", content=[ToolResultBlock(tool_call_id="c1", content="42", is_error=True)]),
        ],
    )
    detail = timeline.detail(options, lambda text: text.replace("hunter2", "[REDACTED]"))
    assert detail["first_chunk_ms"] == 10.0
    assert detail["rates"] == [{"second": 0, "text": 2, "chars": 4}, {"second": 1, "text": 1, "chars": 2}]
    events = ["block-start", "block-end", "block-start", "block-end", "usage", "finish"]
    assert [e["event"] for e in detail["timeline"]] == events
    assert detail["timeline"][2]["name"] == "lookup_[REDACTED]"  # the text from outside is masked
    assert detail["tool_calls"] == [{"id": "c9", "name": "lookup_[REDACTED]", "arguments": '{"q": "[REDACTED]"}'}]
    assert detail["timeline"][4] == {
        "t": 1300.0,
        "event": "usage",
        "input_tokens": 3,
        "output_tokens": 4,
        "reasoning_tokens": 1,
    }
    assert detail["timeline"][5]["error"] == {"code": "OVERLOADED", "message": "busy, says [REDACTED]", "status": 529}
    rendered = json.dumps(detail["messages"])
    assert FAKE_KEY not in rendered
    assert "hunter2" not in rendered
    assert "image/png (4 bytes)" in rendered
    assert [m["role"] for m in detail["messages"]] == ["system", "user", "tool", "assistant"]
    assert detail["messages"][2]["content"][0] == {"type": "tool-result", "id": "c1", "text": "42", "error": True}
    assert detail["messages"][3]["content"][1]["name"] == "lookup_[REDACTED]"  # the reply's call


def test_timeline_bounds_events_seconds_and_text() -> None:
    clock = _Clock()
    timeline = Timeline(clock)
    for i in range(MAX_EVENTS + 5):
        timeline.feed(BlockStart(index=i, block_type="text"))
    clock.now = 4000.0  # beyond the kept seconds: counted in no bucket
    timeline.feed(TextDelta(index=0, text="late"))
    detail = timeline.detail(GenerateOptions(), str)
    assert detail["events_cut"] == 5
    assert detail["rates"] == []
    long = mask_text("z" * (TEXT_LIMIT + 10), str)
    assert long.endswith("… [10 more characters not kept]")


# ---------------------------------------------------------------------- live and statistics


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_live_registry_aborts_and_forgets(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "gw.sqlite")
    try:
        observer = ConsoleObserver(RecordStore(store), lambda: mask_keys)
        signal = AbortSignal()
        info = RunInfo("t1", "r1", "anthropic", "k", "team", "mock", "echo", GenerateOptions(), signal, 1.0)
        watch = observer.started(info)
        watch.chunk(Usage(usage=TokenUsage(input_tokens=1, output_tokens=7)))
        assert observer.snapshot()[0]["output_tokens"] == 7
        pasted = RunInfo("t0", "r0", "openai", None, None, "mock", new_key(), GenerateOptions(), AbortSignal(), 0.5)
        observer.started(pasted)
        assert observer.snapshot()[0]["model"] == "**********"  # a key sent as a model id is not shown live
        del observer.streams["t0"]
        assert not observer.abort("unknown", "op")
        assert observer.abort("t1", "op")
        assert signal.fired
        assert observer.snapshot()[0]["aborting"] is True
        end = RunEnd("aborted", None, 0.0, None, 0.5, "mock", "echo", (), None)
        await watch.ended(end)
        assert observer.snapshot() == []
        found = await RecordStore(store).get("t1")
        assert found is not None
        assert found[0]["error_message"] == "aborted by op from the console"
        assert found[0]["input_tokens"] is None
    finally:
        await store.aclose()


def test_percentiles_by_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([5.0], 99) == 5.0
    values = [float(v) for v in range(1, 21)]
    assert percentile(values, 50) == 10.0
    assert percentile(values, 95) == 19.0
    assert percentile(values, 100) == 20.0


def test_spend_and_traffic_buckets_and_groups() -> None:
    rows = [
        _row("a", 3600.0, key_name="team", cost=1.0, cache_read_tokens=5),
        _row("b", 3700.0, key_name=None, cost=None, input_tokens=None),
        _row("c", 7300.0, route="other", status="error", error_code=None, first_token_ms=None),
        _row("old", 10.0),  # before the window
    ]
    by_key = spend(rows, since=3600.0, now=7300.0, bucket="hour", by="key")
    assert by_key["labels"] == ["1970-01-01 01:00", "1970-01-01 02:00"]
    assert [s["name"] for s in by_key["cost"]] == ["team", "(no key)"]
    assert by_key["table"][0]["cache_read_tokens"] == 5
    by_route = spend(rows, since=3600.0, now=7300.0, bucket="day", by="route")
    assert by_route["labels"] == ["1970-01-01"]
    # a day bucket starts at midnight: the "old" row (in that day) counts; the store's query bounds rows by time
    assert {t["group"]: t["requests"] for t in by_route["table"]} == {"mock": 3, "other": 1}
    seen = traffic(rows, since=3600.0, now=7300.0)
    assert seen["errors"] == [{"code": "(no code)", "count": 1}]
    other = next(r for r in seen["routes"] if r["group"] == "other/echo")
    assert (other["errors"], other["ttft_p50"], other["fallbacks"]) == (1, None, 1)  # served by mock/echo


def test_spend_by_member_groups_by_what_served() -> None:
    rows = [
        _row("a", 3600.0, route="pool", served_route="east", cost=1.0),
        _row("b", 3601.0, route="pool", served_route="east", cost=1.0),
        _row("c", 3602.0, route="pool", served_route="west", served_model="big", cost=3.0),
        _row("d", 3603.0, served_route=None, served_model=None, model=None, cost=0.25),  # nothing else served it
    ]
    by_member = spend(rows, since=3600.0, now=3700.0, bucket="hour", by="member")
    assert [(t["group"], t["requests"], t["cost"]) for t in by_member["table"]] == [
        ("west/big", 1, 3.0),
        ("east/echo", 2, 2.0),
        ("mock/-", 1, 0.25),
    ]
    assert [s["name"] for s in by_member["cost"]] == ["west/big", "east/echo", "mock/-"]
    by_route = spend(rows, since=3600.0, now=3700.0, bucket="hour", by="route")
    assert {t["group"]: t["requests"] for t in by_route["table"]} == {"pool": 3, "mock": 1}  # the pool asked for


def test_records_in_postgresql() -> None:
    """The console's statements run unchanged on PostgreSQL (numbered placeholders, its types)."""
    from gw_postgres import Cluster

    from harness_gateway.postgres import PostgresStore

    root = Path(tempfile.mkdtemp(prefix="harness-pg-console-"))  # the postgres user cannot enter tmp_path
    try:
        cluster = Cluster(root)
        cluster.start()
        try:

            async def main() -> None:
                store = PostgresStore(cluster.dsn)
                try:
                    records = RecordStore(store, keep=2)
                    assert await records.migrate() == 3
                    assert await RecordStore(store).migrate() == 3
                    sessions = StoreSessions(records)
                    await sessions.add("d1", time.time() + 60)
                    await sessions.add("d2", time.time() - 1)  # already expired
                    assert await sessions.alive("d1")
                    assert not await sessions.alive("d2")
                    await sessions.remove("d1")
                    assert not await sessions.alive("d1")
                    for i in range(3):
                        await records.insert(_row(f"p{i}", 10.0 + i, attempts=["a/b: SERVER"]), {"timeline": [i]})
                    assert [r["id"] for r in await records.recent(5)] == ["p2", "p1"]
                    assert [r["attempts"] for r in await records.since(11.5)] == [["a/b: SERVER"]]
                    assert await records.get("p2") == ((await records.recent(1))[0], {"timeline": [2]})
                finally:
                    await store.aclose()

            anyio.run(main)
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
