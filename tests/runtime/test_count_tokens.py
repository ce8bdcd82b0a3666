"""Harness.count_tokens and Harness.route_wire: the adapter's capability, defaults applied, errors scrubbed."""

from __future__ import annotations

import pytest
from runtime_scripted import AdapterPlugin, ScriptedAdapter, reply

from harness_core import GenerateOptions, Harness, LlmError, Message
from harness_core.plugininfo import Defaults
from harness_llm_mock import MockConfig, MockPlugin

pytestmark = pytest.mark.anyio


async def test_count_tokens_uses_the_route_adapter() -> None:
    plugins = [("mock", MockPlugin(MockConfig())), ("other", AdapterPlugin(ScriptedAdapter(reply()), ["other"]))]
    async with Harness(plugins, defaults=Defaults(route="mock", model="echo")) as harness:
        options = GenerateOptions(system="be brief", messages=[Message.user("one two three")])
        assert await harness.count_tokens(options) == 5  # the mock counts words
        assert harness.route_wire("mock") is None
        with pytest.raises(LlmError) as caught:
            await harness.count_tokens(GenerateOptions(route="other", messages=[Message.user("x")]))
        assert caught.value.code == "UNSUPPORTED"
        assert caught.value.message == (
            "route 'other' cannot count tokens: its adapter, of plugin 'other', has no token counter"
        )
        with pytest.raises(LlmError) as caught:
            await harness.count_tokens(GenerateOptions(model="nope"))
        assert caught.value.code == "NOT_FOUND"
        with pytest.raises(LlmError) as caught:
            await harness.count_tokens(GenerateOptions(route="other", model="m1", messages=[Message.user("x")]))
        assert "route 'other' cannot count tokens (model 'm1'):" in caught.value.message
        with pytest.raises(LlmError) as caught:
            harness.route_wire("missing")
        assert caught.value.code == "NO_ADAPTER"
