"""harness_core.config: marked YAML, env substitution, problems, redaction, EnvFallback."""

from __future__ import annotations

import pytest

from harness_core import LlmError
from harness_core.config import (
    MASK,
    ConfigError,
    ConfigProblem,
    EnvFallback,
    Redactor,
    format_path,
    line_for,
    parse_yaml,
    substitute_env,
)


def test_parse_keeps_the_line_of_every_key_and_item() -> None:
    text = "plugins:\n  mock:\n    routes:\n      - a\n      - b\ndefaults: {provider: mock}\n"
    data, lines, problems = parse_yaml(text, source="p.yaml")
    assert problems == []
    assert data == {"plugins": {"mock": {"routes": ["a", "b"]}}, "defaults": {"provider": "mock"}}
    assert lines[("plugins",)] == 1
    assert lines[("plugins", "mock")] == 2
    assert lines[("plugins", "mock", "routes")] == 3
    assert lines[("plugins", "mock", "routes", 1)] == 5
    assert lines[("defaults", "provider")] == 6
    assert not any("<key>" in path for path in lines)


def test_syntax_error_names_the_line() -> None:
    data, _, problems = parse_yaml("plugins:\n  mock: [1\n", source="p.yaml")
    assert data is None
    (problem,) = problems
    assert problem.line == 3
    assert problem.source == "p.yaml"
    assert "invalid YAML" in problem.message


def test_empty_document_is_none_without_problem() -> None:
    assert parse_yaml("# nothing\n", source="p.yaml") == (None, {}, [])


def test_duplicate_keys_are_rejected_with_both_lines() -> None:
    text = "plugins:\n  mock: {}\n  trace: {}\n  mock: {delay: 1}\n"
    data, _, problems = parse_yaml(text, source="p.yaml")
    (problem,) = problems
    assert problem.line == 4
    assert problem.field == "plugins.mock"
    assert "duplicate key 'mock' (lines 2 and 4)" in problem.message
    assert data == {"plugins": {"mock": {}, "trace": {}}}


def test_unsafe_tags_and_bad_scalars_are_problems_with_lines() -> None:
    text = "a: 1\nb: !!python/name:os.system\nc: !!int abc\n"
    data, _, problems = parse_yaml(text, source="p.yaml")
    assert [p.line for p in problems] == [2, 3]
    assert all(p.message.startswith("invalid YAML value") for p in problems)
    assert data == {"a": 1, "b": None, "c": None}


def test_complex_keys_and_recursive_aliases_are_problems() -> None:
    _, _, problems = parse_yaml("? [a, b]\n: 1\n", source="p.yaml")
    assert [p.message for p in problems] == ["a mapping key must be a plain value"]
    data, _, problems = parse_yaml("a: &x [1, *x]\n", source="p.yaml")
    assert [p.message for p in problems] == ["recursive YAML alias"]
    assert data == {"a": [1, None]}


def test_aliases_are_expanded() -> None:
    data, _, problems = parse_yaml("a: &x {k: 1}\nb: *x\n", source="p.yaml")
    assert problems == []
    assert data == {"a": {"k": 1}, "b": {"k": 1}}


def test_substitute_env_looks_up_never_evaluates() -> None:
    redactor = Redactor()
    data = {"key": "${{ env.TOKEN }}", "url": "https://${{env.HOST}}/v1", "n": 3, "list": ["${{ env.TOKEN }}"]}
    out, problems = substitute_env(data, {"TOKEN": "tok-123456", "HOST": "example.org"}, redactor)
    assert problems == []
    assert out == {"key": "tok-123456", "url": "https://example.org/v1", "n": 3, "list": ["tok-123456"]}
    assert "tok-123456" in redactor
    assert "example.org" in redactor
    assert redactor("sent tok-123456 to example.org") == f"sent {MASK} to {MASK}"


def test_substitute_env_reports_missing_variables_and_expressions() -> None:
    data = {"a": "${{ env.MISSING }}", "b": ["${{ 1 + 1 }}"], "c": "plain"}
    out, problems = substitute_env(data, {}, Redactor(), ("plugins", "x"))
    assert problems == [
        (("plugins", "x", "a"), "environment variable MISSING is not set"),
        (("plugins", "x", "b", 0), "unsupported expression '${{ 1 + 1 }}': only ${{ env.NAME }} is allowed"),
    ]
    assert out["c"] == "plain"


def test_redactor_ignores_tiny_values() -> None:
    redactor = Redactor()
    redactor.add("ab")
    redactor.add("abc")
    assert redactor("ab abc") == f"ab {MASK}"
    assert repr(redactor) == "Redactor(1 secrets)"
    assert "ab" not in redactor


def test_config_error_lists_every_problem() -> None:
    problems = [
        ConfigProblem(message="bad", plugin="openai:groq", field="routes[0]", line=7, source="p.yaml"),
        ConfigProblem(message="unknown top-level key", line=1, source="p.yaml"),
        ConfigProblem(message="cannot read", source="p.yaml"),
        ConfigProblem(message="no source"),
    ]
    error = ConfigError(problems)
    assert isinstance(error, LlmError)
    assert error.code == "CONFIG"
    assert error.problems == problems
    assert error.message.splitlines() == [
        "invalid configuration (4 problems):",
        "  - p.yaml:7, plugin 'openai:groq', field 'routes[0]': bad",
        "  - p.yaml:1: unknown top-level key",
        "  - p.yaml: cannot read",
        "  - <config>: no source",
    ]
    assert ConfigError(problems[:1]).message.startswith("invalid configuration (1 problem):")
    assert str(ConfigProblem(message="m", line=3)) == "<config>:3: m"


def test_paths_and_lines() -> None:
    assert format_path(("plugins", "mock", "routes", 0, "x")) == "plugins.mock.routes[0].x"
    assert format_path(()) == ""
    lines = {("plugins",): 1, ("plugins", "mock"): 2}
    assert line_for(lines, ("plugins", "mock", "routes", 3)) == 2
    assert line_for({}, ("a",)) is None


def test_env_fallback_marker() -> None:
    marker = EnvFallback("OPENAI_API_KEY", only_when={"base_url": "https://api.openai.com/v1"})
    assert marker.var == "OPENAI_API_KEY"
    assert marker.only_when == {"base_url": "https://api.openai.com/v1"}
    assert EnvFallback("X").only_when == {}
    assert repr(EnvFallback("X")) == "EnvFallback('X', only_when={})"


@pytest.mark.parametrize("text", ["a: 1\n", "- 1\n"])
def test_documents_of_any_shape_parse(text: str) -> None:
    assert parse_yaml(text, source="s")[2] == []
