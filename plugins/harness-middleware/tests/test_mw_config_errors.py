"""The fallback and balance configs' mistakes are reported at their own key's line (a fresh
user's trial): a target inside ``targets``, a member inside ``pools``, an enum's valid values, and
(when the harness starts) a target or member naming a route that no plugin serves."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from harness_core import ConfigError, Harness
from harness_core.loader import inspect_config, load_config


def problems(tmp_path: Path, text: str) -> list[tuple[str | None, str | None, int | None, str]]:
    path = tmp_path / "plugins.yaml"
    path.write_text(text, encoding="utf-8")
    return [(p.plugin, p.field, p.line, p.message) for p in inspect_config(path, environ={}).problems]


def test_a_bad_fallback_target_is_reported_at_its_own_line(tmp_path: Path) -> None:
    text = "plugins:\n  fallback:\n    targets:\n      mock:\n        - mock/a\n        - 7\n  mock: {}\n"
    assert problems(tmp_path, text) == [("fallback", "targets.mock[1]", 6, "expected a string, got an integer")]
    text = "plugins:\n  fallback:\n    targets:\n      mock: [mock/a]\n      other:\n        - a/\n  mock: {}\n"
    assert problems(tmp_path, text) == [
        (
            "fallback",
            "targets.other[0]",
            6,
            "fallback target 'a/' must be 'route' or 'route/model' (in the list of 'other')",
        )
    ]
    text = "plugins:\n  fallback:\n    default:\n      - mock\n      - /x\n  mock: {}\n"
    [(_, field, line, _)] = problems(tmp_path, text)
    assert (field, line) == ("default[1]", 5)


def test_a_bad_pool_member_is_reported_at_its_own_line(tmp_path: Path) -> None:
    text = (
        "plugins:\n  balance:\n    strategy: wieghted\n    pools:\n      p:\n        - target: mock/a\n"
        "          rpm: -1\n      q:\n        members:\n          - target: mock/a\n          - target: mock/a\n"
        "  mock: {}\n"
    )
    assert problems(tmp_path, text) == [
        (
            "balance",
            "strategy",
            3,
            "Invalid enum value 'wieghted': did you mean 'weighted'?"
            " (expected one of 'weighted', 'least-busy', 'latency', 'usage')",
        ),
        ("balance", "pools.p[0].rpm", 7, "expected an integer of at least 1"),
    ]
    text = (
        "plugins:\n  balance:\n    pools:\n      q:\n        members:\n          - target: mock/a\n"
        "          - target: mock/a\n  mock: {}\n"
    )
    assert problems(tmp_path, text) == [
        ("balance", "pools.q.members[1].target", 7, "pool 'q' lists member 'mock/a' twice")
    ]
    text = "plugins:\n  balance:\n    pools:\n      p: []\n  mock: {}\n"
    assert problems(tmp_path, text) == [("balance", "pools.p", 4, "pool 'p' has no members")]


def unknown_routes(tmp_path: Path, text: str) -> list[tuple[str | None, str | None, int | None, str]]:
    """The problems the start raises for ``text`` (plugins.yaml): the routes it names that no plugin serves."""
    path = tmp_path / "plugins.yaml"
    path.write_text(text, encoding="utf-8")
    harness = Harness.from_loaded(load_config(path, environ={}))

    async def start() -> None:
        async with harness:
            pass  # pragma: no cover - the start raises

    with pytest.raises(ConfigError) as caught:
        anyio.run(start)
    return [(p.plugin, p.field, p.line, p.message) for p in caught.value.problems]


def test_a_fallback_naming_a_route_nothing_serves_stops_the_start(tmp_path: Path) -> None:
    text = (
        "plugins:\n  fallback:\n    targets:\n      mock:\n        - mock/a\n        - mokc/b\n      mcok: [mock]\n"
        "    default: [nowhere]\n  mock: {}\n"
    )
    assert unknown_routes(tmp_path, text) == [
        (
            "fallback",
            "targets.mcok",
            7,
            "`targets` key 'mcok' names route 'mcok', which no plugin serves (did you mean 'mock'?); routes: 'mock'",
        ),
        (
            "fallback",
            "targets.mock[1]",
            6,
            "fallback target 'mokc/b' (in the list of 'mock') names route 'mokc', "
            "which no plugin serves (did you mean 'mock'?); routes: 'mock'",
        ),
        (
            "fallback",
            "default[0]",
            8,
            "fallback target 'nowhere' (in the list of 'default') names route 'nowhere', "
            "which no plugin serves; routes: 'mock'",
        ),
    ]


def test_a_pool_member_naming_a_route_nothing_serves_stops_the_start(tmp_path: Path) -> None:
    text = (
        "plugins:\n  balance:\n    pools:\n      p:\n        - target: mock/a\n        - target: mokc/b\n"
        "      q:\n        members:\n          - target: mock/a\n          - target: elsewhere\n  mock: {}\n"
    )
    assert unknown_routes(tmp_path, text) == [
        (
            "balance",
            "pools.p[1].target",
            6,
            "member 'mokc/b' of pool 'p' names route 'mokc', which no plugin serves "
            "(did you mean 'mock'?); routes: 'p', 'q', 'mock'",
        ),
        (
            "balance",
            "pools.q.members[1].target",
            10,
            "member 'elsewhere' of pool 'q' names route 'elsewhere', which no plugin serves; routes: 'p', 'q', 'mock'",
        ),
    ]


def test_a_fallback_to_a_pool_and_pool_members_that_are_served_start(tmp_path: Path) -> None:
    path = tmp_path / "plugins.yaml"
    path.write_text(
        "plugins:\n  fallback:\n    targets: {mock: [pool]}\n  balance:\n    pools: {pool: [{target: mock/echo}]}\n"
        "  mock: {}\n",
        encoding="utf-8",
    )

    async def start() -> dict[str, str]:
        async with Harness.from_loaded(load_config(path, environ={})) as harness:
            return harness.routes()

    assert anyio.run(start) == {"pool": "balance", "mock": "mock"}
