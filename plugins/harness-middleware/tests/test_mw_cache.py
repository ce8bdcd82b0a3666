"""cache: hit/miss, ttl, what is not cacheable, faults, store maintenance."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import pytest
from mw_helpers import (
    Script,
    aborted_finish,
    collect,
    error_finish,
    finish,
    options,
    stop,
    text_chunks,
    tool_chunks,
    usage,
)

from harness_core.abort import AbortSignal
from harness_core.types import FileBlock, GenerateOptions, JsonSchemaFormat, Message, StreamChunk
from harness_middleware.cache import CachePlugin, cache_key, default_cache_path

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def plugin(tmp_path: Path, clock: Clock | None = None, **config: Any) -> CachePlugin:
    config.setdefault("path", str(tmp_path / "cache.sqlite"))
    return CachePlugin(msgspec.convert(config, CachePlugin.Config), clock=clock or Clock())


REPLY: list[StreamChunk] = [*text_chunks("hel", "lo"), usage(), stop()]


async def test_miss_then_hit_calls_next_once(tmp_path: Path) -> None:
    p = plugin(tmp_path)
    script = Script(REPLY)
    assert await collect(p.llm_stream(options(), script)) == REPLY
    assert await collect(p.llm_stream(options(), script)) == REPLY
    assert len(script.calls) == 1
    assert p.store.stats()["hits"] == 1


async def test_key_ignores_abort_and_metadata_but_not_the_request(tmp_path: Path) -> None:
    assert cache_key(options()) == cache_key(options(abort=AbortSignal(), metadata={"user": "x"}))
    assert cache_key(options()) != cache_key(options(model="m2"))
    assert cache_key(options()) != cache_key(options("other"))
    p = plugin(tmp_path)
    script = Script(REPLY)
    await collect(p.llm_stream(options(), script))
    await collect(p.llm_stream(options(metadata={"trace": 1}), script))
    await collect(p.llm_stream(options(temperature=0.5), script))
    assert len(script.calls) == 2


async def test_files_key_by_digest_and_schemas_key_too(tmp_path: Path) -> None:
    big = b"\x89PNG" + bytes(range(256)) * 4000

    def with_file(data: bytes, **fields: Any) -> GenerateOptions:
        return GenerateOptions(messages=[Message.user("look", FileBlock("image/png", data=data))], **fields)

    assert cache_key(with_file(big)) == cache_key(with_file(bytes(big)))
    assert cache_key(with_file(big)) != cache_key(with_file(big[:-1] + b"\x00"))
    schema = JsonSchemaFormat("p", {"type": "object"})
    assert cache_key(with_file(big)) != cache_key(with_file(big, response_format=schema))
    p = plugin(tmp_path)
    script = Script(REPLY)
    await collect(p.llm_stream(with_file(big), script))
    await collect(p.llm_stream(with_file(bytes(big)), script))
    assert len(script.calls) == 1
    assert b"\x89PNG" not in (tmp_path / "cache.sqlite").read_bytes()  # the key holds the digest only


async def test_ttl(tmp_path: Path) -> None:
    clock = Clock()
    p = plugin(tmp_path, clock, ttl=60)
    script = Script(REPLY)
    await collect(p.llm_stream(options(), script))
    clock.now += 59
    await collect(p.llm_stream(options(), script))
    assert len(script.calls) == 1
    clock.now += 2
    assert p.store.stats()["expired"] == 1
    await collect(p.llm_stream(options(), script))  # expired: a miss, stored again
    assert len(script.calls) == 2
    assert p.store.stats()["expired"] == 0


async def test_no_ttl_never_expires(tmp_path: Path) -> None:
    clock = Clock()
    p = plugin(tmp_path, clock, ttl=None)
    script = Script(REPLY)
    await collect(p.llm_stream(options(), script))
    clock.now += 10**9
    await collect(p.llm_stream(options(), script))
    assert len(script.calls) == 1


async def test_tool_calls_stream_is_cached(tmp_path: Path) -> None:
    p = plugin(tmp_path)
    reply = [*tool_chunks('{"a": 1}'), finish("tool-calls")]
    script = Script(reply)
    await collect(p.llm_stream(options(), script))
    assert await collect(p.llm_stream(options(), script)) == reply
    assert len(script.calls) == 1


@pytest.mark.parametrize(
    "reply",
    [
        [error_finish("SERVER")],
        [aborted_finish()],
        [*text_chunks("cut"), finish("length")],
        [*text_chunks("x"), finish("content-filter")],
    ],
)
async def test_incomplete_streams_are_not_cached(tmp_path: Path, reply: list[StreamChunk]) -> None:
    p = plugin(tmp_path)
    script = Script(reply)
    await collect(p.llm_stream(options(), script))
    await collect(p.llm_stream(options(), script))
    assert len(script.calls) == 2
    assert p.store.stats()["entries"] == 0


async def test_unknown_chunk_kinds_pass_through_and_are_not_cached(tmp_path: Path) -> None:
    p = plugin(tmp_path)
    odd = object()
    script = Script([odd, stop()])  # type: ignore[list-item]
    assert [c async for c in p.llm_stream(options(), script)] == [odd, stop()]
    assert p.store.stats()["entries"] == 0


async def test_broken_stream_is_not_cached(tmp_path: Path) -> None:
    p = plugin(tmp_path)
    script = Script(REPLY)
    stream = p.llm_stream(options(), script)
    async for _ in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]
    assert script.closed == 1
    assert p.store.stats()["entries"] == 0


async def test_database_fault_is_a_logged_miss(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    p = plugin(tmp_path, path=str(tmp_path / "dir"))
    (tmp_path / "dir").mkdir()  # the file's place is taken after start: every operation fails
    script = Script(REPLY)
    with caplog.at_level(logging.ERROR, logger="harness_middleware.cache"):
        assert await collect(p.llm_stream(options(), script)) == REPLY
    assert "treating it as a miss" in caplog.text
    assert "storing in" in caplog.text


async def test_corrupt_entry_is_a_logged_miss(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    p = plugin(tmp_path)
    script = Script(REPLY)
    await collect(p.llm_stream(options(), script))
    with sqlite3.connect(p.store.path) as conn:
        conn.execute("UPDATE cache SET chunks = ?", (b'[{"type": "nope"}]',))
    conn.close()
    with caplog.at_level(logging.ERROR, logger="harness_middleware.cache"):
        assert await collect(p.llm_stream(options(), script)) == REPLY
    assert len(script.calls) == 2
    assert "treating it as a miss" in caplog.text


async def test_clear_and_stats(tmp_path: Path) -> None:
    clock = Clock()
    p = plugin(tmp_path, clock, ttl=10)
    await collect(p.llm_stream(options("a"), Script(REPLY)))
    clock.now += 20
    await collect(p.llm_stream(options("b"), Script(REPLY)))
    stats = p.store.stats()
    assert (stats["entries"], stats["expired"], stats["hits"]) == (2, 1, 0)
    assert stats["bytes"] > 0
    assert stats["path"] == str(p.store.path)
    assert p.store.clear(expired_only=True) == 1
    assert p.store.clear() == 1
    assert p.store.stats()["entries"] == 0


def test_default_path() -> None:
    assert CachePlugin().store.path == default_cache_path()
    assert default_cache_path().name == "cache.sqlite"
