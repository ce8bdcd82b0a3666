"""harness_core.routing: the one owner of the default route, the default model and the aliases."""

from __future__ import annotations

from harness_core.plugininfo import Defaults
from harness_core.routing import default_embed_route, default_model, default_route, resolve_alias


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
