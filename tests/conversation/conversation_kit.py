"""Helpers of the conversation tests: plugins around the kit's FakeAdapter, a recording middleware."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from harness_core import GenerateOptions, LlmAdapter, StreamChunk, hookimpl
from harness_core.hookspecs import RegisterAdapter
from harness_core.testing.fake import FakeAdapter
from harness_core.types import BlockEnd, BlockStart, Finish, FinishReason, ToolCallBlock, ToolCallDelta

__all__ = ["AdapterPlugin", "FakeAdapter", "Recorder", "parallel_calls"]


class AdapterPlugin:
    """Registers ``adapter`` for ``routes``."""

    def __init__(self, adapter: LlmAdapter, routes: Sequence[str] = ("fake",)) -> None:
        self.adapter = adapter
        self.routes = list(routes)

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        register(self.routes, self.adapter)


class Recorder:
    """A middleware recording the options of every stream it sees."""

    def __init__(self) -> None:
        self.options: list[GenerateOptions] = []

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        self.options.append(options)
        async for chunk in call_next(options):
            yield chunk


def parallel_calls(*calls: tuple[str, str, str]) -> list[StreamChunk]:
    """A legal stream of several tool-call blocks ``(id, name, arguments)`` and a ``tool-calls`` finish."""
    chunks: list[StreamChunk] = []
    for index, (call_id, name, arguments) in enumerate(calls):
        chunks.append(BlockStart(index=index, block_type="tool-call", id=call_id, name=name))
        chunks.append(ToolCallDelta(index=index, id=call_id, arguments_delta=arguments))
        chunks.append(BlockEnd(index=index, block=ToolCallBlock(id=call_id, name=name, arguments=arguments)))
    chunks.append(Finish(FinishReason(kind="tool-calls", raw="tool_calls")))
    return chunks
