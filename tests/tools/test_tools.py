"""Tools: schema from hints or a Struct, argument parsing only at run time, errors as results."""

from __future__ import annotations

import threading
from typing import Annotated

import anyio
import msgspec
import pytest

from harness_core import LlmError, ToolCallBlock, ToolResultBlock
from harness_core.tools import Tool, ToolRegistry, tool

pytestmark = pytest.mark.anyio


@tool
def echo(text: Annotated[str, msgspec.Meta(description="The text to echo")], times: int = 1) -> str:
    """Echo text back.

    Longer explanation that is not part of the description.
    """
    return text * times


class Point(msgspec.Struct):
    x: int
    y: int


class Shape(msgspec.Struct):
    """A shape."""

    name: str
    points: list[Point]


@tool(name="area", description="Count the points of a shape.")
async def count_points(shape: Shape) -> dict[str, int]:
    return {"points": len(shape.points)}


def test_schema_from_type_hints() -> None:
    assert echo.spec.name == "echo"
    assert echo.spec.description == "Echo text back."
    assert echo.parameters == {
        "type": "object",
        "properties": {
            "text": {"description": "The text to echo", "type": "string"},
            "times": {"type": "integer", "default": 1},
        },
        "required": ["text"],
        "additionalProperties": False,
    }


def test_schema_from_a_struct_parameter_keeps_nested_definitions() -> None:
    assert count_points.name == "area"
    assert count_points.description == "Count the points of a shape."
    schema = count_points.parameters
    assert schema["required"] == ["name", "points"]
    assert schema["properties"]["points"] == {"type": "array", "items": {"$ref": "#/$defs/Point"}}
    assert schema["$defs"]["Point"]["required"] == ["x", "y"]


async def test_sync_tools_run_in_a_worker_thread() -> None:
    seen: list[str] = []

    def where() -> str:
        seen.append(threading.current_thread().name)
        return "ok"

    result = await Tool(where).run(ToolCallBlock("c1", "where", "{}"))
    assert result == ToolResultBlock("c1", "ok")
    assert seen
    assert seen[0] != threading.main_thread().name


async def test_arguments_are_parsed_at_run_time() -> None:
    assert await echo.run(ToolCallBlock("c1", "echo", '{"text": "ab", "times": 2}')) == ToolResultBlock("c1", "abab")
    result = await count_points.run(ToolCallBlock("c2", "area", '{"name":"t","points":[{"x":1,"y":2}]}'))
    assert result == ToolResultBlock("c2", '{"points":1}')


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"text": "a"', "are not valid JSON"),
        ('{"times": 2}', "invalid arguments for tool 'echo'"),
        ('{"text": "a", "extra": 1}', "invalid arguments for tool 'echo'"),
        ('{"text": 5}', "Expected `str`, got `int`"),
    ],
)
async def test_bad_arguments_become_error_results(arguments: str, expected: str) -> None:
    result = await echo.run(ToolCallBlock("c1", "echo", arguments))
    assert result.is_error
    assert expected in result.content


async def test_a_raising_tool_becomes_an_error_result(caplog: pytest.LogCaptureFixture) -> None:
    @tool
    async def broken() -> str:
        raise ValueError("no luck")

    result = await broken.run(ToolCallBlock("c1", "broken", "{}"))
    assert result == ToolResultBlock("c1", "tool 'broken' failed: ValueError: no luck", is_error=True)
    assert "tool 'broken' raised" in caplog.text


def test_functions_that_cannot_be_described_are_rejected() -> None:
    def untyped(x):  # type: ignore[no-untyped-def]
        return x

    def star(*args: int) -> None:
        return None

    with pytest.raises(TypeError, match="parameter 'x' needs a type hint"):
        Tool(untyped)
    with pytest.raises(TypeError, match=r"\*args/\*\*kwargs"):
        Tool(star)


def test_undocumented_tool_has_an_empty_description() -> None:
    def bare(a: int) -> int:
        return a

    assert Tool(bare).description == ""
    assert repr(Tool(bare)) == "Tool('bare')"


def test_registry_names_both_owners_and_selects_in_order() -> None:
    registry = ToolRegistry()
    registry.register(echo, owner="mock")
    registry.register(lambda: "x", owner="other", name="lam", description="d")
    with pytest.raises(LlmError, match="'echo' is registered by 'mock' and again by 'mine'"):
        registry.register(lambda: "other", owner="mine", name="echo")
    assert [t.name for t in registry.select(["lam", "echo"])] == ["lam", "echo"]
    assert registry.owner("echo") == "mock"
    assert registry.owner("nope") is None
    assert registry.get("nope") is None
    assert len(registry) == 2
    assert sorted(t.name for t in registry) == ["echo", "lam"]
    with pytest.raises(LlmError, match="unknown tool 'nope'; registered tools: echo, lam"):
        registry.select(["nope"])
    with pytest.raises(LlmError, match="registered tools: none"):
        ToolRegistry().select(["x"])


def test_a_tool_stays_callable() -> None:
    assert echo("ab", times=2) == "abab"


async def test_a_cancelled_sync_tool_is_abandoned_not_awaited() -> None:
    release = threading.Event()
    entered = threading.Event()

    def blocking() -> str:
        entered.set()
        release.wait(30)
        return "late"

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(Tool(blocking).run, ToolCallBlock("c1", "blocking", "{}"))
            await anyio.to_thread.run_sync(entered.wait)
            scope.cancel()  # returns at once although the thread still blocks
    assert scope.cancelled_caught
    release.set()


def test_bind_remove_owner_and_names() -> None:
    registry = ToolRegistry()
    registry.bind("p1")(echo)
    registry.bind("p2")(lambda: "x", name="lam", description="d")
    registry.bind("p1")(count_points)
    assert registry.names() == ["echo", "lam", "area"]
    registry.remove_owner("p1")
    assert registry.names() == ["lam"]
    assert registry.owner("lam") == "p2"


async def test_a_result_that_cannot_be_encoded_becomes_an_error_result() -> None:
    def opaque() -> object:
        return object()

    result = await Tool(opaque).run(ToolCallBlock("c1", "opaque", "{}"))
    assert result.is_error
    assert result.content.startswith("tool 'opaque' failed: TypeError: Encoding objects of type object is unsupported")


def test_the_same_tool_again_is_no_conflict() -> None:
    registry = ToolRegistry()
    first = registry.register(echo.func, owner="mock")
    assert registry.register(echo.func, owner="mock:fast") is first
    assert registry.owner("echo") == "mock"
    with pytest.raises(LlmError, match="registered by 'mock' and again by 'other'"):
        registry.register(echo.func, owner="other", description="different")
