"""pricing: costs from the genai-prices table (checked against the table's own rates), overrides,
unknown models (None, never 0), tiers, and the breakdown adding up to the total."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from decimal import Decimal

import genai_prices
import msgspec
import pytest
from genai_prices.data_snapshot import get_snapshot

from harness_core.types import TokenUsage
from harness_middleware.pricing import Cost, CostLine, Price, PriceBook, table_version

MILLION = Decimal(1_000_000)
USAGE = TokenUsage(
    input_tokens=10_000, output_tokens=2_000, cache_read_tokens=6_000, cache_write_tokens=1_000, reasoning_tokens=1_500
)


def table_rates(provider: str, model: str) -> dict[str, Decimal]:
    """The table's own rates (USD per million) of ``provider``/``model`` today."""
    _, info = get_snapshot().find_provider_model(model, None, provider, None)
    price = info.get_prices(datetime.now(tz=UTC))
    return {key: getattr(price, key) for key in ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok")}


def check_lines_add_up(cost: Cost) -> None:
    assert sum((line.cost for line in cost.lines), Decimal(0)) == cost.total
    for line in cost.lines:
        if line.kind != "other":
            assert line.tokens is not None
            assert line.rate is not None
            assert line.cost == line.tokens * line.rate / MILLION


def test_anthropic_cache_reads_and_writes_at_their_own_rates() -> None:
    rates = table_rates("anthropic", "claude-sonnet-4-20250514")
    assert rates["cache_read_mtok"] is not None
    assert rates["cache_write_mtok"] is not None
    assert rates["cache_read_mtok"] < rates["input_mtok"] < rates["cache_write_mtok"]  # type: ignore[operator]
    cost = PriceBook().cost("anthropic", "claude-sonnet-4-20250514", USAGE)
    assert cost is not None
    expected = (
        3_000 * rates["input_mtok"]  # type: ignore[operator]
        + 6_000 * rates["cache_read_mtok"]
        + 1_000 * rates["cache_write_mtok"]
        + 2_000 * rates["output_mtok"]  # no separate reasoning rate: reasoning is output
    ) / MILLION
    assert cost.total == expected
    assert cost.source == f"genai-prices {genai_prices.__version__}" == table_version()
    assert cost.price_id.startswith("anthropic/claude-sonnet-4")
    assert [line.kind for line in cost.lines] == ["input", "cache_read", "cache_write", "output"]
    assert [line.tokens for line in cost.lines] == [3_000, 6_000, 1_000, 2_000]
    check_lines_add_up(cost)


def test_openai_reasoning_model_cache_write_without_rate_is_input() -> None:
    rates = table_rates("openai", "o3")
    assert rates["cache_write_mtok"] is None
    assert rates["cache_read_mtok"] is not None
    cost = PriceBook().cost("openai", "o3", USAGE)
    assert cost is not None
    expected = (
        4_000 * rates["input_mtok"]  # type: ignore[operator]  # plain input + cache writes
        + 6_000 * rates["cache_read_mtok"]
        + 2_000 * rates["output_mtok"]  # reasoning included, at the output rate
    ) / MILLION
    assert cost.total == expected
    assert cost.price_id == "openai/o3"
    check_lines_add_up(cost)


def add_o3_price(monkeypatch: pytest.MonkeyPatch, **extra: Decimal) -> None:
    """Give openai/o3 of the table the extra price keys ``extra`` (USD per unit of the table)."""
    from genai_prices import types

    _, info = get_snapshot().find_provider_model("o3", None, "openai", None)
    original = info.get_prices

    def with_extra(*args: object, **kwargs: object) -> types.ModelPrice:
        price = original(*args, **kwargs)  # type: ignore[arg-type]
        return types.ModelPrice(**price.__dict__, **extra)

    monkeypatch.setattr(info, "get_prices", with_extra)


def test_reasoning_priced_separately_when_the_table_has_a_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    add_o3_price(monkeypatch, output_reasoning_mtok=Decimal("100"))
    cost = PriceBook().cost("openai", "o3", USAGE)
    assert cost is not None
    reasoning = [line for line in cost.lines if line.kind == "reasoning"]
    assert reasoning == [CostLine("reasoning", Decimal("0.15"), 1_500, Decimal("100"))]
    assert [line.tokens for line in cost.lines if line.kind == "output"] == [500]
    check_lines_add_up(cost)


def test_unknown_model_is_none_never_zero() -> None:
    book = PriceBook()
    assert book.cost("mock", "echo", USAGE) is None
    assert book.cost("openai", "no-such-model-xyz", USAGE) is None
    assert book.cost("openai", None, USAGE) is None
    assert book.cost(None, "o3", USAGE) is None  # no route: nothing to look the price up under


def test_unknown_usage_is_none() -> None:
    book = PriceBook()
    assert book.cost("openai", "o3", None) is None
    assert book.cost("openai", "o3", TokenUsage(input_tokens=None, output_tokens=3)) is None
    assert book.cost("openai", "o3", TokenUsage(input_tokens=3, output_tokens=None)) is None


def test_route_that_is_no_table_provider_matches_by_model() -> None:
    cost = PriceBook().cost("work", "gpt-4o-mini", TokenUsage(input_tokens=1_000_000, output_tokens=0))
    assert cost is not None
    assert cost.price_id == "openai/gpt-4o-mini"
    assert cost.total == table_rates("openai", "gpt-4o-mini")["input_mtok"]


def test_provider_mapping() -> None:
    usage = TokenUsage(input_tokens=1_000_000, output_tokens=1_000_000)
    groq = table_rates("groq", "llama-3.1-8b-instant")
    book = PriceBook(providers={"fast": "groq", "local": None, "odd": "openai"})
    cost = book.cost("fast", "llama-3.1-8b-instant", usage)
    assert cost is not None
    assert cost.price_id == "groq/llama-3.1-8b-instant"
    assert cost.total == groq["input_mtok"] + groq["output_mtok"]  # type: ignore[operator]
    assert book.cost("local", "gpt-4o-mini", usage) is None  # kept out of the table
    assert book.cost("odd", "llama-3.1-8b-instant", usage) is None  # named provider: no guessing


def test_override_wins_and_defaults_subset_rates() -> None:
    book = PriceBook(
        {
            "local/secret-1": Price(input=1, output=2, cache_read=0.5, reasoning=8),
            "local/*": Price(input=10, output=20),
            "*/gpt-4o-mini": Price(input=0, output=0),
        }
    )
    cost = book.cost("local", "secret-1", USAGE)
    assert cost is not None
    assert (cost.source, cost.price_id) == ("config", "local/secret-1")
    # cache writes fall back to the input rate; reasoning has its own rate
    assert cost.total == (Decimal(4_000) * 1 + Decimal(6_000) * Decimal("0.5") + 500 * 2 + 1_500 * 8) / MILLION
    check_lines_add_up(cost)
    other = book.cost("local", "other", USAGE)
    assert other is not None
    assert other.price_id == "local/*"
    assert other.total == (Decimal(10_000) * 10 + Decimal(2_000) * 20) / MILLION
    free = book.cost("openai", "gpt-4o-mini", USAGE)
    assert free is not None
    assert free.total == 0
    assert free.price_id == "*/gpt-4o-mini"


def test_table_off_prices_overrides_only() -> None:
    book = PriceBook({"a/b": Price(input=1, output=1)}, use_table=False)
    assert book.cost("openai", "o3", USAGE) is None
    assert book.cost("a", "b", TokenUsage(input_tokens=1, output_tokens=1)) is not None


def test_tiered_prices_follow_total_input() -> None:
    book = PriceBook()
    small = book.cost("google", "gemini-2.5-pro", TokenUsage(input_tokens=1_000, output_tokens=0))
    large = book.cost("google", "gemini-2.5-pro", TokenUsage(input_tokens=300_000, output_tokens=0))
    assert small is not None
    assert large is not None
    assert small.lines[0].rate is not None
    assert large.lines[0].rate is not None
    assert large.lines[0].rate > small.lines[0].rate
    check_lines_add_up(large)


def test_charges_that_are_not_token_rates_go_to_other(monkeypatch: pytest.MonkeyPatch) -> None:
    add_o3_price(monkeypatch, requests_kcount=Decimal("5"))
    cost = PriceBook().cost("openai", "o3", TokenUsage(input_tokens=0, output_tokens=0))
    assert cost is not None
    assert cost.lines == (CostLine("other", Decimal("0.005")),)


def test_inconsistent_counts_are_logged_and_unknown(caplog: pytest.LogCaptureFixture) -> None:
    bad = TokenUsage(input_tokens=10, output_tokens=5, cache_read_tokens=50)
    with caplog.at_level(logging.WARNING, logger="harness_middleware.pricing"):
        assert PriceBook().cost("openai", "o3", bad) is None
        assert PriceBook({"*/m": Price(input=1, output=1, cache_read=1)}).cost("r", "m", bad) is None
    assert len(caplog.records) == 2
    assert "'openai'" in caplog.records[0].getMessage()
    assert "'o3'" in caplog.records[0].getMessage()
    too_much_reasoning = TokenUsage(input_tokens=10, output_tokens=5, reasoning_tokens=6)
    assert PriceBook({"*/m": Price(input=1, output=1, reasoning=2)}).cost("r", "m", too_much_reasoning) is None


def test_prices_follow_the_request_date() -> None:
    long_ago = datetime(2020, 1, 1, tzinfo=UTC)
    cost = PriceBook().cost("openai", "gpt-4o-mini", USAGE, at=long_ago)
    assert cost is not None  # the table's rows without start dates apply at any time


def test_cost_is_json_with_exact_decimals() -> None:
    cost = PriceBook({"r/m": Price(input=0.1, output=0.2)}).cost("r", "m", TokenUsage(3, 3))
    assert cost is not None
    data = msgspec.to_builtins(cost)
    assert Decimal(data["total"]) == Decimal("0.0000009")
    assert data["lines"][0] == {"kind": "input", "cost": "3E-7", "tokens": 3, "rate": "0.1"}  # exact, no float noise


HOUR_USAGE = TokenUsage(input_tokens=10_000, output_tokens=100, cache_write_tokens=4_000, cache_write_1h_tokens=3_000)


def test_one_hour_cache_writes_at_the_tables_one_hour_rate() -> None:
    """Anthropic bills one-hour cache writes at 2x input, five-minute ones at 1.25x: the table's
    ``cache_write_1h_mtok`` prices the one-hour part, and the total matches genai-prices' own."""
    cost = PriceBook().cost("anthropic", "claude-sonnet-4-5", HOUR_USAGE)
    assert cost is not None
    assert [(line.kind, line.tokens) for line in cost.lines] == [
        ("input", 6_000),
        ("cache_write", 1_000),
        ("cache_write_1h", 3_000),
        ("output", 100),
    ]
    rates = {line.kind: line.rate for line in cost.lines}
    assert rates["cache_write_1h"] == 2 * rates["input"]  # type: ignore[operator]  # Anthropic's 1h write: 2x
    assert rates["cache_write"] == Decimal("1.25") * rates["input"]  # type: ignore[operator]  # 5m: 1.25x
    table = genai_prices.calc_price(
        genai_prices.Usage(
            input_tokens=10_000, output_tokens=100, cache_write_tokens=4_000, cache_write_1h_tokens=3_000
        ),
        model_ref="claude-sonnet-4-5",
        provider_id="anthropic",
    )
    assert cost.total == table.total_price
    check_lines_add_up(cost)


def test_one_hour_writes_in_overrides_default_to_the_write_rate_and_are_checked() -> None:
    book = PriceBook(
        {
            "a/hour": Price(input=1, output=1, cache_write=2, cache_write_1h=4),
            "a/plain": Price(input=1, output=1, cache_write=2),
            "a/only-hour": Price(input=1, output=1, cache_write_1h=4),
        }
    )
    hour = book.cost("a", "hour", HOUR_USAGE)
    assert hour is not None
    assert hour.total == (Decimal(6_000) * 1 + 1_000 * 2 + 3_000 * 4 + 100 * 1) / MILLION
    plain = book.cost("a", "plain", HOUR_USAGE)  # no one-hour rate: every write at the write rate
    assert plain is not None
    assert [line.kind for line in plain.lines] == ["input", "cache_write", "output"]
    assert plain.total == (Decimal(6_000) * 1 + 4_000 * 2 + 100 * 1) / MILLION
    only = book.cost("a", "only-hour", HOUR_USAGE)  # writes without a rate are input; the hour part is not
    assert only is not None
    assert [(line.kind, line.tokens) for line in only.lines] == [
        ("input", 7_000),
        ("cache_write_1h", 3_000),
        ("output", 100),
    ]
    bad = TokenUsage(input_tokens=10, output_tokens=1, cache_write_tokens=2, cache_write_1h_tokens=3)
    assert book.cost("a", "hour", bad) is None  # logged as inconsistent
