"""harness-trace on embedding calls: one line per call, input lengths unless asked, errors named."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from harness_core import Harness, LlmError, hookimpl
from harness_core.embedding import EmbeddingAdapter, Embeddings, EmbedOptions
from harness_core.hookspecs import RegisterEmbedder
from harness_llm_mock import MockConfig, MockPlugin
from harness_trace import TraceConfig, TracePlugin

pytestmark = pytest.mark.anyio


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_one_line_per_embedding_call_with_input_lengths(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    trace = TracePlugin(TraceConfig(path=str(path)))
    async with Harness([("trace", trace), ("mock", MockPlugin(MockConfig()))]) as harness:
        await harness.embed(["secret words", "more"], route="mock", dimensions=4)
        await harness.embed(["again"], route="mock")
    first, second = records(path)
    assert first["stream"] != second["stream"]
    assert (first["route"], first["model"]) == ("mock", None)
    assert isinstance(first["t_ms"], float)
    assert first["embed"] == {
        "inputs": [12, 4],
        "dimensions": 4,
        "vectors": 2,
        "model": "hash",
        "usage": {"input_tokens": 3, "output_tokens": None},
    }
    assert second["embed"] == {
        "inputs": [5],
        "dimensions": None,
        "vectors": 1,
        "model": "hash",
        "usage": {"input_tokens": 1, "output_tokens": None},
    }
    assert "secret" not in path.read_text()


async def test_include_content_writes_the_masked_inputs(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    key = "sk-" + "trace" * 5
    trace = TracePlugin(TraceConfig(path=str(path), include_content=True))
    plugins = [("trace", trace), ("mock", MockPlugin(MockConfig()))]
    async with Harness(plugins, redact=lambda text: text.replace(key, "[key]")) as harness:
        await harness.embed([f"my key {key}"], route="mock")
    [line] = records(path)
    assert line["embed"]["inputs"] == ["my key [key]"]  # type: ignore[index]
    assert key not in path.read_text()


class Failing(EmbeddingAdapter):
    """A provider whose every call raises ``error``, or hangs until cancelled when it is ``None``."""

    def __init__(self, error: BaseException | None) -> None:
        self.error = error

    async def embed(self, options: EmbedOptions) -> Embeddings:
        if self.error is None:
            await anyio.sleep_forever()
        assert self.error is not None  # sleep_forever returns only by cancellation
        raise self.error

    @hookimpl
    def register_embedder(self, register: RegisterEmbedder) -> None:
        register(["vec"], self)


async def test_failed_and_cancelled_calls_are_traced(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    trace = TracePlugin(TraceConfig(path=str(path)))
    error = LlmError("RATE_LIMITED", "slow down", status=429)
    async with Harness([("trace", trace), ("vec", Failing(error))]) as harness:
        with pytest.raises(LlmError):
            await harness.embed(["x"], route="vec", model="m")
    async with Harness([("trace", trace), ("vec", Failing(ValueError("bad vector")))]) as harness:
        with pytest.raises(LlmError, match="INTERNAL"):  # the boundary classifies it
            await harness.embed(["x"], route="vec")
    async with Harness([("trace", trace), ("vec", Failing(None))]) as harness:
        with anyio.move_on_after(0.05):
            await harness.embed(["x"], route="vec")
    limited, internal, cancelled = (line["embed"] for line in records(path))
    assert limited == {"inputs": [1], "dimensions": None, "error": {"code": "RATE_LIMITED", "message": "slow down"}}
    assert internal["error"]["code"] == "INTERNAL"  # type: ignore[index]
    assert "bad vector" in internal["error"]["message"]  # type: ignore[index]
    assert cancelled["error"] == {"code": "cancelled"}  # type: ignore[index]


async def test_an_exception_raised_above_the_boundary_is_named_by_its_class(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    trace = TracePlugin(TraceConfig(path=str(path)))

    async def call_next(options: EmbedOptions) -> Embeddings:
        raise KeyError("inner middleware bug")

    with pytest.raises(KeyError):
        await trace.llm_embed(EmbedOptions(inputs=["x"], route="vec"), call_next)
    [line] = records(path)
    assert line["embed"]["error"] == {"code": "KeyError", "message": "'inner middleware bug'"}  # type: ignore[index]


async def test_usage_without_tokens_is_written_as_null(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    trace = TracePlugin(TraceConfig(path=str(path)))

    async def call_next(options: EmbedOptions) -> Embeddings:
        return Embeddings.from_rows([[1.0]], model="m", usage=None)  # the provider reported no usage

    await trace.llm_embed(EmbedOptions(inputs=["x"], model="m"), call_next)
    [line] = records(path)
    assert line["embed"]["usage"] is None  # type: ignore[index]
