"""The terminal renderer of ``harness run`` and ``harness chat``: chunks to stdout/stderr, the exit code.

Text goes to stdout as it arrives; reasoning is dimmed on a terminal and goes to stderr when stdout
is not a terminal (so a pipe receives the answer only), tool calls and results likewise; the finish
line (usage, served-by) goes to stderr. Everything written passes through the config's redaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from harness_core.abort import AbortSignal
from harness_core.cli._common import EXIT_ABORTED, EXIT_ERROR, EXIT_OK, EXIT_USAGE, Sink, describe_error, exit_code_for
from harness_core.cli._options import first_code_block
from harness_core.cli._text import for_terminal
from harness_core.errors import LlmError
from harness_core.secret import ChunkScrubber
from harness_core.types import (
    BlockEnd,
    Finish,
    FinishReason,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
)

if TYPE_CHECKING:
    from harness_core.cli._hints import Hints

__all__ = ["CYAN", "DIM", "RESET", "Renderer"]

DIM = "\x1b[2m"
CYAN = "\x1b[36m"
RESET = "\x1b[0m"


class Renderer:
    """Writes chunks to the terminal (or JSON lines with ``as_json``) and decides the exit code.

    ``out``/``err`` are the stdout/stderr sinks, ``tty`` whether stdout is a terminal,
    ``redact`` scrubs secrets from messages (a :class:`~harness_core.config.Redactor` also masks
    secrets split across deltas), ``abort`` (the stream's signal) is fired when stdout
    fails (the reader went away): the stream ends early and its connection is closed.
    :attr:`route` / :attr:`source` (the route served and the plugins.yaml key owning it) name the
    place in error lines. With ``expect_json`` (``--schema``) the reply text is kept and a reply
    that is not JSON ends with an ``INVALID_OUTPUT`` error line (exit 1).
    """

    def __init__(
        self,
        out: Sink,
        err: Sink,
        *,
        as_json: bool,
        tty: bool,
        redact: Callable[[str], str],
        abort: AbortSignal | None = None,
        expect_json: bool = False,
    ) -> None:
        self.out = out
        self.expect_json = expect_json
        self._text: list[str] = []
        self.err = err
        self.as_json = as_json
        self.tty = tty
        self.redact = redact
        self._scrubber = ChunkScrubber(redact)
        self.abort = abort
        self.finish: FinishReason | None = None
        self.usage: TokenUsage | None = None
        self.route: str | None = None
        self.source: str | None = None
        self.served_by: str | None = None
        """``route[/model]`` that served the reply when it is not the requested one (fallback)."""
        self.hold_text = False
        """Keep the reply's text until :meth:`end` (``--no-stream``, ``--extract``)."""
        self.extract = False
        """Print only the first fenced code block of the held text (``--extract``)."""
        self._held: list[str] = []
        self.hints: Hints | None = None

    def _check_output(self) -> None:
        """Abort the stream once stdout has failed: nobody reads what it would produce."""
        failure = self.out.failure
        if failure is not None and self.abort is not None:
            self.abort.fire(f"stdout failed: {failure.strerror or failure}")

    @property
    def _extras(self) -> Sink:
        """Where reasoning and tool calls go: stdout on a terminal, else stderr."""
        return self.out if self.tty else self.err

    def feed(self, chunk: StreamChunk) -> None:
        """Show one chunk (secrets masked even when split across deltas: :class:`ChunkScrubber`)."""
        for shown in self._scrubber.feed(chunk):
            self._show(shown)

    def _show(self, chunk: StreamChunk) -> None:
        if isinstance(chunk, Finish):
            self.finish = chunk.reason
        elif isinstance(chunk, Usage):
            self.usage = chunk.usage
        elif self.expect_json and isinstance(chunk, TextDelta):
            self._text.append(chunk.text)
        if self.as_json:
            self.out.write(msgspec.json.encode(chunk).decode() + "\n")
        elif isinstance(chunk, TextDelta) and self.hold_text:
            self._held.append(chunk.text)
        elif isinstance(chunk, TextDelta):
            self.out.write(self._shown(chunk.text))
        elif isinstance(chunk, ReasoningDelta):
            self._extras.write(f"{DIM}{self._shown(chunk.text)}{RESET}" if self.tty else chunk.text)
        elif isinstance(chunk, BlockEnd) and isinstance(chunk.block, ReasoningBlock):
            self._extras.end_line()
        elif isinstance(chunk, BlockEnd) and isinstance(chunk.block, ToolCallBlock):
            block = chunk.block
            self._extra_line(f"[tool call {block.id}] {block.name}({block.arguments})")
        self._check_output()

    def _shown(self, text: str) -> str:
        """Model text as written: control characters made visible on a terminal, exact elsewhere."""
        return for_terminal(text) if self.tty else text

    def _extra_line(self, line: str) -> None:
        """A tool call or result line (cyan on a terminal, where the model's text is neutralised)."""
        self._extras.end_line()
        self._extras.write(f"{CYAN}{for_terminal(line)}{RESET}\n" if self.tty else f"{line}\n")

    def tool_result(self, call: ToolCallBlock, result: ToolResultBlock) -> None:
        """Show the result of an executed tool call (a JSON line with ``as_json``)."""
        if self.as_json:
            self.out.write(msgspec.json.encode(result).decode() + "\n")
        else:
            label = "tool error" if result.is_error else "tool result"
            self._extra_line(f"[{label} {result.tool_call_id}] {call.name}: {result.content}")
        self._check_output()

    def note(self, text: str) -> None:
        """A message on stderr, on its own line, secrets scrubbed (control characters made
        visible on a terminal: provider error messages are quoted in notes)."""
        self.out.end_line()
        self.err.end_line()
        text = self.redact(text)
        self.err.write((for_terminal(text) if self.err.isatty() else text) + "\n")

    def release_text(self) -> None:
        """Print the held text (its first fenced code block with ``extract``), once."""
        text, self._held = "".join(self._held), []
        if text:
            self.out.write(first_code_block(text) if self.extract else text)
            self.out.end_line()

    def report(self, error: LlmError) -> int:
        """Report ``error`` on stderr as the command's failure and return the exit code: the
        command line's mistake first when :attr:`hints` explains it (exit 2), else the error
        described with its route, then a hint line when there is one (exit 2), else
        :func:`exit_code_for` its code."""
        described = describe_error(error, route=self.route, source=self.source)
        cause = self.hints.cause(error) if self.hints is not None else None
        if cause is not None:  # what to do first, then what the provider said
            self.note(f"error: {cause}; the provider's answer: {described}")
            return EXIT_USAGE
        self.note(f"error: {described}")
        hint = self.hints.for_error(error) if self.hints is not None else None
        if hint is not None:
            self.note(f"  {hint}")
            return EXIT_USAGE
        return exit_code_for(error.code)

    def end(self) -> int:
        """Print the held text, the summary, and return the exit code for the finish seen."""
        self.release_text()
        finish = self.finish
        if finish is None:
            self.note("error: the stream ended without a finish chunk")
            return EXIT_ERROR
        failure = finish.failure
        if finish.kind == "error":
            if failure is None:
                self.note("error: unknown failure")
                return EXIT_ERROR
            return self.report(LlmError.from_failure(failure))
        if finish.kind == "aborted":
            self.note(f"aborted: {failure.message if failure is not None else 'aborted'}")
            return EXIT_ABORTED
        if self.expect_json and finish.kind == "stop":
            try:
                msgspec.json.decode("".join(self._text))
            except msgspec.DecodeError as exc:
                error = LlmError("INVALID_OUTPUT", f"the reply is not JSON: {exc}")
                self.note(f"error: {describe_error(error, route=self.route, source=self.source)}")
                return EXIT_ERROR
        if not self.as_json:
            raw = f" ({finish.raw})" if finish.raw else ""
            usage = self.usage
            tokens = f"; tokens: {usage.input_tokens} in, {usage.output_tokens} out" if usage is not None else ""
            served = f"; served by {self.served_by}" if self.served_by is not None else ""
            self.note(f"[finish: {finish.kind}{raw}{tokens}{served}]")
        return EXIT_OK
