"""Finishing httpx's chain of body generators without reading the network (see
:func:`finish_generator`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator

import anyio
import httpx

__all__ = ["finish_generator"]


async def finish_generator(iterator: AsyncGenerator[bytes, None]) -> None:
    """Finish httpx's chain of body generators without reading the network.

    ``aiter_raw()`` sits on a stack of nested async generators (httpx and httpcore). Closing
    only the outer one leaves the inner ones suspended; they are then finalised by the garbage
    collector, which trio reports as a ``ResourceWarning``. Resuming the chain inside an already
    cancelled scope instead makes the next network read raise the cancellation through every
    layer, so all of them finish (and httpcore closes the connection, which is not reusable
    mid-body). Bytes already buffered come out first and are discarded: we are closing. An
    exhausted iterator ends at once.
    """
    with anyio.CancelScope() as scope:
        scope.cancel()
        # StopAsyncIteration: already exhausted. HTTPError: the transport already failed.
        with contextlib.suppress(StopAsyncIteration, httpx.HTTPError):
            while True:
                await iterator.__anext__()
    await iterator.aclose()
