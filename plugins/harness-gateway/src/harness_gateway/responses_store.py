"""Stored responses of ``POST /v1/responses``: rows in the state store, and the endpoints reading them.

Wire: https://platform.openai.com/docs/api-reference/responses (``store``,
``previous_response_id``; ``GET /v1/responses/{id}``, ``DELETE /v1/responses/{id}``,
``GET /v1/responses/{id}/input_items``).

A response created with ``store: true`` (the API's default) is one row of ``gateway_responses``
(schema version 4, :data:`~harness_gateway.sqlite.MIGRATIONS_SQLITE` and its PostgreSQL twin): its
input items as given, the Response object as answered, its ``previous_response_id``, the route,
model and plugins.yaml key (``source``) that served it, the route's replay state
(``finish.replay_state``, kept whether or not the client asked for encrypted reasoning) and
``created_at`` / ``expires_at`` (unix seconds, ``expires_at = created_at + responses.retention``;
the current retention: a changed one is applied to the live rows every :data:`PURGE_EVERY` seconds).

Ownership: a row belongs to the caller that made it (:func:`owner_of`: ``key:<key id>``,
``master``, or ``""`` for an anonymous caller where keys are optional). A caller sees only its
own rows; the master key sees all. A row of another owner, an expired row and a missing row are
the same 404, so no caller learns that another's response exists.

Expiry: an expired row is never answered; every store of a new response deletes up to
:data:`PURGE_BATCH` expired rows in its transaction (:func:`purge`), and every process of
``harness serve`` purges them every :data:`PURGE_EVERY` seconds (:func:`purge_forever`), so an
expired row is gone within a minute even when no new response comes.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, Protocol

import anyio
import msgspec
from anyio.abc import TaskStatus
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from harness_gateway.errors import GatewayError
from harness_gateway.keys import KeyRecord
from harness_gateway.request import decimal, single_query
from harness_gateway.store import SqlStore, Tx

__all__ = [
    "PURGE_BATCH",
    "PURGE_EVERY",
    "StoredResponse",
    "chain",
    "delete",
    "fetch",
    "follow_retention",
    "input_items_page",
    "not_found",
    "owner_of",
    "purge",
    "purge_expired",
    "purge_forever",
    "put",
    "responses_routes",
]

PURGE_BATCH: Final = 500
"""Expired rows one store of a new response deletes at most (the next store takes the rest)."""

PURGE_EVERY: Final = 60.0
"""Seconds between two purges of expired rows by :func:`purge_forever`."""

_COLUMNS: Final = (
    "id, owner, previous_id, route, model, source, replay_state, input_items, response, created_at, expires_at"
)
_encode = msgspec.json.Encoder().encode


class StoredResponse(msgspec.Struct, kw_only=True, frozen=True):
    """One stored response (module docstring).

    ``input_items`` and ``response`` are the decoded JSON (a list of input items, the Response
    object); ``replay_state`` the route's ``finish.replay_state`` (any JSON, ``None`` when it had
    none); times in unix seconds.
    """

    id: str
    owner: str
    previous_id: str | None
    route: str
    model: str
    source: str | None
    replay_state: Any
    input_items: list[Any]
    response: dict[str, Any]
    created_at: float
    expires_at: float


def owner_of(who: KeyRecord | bool | None) -> str:
    """The owner of what ``who`` stores: ``key:<key id>`` for a key, ``master`` for the master
    key (``True``), ``""`` for an anonymous caller (``None``)."""
    if isinstance(who, KeyRecord):
        return f"key:{who.id}"
    return "master" if who is True else ""


def not_found(response_id: str, param: str | None = None) -> GatewayError:
    """OpenAI's 404 for a response id that is not stored for this caller (missing, expired,
    deleted, ``store: false``, or another key's): ``invalid_request_error``; ``param`` names the
    request field that held the id (``previous_response_id``), ``None`` on the ``/v1/responses/{id}``
    endpoints."""
    shown = response_id[:64]
    code = "previous_response_not_found" if param else "response_not_found"
    what = "Previous response" if param else "Response"
    return GatewayError(
        404, f"{what} with id {shown!r} not found.", code=code, param=param, openai_type="invalid_request_error"
    )


def _row(row: Sequence[Any]) -> StoredResponse:
    return StoredResponse(
        id=row[0], owner=row[1], previous_id=row[2], route=row[3], model=row[4], source=row[5],
        replay_state=msgspec.json.decode(row[6]) if row[6] is not None else None,
        input_items=msgspec.json.decode(row[7]), response=msgspec.json.decode(row[8]),
        created_at=float(row[9]), expires_at=float(row[10]),
    )  # fmt: skip


async def _read(tx: Tx, response_id: str, owner: str | None, now: float) -> StoredResponse | None:
    where = "id = ? AND expires_at > ?" + ("" if owner is None else " AND owner = ?")
    args = (response_id, now) if owner is None else (response_id, now, owner)
    row = await tx.one(f"SELECT {_COLUMNS} FROM gateway_responses WHERE {where}", *args)
    return _row(row) if row is not None else None


async def purge(tx: Tx, now: float, batch: int = PURGE_BATCH) -> int:
    """Delete up to ``batch`` rows expired at ``now`` (unix seconds) in transaction ``tx``; how many."""
    return await tx.run(
        "DELETE FROM gateway_responses WHERE id IN"
        " (SELECT id FROM gateway_responses WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)",
        now,
        batch,
    )


async def follow_retention(tx: Tx, retention: float, now: float) -> int:
    """Give every stored response not expired at ``now`` the expiry of the current ``retention``
    (seconds): ``created_at + retention``, shorter or longer than the one it was stored with; how
    many rows changed (in transaction ``tx``)."""
    return await tx.run(
        "UPDATE gateway_responses SET expires_at = created_at + ?"
        " WHERE expires_at > ? AND expires_at <> created_at + ?",
        retention,
        now,
        retention,
    )


async def purge_expired(
    store: SqlStore, now: float, batch: int = PURGE_BATCH, *, retention: float | None = None
) -> int:
    """Delete every row expired at ``now`` (unix seconds), ``batch`` rows per transaction; how
    many. With ``retention`` (seconds, the configuration's current one) the live rows' expiry
    follows it first (:func:`follow_retention`). Nothing before the store's schema holds the table
    (version 4: :meth:`SqlStore.migrate` ran); a database fault is logged (by
    :func:`~harness_gateway.store.unavailable`) and ends the purge (the next one retries), never raised."""
    if store.schema < 4:
        return 0
    total = 0
    try:
        if retention is not None:
            await store.transaction(lambda tx: follow_retention(tx, retention, now))
        while True:
            removed = await store.transaction(lambda tx: purge(tx, now, batch))
            total += removed
            if removed < batch:
                return total
    except GatewayError:
        return total


async def purge_forever(
    store: SqlStore,
    every: float = PURGE_EVERY,
    *,
    clock: Callable[[], float] = time.time,
    retention: Callable[[], float] | None = None,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Forever: every ``every`` seconds, :func:`purge_expired` at ``clock()`` (started with
    ``TaskGroup.start`` by ``harness serve``, in every process), the live rows' expiry following
    ``retention()`` (the current runtime's ``responses.retention`` in seconds) when given."""
    task_status.started()
    while True:
        await anyio.sleep(every)
        await purge_expired(store, clock(), retention=retention() if retention is not None else None)


async def put(store: SqlStore, record: StoredResponse, *, now: float | None = None) -> None:
    """Store ``record`` (its ``expires_at`` already set) and purge expired rows, in one transaction.

    Raises:
        GatewayError: 503 while the database is unreachable.
    """
    moment = time.time() if now is None else now

    async def work(tx: Tx) -> None:
        await purge(tx, moment)
        await tx.run(
            f"INSERT INTO gateway_responses ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            record.id, record.owner, record.previous_id, record.route, record.model, record.source,
            None if record.replay_state is None else _encode(record.replay_state).decode(),
            _encode(record.input_items).decode(), _encode(record.response).decode(),
            record.created_at, record.expires_at,
        )  # fmt: skip

    await store.transaction(work)


async def fetch(
    store: SqlStore, response_id: str, owner: str | None, *, now: float | None = None
) -> StoredResponse | None:
    """The live response ``response_id`` of ``owner`` (``None``: any owner, the master key), or
    ``None`` when there is none for it. Raises a 503 :class:`GatewayError` while the database is away."""
    moment = time.time() if now is None else now
    return await store.transaction(lambda tx: _read(tx, response_id, owner, moment), write=False)


async def chain(
    store: SqlStore, response_id: str, owner: str | None, *, now: float | None = None
) -> list[StoredResponse]:
    """The conversation ending with response ``response_id``: it and its ``previous_response_id``
    s back to the first, oldest first, read in one statement (a recursive query: one round trip
    however long the conversation).

    Raises:
        GatewayError: 404 (:func:`not_found`, ``param`` ``previous_response_id``) when ``response_id``
            or one of its predecessors is not live for ``owner`` (deleted or expired breaks the
            conversation there); 503 while the database is away.
    """
    moment = time.time() if now is None else now
    mine = "" if owner is None else " AND owner = ?"
    theirs = () if owner is None else (owner,)
    sql = (
        "WITH RECURSIVE conversation (link, next_link, depth) AS ("
        f" SELECT id, previous_id, 0 FROM gateway_responses WHERE id = ? AND expires_at > ?{mine}"
        " UNION ALL"
        " SELECT r.id, r.previous_id, c.depth + 1 FROM gateway_responses r JOIN conversation c ON r.id = c.next_link"
        f" WHERE r.expires_at > ?{mine.replace('owner', 'r.owner')}"
        f") SELECT {_COLUMNS} FROM gateway_responses JOIN conversation ON id = link ORDER BY depth DESC"
    )
    rows = await store.transaction(lambda tx: tx.all(sql, response_id, moment, *theirs, moment, *theirs), write=False)
    found = [_row(row) for row in rows]
    if not found:
        raise not_found(response_id, "previous_response_id")
    if found[0].previous_id is not None:  # the chain stops at a response no longer live for this caller
        raise not_found(found[0].previous_id, "previous_response_id")
    return found


async def delete(store: SqlStore, response_id: str, owner: str | None, *, now: float | None = None) -> bool:
    """Delete the live response ``response_id`` of ``owner`` (``None``: any owner); whether there
    was one. Raises a 503 :class:`GatewayError` while the database is away."""
    moment = time.time() if now is None else now
    where = "id = ? AND expires_at > ?" + ("" if owner is None else " AND owner = ?")
    args = (response_id, moment) if owner is None else (response_id, moment, owner)
    changed = await store.transaction(lambda tx: tx.run(f"DELETE FROM gateway_responses WHERE {where}", *args))
    return changed > 0


class _Gateway(Protocol):
    """What the endpoints need of :class:`harness_gateway.gateway.Gateway`."""

    store: SqlStore

    async def authenticate(self, request: Request) -> KeyRecord | bool | None: ...


def _visible(who: KeyRecord | bool | None) -> str | None:
    """The owner whose rows ``who`` may see (``None``: every row, for the master key)."""
    return None if who is True else owner_of(who)


def _error(error: GatewayError) -> JSONResponse:
    return JSONResponse(error.openai_body(), status_code=error.status, headers=error.headers())


def input_items_page(record: StoredResponse, query: dict[str, str]) -> dict[str, Any]:
    """``GET /v1/responses/{id}/input_items``: the list object of ``record``'s input items
    (each with an ``id``: the client's, else ``<response id>_in_<position>``), paged by the
    query's ``order`` (``desc``, the API's default, or ``asc``), ``after`` (an item id) and
    ``limit`` (1 … 100, default 20).

    Raises:
        GatewayError: 400 naming ``order``, ``limit`` or ``after`` when it is not one of those.
    """
    items = [
        {**item, "id": item.get("id") or f"{record.id}_in_{position}"}  # stored items were checked objects
        for position, item in enumerate(record.input_items)
    ]
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise GatewayError(400, f"order: expected asc or desc, got {order[:20]!r}", code="invalid_value", param="order")
    if order == "desc":
        items.reverse()
    text = query.get("limit", "20")
    limit = decimal(text) or 0
    if not 1 <= limit <= 100:
        raise GatewayError(
            400, f"limit: expected an integer from 1 to 100, got {text[:20]!r}", code="invalid_value", param="limit"
        )
    after = query.get("after")
    if after is not None:
        ids = [item["id"] for item in items]
        if after not in ids:
            raise GatewayError(400, f"after: no input item {after[:64]!r}", code="invalid_value", param="after")
        items = items[ids.index(after) + 1 :]
    page = items[:limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(items) > len(page),
    }


def responses_routes(gateway: _Gateway) -> list[Route]:
    """``GET`` / ``DELETE /v1/responses/{id}`` and ``GET /v1/responses/{id}/input_items``:
    authenticated as the other endpoints (401), a caller's own stored responses only (404
    otherwise, OpenAI-shaped: :func:`not_found`)."""

    def endpoint(
        work: Callable[[str, str | None, Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            try:
                who = await gateway.authenticate(request)
                return await work(request.path_params["response_id"], _visible(who), request)
            except GatewayError as error:
                return _error(error)

        return run

    async def found(response_id: str, owner: str | None) -> StoredResponse:
        record = await fetch(gateway.store, response_id, owner)
        if record is None:
            raise not_found(response_id)
        return record

    async def retrieve(response_id: str, owner: str | None, request: Request) -> Response:
        if request.method == "DELETE":
            if not await delete(gateway.store, response_id, owner):
                raise not_found(response_id)
            return JSONResponse({"id": response_id, "object": "response", "deleted": True})
        return JSONResponse((await found(response_id, owner)).response)

    async def listing(response_id: str, owner: str | None, request: Request) -> Response:
        record = await found(response_id, owner)
        return JSONResponse(input_items_page(record, single_query(request.query_params.multi_items())))

    return [
        Route("/v1/responses/{response_id}", endpoint(retrieve), methods=["GET", "DELETE"]),
        Route("/v1/responses/{response_id}/input_items", endpoint(listing), methods=["GET"]),
    ]
