"""LlmAdapter's optional methods have safe defaults."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from harness_core import Finish, FinishReason, GenerateOptions, LlmAdapter, LlmError, ModelInfo, StreamChunk

pytestmark = pytest.mark.anyio


class Minimal(LlmAdapter):
    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        yield Finish(FinishReason("stop"))


async def test_defaults() -> None:
    adapter = Minimal()
    assert adapter.resolve_model("m") == ModelInfo(model="m")
    with pytest.raises(LlmError, match="Minimal cannot list models") as info:
        await adapter.list_models()
    assert info.value.code == "UNSUPPORTED"
    with pytest.raises(LlmError, match="Minimal cannot count tokens") as info:
        await adapter.count_tokens(GenerateOptions())
    assert info.value.code == "UNSUPPORTED"
    await adapter.aclose()
    assert [chunk async for chunk in adapter.stream(GenerateOptions())] == [Finish(FinishReason("stop"))]


def test_the_stream_method_is_abstract() -> None:
    with pytest.raises(TypeError, match="abstract"):
        LlmAdapter()  # type: ignore[abstract]
