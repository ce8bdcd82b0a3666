"""Cost of a generation from its :class:`~harness_core.types.TokenUsage`, priced by a maintained table.

Prices are **data**, not code: the default source is the `genai-prices
<https://github.com/pydantic/genai-prices>`_ package (Pydantic's maintained table of provider
prices, MIT; see its ``prices/README.md`` for the units), and user overrides from plugins.yaml
price private or unlisted models. Every amount is a :class:`decimal.Decimal` in **US dollars**
(no float rounding inside the computation; callers that store a float convert at the edge).

Usage::

    book = PriceBook()                                   # the bundled genai-prices table
    cost = book.cost("openai", "gpt-4o-mini", TokenUsage(input_tokens=1200, output_tokens=300,
                                                         cache_read_tokens=1000))
    cost.total          # Decimal('0.000285') USD
    cost.lines          # one CostLine per token kind: tokens, rate (USD per million), cost
    cost.source         # 'genai-prices 0.2.3'  (or 'config' for an override)
    cost.price_id       # 'openai/gpt-4o-mini'  (the table's provider/model that matched)

    book.cost("mock", "echo", usage)                     # None: unknown model, never $0

Token semantics follow :class:`~harness_core.types.TokenUsage`: ``input_tokens`` includes cache
reads and cache writes, ``output_tokens`` includes reasoning tokens. Each subset is priced at its
own rate (cache read, cache write, reasoning) and the rest of its parent at the parent's rate, so
no token is charged twice; a model without a separate rate for a subset charges it at the
parent's rate (which is what providers bill). Tiered prices (e.g. Gemini above 200k prompt
tokens) use the tier selected by the total input tokens, as the table defines.

Lookup order for ``(route, model)``:

1. ``overrides`` keyed ``"route/model"``, then ``"route/*"``, then ``"*/model"`` (source ``config``);
2. the table, unless the route is mapped to ``None`` in ``providers`` or is one of
   :data:`UNPRICED_ROUTES` (the built-in mock) that ``providers`` does not map: the route is looked
   up as the table's provider id (``providers`` maps a route to another id, e.g. ``{work:
   openai}``); a route that is no provider of the table (``local``) matches the model id alone;
3. otherwise ``None``: the cost is unknown, and the caller must say so (never a guessed zero).

The table (genai-prices, with pydantic) costs ~70 ms of CPU to import, so it is imported on the
first lookup that needs it, never at module import and never for an override or an unpriced route:
``harness run`` on the mock does not load it.

A usage without ``input_tokens`` or ``output_tokens`` has an unknown cost (``None``) too.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Annotated, Any, Final, Literal

import msgspec

from harness_core.middleware import TokenUsage

__all__ = ["UNPRICED_ROUTES", "Cost", "CostLine", "Price", "PriceBook", "PricingConfig", "TokenKind", "table_version"]

logger = logging.getLogger(__name__)

_MILLION = Decimal(1_000_000)

UNPRICED_ROUTES: Final = frozenset({"mock"})
"""Routes kept out of the price table unless ``providers`` maps them: ``mock``, the route of the
built-in mock provider (``harness-llm-mock``), whose token counts are estimates nobody bills and
whose only model (``echo``) the table has no row for. Its cost is ``None`` as before, without
importing the table."""

TokenKind = Literal["input", "cache_read", "cache_write", "cache_write_1h", "output", "reasoning", "other"]
"""A line of a cost breakdown: plain input (input minus cache reads and writes), cache reads,
cache writes (those of the provider's default lifetime), cache writes with a one-hour TTL
(``TokenUsage.cache_write_1h_tokens``, where the price has a rate of its own), plain output
(output minus reasoning), reasoning, and ``other`` (charges of the table that are not token
rates, such as per-request fees)."""

_Rate = Annotated[float, msgspec.Meta(ge=0)]


class Price(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """A user price for a private or unlisted model, in **USD per million tokens**.

    ``input`` applies to prompt tokens that are neither cache reads nor cache writes, ``output``
    to output tokens that are not reasoning tokens; ``cache_read`` / ``cache_write`` default to
    ``input``, ``cache_write_1h`` (writes with a one-hour TTL) to ``cache_write``, and
    ``reasoning`` to ``output`` when not given.
    """

    input: _Rate
    output: _Rate
    cache_read: _Rate | None = None
    cache_write: _Rate | None = None
    reasoning: _Rate | None = None
    cache_write_1h: _Rate | None = None


class CostLine(msgspec.Struct, frozen=True, omit_defaults=True):
    """One line of a breakdown: ``tokens`` priced at ``rate`` USD per million tokens = ``cost`` USD.

    ``tokens`` and ``rate`` are ``None`` for the ``other`` line (charges that are not token rates).
    """

    kind: TokenKind
    cost: Decimal
    tokens: int | None = None
    rate: Decimal | None = None


class Cost(msgspec.Struct, frozen=True):
    """The cost of one generation in US dollars.

    Fields:
        total: the whole cost, USD (``Decimal``; the sum of ``lines``).
        lines: the breakdown by :data:`TokenKind`, only kinds with tokens (or a charge).
        source: where the prices came from: ``"genai-prices <version>"`` or ``"config"``.
        price_id: what matched: ``"<provider id>/<model id>"`` of the table, or the override's
            key (``"route/model"``, ``"route/*"``, ``"*/model"``).
    """

    total: Decimal
    lines: tuple[CostLine, ...]
    source: str
    price_id: str


class PricingConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The pricing fields of a middleware config (``usage``, ``prompt-log``) in plugins.yaml.

    Fields:
        prices: price overrides in USD per million tokens keyed ``"route/model"``,
            ``"route/*"`` or ``"*/model"`` (the first that matches, in that order), for private
            or unlisted models; they win over the price table.
        price_providers: route → the price table's provider id when the route's name is not one
            (``{work: openai}``); ``null`` keeps a route out of the table.
        price_table: ``false`` prices from ``prices`` only (no genai-prices lookup).
    """

    prices: dict[str, Price] = msgspec.field(default_factory=dict)
    price_providers: dict[str, str | None] = msgspec.field(default_factory=dict)
    price_table: bool = True

    def price_book(self) -> PriceBook:
        """The :class:`PriceBook` these fields describe."""
        return PriceBook(self.prices, self.price_providers, use_table=self.price_table)


def table_version() -> str:
    """The source name of the bundled table, ``"genai-prices <installed version>"``."""
    import genai_prices

    return f"genai-prices {genai_prices.__version__}"


class PriceBook:
    """Prices generations: user ``overrides`` first, then the genai-prices table (module doc).

    Args:
        overrides: :class:`Price` keyed ``"route/model"``, ``"route/*"`` or ``"*/model"``.
        providers: route → the table's provider id (``{"work": "openai"}``); ``None`` as the id
            keeps a route out of the table (a local server whose model ids look like OpenAI's).
        use_table: ``False`` prices from ``overrides`` only.

    Thread-safe for concurrent :meth:`cost` calls (the table is read-only; its lookup cache is a
    dict updated atomically).
    """

    def __init__(
        self,
        overrides: Mapping[str, Price] | None = None,
        providers: Mapping[str, str | None] | None = None,
        *,
        use_table: bool = True,
    ) -> None:
        self.overrides: Mapping[str, Price] = dict(overrides or {})
        self.providers: Mapping[str, str | None] = dict(providers or {})
        self.use_table = use_table

    def override_for(self, route: str | None, model: str | None) -> tuple[str, Price] | None:
        """The ``(key, price)`` of the first override matching ``route``/``model``, or ``None``."""
        for key in (f"{route}/{model}", f"{route}/*", f"*/{model}"):
            price = self.overrides.get(key)
            if price is not None:
                return key, price
        return None

    def cost(
        self, route: str | None, model: str | None, usage: TokenUsage | None, *, at: datetime | None = None
    ) -> Cost | None:
        """The cost of ``usage`` on ``route``/``model`` in USD, or ``None`` when it is unknown.

        ``at`` is when the request was made (UTC; default now): the table's prices can change
        over time. ``None`` is returned for a model no override or table row matches, for a
        usage without input or output tokens, and for inconsistent counts (a subset larger than
        its total, logged as a warning naming the route and model).
        """
        if usage is None or usage.input_tokens is None or usage.output_tokens is None or model is None:
            return None
        try:
            override = self.override_for(route, model)
            if override is not None:
                key, price = override
                return _price_override(usage, price, key)
            mapped = self.providers.get(route or "", None if route in UNPRICED_ROUTES else route)
            if not self.use_table or mapped is None:
                return None
            return _price_from_table(usage, mapped, model, named=route in self.providers, at=at)
        except ValueError as exc:
            logger.warning("pricing: the usage of route %r model %r cannot be priced: %s", route, model, exc)
            return None


# --------------------------------------------------------------------------- computation


def _split(usage: TokenUsage, separate: Mapping[TokenKind, bool]) -> dict[TokenKind, int]:
    """Token counts per kind; a subset without its own rate (``separate[kind]`` false) stays in
    its parent. Raises ``ValueError`` when subsets exceed their total."""
    assert usage.input_tokens is not None
    assert usage.output_tokens is not None
    counts: dict[TokenKind, int] = {}
    rest_in, rest_out = usage.input_tokens, usage.output_tokens
    subsets: tuple[tuple[TokenKind, int | None], ...] = (
        ("cache_read", usage.cache_read_tokens),
        ("cache_write", usage.cache_write_tokens),
    )
    for kind, tokens in subsets:
        if tokens and separate[kind]:
            counts[kind] = tokens
            rest_in -= tokens
    hour = usage.cache_write_1h_tokens
    if hour and separate["cache_write_1h"]:  # a part of the writes; of plain input when they have no rate
        counts["cache_write_1h"] = hour
        if "cache_write" in counts:
            counts["cache_write"] -= hour
            if counts["cache_write"] < 0:
                raise ValueError(f"one-hour cache writes exceed the cache writes: {usage}")
        else:
            rest_in -= hour
    if usage.reasoning_tokens and separate["reasoning"]:
        counts["reasoning"] = usage.reasoning_tokens
        rest_out -= usage.reasoning_tokens
    if rest_in < 0 or rest_out < 0:
        raise ValueError(f"cache or reasoning token counts exceed the totals they belong to: {usage}")
    counts["input"] = rest_in
    counts["output"] = rest_out
    return counts


_ORDER: tuple[TokenKind, ...] = ("input", "cache_read", "cache_write", "cache_write_1h", "output", "reasoning")


def _lines(counts: Mapping[TokenKind, int], rates: Mapping[TokenKind, Decimal]) -> list[CostLine]:
    return [
        CostLine(kind, counts[kind] * rates[kind] / _MILLION, counts[kind], rates[kind])
        for kind in _ORDER
        if counts.get(kind)
    ]


def _price_override(usage: TokenUsage, price: Price, key: str) -> Cost:
    given: dict[TokenKind, float | None] = {
        "input": price.input,
        "output": price.output,
        "cache_read": price.cache_read,
        "cache_write": price.cache_write,
        "cache_write_1h": price.cache_write_1h,
        "reasoning": price.reasoning,
    }
    separate = {kind: rate is not None for kind, rate in given.items()}
    rates = {kind: Decimal(repr(rate)) for kind, rate in given.items() if rate is not None}
    lines = _lines(_split(usage, separate), rates)
    return Cost(sum((line.cost for line in lines), Decimal(0)), tuple(lines), "config", key)


# genai-prices price keys (USD per million tokens) of each kind, and its usage field names.
_TABLE_KEYS: dict[TokenKind, str] = {
    "input": "input_mtok",
    "cache_read": "cache_read_mtok",
    "cache_write": "cache_write_mtok",
    "cache_write_1h": "cache_write_1h_mtok",
    "output": "output_mtok",
    "reasoning": "output_reasoning_mtok",
}


def _price_from_table(
    usage: TokenUsage, provider_id: str, model: str, *, named: bool, at: datetime | None
) -> Cost | None:
    """Price ``usage`` with the genai-prices table; ``None`` when no provider/model matches.

    ``provider_id`` is the route, or the table provider the user ``named`` for the route.
    """
    from genai_prices import Usage as TableUsage
    from genai_prices.data_snapshot import get_snapshot

    snapshot = get_snapshot()
    try:
        provider, info = snapshot.find_provider_model(model, None, provider_id, None)
    except LookupError:
        if named:  # the user named the table's provider: no guessing by model id
            return None
        try:  # a route that is no provider of the table (``local``): match the model id alone
            provider, info = snapshot.find_provider_model(model, None, None, None)
        except LookupError:
            return None
    moment = at if at is not None else datetime.now(tz=UTC)
    table_usage = TableUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        cache_write_1h_tokens=usage.cache_write_1h_tokens,
        output_reasoning_tokens=usage.reasoning_tokens,
    )
    calculation = info.calc_price(table_usage, provider, genai_request_timestamp=moment)
    model_price = calculation.model_price
    assert usage.input_tokens is not None
    rates = {kind: _rate(getattr(model_price, key), usage.input_tokens) for kind, key in _TABLE_KEYS.items()}
    separate = {kind: rate is not None for kind, rate in rates.items()}
    known = {kind: rate for kind, rate in rates.items() if rate is not None}
    known.setdefault("input", Decimal(0))
    known.setdefault("output", Decimal(0))
    lines = _lines(_split(usage, separate), known)
    rest = calculation.total_price - sum((line.cost for line in lines), Decimal(0))
    if rest:
        lines.append(CostLine("other", rest))
    return Cost(calculation.total_price, tuple(lines), table_version(), f"{provider.id}/{info.id}")


def _rate(price: Any, input_tokens: int) -> Decimal | None:
    """The rate (USD per million) of a table price: a ``Decimal``, ``None``, or tiered prices whose
    tier is the highest one whose ``start`` the total input tokens exceed (the table's rule)."""
    if price is None or isinstance(price, Decimal):
        return price
    rate: Decimal = price.base
    for tier in reversed(price.tiers):
        if input_tokens > tier.start:
            rate = tier.price
            break
    return rate
