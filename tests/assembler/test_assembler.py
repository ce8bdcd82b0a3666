"""BlockAssembler: folding chunk streams into an assistant message."""

from __future__ import annotations

import msgspec
import pytest

from harness_core import (
    BlockAssembler,
    BlockEnd,
    BlockStart,
    Failure,
    Finish,
    FinishReason,
    Message,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)
from harness_core.assembler import failure_finish


def assemble(chunks: list[StreamChunk]) -> BlockAssembler:
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.feed(chunk)
    return assembler


def test_full_stream_with_every_block_kind() -> None:
    assembler = assemble(
        [
            BlockStart(0, "reasoning", signed=True),
            ReasoningDelta(0, "think"),
            BlockEnd(0, ReasoningBlock("think", signed=True)),
            BlockStart(1, "text"),
            TextDelta(1, "Hel"),
            TextDelta(1, "lo"),
            BlockEnd(1, TextBlock("Hello")),
            BlockStart(2, "tool-call", id="call_1", name="get"),
            ToolCallDelta(2, "call_1", '{"a":'),
            ToolCallDelta(2, "call_1", "1}"),
            BlockEnd(2, ToolCallBlock("call_1", "get", '{"a":1}')),
            Usage(TokenUsage(10, 5)),
            Finish(FinishReason(kind="tool-calls", raw="tool_use"), replay_state={"sig": "abc"}),
        ]
    )
    assert assembler.usage == TokenUsage(10, 5)
    assert assembler.finish == FinishReason(kind="tool-calls", raw="tool_use")
    assert assembler.replay_state == {"sig": "abc"}
    assert assembler.open_blocks() == []
    message = assembler.message(route="anthropic", source="anthropic:work")
    assert message == Message(
        role="assistant",
        content=[
            ReasoningBlock("think", signed=True),
            TextBlock("Hello"),
            ToolCallBlock("call_1", "get", '{"a":1}'),
        ],
        route="anthropic",
        source="anthropic:work",
        replay_state={"sig": "abc"},
    )
    assert msgspec.json.decode(msgspec.json.encode(message), type=Message) == message


def test_block_end_is_authoritative() -> None:
    assembler = assemble([BlockStart(0, "text"), TextDelta(0, "draft"), BlockEnd(0, TextBlock("final"))])
    assert assembler.blocks() == [TextBlock("final")]


def test_deltas_after_block_end_are_ignored() -> None:
    assembler = assemble(
        [
            BlockStart(0, "text"),
            TextDelta(0, "a"),
            BlockEnd(0, TextBlock("a")),
            TextDelta(0, "late"),
            ToolCallDelta(0, "x", "{}"),
        ]
    )
    assert assembler.message().content == [TextBlock("a")]


def test_delta_only_stream_is_assembled() -> None:
    assembler = assemble(
        [
            ReasoningDelta(0, "hmm"),
            TextDelta(1, "He"),
            TextDelta(1, "y"),
            ToolCallDelta(2, "call_9", '{"q"'),
            ToolCallDelta(2, "call_9", ':"x"}', name="search"),
            ToolCallDelta(3, "call_10", "", name="noargs"),
            Finish(FinishReason(kind="tool-calls")),
        ]
    )
    assert assembler.message().content == [
        ReasoningBlock("hmm"),
        TextBlock("Hey"),
        ToolCallBlock("call_9", "search", '{"q":"x"}'),
        ToolCallBlock("call_10", "noargs", "{}"),
    ]
    assert [index for index, _ in assembler.open_blocks()] == [0, 1, 2, 3]


def test_open_blocks_hold_what_they_received_in_index_order() -> None:
    assembler = assemble(
        [
            BlockStart(1, "tool-call"),  # id and name unknown at start: taken from the deltas
            BlockStart(0, "text"),
            TextDelta(0, "par"),
            ToolCallDelta(1, "call_1", '{"a"', name="f"),
            BlockStart(2, "text"),
            BlockEnd(2, TextBlock("done")),
            BlockStart(3, "reasoning", signed=True),
            BlockStart(0, "text"),  # a repeated start does not reset the block
        ]
    )
    assert assembler.open_blocks() == [
        (0, TextBlock("par")),
        (1, ToolCallBlock("call_1", "f", '{"a"')),
        (3, ReasoningBlock("", signed=True)),
    ]
    assert assembler.finish is None
    assert assembler.usage is None


def test_tool_call_without_any_id_or_name() -> None:
    """The one rule for a missing tool-call id: ``call_<index>`` (unique in the reply)."""
    assembler = assemble([BlockStart(0, "tool-call")])
    assert assembler.blocks() == [ToolCallBlock("call_0", "", "{}")]


def test_unknown_chunk_kinds_are_ignored() -> None:
    assembler = BlockAssembler()
    assembler.feed("not a chunk")  # type: ignore[arg-type]
    assert assembler.message() == Message(role="assistant", content=[])


@pytest.mark.parametrize("replay", [None, {"response_id": "r1"}])
def test_message_records_route_source_and_replay(replay: object) -> None:
    assembler = assemble([Finish(FinishReason(kind="stop"), replay_state=replay)])
    message = assembler.message(route="openai", source="openai:work")
    assert (message.route, message.source, message.replay_state) == ("openai", "openai:work", replay)


def test_keep_ended_false_drops_ended_content_but_still_ignores_late_deltas() -> None:
    from harness_core import BlockEnd, BlockStart, TextBlock, TextDelta

    tracker = BlockAssembler(keep_ended=False)
    chunks: list[StreamChunk] = [
        BlockStart(0, "text"),
        TextDelta(0, "done"),
        BlockEnd(0, TextBlock("done")),
        TextDelta(0, "late"),
        BlockStart(1, "text"),
        TextDelta(1, "open"),
    ]
    for chunk in chunks:
        tracker.feed(chunk)
    assert tracker.open_blocks() == [(1, TextBlock("open"))]
    assert tracker.blocks() == [TextBlock("open")]


def test_terminal_closes_the_open_blocks_then_finishes_with_the_failure() -> None:
    assembler = BlockAssembler(keep_ended=False)
    chunks: list[StreamChunk] = [
        BlockStart(0, "text"),
        TextDelta(0, "done"),
        BlockEnd(0, TextBlock("done")),
        BlockStart(1, "reasoning", signed=True),
        ReasoningDelta(1, "hm"),
        BlockStart(2, "tool-call", id="c1", name="f"),
        ToolCallDelta(2, "c1", '{"a"'),
    ]
    for chunk in chunks:
        assembler.feed(chunk)
    failure = Failure(code="TIMEOUT", message="ran out", retryable=True)
    tail = assembler.terminal(failure)
    assert tail == [
        BlockEnd(1, ReasoningBlock("hm", signed=True)),
        BlockEnd(2, ToolCallBlock("c1", "f", '{"a"')),
        Finish(FinishReason("error", failure=failure)),
    ]
    assert assembler.open_blocks() == []  # they count as ended now
    assert assembler.terminal(failure) == [Finish(FinishReason("error", failure=failure))]


def test_terminal_keeps_the_closed_blocks_when_asked() -> None:
    assembler = assemble([BlockStart(0, "text"), TextDelta(0, "par")])
    aborted = Failure(code="ABORTED", message="stop")
    assert assembler.terminal(aborted)[-1] == Finish(FinishReason("aborted", failure=aborted))
    assert assembler.blocks() == [TextBlock("par")]


def test_failure_finish_is_aborted_only_for_aborted() -> None:
    assert failure_finish(Failure(code="ABORTED", message="x")).reason.kind == "aborted"
    assert failure_finish(Failure(code="SERVER", message="x")).reason.kind == "error"
