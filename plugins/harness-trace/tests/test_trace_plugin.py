"""harness-trace: one JSON line per chunk, content replaced by its length unless asked."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness_core import FileBlock, GenerateOptions, Harness, Message, StreamChunk, ToolSpec
from harness_llm_mock import MockConfig, MockPlugin
from harness_trace import TraceConfig, TracePlugin


async def run(trace: TracePlugin, text: str, *, stop_after: int | None = None) -> int:
    options = GenerateOptions(route="mock", model="echo", messages=[Message.user(text)], tools=[ToolSpec(name="echo")])
    seen = 0
    harness = Harness([("trace", trace), ("mock", MockPlugin(MockConfig()))])
    async with harness, harness.stream(options) as chunks:
        async for _ in chunks:
            seen += 1
            if seen == stop_after:
                break
    return seen


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.anyio
async def test_lines_hold_route_model_time_and_lengths(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "trace.jsonl"
    trace = TracePlugin(TraceConfig(path=str(path)))
    count = await run(trace, "secret words")
    await run(trace, "please echo")
    rows = records(path)
    first = rows[:count]
    assert len({row["stream"] for row in first}) == 1
    assert {(row["route"], row["model"]) for row in rows} == {("mock", "echo")}
    times = [float(str(row["t_ms"])) for row in first]
    assert times == sorted(times)
    assert [row["chunk"] for row in first] == [
        {"type": "block-start", "index": 0, "block_type": "text"},
        {"type": "text-delta", "index": 0, "text": 7},
        {"type": "text-delta", "index": 0, "text": 5},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": 12}},
        {"type": "usage", "usage": {"input_tokens": 2, "output_tokens": 2}},
        {"type": "finish", "reason": {"kind": "stop", "raw": "stop"}},
    ]
    call = rows[count:]
    assert call[1]["chunk"] == {"type": "tool-call-delta", "index": 0, "id": "call_mock_1", "arguments_delta": 11}
    assert call[3]["chunk"]["block"]["arguments"] == 22  # type: ignore[index]
    assert "secret" not in path.read_text()


@pytest.mark.anyio
async def test_include_content_and_early_close(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    await run(TracePlugin(TraceConfig(path=str(path), include_content=True)), "kept words", stop_after=2)
    rows = records(path)
    assert [row["chunk"] for row in rows] == [
        {"type": "block-start", "index": 0, "block_type": "text"},
        {"type": "text-delta", "index": 0, "text": "kept "},
    ]


@pytest.mark.anyio
async def test_written_as_it_goes_with_bounded_memory(tmp_path: Path) -> None:
    from harness_core import BlockStart, Finish, FinishReason, TextBlock, TextDelta
    from harness_core.types import BlockEnd

    path = tmp_path / "trace.jsonl"
    trace = TracePlugin(TraceConfig(path=str(path), flush_every=3))
    held: list[int] = []

    async def inner(options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        yield BlockStart(index=0, block_type="text")
        for number in range(1000):
            held.append(len(path.read_text().splitlines()) if path.exists() else 0)
            yield TextDelta(index=0, text=f"{number} ")
        yield BlockEnd(index=0, block=TextBlock("…"))
        yield Finish(FinishReason(kind="stop"))

    stream = trace.llm_stream(GenerateOptions(route="p", model="m"), inner)
    seen = 0
    async for _ in stream:
        seen += 1
        if seen == 8:
            # the consumer holds chunk 8: lines 1-6 are on disk already, 7-8 are held (< 3)
            assert len(records(path)) == 6
    assert seen == 1003
    assert len(records(path)) == 1003
    # what the inner stream saw on disk while producing: never more than 3 lines behind
    assert all(produced - written <= 3 for produced, written in enumerate(held, start=1))


def test_flush_every_is_validated() -> None:
    import msgspec

    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"flush_every": 0}, TraceConfig)


@pytest.mark.anyio
async def test_flush_every_one_writes_each_line_before_its_chunk(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    trace = TracePlugin(TraceConfig(path=str(path), flush_every=1))
    options = GenerateOptions(route="mock", model="echo", messages=[Message.user("a b c")])
    harness = Harness([("trace", trace), ("mock", MockPlugin(MockConfig()))])
    seen = 0
    async with harness, harness.stream(options) as chunks:
        async for _ in chunks:
            seen += 1
            assert len(records(path)) == seen  # on disk before the consumer got it
    assert len(records(path)) == seen


@pytest.mark.anyio
async def test_files_are_traced_by_digest_and_size_never_bytes(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    photo = FileBlock("image/png", data=b"PRIVATE-PIXELS" * 1000, filename="me.png")
    options = GenerateOptions(
        route="mock",
        model="echo",
        messages=[Message.user("look", photo, FileBlock("application/pdf", url="https://h/a.pdf?sig=TOKEN"))],
    )
    harness = Harness(
        [("trace", TracePlugin(TraceConfig(path=str(path), include_content=True))), ("mock", MockPlugin(MockConfig()))]
    )
    async with harness, harness.stream(options) as chunks:
        async for _ in chunks:
            pass
    rows = records(path)
    expected = [
        {"media_type": "image/png", "size": 14000, "digest": "sha256:" + hashlib.sha256(photo.data or b"").hexdigest()},
        {"media_type": "application/pdf", "url": "https://h/a.pdf?…"},
    ]
    assert all(row["files"] == expected for row in rows)
    text = path.read_text()
    assert "PRIVATE" not in text
    assert "TOKEN" not in text
    assert base64.b64encode(b"PRIVATE-PIXELS").decode()[:12] not in text


def test_a_path_that_cannot_be_written_is_a_config_error(tmp_path: Path) -> None:
    import msgspec

    with pytest.raises(msgspec.ValidationError, match=r"trace path '.*' is a directory; expected a file"):
        msgspec.convert({"path": str(tmp_path)}, TraceConfig)
    proc = r"trace path '/proc/nope/t\.jsonl' cannot be created: cannot write in '/proc'"
    with pytest.raises(ValueError, match=proc):
        TraceConfig(path="/proc/nope/t.jsonl")
    TraceConfig(path=str(tmp_path / "new" / "t.jsonl"))
    assert not (tmp_path / "new").exists()  # the check leaves nothing behind


@pytest.mark.anyio
async def test_a_failing_write_is_logged_once_and_the_stream_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    folder = tmp_path / "gone"
    trace = TracePlugin(TraceConfig(path=str(folder / "trace.jsonl"), flush_every=1))
    folder.write_text("x")  # the folder's place is taken by a file after start
    with caplog.at_level(logging.DEBUG, logger="harness_trace"):
        count = await run(trace, "two words")
    assert count == 6  # every chunk reached the consumer
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert errors[0].getMessage().startswith(f"trace: appending to {folder / 'trace.jsonl'} failed: FileExistsError")
    assert len(caplog.records) == count  # the other failed writes at DEBUG only


@pytest.mark.anyio
@pytest.mark.parametrize("include_content", [False, True])
async def test_a_secret_route_is_masked_in_every_line(tmp_path: Path, include_content: bool) -> None:
    from harness_core import Redactor

    key = "route-5d1e9c0b7a2f4e63"
    redactor = Redactor()
    redactor.add(key)
    path = tmp_path / "trace.jsonl"
    trace = TracePlugin(TraceConfig(path=str(path), include_content=include_content))
    options = GenerateOptions(
        route=key,
        model="echo",
        messages=[
            Message.user(f"echo {key}", FileBlock(media_type="image/png", url=f"https://example.com/{key}.png?sig=x"))
        ],
        tools=[ToolSpec(name="echo")],
    )
    harness = Harness([("trace", trace), ("mock", MockPlugin(MockConfig(routes=[key])))], redact=redactor)
    async with harness, harness.stream(options) as chunks:
        async for _ in chunks:
            pass
    text = path.read_text()
    assert key not in text
    rows = records(path)
    assert {row["route"] for row in rows} == {"**********"}
    assert rows[0]["files"] == [{"media_type": "image/png", "url": "https://example.com/**********.png?…"}]
    assert ("echo **********" in text) is include_content  # the tool call's arguments, masked
