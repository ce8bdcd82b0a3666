"""What a request costs: tokens × the configured price of its ``route/model``.

Kept to one function so the price source can change (the ``prices`` of the gateway config today)
without touching the gateway. Token semantics and arithmetic are those of the usage ledger
(:func:`harness_middleware.usage.cost_of`): cache reads and writes are subsets of input tokens,
reasoning tokens a subset of output tokens.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from harness_core.types import TokenUsage
from harness_middleware.usage import Price, cost_of

__all__ = ["request_cost"]

logger = logging.getLogger(__name__)


def request_cost(prices: Mapping[str, Price], route: str, model: str, usage: TokenUsage | None) -> float:
    """USD for ``usage`` of ``route/model``; 0.0 (logged as a warning) when the price or the usage is unknown."""
    cost = cost_of(usage, prices.get(f"{route}/{model}"))
    if cost is None:
        reason = "no usage was reported" if usage is None else f"no price is configured for {route}/{model}"
        logger.warning("charging 0 USD for a %s/%s request: %s", route, model, reason)
        return 0.0
    return cost
