"""What a request costs: its token usage priced by :class:`harness_middleware.pricing.PriceBook`.

Prices come from the maintained genai-prices table, with the gateway config's ``prices``
(``route/model``, ``route/*`` or ``*/model`` → USD per million tokens) overriding or adding
models and ``price_providers`` mapping routes to the table's provider ids. Token semantics are
:class:`~harness_core.types.TokenUsage`'s: cache reads/writes are subsets of input tokens,
reasoning tokens a subset of output tokens, each priced at its own rate.
"""

from __future__ import annotations

import logging

from harness_core.types import TokenUsage
from harness_middleware.pricing import PriceBook

__all__ = ["request_cost"]

logger = logging.getLogger(__name__)

_UNPRICED: set[tuple[str, str]] = set()


def request_cost(book: PriceBook, route: str, model: str, usage: TokenUsage | None) -> float:
    """USD for ``usage`` of ``route/model`` (a float, for the ledger).

    An unknown cost is charged as 0.0 and logged as a warning naming the route and model (once
    per model when no price is known; every time a stream reported no usage), so the gap is
    visible rather than silent.
    """
    cost = book.cost(route, model, usage)
    if cost is None:
        if usage is None:
            logger.warning("charging 0 USD for a %s/%s request: no usage was reported", route, model)
        elif (route, model) not in _UNPRICED:  # once per model: every request of it would repeat it
            _UNPRICED.add((route, model))
            logger.warning("charging 0 USD for %s/%s requests: no price is known (add one to `prices`)", route, model)
        return 0.0
    return float(cost.total)
