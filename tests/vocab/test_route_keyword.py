"""``route`` is the plugins.yaml entry a request goes to; ``provider`` its deprecated old name on
the option structs and ``Harness.embed`` (docs/vocabulary.md#route-and-provider-one-meaning-each)."""

from __future__ import annotations

import msgspec
import pytest

from harness_core import EmbedOptions, GenerateOptions, Message, canonical_json


def test_route_is_the_field_and_the_serialised_key() -> None:
    options = GenerateOptions(route="openai", model="m", messages=[Message.user("hi")])
    assert options.route == "openai"
    assert b'"route":"openai"' in canonical_json(options)
    assert b"provider" not in msgspec.json.encode(options)
    assert msgspec.json.decode(msgspec.json.encode(options), type=GenerateOptions) == options


def test_the_provider_keyword_warns_naming_route_and_builds_the_same_options() -> None:
    with pytest.warns(
        DeprecationWarning, match=r"GenerateOptions\(provider=\.\.\.\) is deprecated: pass route="
    ) as seen:
        old = GenerateOptions(provider="openai", model="m")  # type: ignore[call-arg]
    assert seen[0].filename == __file__  # attributed to the calling line
    assert old == GenerateOptions(route="openai", model="m")
    assert canonical_json(old) == canonical_json(GenerateOptions(route="openai", model="m"))


def test_the_provider_attribute_warns_naming_route_and_reads_the_route() -> None:
    options = GenerateOptions(route="openai")
    with pytest.warns(
        DeprecationWarning, match=r"GenerateOptions\.provider is deprecated: read GenerateOptions\.route"
    ) as seen:
        assert options.provider == "openai"
    assert seen[0].filename == __file__


def test_both_names_at_once_are_refused() -> None:
    with pytest.raises(TypeError, match=r"GenerateOptions: give route= only"):
        GenerateOptions(provider="a", route="b")  # type: ignore[call-arg]


def test_embed_options_take_the_same_path() -> None:
    with pytest.warns(DeprecationWarning, match=r"EmbedOptions\(provider=\.\.\.\) is deprecated: pass route="):
        old = EmbedOptions(inputs=["x"], provider="mock")  # type: ignore[call-arg]
    assert old == EmbedOptions(inputs=["x"], route="mock")
    with pytest.warns(DeprecationWarning, match=r"EmbedOptions\.provider is deprecated: read EmbedOptions\.route"):
        assert old.provider == "mock"
    with pytest.raises(TypeError, match=r"EmbedOptions: give route= only"):
        EmbedOptions(inputs=["x"], provider="a", route="b")  # type: ignore[call-arg]
