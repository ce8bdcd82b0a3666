"""harness_core.config: marked YAML, env substitution, problems, redaction, EnvFallback."""

from __future__ import annotations

import io
import itertools
import logging

import pytest

from harness_core import LlmError
from harness_core.config import (
    MAX_ALIAS_NODES,
    ConfigError,
    ConfigProblem,
    EnvFallback,
    format_path,
    line_for,
    parse_yaml,
    substitute_env,
)
from harness_core.secret import MASK, RedactFilter, Redactor, redacted_logging


def test_parse_keeps_the_line_of_every_key_and_item() -> None:
    text = "plugins:\n  mock:\n    routes:\n      - a\n      - b\ndefaults: {route: mock}\n"
    data, lines, problems = parse_yaml(text, source="p.yaml")
    assert problems == []
    assert data == {"plugins": {"mock": {"routes": ["a", "b"]}}, "defaults": {"route": "mock"}}
    assert lines[("plugins",)] == 1
    assert lines[("plugins", "mock")] == 2
    assert lines[("plugins", "mock", "routes")] == 3
    assert lines[("plugins", "mock", "routes", 1)] == 5
    assert lines[("defaults", "route")] == 6
    assert not any("<key>" in path for path in lines)


def test_syntax_error_names_the_line() -> None:
    data, _, problems = parse_yaml("plugins:\n  mock: [1\n", source="p.yaml")
    assert data is None
    (problem,) = problems
    assert problem.line == 3
    assert problem.source == "p.yaml"
    assert "invalid YAML" in problem.message


def test_an_unclosed_bracket_is_named_at_its_own_line() -> None:
    """PyYAML finds the fault where the list should have ended; the ``[`` left open is elsewhere."""
    _, _, (problem,) = parse_yaml("plugins:\n  mock: {routes: [a, b}\n  other: {}\n", source="p.yaml")
    assert (problem.line, problem.message) == (2, "invalid YAML: expected ',' or ']', but got '}'")  # one line
    _, _, (problem,) = parse_yaml("plugins:\n  mock: [a, b\n  other: {}\n", source="p.yaml")
    assert (problem.line, problem.message) == (
        3,
        "invalid YAML: expected ',' or ']', but got ':' (while parsing a flow sequence that starts at line 2)",
    )


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


def test_every_explicit_tag_is_refused_naming_tag_and_line() -> None:
    text = (
        "a: 1\n"
        "b: !!python/name:os.system\n"
        "c: !!int abc\n"
        'mock: !!python/object/apply:os.system ["touch x"]\n'  # a sequence, not kept as a plain list
        "d: ! plain\n"
        "e: !custom {k: 1}\n"
        "!!str f: 2\n"  # a tagged key: the entry is dropped
        "g: =\n"  # implicitly `tag:yaml.org,2002:value`, which SafeLoader cannot construct
    )
    data, _, problems = parse_yaml(text, source="p.yaml")
    assert [(p.line, p.field, p.message) for p in problems] == [
        (2, "b", "YAML tags are not allowed (found '!!python/name:os.system'); write the plain value"),
        (3, "c", "YAML tags are not allowed (found '!!int'); write the plain value"),
        (4, "mock", "YAML tags are not allowed (found '!!python/object/apply:os.system'); write the plain value"),
        (5, "d", "YAML tags are not allowed (found '!'); write the plain value"),
        (6, "e", "YAML tags are not allowed (found '!custom'); write the plain value"),
        (7, "<key>", "YAML tags are not allowed (found '!!str'); write the plain value"),
        (8, "g", "invalid YAML value: could not determine a constructor for the tag 'tag:yaml.org,2002:value'"),
    ]
    assert data == {"a": 1, "b": None, "c": None, "mock": None, "d": None, "e": None, "g": None}


def test_merge_keys_merge_with_lines() -> None:
    text = (
        "base: &base {delay: 1, routes: [a]}\n"
        "more: &more\n"
        "  delay: 2\n"
        "  error: X\n"
        "one:\n"
        "  <<: *base\n"
        "  delay: 3\n"  # line 7: written keys win
        "two:\n"
        "  <<: [*more, *base]\n"  # the first source wins
        "three: {<<: {inline: 1}}\n"
    )
    data, lines, problems = parse_yaml(text, source="p.yaml")
    assert problems == []
    assert data["one"] == {"delay": 3, "routes": ["a"]}
    assert data["two"] == {"delay": 2, "error": "X", "routes": ["a"]}
    assert list(data["two"]) == ["delay", "error", "routes"]
    assert data["three"] == {"inline": 1}
    assert lines[("one", "delay")] == 7
    assert lines[("one", "routes")] == 1
    assert lines[("two", "delay")] == 3
    assert lines[("two", "routes")] == 1


def test_bad_merge_keys_are_problems_with_lines() -> None:
    text = (
        "a: &a [1]\n"
        "b:\n"
        "  <<: *a\n"  # line 3: a sequence of scalars, not mappings
        "c:\n"
        "  <<: [x]\n"  # line 5
        "d: <<\n"  # line 6: a merge key as a value
        "e: &e {<<: *e, k: 1}\n"  # line 7: merges itself
        "f: {!!merge <<: {k: 1}}\n"  # line 8: an explicit tag, even the merge one
    )
    data, _, problems = parse_yaml(text, source="p.yaml")
    assert [(p.line, p.message) for p in problems] == [
        (3, "a merge key `<<` takes a mapping or a list of mappings"),
        (5, "a merge key `<<` takes a mapping or a list of mappings"),
        (6, "a merge key `<<` may only be a key of a mapping"),
        (7, "recursive YAML alias"),
        (8, "YAML tags are not allowed (found '!!merge'); write the plain value"),
    ]
    assert data == {"a": [1], "b": {}, "c": {}, "d": None, "e": {"k": 1}, "f": {}}


def billion_laughs(levels: int) -> str:
    names = [f"l{i}" for i in range(levels)]
    lines = [f"{names[0]}: &{names[0]} [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for prev, name in itertools.pairwise(names):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_alias_bombs_are_refused_naming_the_alias_line() -> None:
    data, lines, problems = parse_yaml(billion_laughs(9), source="bomb.yaml")
    assert data is None
    assert lines == {}
    (problem,) = problems
    assert problem.source == "bomb.yaml"
    assert problem.line == 5  # l4 = [*l3 …]: the expansion crosses the limit while expanding *l3
    assert problem.message == (
        f"YAML aliases expand to more than {MAX_ALIAS_NODES} nodes (at alias *l3): "
        "refused, this looks like an alias bomb"
    )
    # below the limit, aliases expand as usual
    data, _, problems = parse_yaml(billion_laughs(4), source="ok.yaml")
    assert problems == []
    assert len(data["l3"]) == 9
    assert data["l3"][0][0][0] == ["lol"] * 9


def test_deep_nesting_is_a_problem_not_a_crash() -> None:
    data, _, problems = parse_yaml("a: " + "[" * 5000 + "]" * 5000 + "\n", source="deep.yaml")
    assert data is None
    assert [(p.message, p.source) for p in problems] == [("the YAML document nests too deeply", "deep.yaml")]


def test_problems_inside_an_aliased_subtree_are_reported_once() -> None:
    data, _, problems = parse_yaml("a: &x {k: !!int 1}\nb: *x\nc: *x\n", source="p.yaml")
    assert [(p.line, p.field) for p in problems] == [(1, "a.k")]
    assert data == {"a": {"k": None}, "b": {"k": None}, "c": {"k": None}}


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
        (("plugins", "x", "a"), "environment variable MISSING is not set", True),
        (("plugins", "x", "b", 0), "unsupported expression '${{ 1 + 1 }}': only ${{ env.NAME }} is allowed", False),
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
    lines: dict[tuple[str | int, ...], int] = {("plugins",): 1, ("plugins", "mock"): 2}
    assert line_for(lines, ("plugins", "mock", "routes", 3)) == 2
    assert line_for({}, ("a",)) is None


def test_env_fallback_marker() -> None:
    marker = EnvFallback("OPENAI_API_KEY", only_when={"base_url": "https://api.openai.com/v1"})
    assert marker.var == "OPENAI_API_KEY"
    assert marker.only_when == {"base_url": "https://api.openai.com/v1"}
    assert EnvFallback("X").only_when == {}
    assert repr(EnvFallback("X")) == "EnvFallback('X', only_when={}, required=False)"


@pytest.mark.parametrize("text", ["a: 1\n", "- 1\n"])
def test_documents_of_any_shape_parse(text: str) -> None:
    assert parse_yaml(text, source="s")[2] == []


def secret_traceback_record(secret: str) -> logging.LogRecord:
    try:
        raise RuntimeError(f"failed with {secret}")
    except RuntimeError as exc:
        return logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "plugin %r: %s", ("k", secret), (type(exc), exc, None)
        )


def test_redact_filter_scrubs_message_arguments_traceback_and_stack() -> None:
    redactor = Redactor()
    redactor.add("sk-log-secret")
    redact_filter = RedactFilter(redactor)
    record = secret_traceback_record("sk-log-secret")
    record.stack_info = "Stack: sk-log-secret"
    assert redact_filter.filter(record) is True
    assert (record.msg, record.args) == (f"plugin 'k': {MASK}", None)
    assert record.exc_info is not None  # kept: formatters still know there is a traceback
    assert record.exc_text is not None
    assert f"RuntimeError: failed with {MASK}" in record.exc_text
    assert record.stack_info == f"Stack: {MASK}"
    text = logging.Formatter().format(record)
    assert "sk-log-secret" not in text
    assert f"failed with {MASK}" in text
    # an already formatted traceback is redacted as is; a record without one stays without
    record = secret_traceback_record("sk-log-secret")
    record.exc_text = "Traceback: sk-log-secret"
    redact_filter.filter(record)
    assert record.exc_text == f"Traceback: {MASK}"
    plain = logging.LogRecord("x", logging.INFO, __file__, 1, "no secret here", None, None)
    redact_filter.filter(plain)
    assert (plain.msg, plain.exc_text, plain.stack_info) == ("no secret here", None, None)


def test_redacted_logging_covers_root_handlers_within_the_block() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    logger = logging.getLogger("harness.test.redaction")
    try:
        with redacted_logging(lambda text: text.replace("sk-hidden", MASK)) as installed:
            assert installed in handler.filters
            logger.error("inside %s", "sk-hidden", exc_info=RuntimeError("boom sk-hidden"))
        assert handler.filters == []
        logger.error("outside %s", "sk-hidden")
    finally:
        root.removeHandler(handler)
    inside, _, outside = stream.getvalue().partition("outside")
    assert "sk-hidden" not in inside
    assert f"inside {MASK}" in inside
    assert f"RuntimeError: boom {MASK}" in inside
    assert "sk-hidden" in outside


def test_an_env_expression_in_flow_style_gets_a_hint_to_quote_it() -> None:
    _, _, [problem] = parse_yaml("plugins:\n  openai: {api_key: ${{ env.K }}}\n", source="p.yaml")
    assert problem.line == 2
    assert problem.message.endswith('must be quoted: key: "${{ env.NAME }}"')
    _, _, [plain] = parse_yaml("plugins: {a: b\n", source="p.yaml")
    assert "quoted" not in plain.message
