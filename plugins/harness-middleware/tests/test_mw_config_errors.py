"""The fallback and balance configs' mistakes are reported at their own key's line (a fresh
user's trial): a target inside ``targets``, a member inside ``pools``, an enum's valid values."""

from __future__ import annotations

from pathlib import Path

from harness_core.loader import inspect_config


def problems(tmp_path: Path, text: str) -> list[tuple[str | None, str | None, int | None, str]]:
    path = tmp_path / "plugins.yaml"
    path.write_text(text, encoding="utf-8")
    return [(p.plugin, p.field, p.line, p.message) for p in inspect_config(path, environ={}).problems]


def test_a_bad_fallback_target_is_reported_at_its_own_line(tmp_path: Path) -> None:
    text = "plugins:\n  fallback:\n    targets:\n      mock:\n        - mock/a\n        - 7\n  mock: {}\n"
    assert problems(tmp_path, text) == [("fallback", "targets.mock[1]", 6, "Expected `str`, got `int`")]
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
            "Invalid enum value 'wieghted' (expected one of 'weighted', 'least-busy', 'latency', 'usage')",
        ),
        ("balance", "pools.p[0].rpm", 7, "Expected `int` >= 1"),
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
