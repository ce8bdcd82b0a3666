"""Finishing httpx's chain of body generators without reading the network (see
:func:`finish_generator`), and knowing when none is needed (:data:`BODY_RECEIVED`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import Final

import anyio
import httpx

__all__ = ["BODY_RECEIVED", "body_received", "finish_generator"]

BODY_RECEIVED: Final = "harness.body_received"
"""The key of ``httpx.Response.extensions`` under which a transport may put a zero-argument
callable telling whether the whole response body has arrived, such that reading the rest of it
returns buffered bytes only and closing the response does no I/O (the aiohttp transport,
:mod:`harness_core.http.aiohttp_transport`, sets it). :func:`body_received` reads it."""


def body_received(response: httpx.Response) -> bool:
    """Whether ``response``'s transport says its whole body has arrived (:data:`BODY_RECEIVED`);
    ``False`` when the transport does not say (httpcore's)."""
    received = response.extensions.get(BODY_RECEIVED)
    return received is not None and bool(received())


async def finish_generator(iterator: AsyncGenerator[bytes, None], *, received: bool = False) -> None:
    """Finish httpx's chain of body generators without reading the network.

    ``aiter_raw()`` sits on a stack of nested async generators (httpx and httpcore). Closing
    only the outer one leaves the inner ones suspended; they are then finalised by the garbage
    collector, which trio reports as a ``ResourceWarning``. Resuming the chain inside an already
    cancelled scope instead makes the next network read raise the cancellation through every
    layer, so all of them finish (and httpcore closes the connection, which is not reusable
    mid-body). Bytes already buffered come out first and are discarded: we are closing. An
    exhausted iterator ends at once.

    ``received``: the whole body has arrived (:func:`body_received`), so the chain ends on
    buffered bytes without a network read and needs no cancelled scope (whose cancellation,
    on asyncio, formats the task's repr: a measurable part of a short request's cost).
    """
    with contextlib.ExitStack() as scope:
        if not received:
            scope.enter_context(anyio.CancelScope()).cancel()
        # StopAsyncIteration: exhausted. HTTPError: the transport failed (before or meanwhile).
        with contextlib.suppress(StopAsyncIteration, httpx.HTTPError):
            while True:
                await iterator.__anext__()
    await iterator.aclose()
