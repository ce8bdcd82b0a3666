"""In-process tests of the terminal renderer and of Ctrl-C before the stream starts."""

from __future__ import annotations

import io

import pytest

from harness_core import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
)
from harness_core.cli._common import Sink
from harness_core.cli._run import CYAN, DIM, RESET, Renderer, run_prompt

CHUNKS = [
    BlockStart(index=0, block_type="reasoning"),
    ReasoningDelta(index=0, text="hmm"),
    BlockEnd(index=0, block=ReasoningBlock("hmm")),
    BlockStart(index=1, block_type="text"),
    TextDelta(index=1, text="Let me call"),
    BlockEnd(index=1, block=TextBlock("Let me call")),
    BlockStart(index=2, block_type="tool-call", id="c1", name="echo"),
    ToolCallDelta(index=2, id="c1", arguments_delta='{"text":"x"}'),
    BlockEnd(index=2, block=ToolCallBlock(id="c1", name="echo", arguments='{"text":"x"}')),
    Finish(reason=FinishReason(kind="tool-calls")),
]


def render(tty: bool) -> tuple[str, str, int]:
    out, err = io.StringIO(), io.StringIO()
    renderer = Renderer(Sink(out), Sink(err), as_json=False, tty=tty, redact=str)
    for chunk in CHUNKS:
        renderer.feed(chunk)
    code = renderer.end()
    return out.getvalue(), err.getvalue(), code


def test_terminal_shows_reasoning_dimmed_and_tool_calls_inline() -> None:
    out, err, code = render(tty=True)
    assert code == 0
    assert out == f'{DIM}hmm{RESET}\nLet me call\n{CYAN}[tool call c1] echo({{"text":"x"}}){RESET}\n'
    assert err == "[finish: tool-calls]\n"


def test_pipe_gets_the_answer_only() -> None:
    out, err, code = render(tty=False)
    assert code == 0
    assert out == "Let me call\n"
    assert err == 'hmm\n[tool call c1] echo({"text":"x"})\n[finish: tool-calls]\n'


@pytest.mark.parametrize(
    ("reason", "code", "message"),
    [
        (FinishReason(kind="error"), 1, "error: unknown failure\n"),
        (FinishReason(kind="aborted"), 130, "aborted: aborted\n"),
        (FinishReason(kind="content-filter", raw="content_filter"), 0, "[finish: content-filter (content_filter)]\n"),
    ],
)
def test_exit_codes_follow_the_finish(reason: FinishReason, code: int, message: str) -> None:
    err = io.StringIO()
    renderer = Renderer(Sink(io.StringIO()), Sink(err), as_json=False, tty=False, redact=str)
    renderer.feed(Finish(reason=reason))
    assert renderer.end() == code
    assert err.getvalue() == message


def test_ctrl_c_while_reading_stdin_exits_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class Interrupted(io.StringIO):
        def read(self, size: int | None = -1) -> str:
            raise KeyboardInterrupt

    monkeypatch.setattr("sys.stdin", Interrupted())
    code = run_prompt(
        "-",
        as_json=False,
        provider=None,
        model=None,
        system=None,
        max_tokens=None,
        temperature=None,
        reasoning_effort=None,
        config=None,
    )
    assert code == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_sink_tracks_line_ends() -> None:
    stream = io.StringIO()
    sink = Sink(stream)
    sink.end_line()
    sink.write("")
    sink.write("a")
    sink.end_line()
    sink.end_line()
    assert stream.getvalue() == "a\n"
