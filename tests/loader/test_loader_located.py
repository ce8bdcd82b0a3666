"""Problems located at their own key (a fresh user's trial): values of mappings and items of
lists of structs at their own line, ``field_message`` paths from ``__post_init__`` checks, text
from the environment read as a number or a boolean, enum errors listing the values, and a file
that is no plugins.yaml reported once without echoing it."""

from __future__ import annotations

import enum
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal

import msgspec
import pytest

from harness_core import field_message
from harness_core.config import ConfigPath, named_field
from harness_core.loader import inspect_config
from harness_core.loader.convert import Converter, env_text_values, split_msgspec_error, type_at
from harness_core.secret import Redactor

Write = Callable[..., Path]


class Member(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    target: str
    rpm: Annotated[int, msgspec.Meta(ge=1)] | None = None


class Pool(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    members: list[Member]
    mode: Literal["a", "b"] | None = None


class TagA(msgspec.Struct, kw_only=True, tag="a"):
    x: int = 0


class TagB(msgspec.Struct, kw_only=True, tag="b"):
    y: int = 0
    kind: Literal["p", "q"] = "p"


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Config(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 8000
    ratio: float = 1.0
    flag: bool | None = None
    timeout: Annotated[float, msgspec.Meta(gt=0)] | None = 1.0
    label: str | int = "x"
    statuses: list[int] = msgspec.field(default_factory=list)
    names: dict[str, str] = msgspec.field(default_factory=dict)
    targets: dict[str, list[str]] = msgspec.field(default_factory=dict)
    pools: dict[str, list[Member] | Pool] = msgspec.field(default_factory=dict)
    either: TagA | TagB | None = None
    strategy: Literal["weighted", "latency"] = "weighted"
    codes: list[Literal["A", "B"]] = msgspec.field(default_factory=list)
    colour: Colour | None = None
    level: Literal[1, 2, "max"] | Literal["min"] = 1


def problems(raw: dict[str, object]) -> list[tuple[str, tuple[str | int, ...]]]:
    config, found = Converter(Redactor()).convert(Config, raw)
    assert config is None
    return [(message, path) for message, path, _ in found]


# ------------------------------------------------------------------ the field_message convention


@pytest.mark.parametrize(
    ("path", "written"),
    [
        (("base_url",), "base_url"),
        (("aliases", "slow"), "aliases.slow"),
        (("targets", "mock", 1), "targets.mock[1]"),
        (("prices", "mock/echo"), "prices.mock/echo"),
        (("aliases", "gpt-4.1"), 'aliases["gpt-4.1"]'),
        (("x", "it's", 'a"b\\', ""), 'x["it\'s"]["a\\"b\\\\"][""]'),
        (("a", "1"), "a.1"),
    ],
)
def test_a_field_message_path_reads_back_exactly(path: tuple[str | int, ...], written: str) -> None:
    message = field_message(path, "why: it is wrong")
    assert message == f"field '{written}': why: it is wrong"
    assert named_field(message) == (path, "why: it is wrong")


@pytest.mark.parametrize("path", [(), (1,), ("1a",), ("a b",)])
def test_a_field_message_path_starts_with_a_field_name(path: tuple[str | int, ...]) -> None:
    with pytest.raises(ValueError, match="the path must start with a field name"):
        field_message(path, "x")


@pytest.mark.parametrize("message", ["field base: x", "field '1a': x", "field 'a.b' x", "Expected `int`"])
def test_other_messages_name_no_field(message: str) -> None:
    assert named_field(message) is None


def test_a_post_init_message_is_located_below_the_struct_that_raised_it() -> None:
    text = "field 'targets.mock[1]': bad target - at `$.fallback`"
    assert split_msgspec_error(text) == ("bad target", ("fallback", "targets", "mock", 1))


class Checked(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A config with checks of its own (``__post_init__``), as the gateway's (a URL's port)."""

    port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 8000
    url: str = "h:1"
    other: str = "h:1"
    name: str
    after: str = "x"

    def __post_init__(self) -> None:
        for field in ("url", "other"):
            if not getattr(self, field).endswith(":1"):
                raise ValueError(field_message((field,), "the URL's port must be 1"))
        if self.after == "needs-port" and self.port == 8000:
            raise ValueError(field_message(("port",), "set the port for `after`"))


def test_a_struct_check_is_reported_beside_a_field_problem_and_beside_another_check() -> None:
    """msgspec runs ``__post_init__`` only once every field converted, and stops at its first
    error: ``port: 99999`` hid a bad ``url`` (reported when alone), and of two bad URLs only the
    first was named. Every one is reported, each at its field."""
    converter = Converter(Redactor())
    raw = {"port": 99999, "url": "h:7", "other": "h:9", "name": "n"}
    config, found = converter.convert(Checked, raw)
    assert config is None
    assert [(message, path) for message, path, _ in found] == [
        ("expected an integer of at most 65535", ("port",)),
        ("the URL's port must be 1", ("url",)),
        ("the URL's port must be 1", ("other",)),
    ]
    # a check naming a field left out (its default), or with a required field left out: no more
    _, found = converter.convert(Checked, {"port": "x", "after": "needs-port", "name": "n"})
    assert [path for _, path, _ in found] == [("port",)]
    _, found = converter.convert(Checked, {"name": 1, "url": "h:7"})
    assert [path for _, path, _ in found] == [("name",)]
    assert converter.convert(Checked, {"url": "h:7", "name": "n"})[1] == [("the URL's port must be 1", ("url",), False)]


# ------------------------------------------------------------------ values at their own key


def test_each_value_of_a_mapping_is_reported_at_its_own_key() -> None:
    found = problems({"names": {"fine": "a", "slow": 5, "also": 6}, "targets": {"mock": ["a", 7]}})
    assert found == [
        ("expected a string, got an integer", ("names", "slow")),
        ("expected a string, got an integer", ("names", "also")),
        ("expected a string, got an integer", ("targets", "mock", 1)),
    ]


def test_each_member_of_a_union_of_a_list_and_a_struct_is_reported_at_its_index() -> None:
    found = problems(
        {
            "pools": {
                "p": [{"target": "a", "rpm": -1}, {"target": "b", "rpm": 0}],
                "q": {"members": [{"target": 3}], "mode": "c"},
            }
        }
    )
    assert found == [
        ("expected an integer of at least 1", ("pools", "p", 0, "rpm")),
        ("expected an integer of at least 1", ("pools", "p", 1, "rpm")),
        ("expected a string, got an integer", ("pools", "q", "members", 0, "target")),
        ("Invalid enum value 'c' (expected one of 'a', 'b')", ("pools", "q", "mode")),
    ]


def test_a_value_no_member_of_a_union_fits_by_shape_is_converted_whole() -> None:
    assert problems({"pools": {"p": "text"}}) == [("expected a mapping or a list, got a string", ("pools", "p"))]
    # two members take a mapping (tagged structs): msgspec picks one itself
    assert problems({"either": {"type": "a", "x": "s"}}) == [("expected an integer, got a string", ("either", "x"))]
    assert type_at(Config, {"either": {"type": "a", "x": 1}}, ("either", "x")) is None


def test_the_type_at_a_path() -> None:
    raw = {"pools": {"p": [{"target": "a", "rpm": 1}]}, "names": {"k": "v"}, "nosuchfield": 1}
    assert type_at(Config, raw, ("pools", "p", 0, "rpm")) == Annotated[int, msgspec.Meta(ge=1)] | None
    assert type_at(Config, raw, ("names", "k")) is str
    assert type_at(Config, raw, ("nosuchfield",)) is None
    assert type_at(Config, raw, ("pools", "missing")) is None
    assert type_at(Config, raw, ("pools", "p", "x")) is None


def test_an_invalid_enum_value_lists_the_values_of_its_literal_and_names_the_closest() -> None:
    found = problems({"strategy": "wieghted", "codes": ["A", "Z"], "colour": "gren"})
    assert found == [
        (
            "Invalid enum value 'wieghted': did you mean 'weighted'? (expected one of 'weighted', 'latency')",
            ("strategy",),
        ),
        ("Invalid enum value 'Z' (expected one of 'A', 'B')", ("codes", 1)),  # none close
        ("Invalid enum value 'gren': did you mean 'green'? (expected one of 'red', 'green')", ("colour",)),
    ]


def test_an_invalid_enum_value_that_is_no_text_or_of_a_union_of_literals() -> None:
    assert problems({"level": 3}) == [("Invalid enum value 3 (expected one of 1, 2, 'max', 'min')", ("level",))]
    assert problems({"level": "mni"}) == [
        ("Invalid enum value 'mni': did you mean 'min'? (expected one of 1, 2, 'max', 'min')", ("level",))
    ]
    # a tagged struct (msgspec picks the member): the type there is not known, the message is msgspec's
    assert problems({"either": {"type": "b", "kind": "pp"}}) == [("Invalid enum value 'pp'", ("either", "kind"))]
    assert problems({"pools": {"q": {"members": [], "mode": "B"}}}) == [  # an optional Literal in a nested struct
        ("Invalid enum value 'B': did you mean 'b'? (expected one of 'a', 'b')", ("pools", "q", "mode"))
    ]


def test_an_invalid_enum_value_of_a_real_plugin_is_located_with_its_hint(write_config: Write) -> None:
    """The balance pool's ``strategy`` and the gateway's ``loop``, as a fresh user mistypes them."""
    path = write_config(
        "plugins:\n  mock: {routes: [a, b]}\n  balance:\n    pools:\n"
        "      p: {members: [{target: a}, {target: b}], strategy: wieghted}\n"
        "  gateway:\n    loop: asynico\n"
    )
    found = [str(problem) for problem in inspect_config(path, environ={}, instantiate=False).problems]
    assert found == [
        f"{path}:5, plugin 'balance', field 'pools.p.strategy': Invalid enum value 'wieghted': did you mean"
        " 'weighted'? (expected one of 'weighted', 'least-busy', 'latency', 'usage')",
        f"{path}:7, plugin 'gateway', field 'loop': Invalid enum value 'asynico': did you mean 'asyncio'?"
        " (expected one of 'auto', 'asyncio', 'uvloop')",
    ]


# ------------------------------------------------------------------ text from the environment


def test_text_from_the_environment_becomes_a_number_or_a_boolean_where_the_field_takes_one() -> None:
    raw = {
        "port": "8080",
        "ratio": "1.5",
        "flag": "true",
        "timeout": "null",
        "label": "7",
        "statuses": ["429"],
        "names": {"k": "v"},
        "pools": {"p": [{"target": "a", "rpm": "60"}]},
    }
    expanded: dict[ConfigPath, tuple[str, ...]] = {
        ("port",): ("PORT",),
        ("ratio",): ("R",),
        ("flag",): ("F",),
        ("timeout",): ("T",),
        ("label",): ("L",),
        ("statuses", 0): ("S",),
        ("names", "k"): ("V",),
        ("pools", "p", 0, "rpm"): ("RPM",),
    }
    converted, found = env_text_values(Config, raw, expanded)
    assert found == []
    config, problems_found = Converter(Redactor()).convert(Config, converted)
    assert problems_found == []
    assert isinstance(config, Config)
    assert (config.port, config.ratio, config.flag, config.timeout) == (8080, 1.5, True, None)
    assert (config.label, config.statuses, config.names) == ("7", [429], {"k": "v"})  # str | int keeps the text
    assert config.pools == {"p": [Member(target="a", rpm=60)]}


def test_text_from_the_environment_that_is_no_such_value_names_the_variables_never_the_value() -> None:
    raw = {"port": "80x80", "flag": "maybe", "ratio": "1.5-2"}
    expanded: dict[ConfigPath, tuple[str, ...]] = {
        ("port",): ("PORT",),
        ("flag",): ("FLAG",),
        ("ratio",): ("LOW", "HIGH"),
    }
    converted, found = env_text_values(Config, raw, expanded)
    assert found == [
        (
            "the environment variable PORT must hold an integer (such as 8080) for this field; its value is not shown",
            ("port",),
            False,
        ),
        (
            "the environment variable FLAG must hold a boolean (true or false) for this field; its value is not shown",
            ("flag",),
            False,
        ),
        (
            "the environment variables LOW, HIGH must hold a number (such as 1.5) for this field; "
            "its value is not shown",
            ("ratio",),
            False,
        ),
    ]
    assert converted["port"] == "80x80"


def test_a_port_from_the_environment_loads(fake_plugins: Path, write_config: Write) -> None:
    path = write_config("plugins:\n  strict:\n    name: n\n    count: ${{ env.COUNT }}\n")
    loaded = inspect_config(path, environ={"COUNT": "12"}, instantiate=False)
    assert loaded.problems == []
    broken = inspect_config(path, environ={"COUNT": "twelve"}, instantiate=False)
    [problem] = broken.problems
    assert (problem.plugin, problem.field, problem.line) == ("strict", "count", 4)
    assert problem.message.startswith("the environment variable COUNT must hold an integer")
    assert "twelve" not in str(problem)


def test_text_with_an_environment_problem_is_reported_once(fake_plugins: Path, write_config: Write) -> None:
    path = write_config("plugins:\n  strict:\n    name: n\n    count: '${{ env.COUNT }}${OTHER}'\n")
    [problem] = inspect_config(path, environ={"COUNT": "1"}, instantiate=False).problems
    assert (problem.field, problem.line) == ("count", 4)
    assert "write ${{ env.OTHER }}" in problem.message


def test_only_text_from_the_environment_is_read_as_a_number(fake_plugins: Path, write_config: Write) -> None:
    path = write_config("plugins:\n  strict:\n    name: n\n    count: '12'\n")
    [problem] = inspect_config(path, environ={}, instantiate=False).problems
    assert (problem.field, problem.line, problem.message) == ("count", 4, "expected an integer, got a string")


# ------------------------------------------------------------------ a file that is no plugins.yaml


def test_a_file_that_is_no_plugins_yaml_is_one_problem_quoting_none_of_it(
    fake_plugins: Path, write_config: Write
) -> None:
    path = write_config("root: x:0:0:root:/root:/bin/bash\ndaemon: x:1:1\nsecret-host: s3cr3t\n", name="passwd")
    [problem] = inspect_config(path, environ={}).problems
    assert str(problem) == (
        f"{path}: {path} is not a harness plugins.yaml: none of its top-level keys is "
        "`plugins`, `defaults` or `aliases` (3 unknown keys)"
    )
    for written in ("root", "daemon", "s3cr3t", "secret-host"):
        assert written not in problem.message.replace(str(path), "")
    path = write_config("only: one\n", name="one.yaml")
    [problem] = inspect_config(path, environ={}).problems
    assert problem.message.endswith("(1 unknown key)")


def test_an_unknown_key_beside_a_known_one_is_named_with_the_closest_known_key(
    fake_plugins: Path, write_config: Write
) -> None:
    path = write_config("plugins:\n  mock: {}\ndefault:\n  provider: mock\ncolour: red\n")
    found = [(p.line, p.message) for p in inspect_config(path, environ={}).problems]
    expected = "expected `plugins`, `defaults` or `aliases`"
    assert found == [
        (3, f"unknown top-level key 'default'; {expected} (did you mean `defaults`?)"),
        (5, f"unknown top-level key 'colour'; {expected}"),
    ]


def test_a_mistyped_plugins_key_alone_is_named_not_refused_as_another_file(
    fake_plugins: Path, write_config: Write
) -> None:
    path = write_config("plugin:\n  mock: {}\n")
    [problem] = inspect_config(path, environ={}).problems
    assert problem.line == 1
    assert problem.message.endswith("(did you mean `plugins`?)")
