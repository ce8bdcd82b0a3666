"""The environment syntax in plugins.yaml is strict: a malformed reference is a located error, never
a literal key sent to a provider; and every problem of one plugin is reported, not only the first."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from harness_core.config import ConfigError
from harness_core.loader import inspect_config, load_config
from harness_core.secret import MASK

Write = Callable[..., Path]
KEY = "sk-" + "q7Zr" * 6  # key-shaped, built at run time


def only_problem(path: Path, environ: dict[str, str] | None = None) -> tuple[str | None, str | None, int | None, str]:
    loaded = inspect_config(path, environ=environ if environ is not None else {"MY_TOKEN": KEY})
    assert loaded.failures == []
    [problem] = loaded.problems
    return problem.plugin, problem.field, problem.line, problem.message


@pytest.mark.parametrize(
    ("written", "hint"),
    [
        ('"${ env.MY_TOKEN }"', "write ${{ env.MY_TOKEN }}"),
        ('"${MY_TOKEN}"', "write ${{ env.MY_TOKEN }}"),
        ('"$MY_TOKEN"', "write ${{ env.MY_TOKEN }}"),
        ('"${{ env.MY_TOKEN }"', "write ${{ env.MY_TOKEN }}"),  # one brace missing
        ('"${{ env.MY_TOKEN }}x"', "a secret is one whole value"),  # concatenation
        ('"x${{ env.MY_TOKEN }}"', "a secret is one whole value"),
        ('"{{ env.MY_TOKEN }}"', "a `$` is missing: write ${{ env.MY_TOKEN }}"),
        ('"${{ ENV.MY_TOKEN }}"', "only ${{ env.NAME }} is allowed"),
        ('"$$MY_TOKEN"', "the syntax is ${{ env.NAME }}"),
    ],
)
def test_a_malformed_reference_in_a_secret_field_is_a_located_error(
    fake_plugins: Path, write_config: Write, written: str, hint: str
) -> None:
    path = write_config(f"plugins:\n  strict:\n    name: a\n    token: {written}\n")
    plugin, field, line, message = only_problem(path)
    assert (plugin, field, line) == ("strict", "token", 4)
    assert hint in message
    assert KEY not in message
    with pytest.raises(ConfigError, match="field 'token'"):
        load_config(path, environ={"MY_TOKEN": KEY})


@pytest.mark.parametrize("written", ["$" + KEY, "$" + KEY.replace("-", "_"), "${" + KEY + "}"])
def test_a_dollar_before_a_literal_key_never_shows_the_key(
    fake_plugins: Path, write_config: Write, written: str
) -> None:
    path = write_config(f"plugins:\n  strict:\n    name: a\n    token: '{written}'\n")
    _, field, line, message = only_problem(path)
    assert (field, line) == ("token", 4)
    assert written[1:].strip("{}") not in message
    assert "${{ env.NAME }}" in message
    assert inspect_config(path, environ={}).redact(f"x {written} y") == f"x {MASK} y"  # masked wherever it shows


def test_a_shell_style_variable_name_is_quoted_with_the_fix(fake_plugins: Path, write_config: Write) -> None:
    path = write_config("plugins:\n  strict:\n    name: a\n    token: $OPENAI_API_KEY\n")
    assert only_problem(path)[3] == (
        "$OPENAI_API_KEY is not expanded (harness does not expand shell variables): write ${{ env.OPENAI_API_KEY }}"
    )


def test_the_right_syntax_is_accepted_with_or_without_spaces(fake_plugins: Path, write_config: Write) -> None:
    path = write_config("plugins:\n  strict:\n    name: a\n    token: ${{env.MY_TOKEN}}\n  strict:b:\n    name: b\n")
    loaded = load_config(path, environ={"MY_TOKEN": KEY})
    assert loaded.plugins[0].instance.config.token.get_secret_value() == KEY  # type: ignore[attr-defined]


def test_other_string_fields_are_strict_too_with_an_escape(fake_plugins: Path, write_config: Write) -> None:
    path = write_config(
        "plugins:\n"
        "  strict:\n"
        "    name: 'costs $5 and $${{ kept }} and $${HOME}'\n"  # $$ { is the escape for a literal ${
        "    host: 'https://${ env.HOST }/v1'\n"
        "    tags: ['${{ env.HOST }', '${{ env.HOST }}-x']\n"
    )
    problems = inspect_config(path, environ={"HOST": "example.org"}).problems
    assert [(p.field, p.line, p.message) for p in problems] == [
        (
            "host",
            4,
            "'${ env.HOST }' is not expanded: harness reads the environment only as ${{ env.NAME }} (double braces): "
            "write ${{ env.HOST }} (write $${ for a literal ${)",
        ),
        (
            "tags[0]",
            5,
            "unterminated expression '${{ env.HOST }': `${{` without a closing `}}`; write ${{ env.HOST }} "
            "(write $${ for a literal ${)",
        ),
    ]
    path = write_config("plugins:\n  strict:\n    name: 'costs $5 and $${{ kept }} and $${HOME}'\n    host: '${ 1'\n")
    [problem] = inspect_config(path, environ={}).problems
    assert (
        problem.message == "`${` starts no expression here: the syntax is ${{ env.NAME }} (write $${ for a literal ${)"
    )
    path = write_config("plugins:\n  strict:\n    name: 'costs $5 and $${{ kept }} and $${HOME}'\n")
    config = load_config(path, environ={}).plugins[0].instance.config  # type: ignore[attr-defined]
    assert config.name == "costs $5 and ${{ kept }} and ${HOME}"


@pytest.mark.parametrize("token", ["$${{ env.MY_TOKEN }}", "$${x}", "sk-$${abc", "$${{ env.K }}${{ env.K }}"])
def test_the_literal_escape_is_refused_in_a_secret_field(fake_plugins: Path, write_config: Write, token: str) -> None:
    path = write_config(f"plugins:\n  strict:\n    name: 'a $${{ literal'\n    token: '{token}'\n")
    loaded = inspect_config(path, environ={"MY_TOKEN": KEY, "K": KEY})
    [problem] = loaded.problems
    assert (problem.plugin, problem.field, problem.line) == ("strict", "token", 4)
    assert problem.message.startswith("`$${` (the escape for a literal `${`) is not allowed in a secret")
    assert token not in problem.message
    assert KEY not in problem.message
    assert loaded.redact(f"sent {token}") == f"sent {MASK}"  # a value refused unquoted is masked elsewhere


def test_a_secret_field_nested_in_a_list_or_a_mapping_is_checked_too(fake_plugins: Path, write_config: Write) -> None:
    path = write_config(
        "plugins:\n  openai:\n    base_url: http://127.0.0.1:9/v1\n    api_key: '${{ env.K }}-suffix'\n"
    )
    loaded = inspect_config(path, environ={"K": KEY})
    [problem] = loaded.problems
    assert (problem.plugin, problem.field, problem.line) == ("openai", "api_key", 4)
    assert "a secret is one whole value" in problem.message


# ------------------------------------------------------------------ every problem of a plugin


def test_every_problem_inside_one_plugin_is_reported_in_file_order(fake_plugins: Path, write_config: Write) -> None:
    path = write_config(
        "plugins:\n"
        "  strict:\n"
        "    colour: red\n"  # 3
        "    count: many\n"  # 4
        "    token: ${{ env.MY_TOKEN }\n"  # 5
        "    tags: [a, 2, b, 3]\n"  # 6: both bad items (msgspec alone reports the first)
        "    inner: {level: x}\n"  # 7
        "    host: ${ env.HOST }\n"  # 8
        "    routes: ${{ env.NOT_SET }}\n"  # 9: unset, listed with the rest since the config is invalid anyway
    )
    problems = inspect_config(path, environ={}).problems
    assert [(p.plugin, p.field, p.line) for p in problems] == [
        ("strict", None, 2),  # `name` is missing: located at the plugin
        ("strict", "colour", 3),
        ("strict", "count", 4),
        ("strict", "token", 5),
        ("strict", "tags[1]", 6),
        ("strict", "tags[3]", 6),
        ("strict", "inner.level", 7),
        ("strict", "host", 8),
        ("strict", "routes", 9),
    ]
    assert problems[0].message == "Object missing required field `name`"
    assert problems[-1].message == "environment variable NOT_SET is not set"


def test_every_unusable_secret_of_a_provider_is_named_in_its_one_failure(
    fake_plugins: Path, write_config: Write
) -> None:
    path = write_config(
        "plugins:\n  strict:\n    name: a\n    token: ${{ env.NOT_SET }}\n    other: ${{ env.ALSO_NOT_SET }}\n"
    )
    loaded = inspect_config(path, environ={})
    assert loaded.problems == []
    [failure] = loaded.failures
    assert failure.message == (
        f"plugin 'strict' cannot be used: environment variable NOT_SET is not set ({path}:4, field 'token'); "
        f"environment variable ALSO_NOT_SET is not set ({path}:5, field 'other')"
    )


def test_a_refused_key_and_a_type_error_are_both_reported(fake_plugins: Path, write_config: Write) -> None:
    path = write_config(f"plugins:\n  strict:\n    name: a\n    token: '{KEY}\\r'\n    count: x\n".replace("'", '"'))
    problems = inspect_config(path, environ={}).problems
    assert [(p.field, p.line) for p in problems] == [("token", 4), ("count", 5)]
    assert "CRLF" in problems[0].message
    assert KEY not in repr(problems)


def test_a_check_across_fields_is_reported_when_every_field_alone_is_fine(
    fake_plugins: Path, write_config: Write, tmp_path: Path
) -> None:
    path = write_config(f"plugins:\n  trace:\n    path: {tmp_path}\n")  # a folder: TraceConfig refuses it
    [problem] = inspect_config(path, environ={}).problems
    assert (problem.plugin, problem.line) == ("trace", 2)
    assert "trace path" in problem.message


def test_a_config_that_ignores_unknown_fields_reports_only_the_bad_values(
    fake_plugins: Path, write_config: Write
) -> None:
    path = write_config("plugins:\n  lenient:\n    whatever: 1\n    count: x\n    size: y\n")
    problems = inspect_config(path, environ={}).problems
    assert [(p.field, p.line, p.message) for p in problems] == [
        ("count", 4, "expected an integer, got a string"),
        ("size", 5, "expected an integer, got a string"),
    ]


# ------------------------------------------------------------------ aliases


def test_alias_targets_take_env_expressions_and_the_value_is_a_secret(fake_plugins: Path, write_config: Write) -> None:
    path = write_config(
        "plugins:\n  mock: {}\naliases:\n  k: 'mock/${{ env.MODEL_NAME }}'\n  plain: 'mock/echo $${x}'\n"
    )
    loaded = load_config(path, environ={"MODEL_NAME": KEY})
    assert loaded.resolve_alias(None, "k") == ("mock", KEY)
    assert loaded.aliases["plain"] == "mock/echo ${x}"
    assert loaded.redact(f"model {KEY}") == f"model {MASK}"


@pytest.mark.parametrize(
    ("written", "message"),
    [
        ("'mock/${{ env.MODEL_NAME }'", "unterminated expression"),
        ("'mock/${MODEL_NAME}'", "write ${{ env.MODEL_NAME }}"),
        ("'mock/${{ 1 + 1 }}'", "only ${{ env.NAME }} is allowed"),
        ("'mock/${{ env.UNSET_NAME }}'", "environment variable UNSET_NAME is not set"),
    ],
)
def test_a_malformed_or_unset_expression_in_an_alias_is_a_located_error(
    fake_plugins: Path, write_config: Write, written: str, message: str
) -> None:
    path = write_config(f"plugins:\n  mock: {{}}\naliases:\n  fine: mock/echo\n  k: {written}\n")
    loaded = inspect_config(path, environ={"MODEL_NAME": KEY})
    [problem] = loaded.problems
    assert (problem.field, problem.line) == ("aliases.k", 5)
    assert message in problem.message
    assert loaded.aliases == {"fine": "mock/echo"}


def test_an_expression_in_an_alias_name_is_refused(fake_plugins: Path, write_config: Write) -> None:
    path = write_config("plugins:\n  mock: {}\naliases:\n  '${{ env.MODEL_NAME }}': mock/echo\n")
    [problem] = inspect_config(path, environ={"MODEL_NAME": KEY}).problems
    assert (problem.field, problem.line) == ("aliases.${{ env.MODEL_NAME }}", 4)
    assert "names are not expanded" in problem.message


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("/echo", "alias 'k': the route of '/echo' is empty (write 'route/model', or a model id alone)"),
        ("mock/", "alias 'k': the model of 'mock/' is empty (write 'route/model', or a model id alone)"),
    ],
)
def test_an_alias_whose_route_or_model_is_empty_is_a_located_error(
    fake_plugins: Path, write_config: Write, value: str, message: str
) -> None:
    """Found by a trial: ``k: ${{ env.T }}`` with ``T=/echo`` sent a request to route ``''``."""
    path = write_config("plugins:\n  mock: {}\naliases:\n  fine: mock/e/f\n  k: ${{ env.T }}\n")
    loaded = inspect_config(path, environ={"T": value})
    [problem] = loaded.problems
    assert (problem.field, problem.line) == ("aliases.k", 5)
    assert problem.message == message.replace(repr(value), repr(MASK))  # the value came from the environment
    assert loaded.aliases == {"fine": "mock/e/f"}
