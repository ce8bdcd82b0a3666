"""What a request costs: its token usage priced by :class:`harness_middleware.pricing.PriceBook`.

Prices come from the maintained genai-prices table, with the gateway config's ``prices``
(``route/model``, ``route/*`` or ``*/model`` → USD per million tokens) overriding or adding
models and ``price_providers`` mapping routes to the table's provider ids. Token semantics are
:class:`~harness_core.types.TokenUsage`'s: cache reads/writes are subsets of input tokens,
reasoning tokens a subset of output tokens, each priced at its own rate.
"""

from __future__ import annotations

import logging
import math
import weakref
from collections.abc import Sequence
from typing import Final

import msgspec

from harness_core import (
    ContentBlock,
    GenerateOptions,
    ReasoningBlock,
    TextBlock,
    TokenUsage,
    ToolCallBlock,
    ToolResultBlock,
)
from harness_middleware.pricing import PriceBook

__all__ = [
    "CHARS_PER_TOKEN",
    "embedding_bound",
    "embedding_usage",
    "estimated_embedding_usage",
    "estimated_usage",
    "generation_bound",
    "generation_floor",
    "is_priced",
    "request_bound",
    "request_cost",
]

CHARS_PER_TOKEN: Final = 4
"""Characters per token of :func:`estimated_usage` (OpenAI's rule of thumb for English text,
https://help.openai.com/en/articles/4936856-what-are-tokens-and-how-to-count-them)."""

logger = logging.getLogger(__name__)

_PROBE = TokenUsage(input_tokens=1, output_tokens=1)
_UNPRICED: weakref.WeakKeyDictionary[PriceBook, set[tuple[str, str]]] = weakref.WeakKeyDictionary()
"""Per price book (one per configuration read), the ``(route, model)`` pairs no price matches:
not looked up again (a miss searches the whole table, ~1 ms)."""
_OUTPUT_PRICED: weakref.WeakKeyDictionary[PriceBook, set[tuple[str, str]]] = weakref.WeakKeyDictionary()
"""Per price book, the priced ``(route, model)`` pairs whose output tokens cost something: a
request to one without an output bound has no bound, and is not priced again to learn it."""
_MOST_OUTPUT: Final = 10**9
"""The output tokens :func:`_output_free` prices to tell a model whose output costs nothing: more
than any model's context, so any rate above 0 shows in the total."""


def request_cost(book: PriceBook, route: str, model: str, usage: TokenUsage | None, *, completed: bool = True) -> float:
    """USD for ``usage`` of ``route/model`` (a float, for the ledger).

    An unknown cost is charged as 0.0 and logged as a warning naming the route and model (once
    per model when no price is known; every time a ``completed`` request reported no usage), so
    the gap is visible rather than silent. A request that did not complete (refused by the
    adapter or the provider, aborted) and reported no usage cost nothing: 0.0, with no warning
    (the callers charge an estimate for what one streamed before it ended).
    """
    if usage is None:
        if completed:
            logger.warning("charging 0 USD for a request to %s/%s: no usage was reported", route, model)
        return 0.0
    if (route, model) in _UNPRICED.setdefault(book, set()):
        return 0.0
    cost = book.cost(route, model, usage)
    if cost is not None:
        return float(cost.total)
    if _priced(book, route, model):
        logger.warning("charging 0 USD for a request to %s/%s: its usage cannot be priced (%s)", route, model, usage)
    return 0.0


def _priced(book: PriceBook, route: str, model: str) -> bool:
    """Whether ``route/model`` (not in :data:`_UNPRICED`: the callers look there first) has a price
    in ``book`` at all. A pair without one is remembered there and logged once: every request of
    it is charged 0."""
    if book.cost(route, model, _PROBE) is not None:
        return True
    _UNPRICED.setdefault(book, set()).add((route, model))
    logger.warning("charging 0 USD for %s/%s requests: no price is known (add one to `prices`)", route, model)
    return False


def is_priced(book: PriceBook, route: str, model: str) -> bool:
    """Whether ``book`` has a price for ``route/model`` at all (a pair without one is remembered
    and logged once, as :func:`request_cost` does): a budgeted key's refusal of a request to an
    unpriced one names its price as the cure (:func:`~harness_gateway.store.decide`)."""
    return (route, model) not in _UNPRICED.setdefault(book, set()) and _priced(book, route, model)


def request_bound(book: PriceBook, route: str, model: str, usage: TokenUsage) -> float | None:
    """The most a request of ``route/model`` is expected to cost (USD), known before it runs, for
    its admission (:meth:`~harness_gateway.store.SqlStore.admit`'s ``bound``): ``usage`` is its
    estimated input tokens and the most output tokens it may produce (``None``: no bound given).

    The cost of ``usage`` at the book's prices (``0.0`` for a route/model priced at 0). Without
    an output bound, the cost of its input alone when the route/model's output (and reasoning)
    tokens cost nothing (:func:`_output_free`: a self-hosted model priced at 0, ``max_tokens`` or
    not, is bounded at 0), else ``None``. ``None`` too for a usage the book cannot price and for
    a route/model without any price: a request to an unpriced route is charged 0 when that route
    serves it, but a ``balance`` pool or a ``fallback`` target may serve it at a member's price,
    so it gets no bound (a pool's own name has no price): it is admitted as a priced request
    without ``max_tokens`` is, never with nothing reserved. A pair without a price is remembered
    (and logged once, :func:`_priced`) and not looked up again; so is one whose output is priced.
    """
    if (route, model) in _UNPRICED.setdefault(book, set()):
        return None
    if usage.output_tokens is None:
        return _output_free(book, route, model, usage.input_tokens)
    cost = book.cost(route, model, usage)
    if cost is not None:
        return float(cost.total)
    _priced(book, route, model)  # (remembers a pair without any price, and logs it once)
    return None


def _output_free(book: PriceBook, route: str, model: str, input_tokens: int | None) -> float | None:
    """The cost of ``input_tokens`` on ``route/model`` when its output costs nothing whatever its
    length (priced with no output, with :data:`_MOST_OUTPUT` output tokens, and with as many of
    them reasoning tokens, which may have their own rate: the same total); ``None`` when output
    is priced (remembered in :data:`_OUTPUT_PRICED`), when the route/model has no price at all,
    or when the usage cannot be priced."""
    seen = _OUTPUT_PRICED.setdefault(book, set())
    if (route, model) in seen:
        return None
    base = book.cost(route, model, TokenUsage(input_tokens, 0))
    if base is None:
        _priced(book, route, model)  # (remembers a pair without any price, and logs it once)
        return None
    for most in (
        TokenUsage(input_tokens, _MOST_OUTPUT),
        TokenUsage(input_tokens, _MOST_OUTPUT, reasoning_tokens=_MOST_OUTPUT),
    ):
        priced = book.cost(route, model, most)
        if priced is None or priced.total != base.total:
            seen.add((route, model))
            return None
    return float(base.total)


def generation_bound(book: PriceBook, route: str, model: str, options: GenerateOptions) -> float | None:
    """:func:`request_bound` of a generation: the input tokens :func:`estimated_usage` counts in
    ``options`` and ``options.max_tokens`` output tokens (``None`` when the request sets none)."""
    input_tokens = estimated_usage(options, 0).input_tokens
    return request_bound(book, route, model, TokenUsage(input_tokens, options.max_tokens))


def generation_floor(book: PriceBook, route: str, model: str, options: GenerateOptions) -> float:
    """The least a generation of ``route/model`` costs, known before it runs (USD): the input
    tokens :func:`estimated_usage` counts in ``options`` at the book's prices, with no output.
    What a budgeted key's request without a bound (:func:`generation_bound` ``None``) reserves at
    least (:func:`~harness_gateway.store.decide`), so requests that each cost more than the key's
    costliest so far cannot together pass its budget by more than their outputs. ``0.0`` when the
    book has no price for the pair (remembered, :func:`_priced`) or cannot price the usage."""
    if (route, model) in _UNPRICED.setdefault(book, set()):
        return 0.0
    cost = book.cost(route, model, TokenUsage(estimated_usage(options, 0).input_tokens, 0))
    if cost is None:
        _priced(book, route, model)  # (remembers a pair without any price, and logs it once)
        return 0.0
    return float(cost.total)


def embedding_bound(book: PriceBook, route: str, model: str, inputs: Sequence[str]) -> float | None:
    """:func:`request_bound` of an embedding call: the input tokens of
    :func:`estimated_embedding_usage` and no output (an embedding produces none)."""
    return request_bound(book, route, model, estimated_embedding_usage(inputs))


def estimated_usage(options: GenerateOptions, output_chars: int) -> TokenUsage:
    """The usage of a stream still running, before its provider reports one (providers report
    usage once, at the end): input tokens from the characters of the system prompt, the tools'
    definitions (their JSON) and every message block (:func:`_block_chars`: its text, never its
    framing or media), output tokens from ``output_chars`` characters streamed so far, each at
    :data:`CHARS_PER_TOKEN` characters per token, rounded up.

    What the ledger records while a request streams (:meth:`~harness_gateway.store.SqlStore.record`),
    so a process killed mid-stream is charged about what it used, not nothing, and what a budgeted
    key's request is estimated to cost before it runs (:func:`generation_bound`,
    :func:`generation_floor`).
    """
    chars = len(options.system or "")
    if options.tools:
        chars += len(msgspec.json.encode(options.tools))
    for message in options.messages:
        chars += sum(_block_chars(block) for block in message.content)
    return TokenUsage(math.ceil(chars / CHARS_PER_TOKEN), math.ceil(output_chars / CHARS_PER_TOKEN))


def _block_chars(block: ContentBlock) -> int:
    """The characters of ``block`` a provider tokenizes as text: a text's or reasoning's text (and
    a reasoning signature's opaque value, sent back as input), a tool call's name and arguments, a
    tool result's content; 0 for media (a :class:`~harness_core.FileBlock`, and a tool result's
    files), priced by each provider its own way and never by their bytes."""
    if isinstance(block, TextBlock):
        return len(block.text)
    if isinstance(block, ReasoningBlock):
        return len(block.text) + (len(block.signature.value) if block.signature is not None else 0)
    if isinstance(block, ToolCallBlock):
        return len(block.name) + len(block.arguments)
    if isinstance(block, ToolResultBlock):
        return len(block.content)
    return 0


def embedding_usage(usage: TokenUsage | None) -> TokenUsage | None:
    """What an embedding call is recorded and priced as: the input tokens the route reported and
    no output tokens (an embedding produces none; the price book prices a usage only when both
    counts are known); ``None`` when the route reported no usage (charged 0 and logged by
    :func:`request_cost`)."""
    if usage is None or usage.input_tokens is None:
        return None
    return TokenUsage(usage.input_tokens, 0)


def estimated_embedding_usage(inputs: Sequence[str]) -> TokenUsage:
    """The usage of an embedding call still running (what the ledger records for a reaper, as
    :func:`estimated_usage` does for a stream): the inputs' characters at
    :data:`CHARS_PER_TOKEN` per token, rounded up, and no output tokens."""
    return TokenUsage(math.ceil(sum(len(text) for text in inputs) / CHARS_PER_TOKEN), 0)
