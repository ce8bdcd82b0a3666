"""The ``gateway`` entry of ``plugins.yaml``: where ``harness serve`` listens, its state and its limits.

The gateway is configured like every plugin: an entry ``gateway:`` under ``plugins:``, validated
by the loader against :class:`GatewayConfig` (unknown fields rejected, every error naming the
field and the YAML line, secrets never shown)::

    plugins:
      gateway:
        host: 0.0.0.0                 # keys are then required (require_keys defaults to "beyond loopback")
        port: 8000
        master_key: ${{ env.HARNESS_MASTER_KEY }}
        database: ${{ env.HARNESS_DATABASE }}   # a SQLite path, or postgresql://… for several workers/hosts
        limits: ${{ env.HARNESS_LIMITS }}       # optional: redis://… keeps admission state in Redis/Valkey
        aliases: {fast: mock/echo}
        prices: {mock/echo: {input: 1.0, output: 2.0}}   # USD per million tokens
      mock: {}

The plugin itself adds nothing to the runtime (no hooks): ``harness serve`` reads its config.
"""

from __future__ import annotations

import ipaddress
import math
import re
import urllib.parse
from pathlib import Path
from typing import Annotated, Final, Literal

import msgspec
import platformdirs

from harness_core import ConnectionString, RouteReference, Secret, field_message
from harness_gateway.store import LEASE
from harness_middleware.pricing import Price, PriceBook

__all__ = [
    "LIMITS_SCHEMES",
    "RETENTION_MAX",
    "START_ONLY",
    "ConnectionLimits",
    "GatewayConfig",
    "GatewayPlugin",
    "ResponsesConfig",
    "default_database_path",
    "duration_seconds",
    "endpoint",
    "is_loopback",
    "start_only_changes",
]

LIMITS_SCHEMES: Final = ("redis://", "rediss://", "unix://")
"""URL schemes of the ``limits`` setting (redis-py's: TCP, TLS, a Unix socket; Valkey speaks the same)."""
MASTER_KEY_MIN: Final = 16
"""The shortest ``master_key`` and ``metrics_token`` accepted (characters): a shorter one is
guessable, and, as every secret is masked wherever it appears, a short word would be masked out of
every reply and message."""
RETENTION_MAX: Final = 3650 * 86400.0
"""The longest ``responses.retention`` accepted: 10 years, in seconds (a longer one is a typo)."""

START_ONLY: Final = (
    "host",
    "port",
    "workers",
    "loop",
    "http",
    "header_timeout",
    "body_timeout",
    "idle_timeout",
    "max_connections",
    "require_keys",
    "master_key",
    "metrics_require_key",
    "metrics_token",
    "database",
    "limits",
    "db_timeout",
    "lease",
)
"""The :class:`GatewayConfig` fields read only when ``harness serve`` starts: the listening socket
and its server (uvicorn's, with the connection limits), the keys the gateway checks, and the state
store. A reload (SIGHUP, ``--reload``) that changes one logs a warning naming it
(:func:`start_only_changes`); every other field applies to the requests of the new runtime."""

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd]?)$")
_DURATION_UNITS: Final = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def endpoint(url: str, field: str) -> str:
    """Where a connection URL (``database``, ``limits``) points, safe to log: ``host:port`` of a
    network URL (the host alone when the URL gives no port), the path of a Unix socket or
    of a SQLite file; never the user or password.

    Raises:
        ValueError: located at ``field`` (:func:`~harness_core.field_message`; never the value)
            when the URL's port is not a number in 0…65535 (``redis://h:99999``).
    """
    if "://" not in url:
        return url  # a SQLite path
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        raise ValueError(field_message((field,), "the URL's port must be a number from 0 to 65535")) from None
    if parts.hostname is None:
        return parts.path
    return parts.hostname if port is None else f"{parts.hostname}:{port}"


def duration_seconds(value: str | float, where: str, *, most: float | None = None) -> float:
    """Seconds of a duration setting: a number of seconds, or ``<number><unit>`` with unit ``s``,
    ``m``, ``h`` or ``d`` (``30d``, ``12h``, ``90m``, ``45s``).

    Raises:
        ValueError: naming ``where`` for anything else, a duration not above 0, or one above
            ``most`` seconds (when given).
    """
    if isinstance(value, str):
        found = _DURATION.match(value.strip())
        if found is None:
            raise ValueError(f"{where}: expected a duration such as 30d, 12h, 90m, 45s or seconds, got {value!r}")
        seconds = float(found.group(1)) * _DURATION_UNITS[found.group(2)]
    else:
        seconds = float(value)
    if not seconds > 0 or math.isinf(seconds):
        raise ValueError(f"{where}: must be a finite duration above 0, got {value!r}")
    if most is not None and seconds > most:
        raise ValueError(f"{where}: must be at most {most / 86400:g}d, got {value!r}")
    return seconds


class ResponsesConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The stored responses of ``POST /v1/responses`` (the ``responses`` field of the gateway config).

    Fields:
        retention: how long a stored response (``store: true``, the API's default) stays
            retrievable and usable as ``previous_response_id``, from its creation: ``30d`` (the
            default, as OpenAI keeps them), ``12h``, ``90m``, ``45s`` or a number of seconds.
            At most :data:`RETENTION_MAX` (10 years). Expired rows are never answered and are
            purged as new responses are stored. The current retention applies to the rows
            already stored too: lowering it shortens them (within :data:`~harness_gateway.responses_store.PURGE_EVERY`
            seconds of the reload), raising it lengthens the ones not expired yet.
    """

    retention: str | float = "30d"

    def __post_init__(self) -> None:
        """Check :attr:`retention` (raises ``ValueError`` located at the field: :func:`~harness_core.field_message`)."""
        duration_seconds(self.retention, "field 'retention'", most=RETENTION_MAX)  # "field 'retention': …"

    @property
    def retention_seconds(self) -> float:
        """:attr:`retention` in seconds."""
        return duration_seconds(self.retention, "responses.retention", most=RETENTION_MAX)


class ConnectionLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Deadlines in seconds and the connection cap of one serving process (enforced by :mod:`harness_gateway.limits`).

    Fields:
        header: the whole request head must arrive within this many seconds of its first byte.
        body: the whole request body must arrive within this many seconds of the head.
        idle: a connection with no request in progress is closed after this many seconds.
        max_connections: open connections of this process beyond which a new one is refused (503).
    """

    header: float = 10.0
    body: float = 60.0
    idle: float = 5.0
    max_connections: int = 1000


class GatewayConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Config of ``harness serve`` (the ``gateway`` plugin entry).

    Fields:
        host / port: where to listen (``--host`` / ``--port`` override them).
        workers: uvicorn worker processes (``--workers``); more than one needs PostgreSQL for
            limits that hold across them (SQLite is shared by the processes of one host too).
        require_keys: ``None`` (default): keys are required exactly when ``host`` is not a
            loopback address; ``true`` / ``false`` force it.
        master_key: the admin key: manages keys over HTTP (``/admin/keys``) and may call every
            route without limits. A :class:`~harness_core.Secret`; never shown. At least
            :data:`MASTER_KEY_MIN` characters (a shorter one is a configuration error).
        database: the state store: ``None`` = SQLite at :func:`default_database_path`; a path =
            that SQLite file; ``postgresql://…`` / ``postgres://…`` = PostgreSQL (asyncpg). A
            :class:`~harness_core.secret.ConnectionString`: only a URL's password is masked, a
            path is shown.
        limits: admission state (rpm/tpm windows, spend, running reservations and their
            leases) in Redis or Valkey at this URL (``redis://``, ``rediss://``, ``unix://``; a
            :class:`~harness_core.secret.ConnectionString`), for one hot key across many workers
            and hosts; keys and the ledger stay in ``database``. ``None``: all in ``database``
            (:mod:`harness_gateway.redis_limits`; needs ``harness-gateway[redis]``).
        aliases: model alias → ``route/model`` (``{"fast": "mock/echo"}``).
        prices: USD per million tokens (input, output, cache_read, cache_write, reasoning) keyed
            ``route/model``, ``route/*`` or ``*/model``: override or add to the genai-prices table
            that spend is charged from (:mod:`harness_middleware.pricing`).
        price_providers: route → the table's provider id (``{work: openai}``); ``null`` keeps a
            route out of the table. A model priced nowhere is charged 0, with a warning logged.
        max_body_bytes: the largest request body accepted (413 beyond it).
        keepalive: seconds of silence on a stream after which an SSE comment ``: keep-alive`` is sent.
        drain_timeout: seconds in-flight streams may take to finish on SIGTERM (or reload) before
            they are aborted; the current runtime's (a reload changes it).
        db_timeout: seconds one state-store operation may take before the request fails with 503.
        lease: seconds a running request's ledger row stays reserved without its process renewing
            it (every ``lease / 5`` seconds while it runs): a killed process's rows are settled
            by any other (or the restarted) process of the same store, charging the usage last
            recorded, at most ``lease * 1.2`` seconds after the kill. Shorter settles sooner;
            keep it above a few database round trips (a process stalled past it sees its rows
            settled by another and then charges only the difference). Read at start.
        loop / http: uvicorn's event loop (``asyncio``, ``uvloop``, or ``auto``: uvloop when
            installed) and HTTP/1.1 parser (``h11``, ``httptools``, or ``auto``: httptools when
            installed). Measured in BENCHMARKS.md ("Gateway"): the same CPU per chunk relayed
            within the noise for all four pairs (the relay writes the events of one upstream
            read together), and a lower time to first token under saturation on asyncio's loop,
            hence ``loop: asyncio`` by default.
        header_timeout / body_timeout / idle_timeout / max_connections: the connection limits
            (:class:`ConnectionLimits`, enforced before authentication):
            seconds for a request's head to arrive after its first byte (408 and closed), for
            its body to arrive after the head (408 and closed), seconds a connection with no
            request in progress stays open, and the open connections of one worker beyond
            which a new one gets 503 at once.
        upstream_read_timeout: seconds of silence allowed between two reads of a provider's
            stream (its ``timeout.read``) for every HTTP provider whose entry does not set
            ``timeout.read`` itself; ``null`` keeps the providers' own default (600 s).
        metrics_require_key: ``/metrics`` answers 401 without the master key or
            ``metrics_token`` (``Authorization: Bearer``); ``None`` (default): exactly when keys
            are required (the series name routes, models, spend).
        metrics_token: a token that may read ``/metrics`` and nothing else (a
            :class:`~harness_core.Secret`; never shown; at least :data:`MASTER_KEY_MIN`
            characters).
        responses: stored Responses (:class:`ResponsesConfig`: ``{retention: 30d}``).
    """

    host: str = "127.0.0.1"
    port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 8000
    workers: Annotated[int, msgspec.Meta(ge=1, le=256)] = 1
    require_keys: bool | None = None
    master_key: Secret | None = None
    database: ConnectionString | None = None
    limits: ConnectionString | None = None
    aliases: dict[str, str] = msgspec.field(default_factory=dict)
    prices: dict[str, Price] = msgspec.field(default_factory=dict)
    price_providers: dict[str, str | None] = msgspec.field(default_factory=dict)
    max_body_bytes: Annotated[int, msgspec.Meta(ge=1024)] = 10 * 1024 * 1024
    keepalive: Annotated[float, msgspec.Meta(gt=0)] = 15.0
    drain_timeout: Annotated[float, msgspec.Meta(ge=0)] = 30.0
    db_timeout: Annotated[float, msgspec.Meta(gt=0)] = 5.0
    lease: Annotated[float, msgspec.Meta(ge=0.5, le=3600)] = LEASE
    loop: Literal["auto", "asyncio", "uvloop"] = "asyncio"
    http: Literal["auto", "h11", "httptools"] = "auto"
    header_timeout: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    body_timeout: Annotated[float, msgspec.Meta(gt=0)] = 60.0
    idle_timeout: Annotated[float, msgspec.Meta(gt=0)] = 5.0
    max_connections: Annotated[int, msgspec.Meta(ge=1)] = 1000
    upstream_read_timeout: Annotated[float, msgspec.Meta(gt=0)] | None = 120.0
    metrics_require_key: bool | None = None
    metrics_token: Secret | None = None
    responses: ResponsesConfig = msgspec.field(default_factory=ResponsesConfig)

    def __post_init__(self) -> None:
        """Check ``limits``, ``aliases`` and the keys of ``prices`` (raises ``ValueError`` located at
        the value: :func:`~harness_core.field_message`)."""
        if self.limits is not None and not (url := self.limits.get_secret_value()).startswith(LIMITS_SCHEMES):
            scheme = url.split("://", 1)[0] + "://" if "://" in url else "a value without a scheme"
            schemes = ", ".join(LIMITS_SCHEMES)
            raise ValueError(field_message(("limits",), f"expected a Redis or Valkey URL ({schemes}…), got {scheme}"))
        grants = (
            ("master_key", self.master_key, "every route and /admin"),
            ("metrics_token", self.metrics_token, "/metrics"),
        )
        for name, token, grant in grants:
            # a short token is guessable, and every secret is masked wherever it appears: a
            # `metrics_token: mock` would turn each "mock" of a reply, a route or a path into ***
            if token is not None and len(token.get_secret_value()) < MASTER_KEY_MIN:
                problem = (
                    f"must be at least {MASTER_KEY_MIN} characters (it grants {grant}); "
                    "generate one: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
                )
                raise ValueError(field_message((name,), problem))
        if self.limits is not None:
            endpoint(self.limits.get_secret_value(), "limits")
        if self.database is not None:
            endpoint(self.database.get_secret_value(), "database")
        for alias, target in self.aliases.items():
            if "/" not in target:
                raise ValueError(field_message(("aliases", alias), f"expected `route/model`, got {target!r}"))
        for name in self.prices:
            if "/" not in name:
                problem = f"expected a key of the form `route/model`, got {name!r}"
                raise ValueError(field_message(("prices", name), problem))

    def price_book(self) -> PriceBook:
        """The :class:`~harness_middleware.pricing.PriceBook` spend is charged from."""
        return PriceBook(self.prices, self.price_providers)

    def connection_limits(self) -> ConnectionLimits:
        """The :class:`ConnectionLimits` of these settings."""
        return ConnectionLimits(
            header=self.header_timeout,
            body=self.body_timeout,
            idle=self.idle_timeout,
            max_connections=self.max_connections,
        )

    def metrics_protected(self, host: str | None = None) -> bool:
        """Whether ``/metrics`` needs the master key or ``metrics_token`` when listening on ``host``."""
        if self.metrics_require_key is not None:
            return self.metrics_require_key
        return self.keys_required(host)

    def keys_required(self, host: str | None = None) -> bool:
        """Whether requests need a key when listening on ``host`` (default: the configured host)."""
        if self.require_keys is not None:
            return self.require_keys
        return not is_loopback(host if host is not None else self.host)


def start_only_changes(started: GatewayConfig, loaded: GatewayConfig) -> list[str]:
    """The :data:`START_ONLY` fields whose value in ``loaded`` (a reloaded file) differs from
    ``started`` (the config the gateway started with, the one in force for them), in
    :data:`START_ONLY`'s order; names only, never a value (some are secrets)."""
    return [name for name in START_ONLY if getattr(started, name) != getattr(loaded, name)]


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``); false otherwise
    (``0.0.0.0``, ``::``, any name or public address)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def default_database_path() -> Path:
    """The SQLite state used when ``database`` is not set: ``<user data dir>/harness/gateway.sqlite``."""
    return platformdirs.user_data_path("harness") / "gateway.sqlite"


class GatewayPlugin:
    """The ``gateway`` entry of plugins.yaml: holds the validated :class:`GatewayConfig`; no hooks."""

    Config = GatewayConfig

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config

    def route_references(self) -> list[RouteReference]:
        """The route of every ``aliases:`` target (docs/hooks.md, "Optional plugin methods"): the
        start refuses one that no plugin serves (:func:`harness_core.routing.check_routes`), so
        ``harness serve`` and ``config check`` name it instead of a request getting a 404."""
        return [
            RouteReference(("aliases", alias), target.partition("/")[0], f"alias {alias!r}", target)
            for alias, target in self.config.aliases.items()
        ]
