"""harness_core.loader: search, validation with lines, failures, env handling, secrets."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import msgspec
import pytest

from harness_core import Secret
from harness_core.config import ConfigError, ConfigPath
from harness_core.loader import (
    BUILTIN_DEFAULT,
    LoadedConfig,
    find_config,
    inspect_config,
    installed_plugins,
    load_config,
)
from harness_core.plugininfo import Defaults
from harness_core.secret import MASK

FAKE_PLUGINS = Path(__file__).parent / "fakeplugins"

Write = Callable[..., Path]
SECRET = "tok-very-secret-value-123"


def problems_of(
    path: Path, environ: dict[str, str] | None = None
) -> list[tuple[str | None, str | None, int | None, str]]:
    loaded = inspect_config(path, environ=environ or {})
    return [(p.plugin, p.field, p.line, p.message) for p in loaded.problems]


# ------------------------------------------------------------------ search


def test_find_config_search_order(fake_plugins: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = fake_plugins
    assert find_config(None, environ={}) is None
    user = home / "xdg" / "harness" / "plugins.yaml"
    user.parent.mkdir(parents=True)
    user.write_text("plugins: {}\n")
    assert find_config(None, environ={}) == user
    (home / "config").mkdir()
    (home / "config" / "plugins.yaml").write_text("plugins: {}\n")
    assert find_config(None, environ={}) == home / "config" / "plugins.yaml"
    (home / "plugins.yaml").write_text("plugins: {}\n")
    assert find_config(None, environ={}) == home / "plugins.yaml"
    assert find_config(None, environ={}, cwd=home / "xdg") == user
    assert find_config(None, environ={"HARNESS_CONFIG": "/x/env.yaml"}) == Path("/x/env.yaml")
    assert find_config("/x/cli.yaml", environ={"HARNESS_CONFIG": "/x/env.yaml"}) == Path("/x/cli.yaml")
    monkeypatch.setenv("HARNESS_CONFIG", "/x/real-env.yaml")
    assert find_config() == Path("/x/real-env.yaml")


def test_builtin_default_when_nothing_is_found(fake_plugins: Path) -> None:
    loaded = load_config(environ={})
    assert loaded.path is None
    assert loaded.source == "<built-in default>"
    assert [p.key for p in loaded.plugins] == ["mock"]
    assert loaded.defaults == Defaults(route="mock", model="echo")
    assert "mock: {}" in BUILTIN_DEFAULT


def test_a_directory_found_by_the_search_is_reported(fake_plugins: Path) -> None:
    (fake_plugins / "plugins.yaml").mkdir()
    (fake_plugins / "config").mkdir()
    (fake_plugins / "config" / "plugins.yaml").write_text("plugins: {}\n")
    assert find_config(None, environ={}) == fake_plugins / "plugins.yaml"  # not skipped silently
    with pytest.raises(ConfigError) as info:
        load_config(environ={})
    assert info.value.message.splitlines()[1:] == [
        f"  - {fake_plugins / 'plugins.yaml'}: the config path is a directory; expected a YAML file"
    ]
    with pytest.raises(ConfigError, match="is a directory"):  # the same for HARNESS_CONFIG
        load_config(environ={"HARNESS_CONFIG": str(fake_plugins / "config")})


def test_missing_explicit_file_is_a_problem(fake_plugins: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(fake_plugins / "nope.yaml", environ={})
    assert "cannot read the config file: FileNotFoundError" in info.value.message


# ------------------------------------------------------------------ structure


def test_structure_problems_have_lines(fake_plugins: Path, write_config: Write) -> None:
    path = write_config("plugins:\n  mock: {}\nextra: 1\ndefaults:\n  route: mock\n  modle: echo\n  model: 3\n")
    assert problems_of(path) == [
        (None, None, 3, "unknown top-level key 'extra'; expected `plugins`, `defaults` or `aliases`"),
        (None, "defaults.modle", 6, "unknown key 'modle'; expected `route` or `model`"),
        (None, "defaults.model", 7, "expected a string, got int"),
    ]


def test_document_and_sections_must_be_mappings(fake_plugins: Path, write_config: Write) -> None:
    assert problems_of(write_config("- mock\n"))[0][3].startswith("the document must be a mapping")
    assert problems_of(write_config(""))[0][3].startswith("the document must be a mapping")
    assert problems_of(write_config("plugins: [mock]\ndefaults: mock\n")) == [
        (None, None, 2, "`defaults` must be a mapping with `route` and/or `model`"),
        (None, None, 1, "`plugins` must be a mapping of plugin name to config"),
    ]


def test_yaml_problems_stop_early(fake_plugins: Path, write_config: Write) -> None:
    path = write_config("plugins:\n  mock: {}\n  mock: {}\n")
    assert problems_of(path) == [(None, "plugins.mock", 3, "duplicate key 'mock' (lines 2 and 3)")]


def test_empty_sections_are_fine(fake_plugins: Path, write_config: Write) -> None:
    loaded = load_config(write_config("plugins:\ndefaults:\n"), environ={})
    assert loaded.plugins == []
    assert loaded.defaults == Defaults()


def test_invalid_and_repeated_keys(fake_plugins: Path, write_config: Write) -> None:
    path = write_config("plugins:\n  'bad key': {}\n  1: {}\n  mock: {}\n  ~mock: {}\n  mock:x: 5\n  ~: {}\n")
    assert problems_of(path) == [
        (None, None, 2, "invalid plugin key 'bad key'; expected `name`, `name:ident` or `~name`"),
        (None, None, 3, "invalid plugin key 1; expected `name`, `name:ident` or `~name`"),
        (None, None, 5, "plugin 'mock' is listed twice (as 'mock' and '~mock')"),
        ("mock:x", None, 6, "the config of a plugin must be a mapping, got int"),
        (
            None,
            None,
            7,
            "a plugin key is empty or a bare `~` (YAML null); expected `name`, `name:ident` or `~name` "
            "(`~name` disables a plugin)",
        ),
    ]


def test_an_unknown_plugin_lists_the_installed_ones_and_never_guesses_a_distribution(
    fake_plugins: Path, write_config: Write
) -> None:
    ((plugin, _, line, message),) = problems_of(write_config("plugins:\n  mock: {}\n  zzzqqq: {}\n"))
    assert (plugin, line) == ("zzzqqq", 3)
    assert message.startswith("unknown plugin 'zzzqqq': no installed plugin is named 'zzzqqq' (installed: ")
    assert "mock" in message
    assert "strict" in message
    assert "pip install" not in message  # harness-llm-zzzqqq could be anyone's
    assert message.endswith("`harness plugins` lists the installed plugins and their names.")


def test_a_typo_suggests_the_closest_installed_plugins(fake_plugins: Path, write_config: Write) -> None:
    problems = problems_of(write_config("plugins:\n  stirct: {}\n  Mock: {}\n  Nosuch:x: {}\n  opnai: {}\n"))
    assert [(plugin, line) for plugin, _, line, _ in problems] == [
        ("stirct", 2),
        ("Mock", 3),
        ("Nosuch:x", 4),
        ("opnai", 5),
    ]
    stirct, mock, nosuch, opnai = (message for *_, message in problems)
    assert stirct.endswith(". Did you mean 'strict'?")
    assert mock.endswith(". Did you mean 'mock'? (plugin names are case-sensitive)")
    assert "pip install" not in mock + nosuch + stirct
    assert nosuch.endswith("`harness plugins` lists the installed plugins and their names.")
    assert "Did you mean 'openai'?" in opnai
    assert "pip install" not in opnai  # never a pip line for a typo


def test_an_exact_first_party_name_that_is_not_installed_gets_its_pip_line(
    fake_plugins: Path, write_config: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness_core.loader.load as load  # the step that lists the installed plugins for a load
    from harness_core.loader import installed_plugins

    installed = {name: ep for name, ep in installed_plugins().items() if name not in ("gemini", "trace")}
    monkeypatch.setattr(load, "installed_plugins", lambda: installed)
    problems = problems_of(write_config("plugins:\n  gemini: {}\n  Trace: {}\n  gemni: {}\n"))
    gemini, trace, gemni = (message for *_, message in problems)
    assert gemini.endswith(
        " 'gemini' is a plugin of the distribution harness-llm-gemini: pip install harness-llm-gemini"
    )
    assert trace.endswith(
        " 'trace' is a plugin of the distribution harness-trace: pip install harness-trace "
        "(plugin names are case-sensitive)"
    )
    assert "pip install" not in gemni


def test_the_first_party_table_matches_the_plugins_of_this_repository() -> None:
    import tomllib

    from harness_core.loader import ENTRY_POINT_GROUP, FIRST_PARTY_PLUGINS

    declared: dict[str, str] = {}
    for pyproject in (Path(__file__).parents[2] / "plugins").glob("*/pyproject.toml"):
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        for name in project.get("entry-points", {}).get(ENTRY_POINT_GROUP, {}):
            declared[name] = project["name"]
    assert dict(FIRST_PARTY_PLUGINS) == declared


# ------------------------------------------------------------------ validation


def test_every_plugin_is_validated_and_reported_together(fake_plugins: Path, write_config: Write) -> None:
    path = write_config(
        "plugins:\n"
        "  strict:\n"
        "    name: a\n"
        "    tags: [x, 2]\n"  # line 4
        "    count: nope\n"
        "  strict:two:\n"
        "    name: b\n"
        "    colour: red\n"  # line 8
        "  strict:three:\n"  # line 9: missing required `name`
        "    count: 1\n"
        "  strict:four:\n"
        "    name: d\n"
        "    inner:\n"
        "      level: high\n"  # line 14
        "  mock:\n"
        "    delay: -1\n"  # line 16
        "    routes: [m]\n"
    )
    problems = problems_of(path)
    assert problems == [
        ("strict", "tags[1]", 4, "expected a string, got an integer"),
        ("strict", "count", 5, "expected an integer, got a string"),  # every problem of a plugin, not only its first
        (
            "strict:two",
            "colour",
            8,
            "unknown field `colour` (known fields: name, count, host, token, other, extra, tags, inner, routes)",
        ),
        ("strict:three", None, 9, "Object missing required field `name`"),
        ("strict:four", "inner.level", 14, "expected an integer, got a string"),
        ("mock", "delay", 16, "expected a number of at least 0.0"),
    ]
    loaded = inspect_config(path, environ={})
    assert loaded.plugins == []  # nothing is built when any config is invalid
    states = {e.key: (e.state, e.message) for e in loaded.entries if e.key.startswith("strict")}
    assert states["strict:three"] == ("invalid", "Object missing required field `name`")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert info.value.code == "CONFIG"
    assert len(info.value.problems) == 6
    assert f"{path}:14, plugin 'strict:four', field 'inner.level'" in info.value.message


def test_an_unknown_field_names_the_closest_known_one(fake_plugins: Path, write_config: Write) -> None:
    path = write_config("plugins:\n  strict:\n    nmae: a\n    1: x\n    tags: [1, a, 2]\n")
    known = "(known fields: name, count, host, token, other, extra, tags, inner, routes)"
    assert problems_of(path) == [
        ("strict", None, 2, "Object missing required field `name`"),
        ("strict", "nmae", 3, f"unknown field `nmae`: did you mean `name`? {known}"),
        ("strict", "[1]", 4, f"unknown field `1` {known}"),  # no name is close to a number
        ("strict", "tags[0]", 5, "expected a string, got an integer"),
        ("strict", "tags[2]", 5, "expected a string, got an integer"),  # every bad item, not only msgspec's first
    ]


def test_two_instances_of_one_plugin(fake_plugins: Path, write_config: Write) -> None:
    path = write_config(
        "plugins:\n  strict:\n    name: one\n  strict:two:\n    name: two\n    routes: [two]\ndefaults: {route: two}\n"
    )
    loaded = load_config(path, environ={})
    assert [(p.key, p.name, p.dist, p.version) for p in loaded.plugins] == [
        ("strict", "strict", "harness-fake-plugins", "0.1.0"),
        ("strict:two", "strict", "harness-fake-plugins", "0.1.0"),
    ]
    first, second = (p.instance for p in loaded.plugins)
    assert type(first) is type(second)
    assert first is not second
    assert (first.config.name, second.config.name) == ("one", "two")  # type: ignore[attr-defined]
    routes = {e.key: e.routes for e in loaded.entries if e.state == "enabled"}
    assert routes == {"strict": ["strict"], "strict:two": ["two"]}
    assert loaded.defaults == Defaults(route="two")


def test_configure_sets_this_loads_defaults_before_the_plugins_are_built(
    fake_plugins: Path, write_config: Write
) -> None:
    path = write_config(
        "plugins:\n  strict:\n    name: one\n  strict:two:\n    name: two\n  ~lenient: {}\n  noconfig:\n"
    )
    seen: list[tuple[dict[str, object], bool]] = []

    def configure(configs: Mapping[str, msgspec.Struct], lines: Mapping[ConfigPath, int]) -> dict[str, msgspec.Struct]:
        seen.append((dict(configs), ("plugins", "strict", "name") in lines))
        with pytest.raises(TypeError):
            configs["strict"] = configs["strict"]  # type: ignore[index]  # read-only: build with the return value
        return {"strict:two": msgspec.structs.replace(configs["strict:two"], name="changed")}  # type: ignore[type-var]

    loaded = load_config(path, environ={}, configure=configure)
    assert [(key, c.name) for key, c in seen[0][0].items()] == [("strict", "one"), ("strict:two", "two")]  # type: ignore[attr-defined]
    assert seen[0][1]  # the YAML lines tell what the file sets
    names = [p.instance.config.name for p in loaded.plugins if p.key != "noconfig"]  # type: ignore[attr-defined]
    assert names == ["one", "changed"]
    plain = [p.instance.config.name for p in load_config(path, environ={}).plugins if p.key != "noconfig"]  # type: ignore[attr-defined]
    assert plain == ["one", "two"]


@pytest.mark.parametrize("returned", ["lenient", "strict"])
def test_configure_may_only_return_a_plugins_own_config_type(
    fake_plugins: Path, write_config: Write, returned: str
) -> None:
    path = write_config("plugins:\n  strict:\n    name: one\n  ~lenient: {}\n")

    def configure(configs: Mapping[str, msgspec.Struct], lines: Mapping[ConfigPath, int]) -> dict[str, msgspec.Struct]:
        return {returned: Defaults()}  # a disabled plugin, or a config of another type

    with pytest.raises(TypeError, match=f"configure returned Defaults for '{returned}': not that plugin's config"):
        load_config(path, environ={}, configure=configure)


def test_secret_fields_env_substitution_and_fallbacks(fake_plugins: Path, write_config: Write) -> None:
    path = write_config(
        "plugins:\n"
        "  strict:\n"
        "    name: x\n"
        "    token: ${{ env.MY_TOKEN }}\n"
        "  strict:fallback:\n"
        "    name: y\n"
        "  strict:otherhost:\n"
        "    name: z\n"
        "    host: elsewhere.example\n"
        "  strict:literal:\n"
        "    name: w\n"
        "    token: literal-token\n"
    )
    env = {"MY_TOKEN": SECRET, "FAKE_TOKEN": "fallback-token", "FAKE_EXTRA": "extra-value", "FAKE_OTHER": "never"}
    loaded = load_config(path, environ=env)
    configs = {p.key: p.instance.config for p in loaded.plugins}  # type: ignore[attr-defined]
    assert configs["strict"].token == Secret(SECRET)
    assert configs["strict:fallback"].token == Secret("fallback-token")
    assert configs["strict:fallback"].extra == "extra-value"  # only_when on a default_factory field
    assert configs["strict:otherhost"].token is None  # the fallback never goes to another host
    assert configs["strict:literal"].token == Secret("literal-token")
    assert all(c.other is None for c in configs.values())  # only_when names no field: never applies
    assert SECRET not in repr(configs)
    assert "fallback-token" not in repr(configs)
    assert loaded.redact(f"x {SECRET} fallback-token") == f"x {MASK} {MASK}"
    # an empty variable is as good as unset
    loaded = load_config(path, environ={"MY_TOKEN": SECRET, "FAKE_TOKEN": ""})
    assert loaded.plugins[1].instance.config.token is None  # type: ignore[attr-defined]


def test_env_problems_name_the_variable_and_never_the_value(fake_plugins: Path, write_config: Write) -> None:
    path = write_config(
        "plugins:\n"
        "  strict:\n"
        "    name: ${{ env.MISSING_NAME }}\n"
        "  strict:b:\n"
        "    name: b\n"
        "    count: ${{ env.MY_TOKEN }}\n"  # a secret in a field of the wrong type
        "  strict:c:\n"
        "    name: ${{ os.system('x') }}\n"
        "  strict:d:\n"
        "    name: d\n"
        "    token: ''\n"
    )
    loaded = inspect_config(path, environ={"MY_TOKEN": SECRET})
    problems = [(p.plugin, p.field, p.line, p.message) for p in loaded.problems]
    # an unset variable in a provider plugin does not block the rest: that plugin fails
    [failure] = loaded.failures
    assert (failure.key, failure.stage, failure.is_middleware) == ("strict", "config", False)
    assert failure.message == (
        f"plugin 'strict' cannot be used: environment variable MISSING_NAME is not set ({path}:3, field 'name')"
    )
    assert problems == [
        (
            "strict:b",
            "count",
            6,
            "the environment variable MY_TOKEN must hold an integer (such as 8080) for this field; "
            "its value is not shown",
        ),
        ("strict:c", "name", 8, "unsupported expression \"${{ os.system('x') }}\": only ${{ env.NAME }} is allowed"),
        ("strict:d", "token", 11, "a Secret may not be empty"),
    ]
    assert SECRET not in repr(problems)


def test_secret_field_rejects_non_strings(fake_plugins: Path, write_config: Write) -> None:
    assert problems_of(write_config("plugins:\n  strict:\n    name: a\n    token: 5\n")) == [
        ("strict", "token", 4, ["expected a string (a secret), got an integer", " `$.token`"][0]),
    ]


def test_literal_secret_fields_are_secret_too(fake_plugins: Path, write_config: Write) -> None:
    path = write_config(
        "plugins:\n"
        "  failinit:\n"
        "    name: a\n"
        "    token: sk-literal-secret-77\n"  # written in the file, not taken from the environment
        "  strict:\n"
        "    name: b\n"
        "    routes: [sk-literal-secret-77, fine]\n"
    )
    loaded = load_config(path, environ={})
    (failure,) = loaded.failures
    assert failure.message == f"plugin 'failinit' failed to start: RuntimeError: cannot connect with token {MASK}"
    assert loaded.redact("key sk-literal-secret-77") == f"key {MASK}"
    assert {e.key: e.routes for e in loaded.entries if e.key == "strict"} == {"strict": [MASK, "fine"]}
    assert "sk-literal-secret-77" not in repr(loaded.entries)


def test_messages_are_redacted_with_secrets_found_later(fake_plugins: Path, write_config: Write) -> None:
    """mock's problem quotes a value that strict's Secret field (validated after it) makes secret."""
    path = write_config(
        "plugins:\n  mock:\n    error: sk-late-secret-55\n  strict:\n    name: a\n    token: sk-late-secret-55\n"
    )
    ((plugin, field, line, message),) = problems_of(path)
    assert (plugin, field, line) == ("mock", "error", 3)
    assert MASK in message
    assert "sk-late-secret-55" not in message
    loaded = inspect_config(path, environ={})
    assert "sk-late-secret-55" not in repr(loaded.entries)


def test_defaults_substitute_the_environment(fake_plugins: Path, write_config: Write) -> None:
    path = write_config("plugins:\n  mock: {}\ndefaults:\n  route: ${{ env.ROUTE }}\n  model: echo\n")
    loaded = load_config(path, environ={"ROUTE": "env-route"})
    assert loaded.defaults == Defaults(route="env-route", model="echo")
    assert loaded.redact("route env-route") == f"route {MASK}"  # like every value from the environment
    assert loaded.line("defaults", "route") == 4
    assert loaded.line("defaults", "model", "deeper") == 5
    assert LoadedConfig(path=None).line("defaults", "route") is None
    path = write_config("defaults:\n  route: ${{ env.MISSING }}\n  model: ${{ 1 }}\n")
    assert problems_of(path) == [
        (None, "defaults.route", 2, "environment variable MISSING is not set"),
        (None, "defaults.model", 3, "unsupported expression '${{ 1 }}': only ${{ env.NAME }} is allowed"),
    ]
    loaded = inspect_config(path, environ={})
    assert loaded.defaults == Defaults()  # a value that could not be substituted is not used


def test_defaults_route_and_its_deprecated_old_name_provider(fake_plugins: Path, write_config: Write) -> None:
    path = write_config("plugins:\n  mock: {routes: [a, b]}\ndefaults: {route: b, model: echo}\n")
    assert load_config(path).defaults == Defaults(route="b", model="echo")
    old = write_config("plugins:\n  mock: {routes: [a, b]}\ndefaults:\n  model: echo\n  provider: b\n")
    with pytest.warns(
        FutureWarning, match=r"line 5: `defaults.provider` is deprecated: write `defaults.route`"
    ) as seen:
        loaded = load_config(old)
    assert str(old) in str(seen[0].message)
    assert loaded.defaults == Defaults(route="b", model="echo")
    both = write_config("plugins:\n  mock: {}\ndefaults:\n  route: mock\n  provider: mock\n")
    assert problems_of(both) == [
        (None, "defaults.provider", 5, "give `route` only (`provider` is its deprecated old name)")
    ]
    unknown = write_config("plugins:\n  mock: {}\ndefaults: {router: mock}\n")
    assert problems_of(unknown) == [(None, "defaults.router", 3, "unknown key 'router'; expected `route` or `model`")]
    with pytest.warns(FutureWarning, match="defaults.provider"):
        unset = inspect_config(write_config("defaults:\n  provider: ${{ env.MISSING }}\n"), environ={})
    assert unset.defaults == Defaults()  # the old name with a value that could not be substituted: not used


def test_defaults_keep_provider_as_a_deprecated_keyword_and_attribute() -> None:
    with pytest.warns(DeprecationWarning, match=r"Defaults\(provider=\.\.\.\) is deprecated: pass route="):
        old = Defaults(provider="mock", model="echo")  # type: ignore[call-arg]
    assert old == Defaults(route="mock", model="echo")
    with pytest.warns(DeprecationWarning, match=r"Defaults\.provider is deprecated: read Defaults\.route"):
        assert old.provider == "mock"


def test_merge_keys_configure_instances(fake_plugins: Path, write_config: Write) -> None:
    path = write_config(
        "plugins:\n"
        "  strict: &common\n"
        "    name: shared\n"
        "    count: 2\n"
        "  strict:two:\n"
        "    <<: *common\n"
        "    routes: [two]\n"
        "  strict:three:\n"
        "    <<: *common\n"
        "    count: nope\n"  # line 10
    )
    assert problems_of(path) == [("strict:three", "count", 10, "expected an integer, got a string")]
    path = write_config(
        "plugins:\n  strict: &common {name: shared, count: 2}\n  strict:two: {<<: *common, routes: [t]}\n"
    )
    configs = [p.instance.config for p in load_config(path, environ={}).plugins]  # type: ignore[attr-defined]
    assert [(c.name, c.count, c.routes) for c in configs] == [("shared", 2, ["strict"]), ("shared", 2, ["t"])]


def test_yaml_tags_and_alias_bombs_stop_before_anything_is_imported(fake_plugins: Path, write_config: Write) -> None:
    path = write_config('plugins:\n  mock: !!python/object/apply:os.system ["touch x"]\n')
    assert problems_of(path) == [
        (
            None,
            "plugins.mock",
            2,
            "YAML tags are not allowed (found '!!python/object/apply:os.system'); write the plain value",
        )
    ]
    assert not (fake_plugins / "x").exists()
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
    )
    with pytest.raises(ConfigError) as info:
        load_config(write_config(bomb), environ={})
    (problem,) = info.value.problems
    assert problem.line == 5
    assert "YAML aliases expand to more than 10000 nodes (at alias *d)" in problem.message
    assert str(write_config(bomb)) in info.value.message


# ------------------------------------------------------------------ plugin kinds and failures


def test_module_and_config_less_plugins(fake_plugins: Path, write_config: Write) -> None:
    loaded = load_config(write_config("plugins:\n  modplugin:\n  noconfig: {}\n"), environ={})
    module, instance = (p.instance for p in loaded.plugins)
    assert module is sys.modules["harness_fake_module"]
    assert type(instance).__name__ == "NoConfigPlugin"
    assert problems_of(write_config("plugins:\n  modplugin: {}\n  modplugin:b: {}\n  noconfig: {x: 1}\n")) == [
        ("modplugin:b", None, 3, "plugin 'modplugin' has no Config: it runs as a single instance only"),
        ("noconfig", "x", 4, "plugin 'noconfig' takes no configuration"),
    ]


def test_import_and_init_failures_are_recorded_not_raised(fake_plugins: Path, write_config: Write) -> None:
    path = write_config(
        "plugins:\n"
        "  broken: {}\n"
        "  failinit:\n"
        "    name: f\n"
        "    token: ${{ env.MY_TOKEN }}\n"
        "  failmw: {}\n"
        "  badconfig: {}\n"
        "  mock: {}\n"
    )
    loaded = load_config(path, environ={"MY_TOKEN": SECRET})
    assert [p.key for p in loaded.plugins] == ["mock"]
    failures = {f.key: f for f in loaded.failures}
    assert [(f.key, f.stage, f.is_middleware) for f in loaded.failures] == [
        ("broken", "import", True),
        ("badconfig", "config", True),  # serves no adapter: fails closed
        ("failinit", "init", False),
        ("failmw", "init", True),
    ]
    assert "ImportError: harness_fake_broken needs a missing library" in failures["broken"].message
    assert "treated as a middleware (fail closed)" in failures["broken"].message
    assert "not a msgspec.Struct" in failures["badconfig"].message
    assert (
        failures["failinit"].message
        == f"plugin 'failinit' failed to start: RuntimeError: cannot connect with token {MASK}"
    )
    assert "ValueError: middleware exploded" in failures["failmw"].message
    assert SECRET not in repr(loaded.failures)
    assert SECRET not in repr(loaded.entries)
    entries = {e.key: e for e in loaded.entries}
    assert entries["broken"].state == "failed"
    assert entries["broken"].is_middleware is True
    assert entries["failmw"].is_middleware is True
    assert entries["mock"].is_middleware is False


def test_inspect_without_instantiation(fake_plugins: Path, write_config: Write) -> None:
    loaded = inspect_config(
        write_config("plugins:\n  failinit: {name: f}\n  ~disabledone: {}\n  ~gone: {}\n"),
        environ={},
        instantiate=False,
    )
    assert loaded.plugins == []
    assert loaded.failures == []
    assert loaded.problems == []
    entries = {e.key: e for e in loaded.entries}
    assert entries["failinit"].state == "enabled"
    assert entries["failinit"].routes == ["strict"]
    assert (entries["disabledone"].state, entries["disabledone"].dist) == ("disabled", "harness-fake-plugins")
    assert (entries["gone"].state, entries["gone"].dist) == ("disabled", None)
    assert entries["mock"].state == "installed"
    assert entries["mock"].dist == "harness-llm-mock"


def test_secret_routes_are_masked(fake_plugins: Path, write_config: Write) -> None:
    loaded = inspect_config(
        write_config("plugins:\n  strict: {name: a, routes: ['${{ env.ROUTE }}', plain]}\n"),
        environ={"ROUTE": "secret-route"},
        instantiate=False,
    )
    assert loaded.entries[0].routes == [MASK, "plain"]


def test_installed_plugins_reads_metadata_only(fake_plugins: Path) -> None:
    installed = installed_plugins()
    assert installed["strict"].value == "harness_fake_plugins:StrictPlugin"
    assert "mock" in installed


def test_disabled_plugins_are_never_imported(tmp_path: Path) -> None:
    """In a fresh interpreter: only the listed, enabled plugins are imported."""
    config = tmp_path / "plugins.yaml"
    config.write_text("plugins:\n  ~disabledone: {}\n  ~broken: {}\n  mock: {}\n")
    code = (
        "import sys\n"
        "from harness_core.loader import load_config\n"
        f"loaded = load_config({str(config)!r})\n"
        "print(sorted(m for m in sys.modules if m.startswith(('harness_fake', 'harness_llm', 'harness_trace'))))\n"
        "print([p.key for p in loaded.plugins], loaded.failures)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(FAKE_PLUGINS)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert result.stdout.splitlines() == ["['harness_llm_mock']", "['mock'] []"]


def test_msgspec_hides_mapping_keys_and_the_path_says_so() -> None:
    from harness_core.config import format_path
    from harness_core.loader.convert import split_msgspec_error

    message, path = split_msgspec_error("Expected `float` >= 0.0 - at `$.prices[...].input`")
    assert (message, path) == ("expected a number of at least 0.0", ("prices", "<key>", "input"))
    assert format_path(path) == "prices.<key>.input"


@pytest.mark.parametrize(
    ("text", "worded"),
    [
        ("Expected `int`, got `str`", "expected an integer, got a string"),
        ("Expected `object | array`, got `null`", "expected a mapping or a list, got null"),
        ("Expected `bool`, got `float`", "expected a boolean, got a number"),
        ("Expected `int` <= 4096", "expected an integer of at most 4096"),
        ("Expected `float` > 0.0", "expected a number greater than 0.0"),
        ("Expected `int` < 10", "expected an integer less than 10"),
        ("Expected `str` of length >= 1", "expected a string of at least 1 characters"),
        ("Expected `array` of length <= 3", "expected a list of at most 3 items"),
        ("Expected `Route`, got `int`", "expected `Route`, got an integer"),  # a type it has no words for
        ("Object contains unknown field `x`", "unknown field `x`"),  # msgspec's, of a nested struct
        ("Invalid enum value 'z'", "Invalid enum value 'z'"),  # not a type message: kept
    ],
)
def test_config_type_messages_are_worded_for_yaml_users(text: str, worded: str) -> None:
    from harness_core.loader.convert import humane_message

    assert humane_message(text) == worded


def test_nested_struct_types_are_found_through_optional_and_annotated() -> None:
    from typing import Annotated

    import msgspec

    from harness_core.loader.convert import struct_of, struct_values_of

    class Inner(msgspec.Struct):
        a: int = 0

    assert struct_of(Inner) is Inner
    assert struct_of(Annotated[Inner | None, "x"]) is Inner
    assert struct_of(Inner | int) is None  # a real union: converted whole
    assert struct_of(int) is None
    assert struct_values_of(dict[str, Inner]) is Inner
    assert struct_values_of(dict[str, str]) is None
    assert struct_values_of(list[Inner]) is None
