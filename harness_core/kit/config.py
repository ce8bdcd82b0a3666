"""The config every HTTP provider plugin shares: :class:`HttpProviderConfig` and :class:`HttpTimeouts`.

A plugin subclasses :class:`HttpProviderConfig`, gives its vendor's ``base_url`` and ``routes``
defaults, binds ``api_key`` to the vendor's environment variable with :func:`vendor_api_key`
(only ever sent to the vendor's own host), and adds its own fields. Cheap to import (no httpx),
so ``harness plugins`` stays fast. Field meanings are in ``docs/writing-an-adapter.md``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal
from urllib.parse import urlsplit

import msgspec

from harness_core.config import EnvFallback
from harness_core.secret import Secret, connection_secrets

__all__ = [
    "HttpProviderConfig",
    "HttpTimeouts",
    "base_url_problem",
    "client_options",
    "header_name_problem",
    "vendor_api_key",
]

Seconds = Annotated[float, msgspec.Meta(ge=0)]
"""A duration in seconds, at least 0 (msgspec refuses a negative one with the field's path)."""

_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""A header field name: an RFC 9110 token (https://www.rfc-editor.org/rfc/rfc9110#section-5.1)."""


def _control(text: str) -> str | None:
    """The first control character or space of ``text`` as ``U+XXXX at position N``, else ``None``."""
    for position, char in enumerate(text, 1):
        if ord(char) <= 0x20 or ord(char) == 0x7F:
            return f"U+{ord(char):04X} at position {position}"
    return None


def base_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be the ``base_url`` of an HTTP provider, or ``None`` when it can.

    It must be an absolute ``http://`` or ``https://`` URL (RFC 3986,
    https://www.rfc-editor.org/rfc/rfc3986#section-3) with a host, a port (when given) in
    1..65535, and no space or control character (a newline from an environment variable). The
    reason never quotes the URL (it may come from the environment, hence be secret). Checked with
    :func:`urllib.parse.urlsplit` only, so validating a config imports no HTTP client.
    """
    if not url:
        return "base_url is empty: give the API root, e.g. https://api.example.com/v1"
    bad = _control(url)
    if bad is not None:
        return f"base_url holds a space or control character ({bad}); remove it"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "base_url has an invalid port or host: the port must be a number in 1..65535"
    if parts.scheme.lower() not in ("http", "https"):
        return "base_url must start with http:// or https:// (e.g. https://api.example.com/v1)"
    if not parts.hostname:
        return "base_url has no host (e.g. https://api.example.com/v1)"
    if port == 0:
        return "base_url has port 0: the port must be a number in 1..65535"
    return None


def header_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be an HTTP header name, or ``None`` when it can: a name is an RFC 9110
    token (letters, digits and ``!#$%&'*+-.^_`|~``). A ``${{ … }}`` expression is not expanded
    in a name (only values are substituted), so one is refused with that reason. The reason
    never quotes the name (a pasted ``Name: value`` line may hold a key): it names the first
    character that is not allowed and its position."""
    if "${{" in name:
        return (
            "a header name holds a ${{ … }} expression: expressions are expanded in header values "
            "only; write the name literally"
        )
    if not _TOKEN.fullmatch(name):
        # the name is not shown: a pasted "Name: value" line may hold a key
        bad = next((f"{c!a} at position {at}" for at, c in enumerate(name, 1) if not _TOKEN.fullmatch(c)), None)
        what = f"holds {bad}" if bad is not None else "is empty"
        return (
            f"a header name {what}: not a valid HTTP field name (RFC 9110 token: letters, digits "
            "and !#$%&'*+-.^_`|~, no space or colon)"
        )
    return None


class HttpTimeouts(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """HTTP timeouts in seconds (``None`` waits forever).

    Fields:
        connect: TCP connect + TLS handshake.
        read: the longest silence between two reads of the stream (a keep-alive comment resets
            it); reasoning models may think for minutes, hence 600.
        write: sending the request body.
    """

    connect: Seconds = 10.0
    read: Seconds | None = 600.0
    write: Seconds | None = 60.0


class HttpProviderConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Fields shared by every HTTP provider plugin's config (``plugins.yaml`` entry).

    Fields:
        base_url: the API root the adapter's request paths are appended to: an ``http://`` or
            ``https://`` URL with a host (:func:`base_url_problem`). A ``user:password@`` in it
            (RFC 3986 userinfo) is sent as HTTP Basic auth on either transport
            (:func:`harness_core.http.make_client`) and its password is a secret
            (:meth:`secret_parts`), masked like an ``api_key``.
        api_key: the credential (a :class:`~harness_core.secret.Secret`); ``None`` sends none
            (local servers). Subclasses bind it to an environment variable with
            :func:`vendor_api_key`.
        routes: the routes this plugin instance serves.
        headers: extra HTTP headers sent with every request (they win over the adapter's); names
            are RFC 9110 tokens, written literally (values may use ``${{ env.X }}``).
        timeout: :class:`HttpTimeouts` in seconds (each at least 0).
        max_connections: size of the HTTP connection pool (at least 1).
        pool_timeout: seconds to wait for a free pooled connection (at least 0).
        transport: ``auto`` (default), ``httpcore`` or ``aiohttp`` (asyncio only; needs
            ``harness-core[aiohttp]``): see :mod:`harness_core.http.transport`.
        gen_ai_provider: the GenAI provider telemetry names for these routes
            (``gen_ai.provider.name`` of the OpenTelemetry GenAI conventions, e.g. ``groq`` for
            an OpenAI-compatible ``base_url`` at Groq); ``None``: what the adapter declares
            (:meth:`HttpAdapter.gen_ai_provider <harness_core.kit.HttpAdapter.gen_ai_provider>`).
    """

    base_url: str = ""
    api_key: Secret | None = None
    routes: list[str] = msgspec.field(default_factory=list)
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    timeout: HttpTimeouts = msgspec.field(default_factory=HttpTimeouts)
    max_connections: Annotated[int, msgspec.Meta(ge=1)] = 20
    pool_timeout: Seconds = 30.0
    transport: Literal["auto", "httpcore", "aiohttp"] = "auto"
    gen_ai_provider: Annotated[str, msgspec.Meta(min_length=1)] | None = None

    def __post_init__(self) -> None:
        """Check ``base_url`` (:func:`base_url_problem`) and the header names
        (:func:`header_name_problem`) when the config is built, so ``config check`` reports them.

        Raises:
            ValueError: ``field 'base_url': …`` or ``field 'headers': …`` (the loader reports it
                at that field's YAML line).
        """
        problem = base_url_problem(self.base_url)
        if problem is not None:
            raise ValueError(f"field 'base_url': {problem}")
        for name in self.headers:
            problem = header_name_problem(name)
            if problem is not None:
                raise ValueError(f"field 'headers': {problem}")

    def secret_parts(self) -> tuple[str, ...]:
        """The password of ``base_url``'s userinfo (as written and percent-decoded), else ``()``:
        :func:`harness_core.secret.secrets_of` and the loader mask it wherever it appears."""
        return connection_secrets(self.base_url)


def vendor_api_key(var: str, base_url: str) -> EnvFallback:
    """The :class:`~harness_core.config.EnvFallback` of a vendor key: ``api_key`` comes from
    ``$var`` only while ``base_url`` is the vendor's own, so the key never reaches another host,
    and there it is required (without one the plugin fails naming ``var``; ``api_key: null`` in
    the YAML opts out). Another host needs none::

        api_key: Annotated[Secret | None, vendor_api_key("OPENAI_API_KEY", OPENAI_BASE_URL)] = None
    """
    return EnvFallback(var, only_when={"base_url": base_url}, required=True)


def client_options(config: HttpProviderConfig) -> dict[str, Any]:
    """Keyword arguments of :func:`harness_core.http.make_client` from a config (base URL, which
    may carry a query sent with every request; timeouts; pool size; transport); headers are the adapter's
    business."""
    timeout = config.timeout
    return {
        "base_url": config.base_url,
        "connect_timeout": timeout.connect,
        "read_timeout": timeout.read,
        "write_timeout": timeout.write,
        "pool_timeout": config.pool_timeout,
        "max_connections": config.max_connections,
        "max_keepalive_connections": config.max_connections,
        "backend": config.transport,
    }
