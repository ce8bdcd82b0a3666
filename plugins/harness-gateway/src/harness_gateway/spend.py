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

from harness_core import FileBlock, GenerateOptions, TokenUsage
from harness_middleware.pricing import PriceBook

__all__ = ["CHARS_PER_TOKEN", "embedding_usage", "estimated_embedding_usage", "estimated_usage", "request_cost"]

CHARS_PER_TOKEN: Final = 4
"""Characters per token of :func:`estimated_usage` (OpenAI's rule of thumb for English text,
https://help.openai.com/en/articles/4936856-what-are-tokens-and-how-to-count-them)."""

logger = logging.getLogger(__name__)

_PROBE = TokenUsage(input_tokens=1, output_tokens=1)
_UNPRICED: weakref.WeakKeyDictionary[PriceBook, set[tuple[str, str]]] = weakref.WeakKeyDictionary()
"""Per price book (one per configuration read), the ``(route, model)`` pairs no price matches:
not looked up again (a miss searches the whole table, ~1 ms)."""


def request_cost(book: PriceBook, route: str, model: str, usage: TokenUsage | None) -> float:
    """USD for ``usage`` of ``route/model`` (a float, for the ledger).

    An unknown cost is charged as 0.0 and logged as a warning naming the route and model (once
    per model when no price is known; every time a stream reported no usage), so the gap is
    visible rather than silent.
    """
    unpriced = _UNPRICED.setdefault(book, set())
    if usage is None:
        logger.warning("charging 0 USD for a request to %s/%s: no usage was reported", route, model)
        return 0.0
    if (route, model) in unpriced:
        return 0.0
    cost = book.cost(route, model, usage)
    if cost is not None:
        return float(cost.total)
    if book.cost(route, model, _PROBE) is None:  # no price at all (not a usage it cannot price)
        unpriced.add((route, model))
        logger.warning("charging 0 USD for %s/%s requests: no price is known (add one to `prices`)", route, model)
    else:
        logger.warning("charging 0 USD for a request to %s/%s: its usage cannot be priced (%s)", route, model, usage)
    return 0.0


def estimated_usage(options: GenerateOptions, output_chars: int) -> TokenUsage:
    """The usage of a stream still running, before its provider reports one (providers report
    usage once, at the end): input tokens from the system prompt and every message block except
    media (their JSON), output tokens from ``output_chars`` characters streamed so far, each at
    :data:`CHARS_PER_TOKEN` characters per token, rounded up.

    What the ledger records while a request streams (:meth:`~harness_gateway.store.SqlStore.record`),
    so a process killed mid-stream is charged about what it used, not nothing.
    """
    chars = len(options.system or "")
    for message in options.messages:
        chars += sum(len(msgspec.json.encode(block)) for block in message.content if not isinstance(block, FileBlock))
    return TokenUsage(math.ceil(chars / CHARS_PER_TOKEN), math.ceil(output_chars / CHARS_PER_TOKEN))


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
