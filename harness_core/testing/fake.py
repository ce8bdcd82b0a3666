"""``FakeAdapter``: an :class:`~harness_core.adapter.LlmAdapter` that replays a script.

For testing the runtime and middleware without a provider: a script is a list of steps —
stream chunks (yielded as given, unchecked, so broken streams can be scripted too),
:class:`Delay`, :class:`Stall`, :class:`Raise` — and the adapter records what it was asked and
whether its generator's ``finally`` ran.

It behaves like a well-written adapter towards ``options.abort``: before every step, and while
waiting in a :class:`Delay` or :class:`Stall`, a fired signal closes the open blocks with what
they hold and ends the stream with ``finish{aborted}``. Task cancellation propagates.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

import anyio

from harness_core.abort import Aborted, abort_reason, race
from harness_core.adapter import LlmAdapter
from harness_core.assembler import BlockAssembler
from harness_core.errors import Failure, LlmError
from harness_core.types import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishKind,
    FinishReason,
    GenerateOptions,
    ModelInfo,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)

__all__ = [
    "Delay",
    "FakeAdapter",
    "Raise",
    "Script",
    "Stall",
    "Step",
    "text_reply",
    "tool_call_reply",
]


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds`` before the next step (abortable)."""

    seconds: float


@dataclass(frozen=True)
class Stall:
    """Wait until ``options.abort`` fires (then finish aborted), or forever without a signal."""


@dataclass(frozen=True)
class Raise:
    """Raise ``error`` at this step (an ``LlmError`` or any unexpected exception)."""

    error: BaseException


Step: TypeAlias = StreamChunk | Delay | Stall | Raise
"""One step of a script."""

Script: TypeAlias = Sequence[Step] | Callable[[GenerateOptions], Sequence[Step]]
"""A fixed list of steps, or a function of the options returning one."""


class FakeAdapter(LlmAdapter):
    """Replay scripted streams.

    Args:
        scripts: one script per call, in order; the last one repeats for further calls. A script
            is a list of :data:`Step` or a function ``options -> steps``.
        models: what :meth:`resolve_model` / :meth:`list_models` know; ``None`` accepts any
            model and cannot list them.

    Attributes:
        calls: the ``GenerateOptions`` of every ``stream`` call, in order.
        started: generators that began running.
        finalized: generators whose ``finally`` ran (equal to ``started`` when nothing leaked).
        cancelled: generators that saw task cancellation.
        closed: whether :meth:`aclose` was awaited.
    """

    def __init__(self, *scripts: Script, models: Sequence[ModelInfo] | None = None) -> None:
        if not scripts:
            raise ValueError("FakeAdapter needs at least one script")
        self._scripts = scripts
        self._models = list(models) if models is not None else None
        self.calls: list[GenerateOptions] = []
        self.started = 0
        self.finalized = 0
        self.cancelled = 0
        self.closed = False

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """Yield the steps of this call's script (see the module docstring)."""
        script = self._scripts[min(len(self.calls), len(self._scripts) - 1)]
        self.calls.append(options)
        steps = script(options) if callable(script) else script
        self.started += 1
        blocks = BlockAssembler(keep_ended=False)
        abort = options.abort
        finished = False
        try:
            for step in steps:
                if abort is not None and abort.fired and not finished:
                    break
                if isinstance(step, Raise):
                    raise step.error
                if isinstance(step, Delay | Stall):
                    waited = await race(abort, _waiter(step))
                    if isinstance(waited, Aborted) and not finished:
                        break
                    continue
                blocks.feed(step)
                finished = finished or isinstance(step, Finish)
                yield step
            else:
                return
            for chunk in blocks.terminal(Failure(code="ABORTED", message=abort_reason(abort), retryable=False)):
                yield chunk
        except anyio.get_cancelled_exc_class():
            self.cancelled += 1
            raise
        finally:
            self.finalized += 1

    def resolve_model(self, model: str) -> ModelInfo:
        """The configured :class:`ModelInfo` for ``model``; ``NOT_FOUND`` when unknown."""
        if self._models is None:
            return ModelInfo(model=model)
        for info in self._models:
            if info.model == model:
                return info
        raise LlmError("NOT_FOUND", f"FakeAdapter has no model {model!r}")

    async def list_models(self) -> list[ModelInfo]:
        """The configured models; ``UNSUPPORTED`` when none were given."""
        if self._models is None:
            return await super().list_models()
        return list(self._models)

    async def aclose(self) -> None:
        """Record that the runtime closed the adapter."""
        self.closed = True


def _waiter(step: Delay | Stall) -> Callable[[], Awaitable[None]]:
    async def wait() -> None:
        if isinstance(step, Delay):
            await anyio.sleep(step.seconds)
        else:
            await anyio.sleep_forever()

    return wait


def text_reply(
    *pieces: str,
    usage: TokenUsage | None = None,
    reason: FinishKind = "stop",
    raw: str | None = None,
    replay_state: object = None,
) -> list[StreamChunk]:
    """A legal one-text-block stream: block-start, one text-delta per piece, block-end, optional
    usage, finish. No pieces gives a stream without blocks."""
    chunks: list[StreamChunk] = []
    if pieces:
        chunks.append(BlockStart(index=0, block_type="text"))
        chunks.extend(TextDelta(index=0, text=piece) for piece in pieces)
        chunks.append(BlockEnd(index=0, block=TextBlock("".join(pieces))))
    if usage is not None:
        chunks.append(Usage(usage))
    chunks.append(Finish(FinishReason(kind=reason, raw=raw), replay_state=replay_state))
    return chunks


def tool_call_reply(
    call_id: str, name: str, *argument_pieces: str, usage: TokenUsage | None = None
) -> list[StreamChunk]:
    """A legal stream with one tool-call block (arguments ``"{}"`` when no pieces) and a
    ``tool-calls`` finish."""
    chunks: list[StreamChunk] = [BlockStart(index=0, block_type="tool-call", id=call_id, name=name)]
    chunks.extend(ToolCallDelta(index=0, id=call_id, arguments_delta=piece) for piece in argument_pieces)
    chunks.append(
        BlockEnd(index=0, block=ToolCallBlock(id=call_id, name=name, arguments="".join(argument_pieces) or "{}"))
    )
    if usage is not None:
        chunks.append(Usage(usage))
    chunks.append(Finish(FinishReason(kind="tool-calls", raw="tool_calls")))
    return chunks
