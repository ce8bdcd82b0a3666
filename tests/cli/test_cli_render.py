"""In-process tests of the terminal renderer and of Ctrl-C before the stream starts."""

from __future__ import annotations

import errno
import io
import os
import signal
from pathlib import Path

import anyio
import pytest

from harness_core import (
    AbortSignal,
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    GenerateOptions,
    LlmError,
    Message,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
)
from harness_core.cli._common import Sink, describe_error, exit_code_for, isatty, output_failure_code, report_error
from harness_core.cli._run import CYAN, DIM, RESET, Renderer, _generate, run_prompt
from harness_core.loader import LoadedConfig
from harness_core.plugininfo import LoadedPlugin

CHUNKS: list[StreamChunk] = [
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
        route=None,
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


@pytest.mark.anyio
async def test_second_interrupt_cancels_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """In process (the subprocess test covers the same path end to end): Ctrl-C twice."""
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "loader" / "fakeplugins"))
    from harness_fake_plugins import StubbornPlugin  # type: ignore[import-not-found]

    loaded = LoadedConfig(path=None, plugins=[LoadedPlugin(key="stubborn", name="stubborn", instance=StubbornPlugin())])
    abort = AbortSignal()
    written = anyio.Event()

    class Out(io.StringIO):
        def write(self, text: str) -> int:
            written.set()
            return super().write(text)

    out, err = Out(), io.StringIO()
    renderer = Renderer(Sink(out), Sink(err), as_json=False, tty=False, redact=str)
    options = GenerateOptions(route="stubborn", model="any", messages=[Message.user("x")], abort=abort)
    codes: list[int] = []

    async def generate() -> None:
        codes.append(await _generate(loaded, options, abort, renderer))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(generate)
            await written.wait()  # "partial " is out: the stream is running, the watcher installed
            signal.raise_signal(signal.SIGINT)
            await abort.wait()
            signal.raise_signal(signal.SIGINT)
    assert codes == [130]
    assert err.getvalue() == "aborting… (press Ctrl-C again to quit at once)\ninterrupted\n"


@pytest.mark.anyio
async def test_generate_returns_the_finish_exit_code() -> None:
    from harness_llm_mock import MockConfig, MockPlugin

    loaded = LoadedConfig(path=None, plugins=[LoadedPlugin(key="mock", name="mock", instance=MockPlugin(MockConfig()))])
    out, err = io.StringIO(), io.StringIO()
    renderer = Renderer(Sink(out), Sink(err), as_json=False, tty=False, redact=str)
    options = GenerateOptions(route="mock", model="echo", messages=[Message.user("in process")])
    assert await _generate(loaded, options, AbortSignal(), renderer) == 0
    assert out.getvalue() == "in process\n"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("prompt", "max_steps", "code", "stdout", "stderr"),
    [
        ("echo in process", 8, 0, "The echo tool returned: echo in process\n", "[finish: stop (stop); tokens: "),
        ("echo in process", 1, 1, "", "error: the model still called tools after 1 generation steps"),
    ],
)
async def test_generate_with_tools_in_process(prompt: str, max_steps: int, code: int, stdout: str, stderr: str) -> None:
    """In process (the subprocess tests cover the same paths end to end): the tool round trip."""
    from harness_llm_mock import MockConfig, MockPlugin

    loaded = LoadedConfig(path=None, plugins=[LoadedPlugin(key="mock", name="mock", instance=MockPlugin(MockConfig()))])
    out, err = io.StringIO(), io.StringIO()
    renderer = Renderer(Sink(out), Sink(err), as_json=False, tty=False, redact=str)
    options = GenerateOptions(route="mock", model="echo", messages=[Message.user(prompt)])
    assert await _generate(loaded, options, AbortSignal(), renderer, ("echo",), max_steps) == code
    assert out.getvalue() == stdout
    assert stderr in err.getvalue()
    assert '[tool call call_mock_1] echo({"text":"echo in process"})' in err.getvalue()


def test_tool_results_on_a_terminal_and_as_json() -> None:
    call = ToolCallBlock(id="c1", name="echo", arguments="{}")
    out, err = io.StringIO(), io.StringIO()
    Renderer(Sink(out), Sink(err), as_json=False, tty=True, redact=str).tool_result(call, ToolResultBlock("c1", "ok"))
    assert out.getvalue() == f"{CYAN}[tool result c1] echo: ok{RESET}\n"
    json_out = io.StringIO()
    renderer = Renderer(Sink(json_out), Sink(err), as_json=True, tty=False, redact=str)
    renderer.tool_result(call, ToolResultBlock("c1", "bad", is_error=True))
    assert json_out.getvalue() == '{"type":"tool-result","tool_call_id":"c1","content":"bad","is_error":true}\n'
    assert err.getvalue() == ""


# ------------------------------------------------------------------ output failures, error lines


class FailingStream(io.StringIO):
    """A stream whose writes fail with ``error`` (an in-memory stream: no file descriptor)."""

    def __init__(self, error: OSError) -> None:
        super().__init__()
        self.error = error

    def write(self, text: str) -> int:
        raise self.error


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("error", "code", "stderr"),
    [
        (BrokenPipeError(errno.EPIPE, "Broken pipe"), 141, ""),
        (OSError(errno.ENOSPC, "No space left on device"), 1, "error: cannot write output: No space left on device\n"),
    ],
)
async def test_failed_stdout_aborts_the_stream(error: OSError, code: int, stderr: str) -> None:
    from harness_llm_mock import MockConfig, MockPlugin

    loaded = LoadedConfig(path=None, plugins=[LoadedPlugin(key="mock", name="mock", instance=MockPlugin(MockConfig()))])
    abort = AbortSignal()
    err = io.StringIO()
    renderer = Renderer(Sink(FailingStream(error)), Sink(err), as_json=False, tty=False, redact=str, abort=abort)
    options = GenerateOptions(route="mock", model="echo", messages=[Message.user("a b c")], abort=abort)
    assert await _generate(loaded, options, abort, renderer) == code
    assert abort.reason == f"stdout failed: {error.strerror}"
    assert renderer.finish is not None
    assert renderer.finish.kind == "aborted"
    assert err.getvalue() == stderr


def test_a_stream_without_finish_is_an_error() -> None:
    err = io.StringIO()
    renderer = Renderer(Sink(io.StringIO()), Sink(err), as_json=False, tty=False, redact=str)
    assert renderer.end() == 1
    assert err.getvalue() == "error: the stream ended without a finish chunk\n"


def test_sink_failures() -> None:
    closed = Sink(None, name="stdout")
    assert closed.failure is not None
    assert closed.failure.strerror == "stdout is closed"
    assert not closed.isatty()
    closed.write("dropped")
    failing = Sink(FailingStream(OSError(errno.EIO, "I/O error")))
    failing.write("x")
    assert isinstance(failing.failure, OSError)
    assert not failing.isatty()
    failing.write("dropped too")
    gone = io.StringIO()
    gone.close()
    assert not Sink(gone).isatty()
    assert not isatty(None)
    assert output_failure_code(Sink(io.StringIO()), Sink(io.StringIO())) == 0


def test_sink_redacts_every_write() -> None:
    stream = io.StringIO()
    sink = Sink(stream, redact=lambda text: text.replace("sk-1", "***"))
    sink.write("key sk-1\n")
    assert stream.getvalue() == "key ***\n"
    assert sink.at_line_start


def test_a_failed_write_points_the_descriptor_at_devnull(tmp_path: Path) -> None:
    """The text left in the buffer goes nowhere: the interpreter's final flush cannot fail again."""
    with open(tmp_path / "out.txt", "w") as file:

        class Full(io.TextIOWrapper):
            fails = True

            def flush(self) -> None:
                if self.fails:
                    self.fails = False
                    raise OSError(errno.ENOSPC, "No space left on device")
                super().flush()

        stream = Full(open(os.dup(file.fileno()), "wb"))  # noqa: SIM115 - closed below
        sink = Sink(stream)
        sink.write("lost")
        assert sink.failure is not None
        stream.flush()  # now goes to os.devnull
        stream.close()
    assert (tmp_path / "out.txt").read_text() == ""


def test_describe_error() -> None:
    error = LlmError("SERVER", "502 Bad Gateway", status=502, retry_after=0.5, request_id="r1")
    assert describe_error(error, route="local", source="openai:local") == (
        "SERVER (HTTP 502) from route 'local' (openai:local): 502 Bad Gateway (retry after 0.5s; request id r1)"
    )
    assert describe_error(LlmError("NO_ADAPTER", "no adapter"), route="x") == "NO_ADAPTER: no adapter"
    assert exit_code_for("CONFIG") == exit_code_for("UNSUPPORTED") == exit_code_for("NO_ADAPTER") == 2
    assert exit_code_for("AUTH") == 1


def test_report_error_unwraps_groups() -> None:
    lines: list[str] = []
    group = ExceptionGroup("outer", [LlmError("AUTH", "bad key"), ExceptionGroup("inner", [ValueError("boom")])])
    assert report_error(lines.append, group, suffix="!") == 2
    assert lines == [
        "error: AUTH: bad key!",
        "error: ValueError: boom (a plugin failed; run with -v for the traceback)!",
    ]
    lines.clear()
    with pytest.raises(LlmError) as raised:
        raise LlmError("TIMEOUT", "slow")
    assert report_error(lines.append, raised.value, verbose=1) == 1
    assert lines[0] == "error: TIMEOUT: slow"
    assert lines[1].startswith("Traceback (most recent call last):")
