"""harness_core.routing: the one owner of the default route, the default model and the aliases."""

from __future__ import annotations

from harness_core.plugininfo import Defaults
from harness_core.routing import (
    default_embed_route,
    default_model,
    default_route,
    mistyped_route,
    parse_model_id,
    resolve_alias,
    resolve_target,
    route_suggestion,
)


def test_the_default_route_is_defaults_route_else_the_only_route() -> None:
    assert default_route(Defaults(route="a"), ["b", "c"]) == "a"  # as configured, served or not
    assert default_route(Defaults(), ["only"]) == "only"
    assert default_route(Defaults(), ["b", "c"]) is None
    assert default_route(Defaults(), []) is None


def test_the_default_embedding_route_must_embed() -> None:
    assert default_embed_route(Defaults(route="a"), ["a", "v"]) == "a"
    assert default_embed_route(Defaults(route="chat"), ["v"]) == "v"  # the default route does not embed
    assert default_embed_route(Defaults(route="chat"), ["v", "w"]) is None


def test_the_default_model_applies_to_the_default_route_only() -> None:
    assert default_model(Defaults(route="a", model="m"), "a") == "m"
    assert default_model(Defaults(route="a", model="m"), None) == "m"  # None is the default route
    assert default_model(Defaults(route="a", model="m"), "b") is None  # another provider's model id
    assert default_model(Defaults(model="m"), "b") == "m"  # no default route: every route
    assert default_model(Defaults(route="a"), "a") is None


def test_aliases_set_the_route_and_model_an_explicit_route_wins() -> None:
    aliases = {"fast": "groq/llama", "plain": "gpt-4o"}
    assert resolve_alias(aliases, None, "fast") == ("groq", "llama")
    assert resolve_alias(aliases, "mine", "fast") == ("mine", "llama")
    assert resolve_alias(aliases, None, "plain") == (None, "gpt-4o")
    assert resolve_alias(aliases, "mine", "plain") == ("mine", "gpt-4o")
    assert resolve_alias(aliases, "r", "other") == ("r", "other")
    assert resolve_alias(aliases, "r", None) == ("r", None)


def test_a_model_id_names_its_route_before_the_first_slash() -> None:
    assert parse_model_id("openai/gpt-4o") == ("openai", "gpt-4o")
    assert parse_model_id("or/meta-llama/llama-3") == ("or", "meta-llama/llama-3")  # the model keeps its slashes
    for text in ("gpt-4o", "/gpt-4o", "openai/", "/"):
        assert parse_model_id(text) is None


def test_the_target_of_a_route_and_a_model_id() -> None:
    aliases = {"fast": "groq/llama", "plain": "gpt-4o"}
    routes = ["groq", "openai", "or"]
    assert resolve_target(aliases, None, "openai/gpt-4o", routes) == ("openai", "gpt-4o")
    assert resolve_target(aliases, "or", "meta-llama/llama-3", routes) == ("or", "meta-llama/llama-3")  # no route
    assert resolve_target(aliases, None, "meta-llama/llama-3", routes) == (None, "meta-llama/llama-3")
    assert resolve_target(aliases, "mine", "fast", routes) == ("mine", "llama")  # aliases first, as before
    assert resolve_target(aliases, None, "plain", routes) == (None, "gpt-4o")
    assert resolve_target(aliases, "r", None, routes) == ("r", None)
    # a route given (-r) takes the provider's model id as it is, even where its first part names a
    # route: OpenRouter's openai/gpt-4o and openrouter/auto
    assert resolve_target(aliases, "or", "openai/gpt-4o", routes) == ("or", "openai/gpt-4o")
    assert resolve_target(aliases, "or", "or/auto", routes) == ("or", "or/auto")


def test_an_unknown_route_suggests_the_closest_one() -> None:
    assert route_suggestion("mokc", ["mock", "openai"]) == " (did you mean 'mock'?)"
    assert route_suggestion("mokc", ["mock"], model="echo") == " (did you mean 'mock/echo'?)"  # a gateway model id
    assert route_suggestion("nowhere", ["mock"]) == ""
    assert route_suggestion("mock", ["mock", "mocks"]) == ""  # served: no typo


def test_a_model_id_naming_a_mistyped_route() -> None:
    routes = ["mock", "openai"]
    assert mistyped_route({}, None, "mokc/echo", routes) == "route 'mokc' is not served (did you mean 'mock/echo'?)"
    assert mistyped_route({}, None, "meta-llama/llama-3", routes) is None  # a provider's own id: close to no route
    assert mistyped_route({}, None, "mock/echo", routes) is None  # a served route
    assert mistyped_route({}, "mock", "mokc/echo", routes) is None  # -r given: the id is the provider's
    assert mistyped_route({"mokc/echo": "mock/echo"}, None, "mokc/echo", routes) is None  # an alias
    assert mistyped_route({}, None, "echo", routes) is None  # no route part
    assert mistyped_route({}, None, None, routes) is None
