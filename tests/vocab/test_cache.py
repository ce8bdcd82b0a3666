"""Prompt-cache breakpoints in the vocabulary: CacheMark, cache_breakpoint, Message.cached, the TTL check."""

from __future__ import annotations

import msgspec
import pytest

from harness_core import (
    CacheMark,
    FileBlock,
    GenerateOptions,
    LlmError,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolSpec,
    cache_breakpoint,
)
from harness_core.types import ToolCallBlock, ToolResultBlock, cache_marks, check_cache_ttls


def test_cache_mark_checks_its_ttl_and_round_trips() -> None:
    for bad in (0, -5, True, 1.5, "1h"):
        with pytest.raises(ValueError, match=r"CacheMark\.ttl"):
            CacheMark(bad)  # type: ignore[arg-type]
    block = TextBlock("x", cache=CacheMark(3600))
    assert msgspec.json.encode(block) == b'{"type":"text","text":"x","cache":{"ttl":3600}}'
    assert msgspec.json.encode(TextBlock("x")) == b'{"type":"text","text":"x"}'  # unmarked: unchanged JSON
    message = Message(role="user", content=[block])
    assert msgspec.json.decode(msgspec.json.encode(message), type=Message) == message


def test_breakpoints_on_blocks_and_messages() -> None:
    assert cache_breakpoint(TextBlock("a"), 300) == TextBlock("a", cache=CacheMark(300))
    thinking = ReasoningBlock("hm")
    assert cache_breakpoint(thinking) is thinking
    message = Message(
        role="assistant", content=[TextBlock("a", cache=CacheMark()), ToolCallBlock("1", "t", "{}"), thinking]
    )
    cached = message.cached(3600)
    assert cached.content == [TextBlock("a"), ToolCallBlock("1", "t", "{}", cache=CacheMark(3600)), thinking]
    only_thinking = Message(role="assistant", content=[thinking])
    assert only_thinking.cached() is only_thinking
    file = FileBlock("image/png", data=b"x", cache=CacheMark())
    assert "cache=CacheMark(ttl=None)" in repr(file)
    assert ("cache", CacheMark()) in file.__rich_repr__()


def test_cache_marks_names_every_place_and_the_ttl_check() -> None:
    options = GenerateOptions(
        system="s",
        system_cache=CacheMark(),
        tools=[ToolSpec("a"), ToolSpec("b", cache=CacheMark(3600))],
        messages=[
            Message(role="tool", content=[ToolResultBlock("1", "r"), ToolResultBlock("2", "r", cache=CacheMark(300))])
        ],
    )
    assert [where for where, _ in cache_marks(options)] == ["system", "tools[1]", "messages[0].content[1]"]
    check_cache_ttls("anthropic", options, (300, 3600))
    with pytest.raises(
        LlmError, match=r"tools\[1\]: a prompt-cache TTL of 3600 s is not supported by gemini \(it caches"
    ):
        check_cache_ttls("gemini", options)
    with pytest.raises(LlmError, match=r"it takes 300 s"):
        check_cache_ttls("x", options, (300,))
    untimed = GenerateOptions(system_cache=CacheMark())
    check_cache_ttls("openai", untimed)  # a mark without a TTL is fine where caching is implicit
    with pytest.raises(TypeError, match="system_cache must be a CacheMark"):
        GenerateOptions(system_cache=300)  # type: ignore[arg-type]
