"""What a request costs: its token usage priced by :class:`harness_middleware.pricing.PriceBook`.

Prices come from the maintained genai-prices table, with the gateway config's ``prices``
(``route/model``, ``route/*`` or ``*/model`` → USD per million tokens) overriding or adding
models and ``price_providers`` mapping routes to the table's provider ids. Token semantics are
:class:`~harness_core.types.TokenUsage`'s: cache reads/writes are subsets of input tokens,
reasoning tokens a subset of output tokens, each priced at its own rate.
"""

from __future__ import annotations

import logging
import weakref

from harness_core.types import TokenUsage
from harness_middleware.pricing import PriceBook

__all__ = ["request_cost"]

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
