"""Tool sources (``register_tool_source``), globs, ``Tool(parameters=…)``, ``ToolError`` and the
``approve`` callback of a conversation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from harness_core import Conversation, Harness, LlmError, Tool, ToolCallBlock, ToolError, hookimpl
from harness_core.conversation import DECLINED
from harness_core.hookspecs import RegisterAdapter, RegisterTool, RegisterToolSource
from harness_core.testing.fake import FakeAdapter, text_reply, tool_call_reply
from harness_core.tools import ToolRegistry, _could_match

pytestmark = pytest.mark.anyio


async def lookup(arguments: dict[str, Any]) -> str:
    if arguments.get("key") == "missing":
        raise ToolError("no such key: missing")
    return f"value of {arguments['key']}"


SCHEMA = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}


class Source:
    """A tool source listing ``names`` (each a :func:`lookup` tool), or raising ``error``."""

    def __init__(self, *names: str, prefix: str | None = "kv_", error: Exception | None = None) -> None:
        self.names = names
        self.prefix = prefix
        self.error = error
        self.listed: list[str] = []

    def tool_prefix(self, owner: str) -> str | None:
        return self.prefix

    async def list_tools(self, owner: str) -> Sequence[Tool]:
        self.listed.append(owner)
        if self.error is not None:
            raise self.error
        return [Tool(lookup, name=name, description=f"look up ({owner})", parameters=SCHEMA) for name in self.names]


class SourcePlugin:
    def __init__(self, source: Source, route: str | None = None) -> None:
        self.source = source
        self.route = route

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        if self.route is not None:
            register([self.route], FakeAdapter(tool_call_reply("c1", "kv_get", '{"key": "a"}'), text_reply("done")))

    @hookimpl
    def register_tool_source(self, register: RegisterToolSource) -> None:
        register(self.source)


def shout(text: str) -> str:
    """Upper-case."""
    return text.upper()


class PythonTools:
    @hookimpl
    def register_tools(self, register: RegisterTool) -> None:
        register(shout)
        register(shout, name="kv_shout")


async def test_sources_are_listed_only_when_their_tools_are_asked_for() -> None:
    kv, other = Source("kv_get", "kv_put"), Source("o_x", prefix="o_")
    harness = Harness([("kv", SourcePlugin(kv, route="fake")), ("other", SourcePlugin(other))])
    async with harness:
        assert kv.listed == []  # nothing starts with the harness
        assert await harness.select_tools([]) == []
        tools = await harness.select_tools(["kv_*"])
        assert [t.name for t in tools] == ["kv_get", "kv_put"]
        assert kv.listed == ["kv"]
        assert other.listed == []  # its prefix matches no pattern: never started
        assert harness.tools.owner("kv_get") == "kv"
        assert await harness.select_tools(["kv_get", "kv_*"]) == tools[:1] + tools[1:]  # once each
        assert kv.listed == ["kv"]  # listed once
        reply = await Conversation(harness, tools=tools).send("go")
        assert reply.text == "done"
        listed, failures = await harness.list_tools()
        assert [(t.name, owner) for t, owner in listed] == [("kv_get", "kv"), ("kv_put", "kv"), ("o_x", "other")]
        assert failures == {}
        assert set(harness.tools.sources) == {"kv", "other"}


async def test_parameters_and_tool_error() -> None:
    item = Tool(lookup, name="kv_get", parameters=SCHEMA)
    assert item.spec.parameters == SCHEMA
    assert (await item.run(ToolCallBlock("1", "kv_get", '{"key": "a"}'))).content == "value of a"
    missing = await item.run(ToolCallBlock("2", "kv_get", '{"key": "missing"}'))
    assert missing.is_error
    assert missing.content == "no such key: missing"
    not_object = await item.run(ToolCallBlock("3", "kv_get", "[1]"))
    assert not_object.is_error
    assert "invalid arguments for tool 'kv_get'" in not_object.content


async def test_a_failing_source_is_reported_to_whoever_asks_for_its_tools() -> None:
    broken = Source(error=RuntimeError("cannot spawn"))
    harness = Harness([("py", PythonTools()), ("kv", SourcePlugin(broken))])
    async with harness:
        with pytest.raises(LlmError, match="plugin 'kv' could not list its tools: RuntimeError: cannot spawn"):
            await harness.select_tools(["kv_get"])
        assert [t.name for t in await harness.select_tools(["shout"])] == ["shout"]
        assert [t.name for t in await harness.select_tools(["kv_sh*"])] == ["kv_shout"]
        with pytest.raises(LlmError, match="no tool matches 'z\\*'; registered tools: kv_shout, shout"):
            await harness.select_tools(["z*"])
        with pytest.raises(LlmError, match="unknown tool 'zz'"):
            await harness.select_tools(["zz"])
        _, failures = await harness.list_tools()
        assert list(failures) == ["kv"]
        assert broken.listed == ["kv"]  # never retried
        assert list(harness.tools.source_failures) == ["kv"]


async def test_a_source_error_that_is_an_llm_error_is_kept() -> None:
    registry = ToolRegistry()
    registry.bind_source("kv")(Source(error=LlmError("TIMEOUT", "plugin 'kv': slow")))
    failures = await registry.load(None)
    assert str(failures["kv"]) == "TIMEOUT: plugin 'kv': slow"


async def test_a_source_name_taken_by_another_plugin_fails_that_source() -> None:
    registry = ToolRegistry()
    registry.register(shout, owner="py", name="kv_get")
    registry.bind_source("kv")(Source("kv_get", "kv_put"))
    failures = await registry.load(["kv_put"])
    assert "tool 'kv_get' is registered by 'py' and again by 'kv'" in str(failures["kv"])
    assert registry.names() == ["kv_get"]  # none of the failed source's tools stay
    registry.remove_owner("kv")
    assert registry.sources == {}


def test_could_match() -> None:
    assert _could_match("time_now", "time_")
    assert _could_match("ti*", "time_")
    assert _could_match("*", "time_")
    assert not _could_match("other_*", "time_")
    assert not _could_match("tim", "time_")
    assert _could_match("x", None)


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_approve_is_asked_before_each_call(asynchronous: bool) -> None:
    asked: list[str] = []

    def sync_answer(call: ToolCallBlock) -> bool:
        asked.append(call.arguments)
        return call.arguments == '{"text": "yes"}'

    async def async_answer(call: ToolCallBlock) -> bool:
        return sync_answer(call)

    adapter = FakeAdapter(
        tool_call_reply("c1", "shout", '{"text": "no"}'),
        tool_call_reply("c2", "shout", '{"text": "yes"}'),
        text_reply("end"),
    )

    class Plugin:
        @hookimpl
        def register_adapter(self, register: RegisterAdapter) -> None:
            register(["fake"], adapter)

    async with Harness([("fake", Plugin())]) as harness:
        conversation = Conversation(harness, tools=[Tool(shout)], approve=async_answer if asynchronous else sync_answer)
        results: list[str] = []
        reply = await conversation.send("go", on_tool_result=lambda call, result: results.append(result.content))
    assert reply.text == "end"
    assert asked == ['{"text": "no"}', '{"text": "yes"}']
    assert results == [DECLINED, "YES"]
