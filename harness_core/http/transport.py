"""Which transport carries an adapter's ``httpx.AsyncClient``: httpx's own (httpcore + h11) or
aiohttp's (through `httpx-aiohttp <https://pypi.org/project/httpx-aiohttp/>`_, httpx's API over
aiohttp's C HTTP parser and connection pool; asyncio only).

The choice is the ``transport:`` field of an HTTP provider's config (``auto``, ``httpcore`` or
``aiohttp``). ``auto`` resolves to :func:`preferred_transport`: ``aiohttp`` by default (a
library user's process, ``harness serve``: aiohttp's import is paid once, every chunk costs less),
``httpcore`` where the ``harness`` command line chose it with :func:`prefer_transport` (a
one-shot ``run`` relays a few hundred chunks: the import would cost more than it saves); and
always ``httpcore`` under trio or when httpx-aiohttp is not installed. The measurements behind
the default are in ``BENCHMARKS.md`` ("The transport").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal, get_args

if TYPE_CHECKING:  # pragma: no cover - typing only
    import httpx

__all__ = ["TransportName", "make_transport", "prefer_transport", "preferred_transport", "resolve_transport"]

TransportName = Literal["auto", "httpcore", "aiohttp"]
"""The values of an HTTP provider's ``transport:`` field."""

_NAMES: Final = get_args(TransportName)
_preferred: list[Literal["httpcore", "aiohttp"]] = ["aiohttp"]


def prefer_transport(name: Literal["httpcore", "aiohttp"]) -> None:
    """Make ``auto`` mean ``name`` in this process (clients created afterwards).

    The ``harness`` command line calls ``prefer_transport("httpcore")`` (a one-shot ``run`` would
    pay aiohttp's import for a few hundred chunks) and ``harness serve`` ``prefer_transport("aiohttp")``
    again before serving; a library user's process keeps the default, ``aiohttp``.

    Raises:
        ValueError: ``name`` is neither ``"httpcore"`` nor ``"aiohttp"``.
    """
    if name not in ("httpcore", "aiohttp"):
        raise ValueError(f"transport must be 'httpcore' or 'aiohttp', not {name!r}")
    _preferred[0] = name


def preferred_transport() -> Literal["httpcore", "aiohttp"]:
    """What ``auto`` means in this process (see :func:`prefer_transport`); ``"aiohttp"`` by default."""
    return _preferred[0]


def _async_library() -> str | None:
    """``"asyncio"``, ``"trio"`` or ``None`` (no event loop running in this thread)."""
    import asyncio
    import sys

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        trio = sys.modules.get("trio")
        return "trio" if trio is not None and trio.lowlevel.in_trio_run() else None
    return "asyncio"


def _aiohttp_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("httpx_aiohttp") is not None


def resolve_transport(name: str, *, provider: str | None = None) -> Literal["httpcore", "aiohttp"]:
    """The transport a client gets for the config value ``name``, in the running event loop.

    ``auto`` → :func:`preferred_transport`, except ``httpcore`` under trio or without
    httpx-aiohttp installed.

    Raises:
        LlmError: ``CONFIG`` (naming ``provider``) for an unknown name, for ``aiohttp`` under
            an event loop other than asyncio, or for ``aiohttp`` when httpx-aiohttp is not
            installed (``pip install 'harness-core[aiohttp]'``).
    """
    from harness_core.errors import LlmError  # here: the command line imports this module before msgspec

    if name not in _NAMES:
        raise LlmError("CONFIG", f"transport: expected one of {', '.join(_NAMES)}, got {name!r}", provider=provider)
    library = _async_library()
    if name == "auto":
        if preferred_transport() == "aiohttp" and library in (None, "asyncio") and _aiohttp_installed():
            return "aiohttp"
        return "httpcore"
    if name == "aiohttp":
        if library not in (None, "asyncio"):
            raise LlmError("CONFIG", f"transport: aiohttp runs on asyncio only, not {library}", provider=provider)
        if not _aiohttp_installed():
            raise LlmError(
                "CONFIG",
                "transport: aiohttp needs httpx-aiohttp (pip install 'harness-core[aiohttp]')",
                provider=provider,
            )
        return "aiohttp"
    return "httpcore"


def make_transport(name: Literal["httpcore", "aiohttp"], *, limits: httpx.Limits) -> httpx.AsyncBaseTransport | None:
    """The transport for a resolved name: ``None`` for httpcore (httpx builds its own from the
    client's ``limits``), a :class:`harness_core.http.aiohttp_transport.AiohttpTransport` with ``limits`` for aiohttp
    (its pool holds ``limits.max_connections``)."""
    if name == "httpcore":
        return None
    from harness_core.http.aiohttp_transport import AiohttpTransport

    return AiohttpTransport(limits=limits, trust_env=True)
