"""``--approve``: ask on the terminal before each tool call runs (``harness run``, ``harness chat``).

The question goes to stderr as one line, ``approve tool call NAME(ARGUMENTS)? [y/N] ``, with
the config's secrets masked and control characters made visible; the answer is one line read
from stdin, in a worker thread (the event loop keeps running). ``y`` or ``yes`` (any case) runs
the call; anything else, end of input or a stdin that is not a terminal declines it (the model
gets an ``is_error`` result saying so, :data:`harness_core.conversation.DECLINED`), so no tool
runs unasked when the prompt came through a pipe.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TextIO

import anyio

from harness_core.cli._common import Sink, isatty
from harness_core.cli._text import for_terminal
from harness_core.types import ToolCallBlock

__all__ = ["terminal_approval"]

YES = frozenset({"y", "yes"})


def terminal_approval(stdin: TextIO | None, err: Sink) -> Callable[[ToolCallBlock], Awaitable[bool]]:
    """The ``approve`` callback of a :class:`~harness_core.conversation.Conversation` asking
    on ``err`` and reading the answer from ``stdin`` (see the module docstring)."""

    async def approve(call: ToolCallBlock) -> bool:
        err.end_line()
        if not isatty(stdin):
            err.write(f"declined tool call {for_terminal(call.name)}: --approve needs a terminal on stdin\n")
            return False
        assert stdin is not None  # a terminal is an open stream
        err.write(f"approve tool call {for_terminal(call.name)}({for_terminal(call.arguments)})? [y/N] ")
        err.at_line_start = True  # the user's Enter ends the line
        answer = await anyio.to_thread.run_sync(stdin.readline, abandon_on_cancel=True)
        return answer.strip().lower() in YES

    return approve
