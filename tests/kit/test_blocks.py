"""The kit's block writer (:class:`harness_core.kit.BlockWriter`) and event decoding, on their own."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from harness_core.assembler import BlockAssembler
from harness_core.errors import LlmError
from harness_core.kit import DEFAULT_ABORT_REASON, SNIPPET_CHARS, Block, BlockWriter, decode_event, snippet
from harness_core.testing.check import check_stream
from harness_core.types import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    ReasoningBlock,
    ReasoningDelta,
    ReasoningSignature,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)


class _Point(msgspec.Struct):
    x: int


_POINT = msgspec.json.Decoder(type=_Point)


def test_blocks_are_numbered_in_order_and_end_complete() -> None:
    writer = BlockWriter("acme")
    out: list[StreamChunk] = []
    text = writer.open("text", out)
    out.append(writer.delta(text, "Hel"))
    out.append(writer.delta(text, "lo"))
    thought = writer.open("reasoning", out, signed=True)
    out.append(writer.delta(thought, "hm"))
    call = writer.open("tool-call", out, id="c1", name=None)
    call.name = "f"  # learnt later
    out.append(writer.delta(call, "", name="f"))
    empty = writer.open("tool-call", out, id="c2", name="g")
    assert writer.next_index == 4
    assert writer.tool_calls == 2
    writer.close(text, out)
    writer.close(text, out)  # already closed: nothing
    assert text.text == "Hello"
    assert not text.open
    writer.usage = TokenUsage(1, 2)
    out = writer.finish(FinishReason("tool-calls"), out)
    assert out == [
        BlockStart(0, "text"),
        TextDelta(0, "Hel"),
        TextDelta(0, "lo"),
        BlockStart(1, "reasoning", signed=True),
        ReasoningDelta(1, "hm"),
        BlockStart(2, "tool-call", id="c1"),
        ToolCallDelta(2, "c1", "", name="f"),
        BlockStart(3, "tool-call", id="c2", name="g"),
        BlockEnd(0, TextBlock("Hello")),
        BlockEnd(1, ReasoningBlock("hm", signed=True)),  # the open ones in index order
        BlockEnd(2, ToolCallBlock("c1", "f", "{}")),  # no arguments: "{}"
        BlockEnd(3, ToolCallBlock("c2", "g", "{}")),
        Usage(TokenUsage(1, 2)),
        Finish(FinishReason("tool-calls")),
    ]
    assert not empty.open
    check_stream(out)
    assert writer.done
    assert writer.finish(FinishReason("stop")) == []
    assert writer.abort() == []


def test_on_close_runs_before_block_end_and_replay_state_after_every_block_closed() -> None:
    replay: dict[str, Any] = {}

    def on_close(block: Block, out: list[StreamChunk]) -> None:
        if block.kind == "tool-call" and not block.parts:
            out.append(writer.delta(block, '{"a":1}'))
        replay[str(block.index)] = block.extra

    writer = BlockWriter("acme", replay_state=lambda: dict(replay) or None, on_close=on_close)
    out: list[StreamChunk] = []
    writer.open("tool-call", out, id="c1", name="f", extra="sig")
    out = writer.finish(FinishReason("tool-calls", raw="tool_use"), out)
    assert out[1:] == [
        ToolCallDelta(0, "c1", '{"a":1}'),
        BlockEnd(0, ToolCallBlock("c1", "f", '{"a":1}')),
        Finish(FinishReason("tool-calls", raw="tool_use"), {"0": "sig"}),
    ]


def test_a_signature_set_before_the_end_rides_on_the_reasoning_block_end() -> None:
    signature = ReasoningSignature("acme", "m", "SIG")

    def on_close(block: Block, out: list[StreamChunk]) -> None:
        block.signature = signature

    writer = BlockWriter("acme", on_close=on_close)
    out: list[StreamChunk] = []
    block = writer.open("reasoning", out, signed=True)
    assert block.signature is None
    out.append(writer.delta(block, "hmm"))
    out = writer.finish(FinishReason("stop"), out)
    assert out[2] == BlockEnd(0, ReasoningBlock("hmm", signed=True, signature=signature))
    assembler = BlockAssembler()
    for chunk in out:
        assembler.feed(chunk)
    assert assembler.message().content == [ReasoningBlock("hmm", signed=True, signature=signature)]


def test_abort_closes_blocks_keeps_usage_and_replay_state_and_carries_the_reason() -> None:
    writer = BlockWriter("acme", request_id="req-1", replay_state=lambda: {"v": 1})
    out: list[StreamChunk] = []
    block = writer.open("text", out)
    writer.delta(block, "partial")
    writer.usage = TokenUsage(3, None)
    aborted = writer.abort()
    assert aborted[:2] == [BlockEnd(0, TextBlock("partial")), Usage(TokenUsage(3, None))]
    final = aborted[-1]
    assert isinstance(final, Finish)
    assert final.replay_state == {"v": 1}
    failure = final.reason.failure
    assert final.reason.kind == "aborted"
    assert failure is not None
    assert (failure.code, failure.message, failure.provider, failure.request_id) == (
        "ABORTED",
        DEFAULT_ABORT_REASON,
        "acme",
        "req-1",
    )
    assigned = BlockWriter("acme")
    assigned.request_id = "later"
    stopped = assigned.abort("user pressed stop")
    assert stopped == [
        Finish(
            FinishReason(
                "aborted",
                failure=LlmError("ABORTED", "user pressed stop", provider="acme", request_id="later").to_failure(),
            )
        )
    ]
    assembler = BlockAssembler()
    for chunk in [*out, *aborted]:
        assembler.feed(chunk)
    assert assembler.blocks() == [TextBlock("partial")]


def test_no_usage_is_invented_and_no_replay_state_without_a_source() -> None:
    assert BlockWriter("acme").finish(FinishReason("stop")) == [Finish(FinishReason("stop"))]


@pytest.mark.parametrize("data", ["{not json", b"{not json", '{"x": "no int"}'])
def test_decode_event_raises_protocol_quoting_the_payload(data: str | bytes) -> None:
    with pytest.raises(LlmError) as info:
        decode_event(_POINT, data, "Acme event", provider="acme", request_id="req-2")
    error = info.value
    assert (error.code, error.provider, error.request_id) == ("PROTOCOL", "acme", "req-2")
    assert error.message.startswith("malformed Acme event (")
    text = data.decode() if isinstance(data, bytes) else data
    assert error.message.endswith(f": {text!r}")
    assert isinstance(error.__cause__, msgspec.DecodeError)


def test_decode_event_names_the_event_and_decodes_good_payloads() -> None:
    assert decode_event(_POINT, b'{"x": 1}', "Acme event") == _Point(1)
    with pytest.raises(LlmError, match=r"^PROTOCOL: malformed Acme event 'delta' \("):
        decode_event(_POINT, "[", "Acme event", event="delta")


def test_snippet_quotes_at_most_snippet_chars() -> None:
    long = "é" * 1000
    assert snippet(long) == "é" * (SNIPPET_CHARS - 1) + "…"
    assert snippet(long.encode()) == "é" * (SNIPPET_CHARS - 1) + "…"
    assert snippet(b"\xff ok") == "\ufffd ok"
    assert snippet("short") == "short"


def test_decode_event_of_a_cut_payload_is_network() -> None:
    """An event cut by the end of the body (``incomplete``) that does not decode: a truncated body."""
    with pytest.raises(LlmError) as info:
        decode_event(_POINT, '{"x": 1', "Acme event", event="delta", incomplete=True, provider="acme", request_id="r")
    error = info.value
    assert (error.code, error.provider, error.request_id) == ("NETWORK", "acme", "r")
    assert error.message == "Acme event 'delta' cut by the end of the stream (connection closed early): '{\"x\": 1'"
    assert decode_event(_POINT, '{"x": 2}', "Acme event", incomplete=True) == _Point(2)  # complete JSON counts


def test_the_excerpt_rule_has_one_owner_and_old_paths_warn() -> None:
    """``snippet``/``SNIPPET_CHARS``/``truncate`` live in :mod:`harness_core.errors`; the kit face
    re-exports them; their old module paths still work with a warning naming the owner."""
    import harness_core.errors as owner
    import harness_core.http.errors as http_errors
    import harness_core.kit.blocks as blocks

    assert snippet is owner.snippet
    assert SNIPPET_CHARS == owner.SNIPPET_CHARS == 200
    with pytest.warns(DeprecationWarning, match=r"harness_core\.kit\.blocks\.snippet moved: .*harness_core\.errors"):
        assert blocks.snippet is owner.snippet
    with pytest.warns(DeprecationWarning, match=r"harness_core\.kit\.blocks\.SNIPPET_CHARS moved"):
        assert blocks.SNIPPET_CHARS == 200
    with pytest.warns(DeprecationWarning, match=r"harness_core\.http\.errors\.truncate moved: .*harness_core\.errors"):
        assert http_errors.truncate is owner.truncate
    assert owner.truncate("abcdef", 4) == "abc…"
    assert owner.truncate("abcd", 4) == "abcd"
    assert owner.truncate("y" * 1001) == "y" * 999 + "…"  # the old http.errors default limit stays
    assert LlmError("SERVER", "x" * 3000).message == "x" * 1999 + "…"  # LlmError cuts by the same rule
