"""In-process tests of the `harness chat` REPL: commands, errors, Ctrl-C at every moment."""

from __future__ import annotations

import base64
import builtins
import concurrent.futures
import errno
import io
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from anyio.from_thread import start_blocking_portal

from harness_core import (
    BlockStart,
    GenerateOptions,
    Harness,
    LlmAdapter,
    LlmError,
    Message,
    ModelInfo,
    StreamChunk,
    TextDelta,
    hookimpl,
)
from harness_core.cli._chat import HELP, PROMPT, Repl, _Turn
from harness_core.cli._common import Sink
from harness_core.conversation import Conversation
from harness_core.hookspecs import RegisterAdapter
from harness_core.plugininfo import Defaults
from harness_core.testing.fake import FakeAdapter, Raise, text_reply, tool_call_reply
from harness_core.tools import Tool
from harness_llm_mock import MockConfig, MockPlugin

SECRET = "sk-chat-secret-123"


class AdapterPlugin:
    def __init__(self, adapter: LlmAdapter, route: str) -> None:
        self.adapter = adapter
        self.route = route

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        register([self.route], self.adapter)


class Stubborn(LlmAdapter):
    """Streams a little, then ignores the abort signal: only cancellation stops it.

    It plays the user pressing Ctrl-C twice by sending SIGINT to the main thread (where the REPL
    waits for the reply)."""

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        assert options.abort is not None
        yield BlockStart(index=0, block_type="text")
        yield TextDelta(index=0, text="partial ")
        main = threading.main_thread().ident
        assert main is not None
        signal.pthread_kill(main, signal.SIGINT)  # first Ctrl-C: fires the abort signal ...
        await options.abort.wait()
        signal.pthread_kill(main, signal.SIGINT)  # ... which this adapter ignores: second Ctrl-C
        await anyio.sleep_forever()


class Session:
    def __init__(self, repl: Repl, out: io.StringIO, err: io.StringIO, prompts: list[str]) -> None:
        self.repl = repl
        self.out = out
        self.err = err
        self.prompts = prompts

    def run(self) -> int:
        return self.repl.run()


@contextmanager
def session(
    monkeypatch: pytest.MonkeyPatch,
    inputs: Sequence[str | BaseException | Callable[[], str]],
    *,
    fake: LlmAdapter | None = None,
    defaults: Defaults | None = Defaults(route="mock", model="echo"),  # noqa: B008
    interactive: bool = False,
    tools: Sequence[Tool] = (),
    max_steps: int = 8,
) -> Iterator[Session]:
    pending = list(inputs)
    prompts: list[str] = []

    def fake_input(prompt: str = "") -> str:
        prompts.append(prompt)
        if not pending:
            raise EOFError
        item = pending.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item() if callable(item) else item

    class FakeStdin:
        """Non-interactive input: lines read from stdin (recorded as an empty prompt)."""

        def readline(self) -> str:
            try:
                return fake_input() + "\n"
            except EOFError:
                return ""

    monkeypatch.setattr(builtins, "input", fake_input)
    monkeypatch.setattr(sys, "stdin", FakeStdin())
    plugins: list[tuple[str, object]] = [("mock", MockPlugin(MockConfig()))]
    if fake is not None:
        plugins.append(("fake", AdapterPlugin(fake, "fake")))
    harness = Harness(plugins, defaults=defaults)
    out, err = io.StringIO(), io.StringIO()
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(harness):
        conversation = Conversation(harness, tools=tools, max_steps=max_steps)
        repl = Repl(
            portal,
            conversation,
            Sink(out),
            Sink(err),
            redact=lambda text: text.replace(SECRET, "[redacted]"),
            interactive=interactive,
            tty=False,
        )
        yield Session(repl, out, err, prompts)


def test_two_turns_then_end_of_input(monkeypatch: pytest.MonkeyPatch) -> None:
    with session(monkeypatch, ["hello", "  ", "world"]) as s:
        assert s.run() == 0
        assert [m.role for m in s.repl.conversation.messages] == ["user", "assistant", "user", "assistant"]
    assert s.out.getvalue() == "hello\nworld\n"
    assert s.err.getvalue() == ""
    assert s.prompts == ["", "", "", ""]


def test_interactive_session_greets_prompts_and_ends_the_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "readline", raising=False)
    with session(monkeypatch, ["hi"], interactive=True) as s:
        assert s.run() == 0
    assert "readline" in sys.modules
    assert s.prompts == [PROMPT, PROMPT]
    assert s.err.getvalue() == "harness chat: route mock, model echo; /help for commands, Ctrl-D to leave\n"
    assert s.out.getvalue() == "hi\n\n"


def test_ctrl_c_at_the_prompt_drops_the_line(monkeypatch: pytest.MonkeyPatch) -> None:
    with session(monkeypatch, [KeyboardInterrupt(), "still here"]) as s:
        assert s.run() == 0
    assert s.out.getvalue() == "\nstill here\n"


def test_a_real_sigint_at_the_prompt_drops_the_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def press_ctrl_c() -> str:
        signal.raise_signal(signal.SIGINT)  # the REPL's handler raises KeyboardInterrupt here
        return "never returned"

    with session(monkeypatch, [press_ctrl_c, "still here"]) as s:
        assert s.run() == 0
    assert s.out.getvalue() == "\nstill here\n"


def test_ctrl_c_while_a_command_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with session(monkeypatch, ["/save x.json", "after"]) as s:

        def interrupted(path: Any, **kwargs: Any) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(s.repl.conversation, "save", interrupted)
        assert s.run() == 0
    assert s.err.getvalue() == "interrupted\n"
    assert s.out.getvalue() == "after\n"


def test_the_sigint_handler_is_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    before = signal.getsignal(signal.SIGINT)
    with session(monkeypatch, []) as s:
        assert s.run() == 0
    assert signal.getsignal(signal.SIGINT) is before


def test_a_second_ctrl_c_discards_a_stubborn_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    with session(monkeypatch, ["/route fake any", "go", "/route mock", "next"], fake=Stubborn()) as s:
        assert s.run() == 0
        messages = s.repl.conversation.messages
    assert s.out.getvalue() == "partial \nnext\n"
    assert "interrupted: the reply was discarded" in s.err.getvalue()
    assert len(messages) == 2  # only "next" and its answer: the stubborn turn was rolled back
    assert messages[0] == Message.user("next")


def test_turn_applies_a_cancel_requested_before_the_future_is_known() -> None:
    turn = _Turn()
    turn.interrupt()
    assert turn.abort.fired
    assert turn.abort.reason == "interrupted by Ctrl-C"
    turn.interrupt()
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    turn.started(future)
    assert future.cancelled()
    other = _Turn()
    running: concurrent.futures.Future[Any] = concurrent.futures.Future()
    other.started(running)
    other.interrupt()
    other.interrupt()
    assert running.cancelled()


def test_commands(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeAdapter(text_reply("fake answer"))
    saved = tmp_path / "chat.json"
    lines = [
        "/help",
        "/bogus",
        "/route",
        "/route nowhere",
        "/route fake nope-model",
        "/route fake model-a",
        "/model",
        "/model model-b",
        "/system be brief",
        "question",
        "/system",
        "/save",
        f"/save {tmp_path / 'missing' / 'dir' / 'x.json'}",
        f"/save {saved}",
        "/clear",
        "/load",
        f"/load {tmp_path / 'absent.json'}",
        f"/load {saved}",
        "/route mock",
        "/model nope",
        "/exit",
        "never read",
    ]
    with session(monkeypatch, lines, fake=fake) as s:
        assert s.run() == 0
        conversation = s.repl.conversation
        assert len(conversation.messages) == 2
        assert (conversation.route, conversation.model, conversation.system) == ("mock", "echo", None)
    err = s.err.getvalue()
    assert HELP in err
    assert "unknown command /bogus; /help lists the commands" in err
    assert "route mock, model echo" in err
    assert "error: no route 'nowhere'; routes: mock, fake" in err
    assert "route fake, model model-a" in err
    assert "route fake, model model-b" in err
    assert "system prompt: be brief" in err
    assert "system prompt removed" in err
    assert "usage: /save PATH" in err
    assert "error: cannot save to " in err
    assert f"saved 2 messages to {saved}" in err
    assert "history cleared" in err
    assert "usage: /load PATH" in err
    assert "error: CONFIG: cannot load a conversation from " in err
    assert f"loaded 2 messages from {saved}; route fake, model model-b" in err
    assert "error: NOT_FOUND: the mock has no model 'nope'" in err
    assert s.out.getvalue() == "fake answer\n"
    [call] = fake.calls
    assert (call.route, call.model, call.system) == ("fake", "model-b", "be brief")
    assert s.prompts.count("") == len(lines) - 1  # "never read" was never read


def test_route_rejects_an_unknown_model(monkeypatch: pytest.MonkeyPatch) -> None:
    with session(monkeypatch, ["/route mock gpt-9"]) as s:
        assert s.run() == 0
        assert s.repl.conversation.route is None
    assert "error: NOT_FOUND: the mock has no model 'gpt-9'" in s.err.getvalue()


def test_the_provider_command_is_the_deprecated_route_command(monkeypatch: pytest.MonkeyPatch) -> None:
    with session(monkeypatch, ["/provider", "/provider mock echo"], defaults=None) as s:
        assert s.run() == 0
        assert s.repl.conversation.route == "mock"
    note = "warning: /provider is deprecated: use /route\n"
    assert s.err.getvalue() == f"{note}route mock, model echo\n{note}route mock, model echo\n"


def test_where_without_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    with session(monkeypatch, ["/route"], defaults=None) as s:
        assert s.run() == 0
    # no defaults: the only route served is the default, with its adapter's default model
    assert s.err.getvalue() == "route mock, model echo\n"


def test_errors_are_shown_and_the_repl_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeAdapter(
        [Raise(LlmError("AUTH", f"bad key {SECRET}"))],
        text_reply("cut", reason="length", raw="max_tokens"),
        tool_call_reply("c1", "echo", '{"text":"x"}'),
    )

    def echo(text: str) -> str:
        return text

    with session(
        monkeypatch, ["/route fake m", "one", "two", "three"], fake=fake, tools=[Tool(echo)], max_steps=1
    ) as s:
        assert s.run() == 0
        roles = [m.role for m in s.repl.conversation.messages]
    err = s.err.getvalue()
    assert "error: AUTH from route 'fake' (fake): bad key [redacted] (the message was not added to the history)" in err
    assert SECRET not in err
    assert "[finish: length (max_tokens)]" in err
    assert "error: the model still called tools after 1 generation steps (max_steps=1)" in err
    assert "[tool error c1] echo: not executed" in err
    assert s.out.getvalue() == "cut\n"
    assert roles == ["user", "assistant", "user", "assistant", "tool"]


def test_an_error_without_a_route_names_no_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two routes and no defaults: no route is chosen (with one route, that one would be)."""
    with session(monkeypatch, ["hello"], fake=FakeAdapter(text_reply("unused")), defaults=None) as s:
        assert s.run() == 0
    assert s.err.getvalue().startswith(
        "error: NO_ADAPTER: no route given (options.route; -r/--route on the command line)"
    )
    assert s.err.getvalue().endswith("(the message was not added to the history)\n")


def test_a_failed_stdout_aborts_the_reply_and_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chat stops reading once stdout fails: the reply being streamed is aborted, nothing more is sent."""

    class Full(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    with session(monkeypatch, ["one two three", "never sent"]) as s:
        s.repl.out = Sink(Full())
        assert s.run() == 1
        [user, reply] = s.repl.conversation.messages
    assert user == Message.user("one two three")
    assert reply.text == "one "  # aborted after its first delta: the partial reply is kept
    assert s.prompts == [""]  # "never sent" was never read
    assert s.err.getvalue() == "error: cannot write output: No space left on device\n"


def test_attach_sends_files_with_the_next_message_and_save_keeps_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    photo = tmp_path / "photo one.png"
    photo.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    blob = tmp_path / "blob"
    blob.write_bytes(b"\x00\x01")
    saved = tmp_path / "conv.json"
    lines = [
        "/attach",
        f"/attach {photo}",
        f"/attach {blob} application/octet-stream",
        "/attach https://example.com/doc.pdf",
        f"/attach {tmp_path / 'missing.png'}",
        "/attach https://example.com/noext",
        "/attach",
        "look",
        "/attach",
        "again",
        f"/save {saved}",
    ]
    with session(monkeypatch, lines) as s:
        assert s.run() == 0
        conversation = s.repl.conversation
    errors = s.err.getvalue()
    assert "attachments for the next message: none" in errors
    assert "attached image/png 'photo one.png' (16 bytes) to the next message" in errors
    assert "attached application/octet-stream 'blob' (2 bytes) to the next message" in errors
    assert "attached application/pdf (url https://example.com/doc.pdf)" in errors
    assert "error: /attach: " + str(tmp_path / "missing.png") + ": cannot read" in errors
    assert "error: /attach: https://example.com/noext: cannot tell the media type of a URL" in errors
    assert (
        "attachments for the next message: image/png 'photo one.png' (16 bytes),"
        " application/octet-stream 'blob' (2 bytes), application/pdf (url https://example.com/doc.pdf)"
    ) in errors
    # the mock acknowledges the files; the second message goes without them
    assert "look [image/png 'photo one.png' (16 bytes)] [application/octet-stream 'blob' (2 bytes)]" in s.out.getvalue()
    first, second = conversation.messages[0], conversation.messages[2]
    assert [f.filename for f in first.files] == ["photo one.png", "blob", None]
    assert second.files == []
    state = msgspec.json.decode(saved.read_bytes())
    assert state["messages"][0]["content"][1]["data"] == base64.b64encode(photo.read_bytes()).decode()
    restored = Conversation.load(saved, conversation.harness)
    assert restored.messages[0].files == first.files


def test_attach_parses_its_argument_like_a_shell(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    photo = tmp_path / "my img.png"
    photo.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    lines = [
        f'/attach "{photo}" IMAGE/PNG',
        f"/attach '{photo}'",
        f"/attach {photo} notatype",
        f'/attach "{photo}',
        "/attach a b c",
        "/attach -",
        "/attach ''",
    ]
    with session(monkeypatch, lines) as s:
        assert s.run() == 0
    assert s.err.getvalue().splitlines() == [
        "attached image/png 'my img.png' (16 bytes) to the next message",
        "attached image/png 'my img.png' (16 bytes) to the next message",
        'error: /attach takes PATH|URL [TYPE]; quote a path holding spaces: /attach "my file.png"',
        'error: /attach: No closing quotation (quote a path holding spaces: /attach "my file.png")',
        'error: /attach takes PATH|URL [TYPE]; quote a path holding spaces: /attach "my file.png"',
        "error: /attach: - (standard input) cannot be attached here",
        "error: /attach: an empty path: give a file, a URL, or - for standard input",
    ]
    with session(monkeypatch, [f"/attach '{photo}' notatype"]) as s:
        assert s.run() == 0
    assert s.err.getvalue() == (
        "error: /attach: 'notatype' is not a media type (type/subtype, e.g. image/png or application/pdf)\n"
    )


def test_clear_drops_pending_attachments(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    note = tmp_path / "n.txt"
    note.write_text("hi", encoding="utf-8")
    with session(monkeypatch, [f"/attach {note}", "/clear", "/attach"]) as s:
        assert s.run() == 0
    assert s.err.getvalue().endswith("history cleared\nattachments for the next message: none\n")


def test_sigterm_at_the_prompt_leaves_with_128_plus_the_signal(monkeypatch: pytest.MonkeyPatch) -> None:
    def hang_up() -> str:
        s.repl._on_signal(signal.SIGHUP, None)  # what the handler does when no reply streams
        raise AssertionError("unreachable")  # pragma: no cover - the handler raises

    with session(monkeypatch, ["hello", hang_up, "never read"]) as s:
        assert s.run() == 128 + signal.SIGHUP
    assert s.out.getvalue() == "hello\n"
    assert s.err.getvalue() == "hung up (SIGHUP)\n"


def test_sigterm_while_a_command_runs_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    def terminated(repl: Repl, argument: str) -> None:
        repl._on_signal(signal.SIGTERM, None)

    monkeypatch.setitem(Repl._commands, "/term", terminated)
    with session(monkeypatch, ["/term", "never sent"]) as s:
        assert s.run() == 128 + signal.SIGTERM
    assert s.out.getvalue() == ""
    assert s.err.getvalue() == "terminated by SIGTERM\n"


def test_an_empty_interactive_line_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    with session(monkeypatch, ["", "hi"], interactive=True) as s:
        assert s.run() == 0
    assert s.out.getvalue().endswith("hi\n\n")


def test_switching_route_keeps_a_model_the_route_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    models = [ModelInfo(model="echo"), ModelInfo(model="model-a")]
    fake = FakeAdapter(text_reply("fake answer"), models=models)
    lines = ["/route fake model-a", "/route mock", "/route fake", "question"]
    with session(monkeypatch, lines, fake=fake) as s:
        assert s.run() == 0
    err = s.err.getvalue().splitlines()
    assert err[:3] == [
        "route fake, model model-a",
        "route mock, model echo (defaults.model)",  # the mock does not serve model-a
        "route fake, model echo (kept)",
    ]
    [call] = fake.calls
    assert (call.route, call.model) == ("fake", "echo")  # never sent without a model


def test_switching_route_says_when_no_model_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeAdapter(text_reply("fake answer"), models=[ModelInfo(model="model-a")])
    lines = ["/route fake", "/route fake model-a", "/route mock"]
    with session(monkeypatch, lines, fake=fake, defaults=Defaults(route="mock", model=None)) as s:
        assert s.run() == 0
        assert s.repl.conversation.model is None
    assert s.err.getvalue().splitlines() == [
        "route fake, model (the route default)",
        "route fake, model model-a",
        "route mock, model echo (route mock does not serve model model-a: its default is used)",
    ]


def test_the_reply_wait_wakes_to_run_pending_signal_handlers() -> None:
    """A second Ctrl-C arriving while the first one's handler ran once hung CI: the wait must
    return now and then (with a timeout) until the reply is done."""
    from harness_core.cli._chat import SIGNAL_POLL, wait_handling_signals

    class SetOnThirdWait:
        def __init__(self) -> None:
            self.timeouts: list[float | None] = []

        def wait(self, timeout: float | None = None) -> bool:
            self.timeouts.append(timeout)
            return len(self.timeouts) == 3

    done = SetOnThirdWait()
    wait_handling_signals(done)  # type: ignore[arg-type]
    assert done.timeouts == [SIGNAL_POLL] * 3


def test_model_takes_a_route_model_id_until_a_route_is_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a configuration's reading, ``/model`` reads ``route/model`` over the routes the
    harness serves; ``/route`` chooses the route, after which an id is the model's as it is."""
    fake = FakeAdapter(text_reply("one"), text_reply("two"))
    lines = ["/model fake/model-a", "first", "/model elsewhere/x", "/route mock", "/model fake/model-b", "/route fake"]
    lines += ["/model mock/echo", "second"]
    with session(monkeypatch, lines, fake=fake) as s:
        assert s.run() == 0
        assert (s.repl.conversation.route, s.repl.conversation.model) == ("fake", "mock/echo")
    assert s.err.getvalue().splitlines() == [
        "route fake, model model-a (switched from route mock: fake/model-a names route fake)",
        "route fake, model elsewhere/x",  # no route named elsewhere: a model id of the route in use
        "route mock, model echo (defaults.model)",
        "error: NOT_FOUND: the mock has no model 'fake/model-b'; it serves 'echo'",
        "route mock, model echo",
        "route fake, model echo (kept)",
        "route fake, model mock/echo",  # the route was chosen: the id goes to it as it is
    ]
    assert [(call.route, call.model) for call in fake.calls] == [("fake", "model-a"), ("fake", "mock/echo")]
