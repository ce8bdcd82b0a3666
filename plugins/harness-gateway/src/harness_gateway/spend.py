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


def request_cost(book: PriceBook, route: str, model: str, usage: TokenUsage | None) -> float:
    """USD for ``usage`` of ``route/model`` (a float, for the ledger).

    An unknown cost (no price anywhere, or no usage reported) is charged as 0.0 and logged as a
    warning naming the route and model, so the gap is visible rather than silent.
    """
    cost = book.cost(route, model, usage)
    if cost is None:
        reason = "no usage was reported" if usage is None else f"no price is known for {route}/{model}"
        logger.warning("charging 0 USD for a %s/%s request: %s", route, model, reason)
        return 0.0
    return float(cost.total)
