"""Multi-turn conversations with the tool-call round trip: :class:`Conversation`.

A stream is one turn; a conversation carries the history from turn to turn: every assistant
message keeps the ``route``, ``source`` and ``replay_state`` it was produced with (SPEC §2,
§3.9), so provider state such as thinking signatures reaches the next request when, and only
when, the runtime allows it. Every step goes through ``harness.stream``, so every middleware
applies.

With tools, :meth:`Conversation.send` executes the tool calls of a ``tool-calls`` finish
(arguments parsed only now), runs parallel calls concurrently with results kept in call order,
sends the results back, and continues until the model stops or ``max_steps`` is reached.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from harness_core.abort import ABORTED, AbortSignal, race
from harness_core.assembler import BlockAssembler
from harness_core.errors import LlmError
from harness_core.tools import Tool
from harness_core.types import (
    Failure,
    FinishReason,
    GenerateOptions,
    Message,
    StreamChunk,
    TokenUsage,
    ToolCallBlock,
    ToolResultBlock,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_core.runtime import Harness

__all__ = ["Conversation", "ConversationState", "MaxStepsExceeded", "Reply"]

ChunkCallback = Callable[[StreamChunk], Awaitable[None] | None]
ToolResultCallback = Callable[[ToolCallBlock, ToolResultBlock], Awaitable[None] | None]


class MaxStepsExceeded(RuntimeError):
    """The model kept calling tools for more than ``max_steps`` generations in one send."""


class Reply(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of :meth:`Conversation.send`.

    ``message`` is the last assistant message (partial when aborted); ``finish`` its finish
    reason; ``usage`` the token usage summed over every step (``None`` fields where a step did
    not report them); ``steps`` the number of generations the send took.
    """

    message: Message
    finish: FinishReason
    usage: TokenUsage | None
    steps: int


class ConversationState(msgspec.Struct, kw_only=True):
    """The saved form of a conversation (JSON, version 1): settings and the whole history."""

    version: int = 1
    provider: str | None = None
    model: str | None = None
    system: str | None = None
    messages: list[Message] = msgspec.field(default_factory=list)


def _add_usage(total: TokenUsage | None, step: TokenUsage | None) -> TokenUsage | None:
    if step is None:
        return total
    if total is None:
        return step

    def add(a: int | None, b: int | None) -> int | None:
        return None if a is None or b is None else a + b

    return TokenUsage(
        input_tokens=add(total.input_tokens, step.input_tokens),
        output_tokens=add(total.output_tokens, step.output_tokens),
        cache_read_tokens=add(total.cache_read_tokens, step.cache_read_tokens),
        cache_write_tokens=add(total.cache_write_tokens, step.cache_write_tokens),
        reasoning_tokens=add(total.reasoning_tokens, step.reasoning_tokens),
    )


async def _maybe_await(value: Awaitable[None] | None) -> None:
    if inspect.isawaitable(value):
        await value


class Conversation:
    """A conversation with one harness: history, settings, tools.

    Args:
        harness: an entered :class:`~harness_core.runtime.Harness`.
        provider / model / system: the route, model and system prompt of every step
            (``None`` = the harness defaults).
        tools: the tools the model may call; empty = no tools offered.
        max_steps: the most generations one :meth:`send` may take (tool round trips).
        options: a template for every other :class:`GenerateOptions` field (max_tokens,
            temperature …); its ``messages``, ``tools``, ``provider``, ``model`` and ``system``
            are replaced.
    """

    def __init__(
        self,
        harness: Harness,
        *,
        provider: str | None = None,
        model: str | None = None,
        system: str | None = None,
        tools: Sequence[Tool] = (),
        max_steps: int = 8,
        options: GenerateOptions | None = None,
    ) -> None:
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.harness = harness
        self.provider = provider
        self.model = model
        self.system = system
        self.tools = list(tools)
        self.max_steps = max_steps
        self.options = options or GenerateOptions()
        self.messages: list[Message] = []

    def clear(self) -> None:
        """Forget the history (settings and tools stay)."""
        self.messages.clear()

    async def send(
        self,
        content: str | Message,
        *,
        abort: AbortSignal | None = None,
        on_chunk: ChunkCallback | None = None,
        on_tool_result: ToolResultCallback | None = None,
    ) -> Reply:
        """Send a user message and run generations (and tools) until the model answers.

        ``on_chunk`` sees every chunk of every step as it arrives; ``on_tool_result`` sees each
        executed call with its result. On ``finish{aborted}`` the partial reply is kept in the
        history (without incomplete tool calls) and returned. An abort while tools run records
        an error result for each call and returns an aborted reply.

        Raises:
            LlmError: a step finished with ``error``; the history is rolled back to before this
                send, so the same send can be retried.
            MaxStepsExceeded: the model still called tools after ``max_steps`` generations.
        """
        message = Message.user(content) if isinstance(content, str) else content
        checkpoint = len(self.messages)
        self.messages.append(message)
        total: TokenUsage | None = None
        try:
            for step in range(1, self.max_steps + 1):
                reply, total = await self._step(step, total, abort, on_chunk)
                if reply.finish.kind != "tool-calls" or not self.tools:
                    return reply
                if not await self._run_tools(reply.message.tool_calls, abort, on_tool_result):
                    aborted = FinishReason("aborted", failure=Failure("ABORTED", "aborted while tools ran"))
                    return Reply(message=reply.message, finish=aborted, usage=total, steps=step)
        except LlmError:
            del self.messages[checkpoint:]
            raise
        raise MaxStepsExceeded(f"the model still called tools after {self.max_steps} steps")

    async def _step(
        self, step: int, total: TokenUsage | None, abort: AbortSignal | None, on_chunk: ChunkCallback | None
    ) -> tuple[Reply, TokenUsage | None]:
        options = msgspec.structs.replace(
            self.options,
            provider=self.provider,
            model=self.model,
            system=self.system,
            messages=list(self.messages),
            tools=[t.spec for t in self.tools],
            abort=abort,
        )
        assembler = BlockAssembler()
        stream = self.harness.stream(options)
        async with stream as chunks:
            async for chunk in chunks:
                assembler.feed(chunk)
                if on_chunk is not None:
                    await _maybe_await(on_chunk(chunk))
        finish = assembler.finish
        if finish is None:  # pragma: no cover - the runtime guarantees a finish
            raise LlmError("PROTOCOL", "stream ended without finish")
        total = _add_usage(total, assembler.usage)
        if finish.kind == "error":
            raise LlmError.from_failure(finish.failure or Failure("INTERNAL", "error finish without failure"))
        message = assembler.message(route=stream.route, source=stream.source)
        if finish.kind == "aborted":
            kept = [b for b in message.content if not isinstance(b, ToolCallBlock)]
            message = msgspec.structs.replace(message, content=kept)
        if message.content:
            self.messages.append(message)
        return Reply(message=message, finish=finish, usage=total, steps=step), total

    async def _run_tools(
        self, calls: list[ToolCallBlock], abort: AbortSignal | None, on_tool_result: ToolResultCallback | None
    ) -> bool:
        """Run ``calls`` concurrently and append their results in call order. False when aborted."""
        by_name = {t.name: t for t in self.tools}
        results: list[ToolResultBlock | None] = [None] * len(calls)

        async def run_one(position: int, call: ToolCallBlock) -> None:
            found = by_name.get(call.name)
            if found is None:
                known = ", ".join(sorted(by_name))
                results[position] = ToolResultBlock(
                    call.id, f"unknown tool {call.name!r}; available: {known}", is_error=True
                )
            else:
                results[position] = await found.run(call)

        async def run_all() -> None:
            async with anyio.create_task_group() as tg:
                for position, call in enumerate(calls):
                    tg.start_soon(run_one, position, call)

        outcome = await race(abort, run_all)
        for call, result in zip(calls, results, strict=True):
            if outcome is ABORTED and result is None:
                result = ToolResultBlock(call.id, "the tool run was aborted", is_error=True)
            assert result is not None
            self.messages.append(Message(role="tool", content=[result]))
            if on_tool_result is not None:
                await _maybe_await(on_tool_result(call, result))
        return outcome is not ABORTED

    # ------------------------------------------------------------------ persistence

    def to_state(self) -> ConversationState:
        """The conversation as a :class:`ConversationState` (replay state preserved)."""
        return ConversationState(
            provider=self.provider, model=self.model, system=self.system, messages=list(self.messages)
        )

    def save(self, path: str | Path) -> None:
        """Write the conversation to ``path`` as JSON."""
        Path(path).write_bytes(msgspec.json.format(msgspec.json.encode(self.to_state())))

    @classmethod
    def load(cls, path: str | Path, harness: Harness, **kwargs: Any) -> Conversation:
        """Read a conversation saved by :meth:`save`. ``kwargs`` as for the constructor
        (``tools``, ``max_steps`` …); saved settings apply unless given.

        Raises:
            LlmError: ``CONFIG`` when the file is not a saved conversation (naming the path).
        """
        try:
            state = msgspec.json.decode(Path(path).read_bytes(), type=ConversationState)
        except (OSError, msgspec.DecodeError) as exc:
            raise LlmError("CONFIG", f"cannot load conversation from {path}: {exc}") from exc
        if state.version != 1:
            raise LlmError("CONFIG", f"{path}: unsupported conversation version {state.version}")
        for key in ("provider", "model", "system"):
            kwargs.setdefault(key, getattr(state, key))
        conversation = cls(harness, **kwargs)
        conversation.messages = list(state.messages)
        return conversation
