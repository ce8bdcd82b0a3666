"""Closing streams: shielded, bounded ``aclose`` of every generator, errors re-raised once (docs/runtime.md).

One concept split out of :mod:`harness_core.chain` (issue 22 item 4): the chain, the adapter
boundary and middleware all close inner streams the same way, through :func:`aclose_all` /
:func:`close_stream`; :func:`raise_collected` re-raises what the closes raised.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, Final

import anyio

__all__ = ["DEFAULT_CLOSE_BOUND", "aclose_all", "close_stream", "raise_collected"]

logger = logging.getLogger("harness")

DEFAULT_CLOSE_BOUND: Final = 5.0
"""Seconds one close may take before it is abandoned (the runtime uses ``Harness.close_timeout``)."""


def raise_collected(errors: Sequence[Exception], what: str) -> None:
    """Re-raise errors collected while closing: one as is, several as an :class:`ExceptionGroup`."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ExceptionGroup(f"{what} failed", list(errors))


async def aclose_all(closables: Iterable[Any], bound: float, what: str) -> list[Exception]:
    """Await ``aclose()`` of each of ``closables`` in order, each shielded from cancellation and
    bounded by ``bound`` seconds, so a cancelled caller still runs every cleanup. An object
    without ``aclose`` (a plain async iterator) has nothing to close and is skipped, and so is an
    async generator that already ended (``ag_frame`` is ``None``: its ``aclose()`` does nothing,
    https://peps.python.org/pep-0525/#asynchronous-generator-object), which spares the usual
    stream, read to its end, the cancel scope and timer of a bounded close (~12 µs per close).

    Returns the exceptions the closes raised, each already logged (``what`` names the kind of
    object in the log lines), so the caller can re-raise them once everything is closed
    (:func:`raise_collected`). A close that takes longer than ``bound`` is abandoned with a warning.
    """
    errors: list[Exception] = []
    for closable in closables:
        close = getattr(closable, "aclose", None)
        if close is None or getattr(closable, "ag_frame", closable) is None:
            continue
        with anyio.move_on_after(bound, shield=True) as scope:
            try:
                await close()
            except Exception as exc:
                logger.error("closing the %s failed (%r)", what, closable, exc_info=exc)
                errors.append(exc)
        if scope.cancelled_caught:
            logger.warning("closing the %s %r took longer than %ss; abandoned", what, closable, bound)
    return errors


async def close_stream(stream: AsyncIterator[Any], bound: float = DEFAULT_CLOSE_BOUND) -> None:
    """Close one stream (an inner stream a middleware opened) as :func:`aclose_all` does, then
    re-raise what its cleanup raised. Safe in every ``finally``: closing an exhausted or closed
    generator does nothing."""
    raise_collected(await aclose_all([stream], bound, "stream"), "closing the stream")
