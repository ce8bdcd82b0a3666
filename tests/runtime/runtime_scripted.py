"""Helpers of the runtime tests: the kit's FakeAdapter with a close-order log, plugins, middleware."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

from harness_core import GenerateOptions, LlmAdapter, ModelInfo, StreamChunk, hookimpl
from harness_core.testing.fake import FakeAdapter, Raise, Stall, Step, text_reply

__all__ = ["AdapterPlugin", "PassThrough", "Raise", "ScriptedAdapter", "Stall", "reply"]


def reply(text: str = "hello", *pieces: str) -> list[StreamChunk]:
    """A legal one-text-block stream of ``text`` (sent as ``pieces`` when given), finish ``stop``."""
    return text_reply(*(pieces or (text,)), raw="stop")


class ScriptedAdapter(FakeAdapter):
    """:class:`FakeAdapter` playing each of ``retries`` once, then ``script`` for every further call.

    Also appends ``finally:<name>`` to ``log`` when a stream's generator is finalized (so tests can
    pin the close order against middleware) and counts :meth:`aclose` calls in ``close_count``.
    """

    def __init__(
        self,
        script: Sequence[Step] = (),
        *,
        log: list[str] | None = None,
        name: str = "adapter",
        retries: Sequence[Sequence[Step]] = (),
        models: Sequence[ModelInfo] | None = None,
    ) -> None:
        super().__init__(*retries, script, models=models)
        self.log = log if log is not None else []
        self.name = name
        self.close_count = 0

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        try:
            async with contextlib.aclosing(super().stream(options)) as inner:  # type: ignore[type-var]
                async for chunk in inner:
                    yield chunk
        finally:
            self.log.append(f"finally:{self.name}")

    async def aclose(self) -> None:
        self.close_count += 1
        await super().aclose()


class AdapterPlugin:
    """Registers ``adapter`` for ``routes``."""

    def __init__(self, adapter: LlmAdapter, routes: Sequence[str] = ("fake",)) -> None:
        self.adapter = adapter
        self.routes = list(routes)

    @hookimpl
    def register_adapter(self, register: Any) -> None:
        register(self.routes, self.adapter)


class PassThrough:
    """A pass-through middleware logging ``enter:<name>`` and, in its ``finally``, ``finally:<name>``."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        self.log.append(f"enter:{self.name}")
        try:
            async for chunk in call_next(options):
                yield chunk
        finally:
            self.log.append(f"finally:{self.name}")
