"""Secrets split across deltas never reach the CLI's output (ChunkScrubber, Redactor.safe_end)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from harness_core import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    Message,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
)
from harness_core.secret import MASK, ChunkScrubber, Redactor
from harness_core.testing import check_stream

SECRET = "sk-envsecret-XYZ987654321"
TEXT = f"leak {SECRET} end"


def redactor(*values: str) -> Redactor:
    r = Redactor()
    for value in values:
        r.add(value)
    return r


def scrub(chunks: list[StreamChunk], redact: object) -> list[StreamChunk]:
    scrubber = ChunkScrubber(redact)  # type: ignore[arg-type]
    return [shown for chunk in chunks for shown in scrubber.feed(chunk)]


def text_stream(pieces: list[str], kind: str = "text") -> list[StreamChunk]:
    text = "".join(pieces)
    if kind == "text":
        deltas: list[StreamChunk] = [TextDelta(0, p) for p in pieces if p]
        end = BlockEnd(0, TextBlock(text))
    elif kind == "reasoning":
        deltas = [ReasoningDelta(0, p) for p in pieces if p]
        end = BlockEnd(0, ReasoningBlock(text))
    else:
        deltas = [ToolCallDelta(0, "c1", p, name="f" if i == 0 else None) for i, p in enumerate(pieces) if p]
        end = BlockEnd(0, ToolCallBlock("c1", "f", text))
    start = BlockStart(0, "tool-call", id="c1", name="f") if kind == "tool-call" else BlockStart(0, kind)  # type: ignore[arg-type]
    return [start, *deltas, end, Finish(FinishReason("stop" if kind != "tool-call" else "tool-calls"))]


def shown_text(chunks: list[StreamChunk]) -> str:
    parts = []
    for chunk in chunks:
        if isinstance(chunk, TextDelta | ReasoningDelta):
            parts.append(chunk.text)
        elif isinstance(chunk, ToolCallDelta):
            parts.append(chunk.arguments_delta)
    return "".join(parts)


@pytest.mark.parametrize("kind", ["text", "reasoning", "tool-call"])
def test_every_two_and_three_way_split_is_masked(kind: str) -> None:
    r = redactor(SECRET)
    expected = f"leak {MASK} end"
    for i in range(len(TEXT) + 1):
        for j in range(i, len(TEXT) + 1, 3):
            out = scrub(text_stream([TEXT[:i], TEXT[i:j], TEXT[j:]], kind), r)
            check_stream(out)
            assert shown_text(out) == expected
            assert SECRET[:6] not in repr(out)


def test_text_without_secrets_streams_at_once() -> None:
    scrubber = ChunkScrubber(redactor(SECRET))
    assert scrubber.feed(TextDelta(0, "hello ")) == [TextDelta(0, "hello ")]
    assert scrubber.feed(TextDelta(0, "le sk")) == [TextDelta(0, "le ")]  # "sk" could start the secret
    assert scrubber.feed(TextDelta(0, "y")) == [TextDelta(0, "sky")]  # "sky" cannot: all of it shows
    assert scrubber.feed(TextDelta(0, " is blue")) == [TextDelta(0, " is blue")]  # ordinary text: at once
    # a character that can begin the partial base64 group in front of a base64 form of the secret
    # (here the second character of base64(b"x" + secret)) waits for the next piece
    lead = base64.b64encode(b"x" + SECRET.encode()).decode()[1]
    assert scrubber.feed(TextDelta(0, " B" + lead)) == [TextDelta(0, " B")]
    assert scrubber.feed(TextDelta(0, "!")) == [TextDelta(0, lead + "!")]


def test_a_plain_scrubber_masks_each_piece() -> None:
    out = scrub(text_stream(["a secret", " b"]), lambda text: text.replace("secret", "***"))
    assert shown_text(out) == "a *** b"


def test_overlapping_secrets_are_never_cut_through() -> None:
    r = redactor("abcXYZ", "XYZ123")
    assert r.safe_end("--abcXYZ") == 2  # "XYZ" may start the second secret: wait from the first's start
    assert r.safe_end("plain") == 5  # ordinary text: no form of either secret starts with its tail
    assert r.safe_end("plain.") == 6
    out = scrub(text_stream(["--abc", "XYZ", "123++"]), r)
    assert shown_text(out) == r("--abcXYZ123++")  # streamed pieces mask exactly as the whole text


def test_conversation_save_masks_and_expands_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness_core import Conversation, Harness

    monkeypatch.setenv("HOME", str(tmp_path))
    conversation = Conversation(Harness())
    conversation.messages.append(Message(role="assistant", content=[TextBlock(TEXT)]))
    conversation.save("~/saved.json", redact=redactor(SECRET))
    saved = (tmp_path / "saved.json").read_text()
    assert SECRET not in saved
    assert MASK in saved
    with pytest.raises(IsADirectoryError):
        conversation.save(tmp_path)  # a directory: the temporary file is removed again
    assert not (tmp_path.parent / f"{tmp_path.name}.tmp").exists()


@pytest.mark.parametrize("kind", ["text", "reasoning", "tool-call"])
def test_a_held_back_tail_is_flushed_before_the_block_end(kind: str) -> None:
    out = scrub(text_stream(["tail ", "sk-env"], kind), redactor(SECRET))
    check_stream(out)
    assert shown_text(out) == "tail sk-env"
