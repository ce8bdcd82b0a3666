"""The ``llm_tool_call`` hook (``Harness.run_tool``): every execution of the tool loop passes
through it, ordered like ``llm_stream``; tools returning files."""

from __future__ import annotations

from typing import Any

import pytest

from harness_core import Conversation, FileBlock, Harness, LlmError, hookimpl
from harness_core.hookspecs import RegisterAdapter, ToolCallNext
from harness_core.testing.fake import FakeAdapter, text_reply, tool_call_reply
from harness_core.tools import Tool
from harness_core.types import ToolCallBlock, ToolResultBlock

pytestmark = pytest.mark.anyio

PNG = FileBlock("image/png", data=b"\x89PNG\r\n\x1a\n")


def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


class Route:
    def __init__(self, *scripts: Any) -> None:
        self.adapter = FakeAdapter(*scripts)

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        register(["fake"], self.adapter)


class Around:
    """Records what it sees in ``seen`` (shared), tagged with its name."""

    def __init__(self, name: str, seen: list[str]) -> None:
        self.name = name
        self.seen = seen

    @hookimpl
    async def llm_tool_call(self, call: ToolCallBlock, tool: Tool, call_next: ToolCallNext) -> ToolResultBlock:
        self.seen.append(f"{self.name}>{tool.name}:{call.id}")
        result = await call_next(call)
        self.seen.append(f"{self.name}<{result.content}")
        return result


class First(Around):
    @hookimpl(tryfirst=True)
    async def llm_tool_call(self, call: ToolCallBlock, tool: Tool, call_next: ToolCallNext) -> ToolResultBlock:
        return await super().llm_tool_call(call, tool, call_next)


class Answering:
    """Answers without running the tool, taking only two of the hook's arguments."""

    @hookimpl
    async def llm_tool_call(self, call: ToolCallBlock) -> ToolResultBlock:
        return ToolResultBlock(call.id, "cached")


class Wrong:
    @hookimpl
    async def llm_tool_call(self, call: ToolCallBlock) -> Any:
        return "not a block"


class Plain:
    @hookimpl
    def llm_tool_call(self, call: ToolCallBlock) -> Any:
        return None


class Wrapper:
    @hookimpl(wrapper=True)
    def llm_tool_call(self, call: ToolCallBlock) -> Any:
        return (yield)


class Broken:
    """A tool middleware whose other hook fails at start: the harness does not start (fail closed)."""

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        raise RuntimeError("boom")

    @hookimpl
    async def llm_tool_call(self, call: ToolCallBlock) -> ToolResultBlock:
        raise AssertionError("never called")  # pragma: no cover - the harness never starts


def loop(*plugins: tuple[str, Any]) -> Harness:
    route = Route([*tool_call_reply("c1", "shout", '{"text": "hi"}')], text_reply("done"))
    return Harness([*plugins, ("fake", route)])


async def test_every_execution_of_the_loop_passes_the_chain_outermost_first() -> None:
    seen: list[str] = []
    async with loop(("inner", Around("inner", seen)), ("outer", First("outer", seen))) as harness:
        conversation = Conversation(harness, route="fake", tools=[Tool(shout)])
        reply = await conversation.send("go")
    assert reply.text == "done"
    assert seen == ["outer>shout:c1", "inner>shout:c1", "inner<HI", "outer<HI"]
    assert conversation.messages[2].content == [ToolResultBlock("c1", "HI")]


async def test_unknown_and_declined_calls_pass_no_middleware() -> None:
    seen: list[str] = []
    async with loop(("around", Around("around", seen))) as harness:
        declined = Conversation(harness, route="fake", tools=[Tool(shout)], approve=lambda call: False)
        await declined.send("go")
    assert seen == []


async def test_a_middleware_may_answer_without_the_tool_and_take_fewer_arguments() -> None:
    async with Harness([("cache", Answering())]) as harness:
        result = await harness.run_tool(Tool(shout), ToolCallBlock("c", "shout", '{"text": "x"}'))
    assert result == ToolResultBlock("c", "cached")


async def test_a_result_that_is_no_block_is_a_protocol_error_naming_the_plugin() -> None:
    async with Harness([("wrong", Wrong())]) as harness:
        with pytest.raises(LlmError) as caught:
            await harness.run_tool(Tool(shout), ToolCallBlock("c", "shout", "{}"))
    assert caught.value.code == "PROTOCOL"
    assert "plugin 'wrong': llm_tool_call returned str, not a ToolResultBlock" in str(caught.value)


@pytest.mark.parametrize(
    ("plugin", "says"),
    [(Plain(), "llm_tool_call must be a coroutine function"), (Wrapper(), "may not be a wrapper=/hookwrapper=")],
)
async def test_impls_of_the_wrong_kind_stop_the_start(plugin: Any, says: str) -> None:
    with pytest.raises(LlmError) as caught:
        async with Harness([("bad", plugin)]):
            pass  # pragma: no cover - the start fails
    assert says in str(caught.value)
    assert "plugin 'bad'" in str(caught.value)


async def test_a_tool_middleware_failing_to_start_stops_the_harness() -> None:
    with pytest.raises(LlmError, match="middleware plugins failed to start"):
        async with Harness([("broken", Broken())]):
            pass  # pragma: no cover - the start fails


async def test_run_tool_needs_a_running_harness() -> None:
    with pytest.raises(RuntimeError, match="not running"):
        await Harness([]).run_tool(Tool(shout), ToolCallBlock("c", "shout", "{}"))


# ------------------------------------------------------------------ results with files


async def test_a_tool_returning_a_file_gives_a_result_with_files() -> None:
    def picture() -> FileBlock:
        return PNG

    result = await Tool(picture).run(ToolCallBlock("c", "picture", "{}"))
    assert result == ToolResultBlock("c", "", files=(PNG,))


async def test_a_list_of_texts_and_files_keeps_both() -> None:
    def mixed() -> list[Any]:
        return ["one", PNG, "two"]

    result = await Tool(mixed).run(ToolCallBlock("c", "mixed", "{}"))
    assert result == ToolResultBlock("c", "one\n\ntwo", files=(PNG,))


async def test_a_list_of_files_and_other_values_is_a_tool_error() -> None:
    def odd() -> list[Any]:
        return [PNG, 3]

    result = await Tool(odd).run(ToolCallBlock("c", "odd", "{}"))
    assert result.is_error
    assert "may hold only str and FileBlock items" in result.content


async def test_a_plain_list_stays_json() -> None:
    def numbers() -> list[int]:
        return [1, 2]

    assert await Tool(numbers).run(ToolCallBlock("c", "numbers", "{}")) == ToolResultBlock("c", "[1,2]")
