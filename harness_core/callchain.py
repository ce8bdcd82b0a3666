"""The coroutine waterfall: ordered ``async def`` middleware over an innermost call.

One owner for every middleware hook that awaits one result (``llm_embed``, ``llm_count_tokens``):
each function receives the request and ``call_next`` (the rest of the chain) and returns what
``call_next`` returned, or another result. ``functions`` are outermost first
(:func:`harness_core.chain.order_middleware` orders them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["CallChain"]

In = TypeVar("In")
Out = TypeVar("Out")


class CallChain(Generic[In, Out]):
    """``functions`` (``(request, call_next) -> awaitable result``, outermost first) over
    ``innermost`` (``request -> awaitable result``); awaiting the chain runs one request."""

    __slots__ = ("_call",)

    def __init__(
        self,
        functions: Sequence[Callable[[In, Callable[[In], Awaitable[Out]]], Awaitable[Out]]],
        innermost: Callable[[In], Awaitable[Out]],
    ) -> None:
        call = innermost
        for function in reversed(functions):
            call = _bind(function, call)
        self._call = call

    async def __call__(self, request: In) -> Out:
        """Run one request through the chain."""
        return await self._call(request)


def _bind(
    function: Callable[[In, Callable[[In], Awaitable[Out]]], Awaitable[Out]], inner: Callable[[In], Awaitable[Out]]
) -> Callable[[In], Awaitable[Out]]:
    async def call_next(request: In) -> Out:
        return await function(request, inner)

    return call_next
