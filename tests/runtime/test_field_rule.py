"""The field rule's owner (harness_core.fields) and Harness.route_target: one rule for the
gateway's request fields and ``harness run -o`` (issue 23)."""

from __future__ import annotations

import pytest
from runtime_scripted import AdapterPlugin, ScriptedAdapter, reply

from harness_core import FieldTarget, Harness, LlmError, RefusedField, pass_through
from harness_llm_mock import MockConfig, MockPlugin

pytestmark = pytest.mark.anyio

CHAT = FieldTarget("gpt", "openai-chat", "openai")
MOCK = FieldTarget("mock", None, "mock", takes_options=False)


def test_a_field_of_the_route_s_wire_passes_unchanged_and_mapped_ones_stay_out() -> None:
    fields = {"model": "m", "logprobs": True, "user": "u"}
    assert pass_through(fields, {"model"}, {"user"}, wire="openai-chat", target=CHAT) == {"logprobs": True, "user": "u"}


def test_a_field_of_another_wire_is_refused_naming_it_and_the_route_unless_ignored() -> None:
    assert pass_through({"model": "m", "user": "u"}, {"model"}, {"user"}, wire="anthropic-messages", target=CHAT) == {}
    with pytest.raises(RefusedField) as caught:
        pass_through({"user": "u", "top_k": 5}, (), {"user"}, wire="anthropic-messages", target=CHAT)
    assert caught.value.field == "top_k"
    assert caught.value.reason.startswith("route 'gpt' cannot take this field")
    assert "only a route speaking the anthropic-messages wire receives it unchanged" in caught.value.reason
    assert str(caught.value) == f"top_k: {caught.value.reason}"


def test_a_null_field_of_another_wire_asks_for_nothing_and_is_dropped() -> None:
    """The openai SDK sends an option given as ``None`` as JSON ``null``: on a route of another
    wire it is absent (it was a 400); a route of the wire still receives it unchanged."""
    fields = {"model": "m", "frequency_penalty": None, "logprobs": None}
    assert pass_through(fields, {"model"}, (), wire="openai-chat", target=MOCK) == {}
    assert pass_through(fields, {"model"}, (), wire="openai-chat", target=CHAT) == {
        "frequency_penalty": None,
        "logprobs": None,
    }
    with pytest.raises(RefusedField) as caught:
        pass_through({**fields, "logit_bias": {"1": 2}}, {"model"}, (), wire="openai-chat", target=MOCK)
    assert caught.value.field == "logit_bias"


def test_fields_for_the_route_s_own_plugin_pass_where_the_adapter_takes_options() -> None:
    assert pass_through({"top_k": 5}, (), (), wire=None, target=CHAT) == {"top_k": 5}
    assert pass_through({"top_k": 5}, (), (), wire=None, target=FieldTarget("any", None, "anyllm")) == {"top_k": 5}
    with pytest.raises(RefusedField) as caught:
        pass_through({"delay": 0}, (), (), wire=None, target=MOCK, path=lambda key: f"-o {key}")
    assert caught.value.field == "-o delay"
    assert "route 'mock' cannot take this field" in caught.value.reason
    assert "its adapter takes no provider options" in caught.value.reason


def test_without_a_route_nothing_passes() -> None:
    with pytest.raises(RefusedField) as caught:
        pass_through({"top_k": 5}, (), (), wire="openai-chat", target=None)
    assert caught.value.reason.startswith("this request cannot take this field")
    assert "no route receives it" in caught.value.reason


async def test_route_target_describes_the_route_for_the_rule() -> None:
    plugins = [
        ("mock", MockPlugin(MockConfig())),
        ("scripted:work", AdapterPlugin(ScriptedAdapter(reply()), ["other"])),
    ]
    async with Harness(plugins) as harness:
        assert harness.route_target("mock") == MOCK
        assert harness.route_target("other") == FieldTarget("other", None, "scripted", takes_options=True)
        with pytest.raises(LlmError) as caught:
            harness.route_target("missing")
        assert caught.value.code == "NO_ADAPTER"
        with pytest.raises(LlmError) as caught:
            harness.route_target(None)
        assert caught.value.code == "NO_ADAPTER"
