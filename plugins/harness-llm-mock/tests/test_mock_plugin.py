"""harness-llm-mock: deterministic replies, tools, limits, abort, scripted errors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import msgspec
import pytest

from harness_core import (
    AbortSignal,
    BlockEnd,
    FileBlock,
    Finish,
    GenerateOptions,
    Harness,
    JsonObjectFormat,
    JsonSchemaFormat,
    LlmError,
    Message,
    ReasoningBlock,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolResultBlock,
    ToolSpec,
    Usage,
)
from harness_core.testing import check_stream
from harness_llm_mock import MockAdapter, MockConfig, MockPlugin

ECHO_TOOL = ToolSpec(name="echo", description="echo text back")


def options(text: str | None = "hello big world", **fields: Any) -> GenerateOptions:
    fields.setdefault("route", "mock")
    fields.setdefault("model", "echo")
    fields.setdefault("messages", [Message.user(text)] if text is not None else [])
    return GenerateOptions(**fields)


async def collect(adapter: MockAdapter, opts: GenerateOptions) -> list[StreamChunk]:
    chunks = [chunk async for chunk in adapter.stream(opts)]
    return check_stream(chunks)


def kinds(chunks: Sequence[StreamChunk]) -> list[str]:
    return [type(c).__name__ for c in chunks]


def ends(chunks: Sequence[StreamChunk]) -> list[Any]:
    return [c.block for c in chunks if isinstance(c, BlockEnd)]


@pytest.mark.anyio
async def test_echoes_the_last_user_message_word_by_word() -> None:
    history = [Message.user("first"), Message(role="assistant", content=[TextBlock("ok")]), Message.user(" hi  there ")]
    chunks = await collect(MockAdapter(MockConfig()), options(messages=history, system="be nice"))
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == [" ", "hi  ", "there "]
    assert ends(chunks) == [TextBlock(" hi  there ")]
    assert chunks[-2] == Usage(usage=TokenUsage(input_tokens=6, output_tokens=3))
    assert chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_nothing_to_echo_opens_no_block() -> None:
    for opts in (options(""), options(None), options(model=None, text="")):
        chunks = await collect(MockAdapter(MockConfig()), opts)
        assert kinds(chunks) == ["Usage", "Finish"]


@pytest.mark.anyio
async def test_reasoning_block_first_unless_effort_off() -> None:
    adapter = MockAdapter(MockConfig(reasoning="let me think"))
    chunks = await collect(adapter, options("yes", reasoning_effort="high"))
    assert ends(chunks) == [ReasoningBlock("let me think"), TextBlock("yes")]
    assert chunks[-2] == Usage(usage=TokenUsage(input_tokens=1, output_tokens=4, reasoning_tokens=3))
    chunks = await collect(adapter, options("yes", reasoning_effort="off"))
    assert ends(chunks) == [TextBlock("yes")]


@pytest.mark.anyio
async def test_tool_call_then_answer_quoting_the_result() -> None:
    adapter = MockAdapter(MockConfig())
    first = await collect(adapter, options('please Echo "this"', tools=[ECHO_TOOL]))
    (call,) = ends(first)
    assert call == ToolCallBlock(id="call_mock_1", name="echo", arguments='{"text":"please Echo \\"this\\""}')
    assert msgspec.json.decode(call.arguments) == {"text": 'please Echo "this"'}
    assert first[-1].reason.kind == "tool-calls"  # type: ignore[union-attr]
    history = [
        Message.user('please Echo "this"'),
        Message(role="assistant", content=[ReasoningBlock("r"), call]),
        Message(role="tool", content=[ToolResultBlock(tool_call_id=call.id, content="this")]),
    ]
    second = await collect(adapter, options(messages=history, tools=[ECHO_TOOL]))
    assert ends(second) == [TextBlock("The echo tool returned: this")]
    assert second[-2] == Usage(usage=TokenUsage(input_tokens=8, output_tokens=5))


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("text", "tools", "choice", "calls"),
    [
        ("echo", [], None, False),  # no echo tool offered
        ("echo", [ToolSpec(name="other")], None, False),
        ("echo", [ECHO_TOOL], "none", False),
        ("plain", [ECHO_TOOL], None, False),
        ("plain", [ECHO_TOOL], "auto", False),
        ("plain", [ECHO_TOOL], "required", True),
    ],
)
async def test_when_the_echo_tool_is_called(text: str, tools: list[ToolSpec], choice: Any, calls: bool) -> None:
    chunks = await collect(MockAdapter(MockConfig()), options(text, tools=tools, tool_choice=choice))
    assert (chunks[-1].reason.kind == "tool-calls") is calls  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_call_ids_count_earlier_calls() -> None:
    earlier = Message(role="assistant", content=[ToolCallBlock(id="x", name="echo", arguments="{}")])
    chunks = await collect(
        MockAdapter(MockConfig()), options(messages=[earlier, Message.user("echo")], tools=[ECHO_TOOL])
    )
    assert ends(chunks)[0].id == "call_mock_2"


@pytest.mark.anyio
async def test_max_tokens_ends_with_length() -> None:
    chunks = await collect(MockAdapter(MockConfig()), options("a b c d", max_tokens=2))
    assert ends(chunks) == [TextBlock("a b ")]
    assert chunks[-1].reason.kind == "length"  # type: ignore[union-attr]
    chunks = await collect(MockAdapter(MockConfig()), options("a b c d", max_tokens=1))
    assert ends(chunks) == [TextBlock("a ")]


@pytest.mark.anyio
async def test_stop_sequences_cut_the_reply() -> None:
    chunks = await collect(MockAdapter(MockConfig()), options("one two END three", stop=["", "END"]))
    assert ends(chunks) == [TextBlock("one two ")]
    assert chunks[-1].reason.raw == "stop_sequence"  # type: ignore[union-attr]
    chunks = await collect(MockAdapter(MockConfig()), options("one", stop=["zzz"]))
    assert chunks[-1].reason.raw == "stop"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_abort_before_start_and_while_waiting() -> None:
    abort = AbortSignal()
    abort.fire("stop now")
    chunks = await collect(MockAdapter(MockConfig()), options(abort=abort))
    assert kinds(chunks) == ["Usage", "Finish"]
    failure = chunks[-1].reason.failure  # type: ignore[union-attr]
    assert failure is not None
    assert (failure.code, failure.message) == ("ABORTED", "stop now")

    abort = AbortSignal()
    adapter = MockAdapter(MockConfig(delay=60))
    stream = adapter.stream(options("a b c", abort=abort))
    got: list[StreamChunk] = []
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(anyio.sleep, 0)

            async def fire_soon() -> None:
                await anyio.sleep(0.01)
                abort.fire()

            group.start_soon(fire_soon)
            got.extend([chunk async for chunk in stream])
    check_stream(got)
    assert isinstance(got[-1], Finish)
    assert got[-1].reason.kind == "aborted"


@pytest.mark.anyio
async def test_delay_between_deltas_without_abort_signal() -> None:
    chunks = await collect(MockAdapter(MockConfig(delay=0.001)), options("a b"))
    assert ends(chunks) == [TextBlock("a b")]


@pytest.mark.anyio
@pytest.mark.parametrize(("after", "seen"), [(0, 0), (2, 2), (99, 3)])
async def test_scripted_errors_raise(after: int, seen: int) -> None:
    adapter = MockAdapter(MockConfig(error="OVERLOADED", error_after=after))
    chunks: list[StreamChunk] = []

    async def consume() -> None:
        async for chunk in adapter.stream(options("a b c")):
            chunks.append(chunk)

    with pytest.raises(LlmError) as info:
        await consume()
    assert info.value.code == "OVERLOADED"
    assert info.value.retryable
    assert len([c for c in chunks if isinstance(c, TextDelta)]) == seen


@pytest.mark.anyio
async def test_models_and_unsupported_options() -> None:
    adapter = MockAdapter(MockConfig(routes=["m1", "m2"]))
    info = adapter.resolve_model("echo")
    assert info.route == "m1"
    assert info.reasoning_efforts == ["off", "low", "medium", "high"]
    assert await adapter.list_models() == [info]
    assert MockAdapter(MockConfig(routes=[])).resolve_model("echo").route is None
    with pytest.raises(LlmError) as not_found:
        adapter.resolve_model("gpt")
    assert not_found.value.code == "NOT_FOUND"
    with pytest.raises(LlmError) as unsupported:
        await collect(adapter, options(reasoning_effort="max"))
    assert unsupported.value.code == "UNSUPPORTED"
    assert "reasoning_effort 'max'" in unsupported.value.message
    assert unsupported.value.field == "reasoning_effort"


def test_config_is_strict() -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"delay": -1}, MockConfig)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"error": "NOPE"}, MockConfig)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"colour": 1}, MockConfig)


@pytest.mark.anyio
async def test_through_the_harness() -> None:
    plugin = MockPlugin(MockConfig(routes=["mock", "other"]))
    async with Harness([("mock", plugin)]) as harness:
        assert harness.routes() == {"mock": "mock", "other": "mock"}
        result = await harness.generate(options("hi there", route="other"))
        assert result.text == "hi there"
        assert result.usage == TokenUsage(input_tokens=2, output_tokens=2)


@pytest.mark.anyio
async def test_two_instances_share_the_echo_tool() -> None:
    """`plugins: {mock: {}, mock:two: {routes: [two]}}`: both start; the module-level `echo` is registered once."""
    plugins = [("mock", MockPlugin(MockConfig())), ("mock:two", MockPlugin(MockConfig(routes=["two"])))]
    async with Harness(plugins) as harness:
        assert harness.failures == ()
        assert harness.routes() == {"mock": "mock", "two": "mock:two"}
        assert harness.tools.names() == ["echo"]
        assert harness.tools.owner("echo") == "mock"
        result = await harness.generate(options("from two", route="two"))
        assert result.text == "from two"


@pytest.mark.anyio
async def test_files_are_acknowledged_by_description() -> None:
    photo = FileBlock("image/png", data=b"\x89PNG" * 3, filename="a.png")
    doc = FileBlock("application/pdf", url="https://h/a.pdf")
    chunks = await collect(MockAdapter(MockConfig()), options(messages=[Message.user("look", photo, doc)]))
    assert ends(chunks) == [TextBlock("look [image/png 'a.png' (12 bytes)] [application/pdf (url https://h/a.pdf)]")]
    assert chunks[-2] == Usage(usage=TokenUsage(input_tokens=1, output_tokens=8))


@pytest.mark.anyio
async def test_a_tool_results_files_are_acknowledged_after_its_text() -> None:
    call = ToolCallBlock(id="c1", name="echo", arguments="{}")
    shot = FileBlock("image/png", data=b"\x89PNG", filename="shot.png")
    history = [
        Message.user("echo a screenshot"),
        Message(role="assistant", content=[call]),
        Message(role="tool", content=[ToolResultBlock(tool_call_id="c1", content="taken", files=(shot,))]),
    ]
    chunks = await collect(MockAdapter(MockConfig()), options(messages=history, tools=[ECHO_TOOL]))
    assert ends(chunks) == [TextBlock("The echo tool returned: taken [image/png 'shot.png' (4 bytes)]")]


@pytest.mark.anyio
async def test_with_a_response_format_the_user_text_comes_back_verbatim() -> None:
    text = '{"name": "Ada", "age": 36}'
    fmt = JsonSchemaFormat("person", {"type": "object"})
    photo = FileBlock("image/png", data=b"x")
    for response_format in (fmt, JsonObjectFormat()):
        opts = options(messages=[Message.user(text, photo)], response_format=response_format)
        assert ends(await collect(MockAdapter(MockConfig()), opts)) == [TextBlock(text)]


def test_the_gen_ai_provider_names_no_real_vendor() -> None:
    """``harness.mock``: a custom value in the harness namespace, whatever the plugin is called."""
    assert MockAdapter(MockConfig()).gen_ai_provider("mock") == "harness.mock"
