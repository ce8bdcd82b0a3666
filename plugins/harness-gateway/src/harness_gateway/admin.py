"""``/admin/keys``: list, create, change and revoke virtual keys, with the master key only."""

from __future__ import annotations

import re
from typing import Any, Final, TypeVar

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from harness_gateway.auth import presented_key
from harness_gateway.errors import GatewayError
from harness_gateway.gateway import Gateway
from harness_gateway.intake import read_body
from harness_gateway.keys import KeyChange, KeySpec, KeySpecError, unserved_routes
from harness_gateway.openai_chat import OPENAI_CHAT
from harness_gateway.request import bad_request, decode_json

__all__ = ["admin_routes", "key_change", "key_spec"]


_AT_FIELD: Final = re.compile(r"at `\$\.(\w+)`|unknown field `(\w+)`|missing required field `(\w+)`")
"""The field a msgspec validation message names (``- at `$.rpm```, ``unknown field `x```,
``missing required field `name```)."""


Spec = TypeVar("Spec", KeySpec, KeyChange)


def key_spec(raw: Any) -> KeySpec:
    """The :class:`KeySpec` of a ``POST /admin/keys`` body.

    Raises:
        GatewayError: 400 ``invalid key spec: …`` whose ``param`` names the field at fault (a
            wrong type, an unknown field, a value :class:`KeySpec` refuses), when one is known.
    """
    return _converted(raw, KeySpec)


def key_change(raw: Any) -> KeyChange:
    """The :class:`KeyChange` of a ``PATCH /admin/keys/{id}`` body (:func:`key_spec`'s errors)."""
    return _converted(raw, KeyChange)


def _converted(raw: Any, kind: type[Spec]) -> Spec:
    try:
        return msgspec.convert(raw, kind)
    except msgspec.ValidationError as exc:
        raise _invalid(exc, exc.__cause__) from None


def _invalid(exc: Exception, cause: BaseException | None) -> GatewayError:
    """The 400 of a key spec or change msgspec or :class:`KeySpec` refused (``cause``: the
    :class:`KeySpecError` behind a msgspec error, when one is)."""
    hint = ""
    if isinstance(cause, KeySpecError):
        field: str | None = cause.field
    else:
        found = _AT_FIELD.search(str(exc))
        field = next(filter(None, found.groups()), None) if found else None
        if field is not None and field.startswith("expire"):
            hint = " (a key's expiry: expires_days, or expires_at in unix seconds)"
    error = bad_request("", f"invalid key spec: {exc}{hint}")
    error.param = field
    return error


def admin_routes(gateway: Gateway) -> list[Route]:
    """``/admin/keys``: create, list, change (``PATCH /admin/keys/{id or name}``, a
    :class:`KeyChange`: the key as changed) and revoke keys with the master key."""

    async def admin(request: Request) -> Response:
        try:
            presented = presented_key(request) is not None
            who = await gateway.authenticate(request) if presented else None
            if who is not True:  # no key is missing_api_key, as on every endpoint; another key is invalid
                code = "invalid_api_key" if presented else "missing_api_key"
                raise GatewayError(401, "the master key is required for /admin", code=code)
            if request.method == "GET":
                keys = await gateway.store.list_keys()
                return JSONResponse({"data": [msgspec.to_builtins(k) for k in keys]})
            if request.method == "PATCH":
                change = key_change(decode_json(await read_body(request, 64 * 1024)))
                problem = (
                    None if change.routes is msgspec.UNSET else unserved_routes(change.routes, gateway.served_routes())
                )
                if problem is not None:
                    raise bad_request("routes", problem)
                try:
                    changed = await gateway.store.update_key(request.path_params["key"], change)
                except KeySpecError as exc:  # the key as changed breaks a rule (KeySpec's, naming the field)
                    raise _invalid(exc, exc) from None
                if changed is None:
                    raise GatewayError(404, f"no live key {request.path_params['key']!r}", code="key_not_found")
                return JSONResponse(msgspec.to_builtins(changed))
            if request.method == "DELETE":
                revoked = await gateway.store.revoke(request.path_params["key"])
                if not revoked:
                    raise GatewayError(404, f"no live key {request.path_params['key']!r}", code="key_not_found")
                return JSONResponse({"revoked": revoked})
            raw = decode_json(await read_body(request, 64 * 1024))
            spec = key_spec(raw)
            problem = spec.unserved(gateway.served_routes())
            if problem is not None:
                raise bad_request("routes", problem)
            plain, record = await gateway.store.create_key(spec)
            return JSONResponse({"key": plain, **msgspec.to_builtins(record)}, status_code=201)
        except GatewayError as error:
            return OPENAI_CHAT.error_response(error)

    return [
        Route("/admin/keys", admin, methods=["GET", "POST"]),
        Route("/admin/keys/{key}", admin, methods=["DELETE", "PATCH"]),
    ]
