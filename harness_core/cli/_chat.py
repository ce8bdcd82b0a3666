"""``harness chat``: a REPL over one :class:`~harness_core.conversation.Conversation`.

The harness runs on an event loop in a background thread (an anyio blocking portal) for the whole
session, so connections are reused from turn to turn; the main thread reads lines with
:func:`input` (line editing and history through :mod:`readline` on a terminal) and waits for
each reply. Replies stream to stdout as they arrive (tool calls and results as in ``harness
run``). Lines starting with ``/`` are commands (:data:`HELP`).

Ctrl-C while a reply streams fires that reply's :class:`~harness_core.abort.AbortSignal`: the
stream ends with ``finish{aborted}``, the partial reply stays in the history and the prompt
returns. A second Ctrl-C cancels the reply (it is discarded). Ctrl-C at the prompt drops the line
being typed. End of input (Ctrl-D) or ``/quit`` leaves with exit code 0.

A failed reply is reported as in ``harness run`` (one ``error: …`` line naming the route and
plugin, exception groups unwrapped, the traceback with ``--verbose``) and the REPL goes on. All
output passes through the config's secret redaction. When stdout fails the reply being streamed
is aborted and the REPL leaves: quietly with exit 141 when the reader closed the pipe, else with
``error: cannot write output: …`` and exit 1. A config problem or a harness that cannot start is
exit 2 (or 1 for a failure that is no usage or config error).
"""

from __future__ import annotations

import concurrent.futures
import shlex
import signal
import sys
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Final

from anyio.from_thread import BlockingPortal, start_blocking_portal

from harness_core.abort import AbortSignal
from harness_core.attach import AttachError, load_attachment
from harness_core.cli._approve import terminal_approval
from harness_core.cli._common import (
    ABORT_SIGNALS,
    EXIT_OK,
    EXIT_USAGE,
    Sink,
    isatty,
    load_for_start,
    output_failure_code,
    report_error,
    resolve_flags,
)
from harness_core.cli._hints import typo_hint
from harness_core.cli._promptlog import CONVERSATION_KEY, attach_prompt_log
from harness_core.cli._render import Renderer
from harness_core.cli._text import UNDECODABLE_WARNING, clean_argument
from harness_core.conversation import Conversation, MaxStepsExceeded, Reply
from harness_core.errors import LlmError
from harness_core.routing import default_model, mistyped_route, resolve_target, route_suggestion
from harness_core.runtime import Harness
from harness_core.types import FileBlock, GenerateOptions, Message

__all__ = ["HELP", "Repl", "run_chat"]

PROMPT: Final = "you> "

HELP: Final = """\
commands:
  /route [ROUTE [MODEL]]     show the route and model, or switch route (keeps the model when the route serves it)
  /model [ID]                show the route and model, or set the model (route/model or an alias also sets the route,
                             unless a route was chosen with -r or /route)
  /system [TEXT]             set the system prompt (no text: remove it)
  /attach [PATH|URL [TYPE]]  attach a file (media type from its content) or URL to the next message; no argument: list
  /save PATH                 save the conversation as JSON (replay state included)
  /load PATH                 load a saved conversation (its route, model and system prompt too)
  /clear                     forget the history (and attachments not sent yet)
  /help                      this help
  /quit                      leave (so does Ctrl-D)
Ctrl-C aborts the reply being streamed (a second Ctrl-C discards it) or drops the line being typed."""


def run_chat(
    *,
    route: str | None,
    model: str | None,
    system: str | None,
    max_tokens: int | None,
    temperature: float | None,
    reasoning_effort: str | None,
    tools: Sequence[str],
    max_steps: int,
    config: str | None,
    verbose: int = 0,
    approve: bool = False,
) -> int:
    """Run the ``harness chat`` REPL until end of input or ``/quit``; returns the exit code
    (0; 1 or 141 when stdout fails; 2 for a configuration problem or an unknown tool).
    ``verbose`` shows tracebacks. ``tools`` are names or globs (tool sources such as MCP
    servers start when the REPL does); ``approve`` asks on the terminal before each call
    (:mod:`harness_core.cli._approve`); each call is shown with its arguments as it arrives."""
    out, err = Sink(sys.stdout, name="stdout"), Sink(sys.stderr, name="stderr")
    if out.failure is not None:  # stdout is closed (`>&-`): nowhere to put a reply
        return output_failure_code(out, err)
    if sys.stdin is None:  # stdin is closed (`<&-`): the input ends before it starts
        return EXIT_OK
    loaded = load_for_start(config, err)
    if loaded is None:
        return EXIT_USAGE
    out.redact = loaded.redact
    logged = attach_prompt_log(loaded, enabled=True) is not None  # every turn in the prompt log
    try:
        loaded.require_complete()  # the default prompt log, built only now, may have failed to start
    except LlmError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_USAGE
    harness = Harness.from_loaded(loaded)
    route_flag = route
    target = resolve_flags(loaded, route, model)
    route, model = target
    template = GenerateOptions(
        route=route,
        model=model,
        system=system,
        max_tokens=max_tokens,
        temperature=temperature,
        reasoning_effort=reasoning_effort,
        metadata={CONVERSATION_KEY: uuid.uuid4().hex} if logged else {},  # one conversation per session
    )
    with start_blocking_portal() as portal:
        try:
            with portal.wrap_async_context_manager(harness):
                conversation = Conversation(
                    harness,
                    tools=portal.call(harness.select_tools, tuple(tools)),
                    max_steps=max_steps,
                    options=template,
                    approve=terminal_approval(sys.stdin, err) if approve else None,
                )
                repl = Repl(
                    portal,
                    conversation,
                    out,
                    err,
                    redact=loaded.redactor,
                    interactive=isatty(sys.stdin),
                    tty=out.isatty(),
                    verbose=verbose,
                    resolve=loaded.resolve_target,
                    mistyped=loaded.mistyped_route,
                    route_chosen=route_flag is not None,
                )
                return repl.run()
        except Exception as exc:  # the harness could not start (or stop), or an unknown tool was named
            out.end_line()
            return report_error(_line_writer(err), exc, verbose=verbose)


def _line_writer(sink: Sink) -> Callable[[str], None]:
    """``write(text)``: ``text`` on a line of its own on ``sink``."""

    def write(text: str) -> None:
        sink.end_line()
        sink.write(text + "\n")

    return write


class _Terminated(Exception):
    """Raised by the signal handler when SIGTERM/SIGHUP arrives while no reply is streaming."""


SIGNAL_POLL: Final = 0.1
"""Seconds between the main thread's checks for pending signal handlers while a reply streams."""


def wait_handling_signals(done: threading.Event, poll: float = SIGNAL_POLL) -> None:
    """Wait in the main thread until ``done`` is set, waking every ``poll`` seconds.

    A signal that arrives while the handler of the previous one runs (a second Ctrl-C sent as the
    first one's abort lands) is only marked pending: CPython runs it at the next bytecode, and a
    lock wait without a timeout would block until yet another signal came (seen as a hang).
    Waking now and then runs it at once.
    """
    while not done.wait(poll):
        pass


class _Turn:
    """One reply being streamed: its abort signal and the future of its task.

    The first Ctrl-C fires the signal; a later one cancels the task (also when it arrives before
    the task's future is known: the cancellation is then applied by :meth:`started`).
    """

    def __init__(self) -> None:
        self.abort = AbortSignal()
        self.future: concurrent.futures.Future[Reply] | None = None
        self.cancel_requested = False

    def interrupt(self, reason: str = "interrupted by Ctrl-C") -> None:
        if not self.abort.fired:
            self.abort.fire(reason)
            return
        self.cancel_requested = True
        if self.future is not None:
            self.future.cancel()

    def started(self, future: concurrent.futures.Future[Reply]) -> None:
        self.future = future
        if self.cancel_requested:
            future.cancel()


class Repl:
    """The read-eval-print loop of ``harness chat`` (see the module docstring).

    Args:
        portal: the portal whose event loop runs the (entered) harness.
        conversation: the conversation to continue; replaced by ``/load``.
        out / err: stdout and stderr sinks.
        redact: scrubs secrets from error messages.
        interactive: stdin is a terminal: show a prompt and a greeting, use :mod:`readline`.
        tty: stdout is a terminal (reasoning dimmed, tool lines on stdout; else on stderr).
        verbose: show the traceback of a failed reply.
        resolve: ``(route, model)`` of a route (``None``: not chosen) and a model id, for
            ``/model`` (:meth:`LoadedConfig.resolve_target
            <harness_core.loader.LoadedConfig.resolve_target>`: aliases, ``route/model``); by
            default :func:`harness_core.routing.resolve_target` without aliases, over the routes
            the harness serves.
        mistyped: what a model id naming a mistyped route is (``route 'mokc' is not served (did
            you mean 'mock/echo'?)``, :meth:`LoadedConfig.mistyped_route
            <harness_core.loader.LoadedConfig.mistyped_route>`), said after the error of a
            ``/model`` or a message it explains; by default
            :func:`harness_core.routing.mistyped_route` over the routes the harness serves.
        route_chosen: the route was chosen explicitly (``-r``); ``/route`` also chooses it. While
            it is, ``/model`` takes a model id as it is (the provider's, which may hold a ``/``).
    """

    def __init__(
        self,
        portal: BlockingPortal,
        conversation: Conversation,
        out: Sink,
        err: Sink,
        *,
        redact: Callable[[str], str],
        interactive: bool,
        tty: bool,
        verbose: int = 0,
        resolve: Callable[[str | None, str | None], tuple[str | None, str | None]] | None = None,
        mistyped: Callable[[str | None, str | None], str | None] | None = None,
        route_chosen: bool = False,
    ) -> None:
        self.portal = portal
        self.conversation = conversation
        self.out = out
        self.err = err
        self.redact = redact
        self.interactive = interactive
        self.tty = tty
        self.verbose = verbose
        self.resolve = resolve if resolve is not None else self._resolve_served
        self.mistyped = mistyped if mistyped is not None else self._mistyped_served
        self.route_chosen = route_chosen
        """Whether the route was chosen explicitly (``-r``, ``/route``): ``/model`` then keeps it."""
        self._turn: _Turn | None = None
        self.terminated: int | None = None
        self._warned_undecodable = False
        """The SIGTERM/SIGHUP received, if any: the REPL leaves after the current reply."""
        self.attachments: list[FileBlock] = []
        """Files attached with ``/attach``, sent with the next message (kept until one is sent)."""

    # ------------------------------------------------------------------ the loop

    def run(self) -> int:
        """Read and handle lines until end of input or ``/quit`` (or until stdout fails); returns
        0 (or the code of :func:`~harness_core.cli._common.output_failure_code`).

        Installs its own SIGINT handler for the duration (restored on return). SIGTERM and SIGHUP
        abort the reply being streamed as Ctrl-C does (its middleware cleanup runs), then leave:
        the code is 128 + the signal."""
        previous = {signum: signal.signal(signum, self._on_signal) for signum in ABORT_SIGNALS}
        reconfigure = getattr(sys.stdin, "reconfigure", None)
        if reconfigure is not None:  # undecodable bytes arrive as surrogates, replaced line by line
            reconfigure(errors="surrogateescape")
        try:
            if self.interactive:
                import readline  # noqa: F401 - line editing and history for input()

                self.note(f"harness chat: {self.where()}; /help for commands, Ctrl-D to leave")
            self._loop()
            if self.terminated is not None:
                self.out.end_line()
                self.note(ABORT_SIGNALS[signal.Signals(self.terminated)])
                return 128 + self.terminated
            return output_failure_code(self.out, self.err)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _loop(self) -> None:
        while self.out.failure is None and self.terminated is None:
            try:
                line = self._read_line()
            except EOFError:
                if self.interactive:
                    self.out.write("\n")
                break
            except KeyboardInterrupt:  # Ctrl-C at the prompt: drop the line
                self.out.write("\n")
                continue
            except _Terminated:
                break
            try:
                if not self.handle(line):
                    break
            except KeyboardInterrupt:  # Ctrl-C while a command ran (no reply streaming)
                self.note("interrupted")
            except _Terminated:
                break

    def _read_line(self) -> str:
        """The next input line, without its newline; raises ``EOFError`` at the end of input.

        On a terminal :func:`input` shows the prompt (with :mod:`readline` editing); otherwise
        stdin is read directly (:func:`input` would flush stdout first, failing on a full disk
        before anything was written).
        """
        line = input(PROMPT) if self.interactive else sys.stdin.readline()
        if not line and not self.interactive:
            raise EOFError
        line, replaced = clean_argument(line.removesuffix("\n"))
        if replaced and not self._warned_undecodable:
            self._warned_undecodable = True
            self.note(UNDECODABLE_WARNING)
        return line

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """SIGINT: abort the reply (a second one cancels it), else drop the line. SIGTERM/SIGHUP:
        the same abort, and the loop ends once the reply has (:attr:`terminated`)."""
        if signum != signal.SIGINT:
            self.terminated = signum
        turn = self._turn
        if turn is None:
            raise KeyboardInterrupt if signum == signal.SIGINT else _Terminated
        turn.interrupt(ABORT_SIGNALS[signal.Signals(signum)])

    def handle(self, line: str) -> bool:
        """Handle one input line (a command or a message); ``False`` means leave."""
        text = line.strip()
        if not text:
            return True
        if not text.startswith("/"):
            self.send(text)
            return True
        command, _, argument = text.partition(" ")
        argument = argument.strip()
        if command in ("/quit", "/exit"):
            return False
        handler = self._commands.get(command)
        if handler is None:
            self.note(f"unknown command {command}; /help lists the commands")
        else:
            handler(self, argument)
        return True

    def note(self, text: str) -> None:
        """A message on stderr, on its own line, secrets scrubbed."""
        self.out.end_line()
        self.err.end_line()
        self.err.write(self.redact(text) + "\n")

    # ------------------------------------------------------------------ sending

    def send(self, text: str) -> None:
        """Send ``text`` (with the pending attachments) and stream the reply; errors are shown,
        never raised. The attachments are dropped once a reply was received."""
        turn = self._turn = _Turn()
        renderer = Renderer(self.out, self.err, as_json=False, tty=self.tty, redact=self.redact, abort=turn.abort)
        finished = threading.Event()
        try:
            future = self.portal.start_task_soon(self._send, text, turn.abort, renderer, finished)
            turn.started(future)
            wait_handling_signals(finished)  # also after a cancellation: the send has rolled its history back
            reply = future.result()
            self.attachments = []
        except concurrent.futures.CancelledError:
            self.note("interrupted: the reply was discarded")
            return
        except MaxStepsExceeded as exc:
            self.note(f"error: {exc}")
            return
        except Exception as exc:  # an error finish (LlmError), or a plugin that raised
            route, source = self._place()
            suffix = " (the message was not added to the history)"
            report_error(self.note, exc, route=route, source=source, verbose=self.verbose, suffix=suffix)
            model = self.conversation.model
            typo = typo_hint(exc, f"model {model!r}", self.mistyped(self.conversation.route, model))
            if typo is not None:  # the model id (-m, a loaded conversation's) names a mistyped route
                self.note(f"  {typo}")
            return
        finally:
            self._turn = None
        self.out.end_line()
        if self.out.failure is not None:  # stdout failed: the reply was aborted; run() leaves
            return
        finish = reply.finish
        if finish.kind == "aborted":
            self.note("[aborted: the partial reply is kept]")
        elif finish.kind != "stop":
            self.note(f"[finish: {finish.kind}{f' ({finish.raw})' if finish.raw else ''}]")

    async def _send(self, text: str, abort: AbortSignal, renderer: Renderer, finished: threading.Event) -> Reply:
        try:
            content = Message.user(text, *self.attachments) if self.attachments else text
            return await self.conversation.send(
                content, abort=abort, on_chunk=renderer.feed, on_tool_result=renderer.tool_result
            )
        finally:
            finished.set()

    # ------------------------------------------------------------------ commands

    def _target(self) -> tuple[str | None, str | None]:
        """The route and model the next message goes to, by the runtime's own rule
        (:meth:`~harness_core.runtime.Harness.apply_defaults`)."""
        conversation = self.conversation
        options = GenerateOptions(route=conversation.route, model=conversation.model)
        target = conversation.harness.apply_defaults(options)
        return target.route, target.model

    def where(self) -> str:
        """The route and model the next message goes to, e.g. ``route mock, model echo``."""
        route, model = self._target()
        return f"route {route or '(none)'}, model {model or '(the route default)'}"

    def _place(self) -> tuple[str | None, str | None]:
        """The route the last message went to and the plugins.yaml key owning it (if any)."""
        route, _ = self._target()
        if route is None:
            return None, None
        return route, self.portal.call(self.conversation.harness.routes).get(route)

    def _provider(self, argument: str) -> None:
        """``/provider``: the deprecated old name of ``/route`` (a one-line warning first)."""
        self.note("warning: /provider is deprecated: use /route")
        self._route(argument)

    def _route(self, argument: str) -> None:
        if not argument:
            self.note(self.where())
            return
        route, _, model = argument.partition(" ")
        model = model.strip()
        routes = self.portal.call(self.conversation.harness.routes)
        if route not in routes:
            hint = route_suggestion(route, routes)
            self.note(f"error: no route {route!r}{hint}; routes: {', '.join(routes) or 'none'}")
            return
        if model and not self._model_ok(route, model):
            return
        why = ""
        if not model:
            kept, why = self._model_for(route)
        self.conversation.route = route
        self.conversation.model = model or kept
        self.route_chosen = True
        self.note(self.where() + why)

    def _model_for(self, route: str) -> tuple[str | None, str]:
        """The model to keep when ``/route ROUTE`` names no model, and why (for the
        confirmation line): the model in use when ``route`` serves it, else ``defaults.model``
        when ``route`` serves that, else the route's own default (``None``)."""
        defaults = self.conversation.harness.defaults
        # the model chosen or configured (not an adapter's own default, which is the route's business)
        current = self.conversation.model or default_model(defaults, self.conversation.route)
        for candidate, why in ((current, "kept"), (defaults.model, "defaults.model")):
            if candidate is not None and self._serves(route, candidate):
                return candidate, f" ({why})"
        if current is None:
            return None, ""
        return None, f" (route {route} does not serve model {current}: its default is used)"

    def _serves(self, route: str, model: str) -> bool:
        """Whether ``route`` resolves ``model`` (quietly: a failure only means no)."""
        try:
            self.portal.call(self.conversation.harness.resolve_model, route, model)
        except LlmError:
            return False
        return True

    def _resolve_served(self, route: str | None, model: str | None) -> tuple[str | None, str | None]:
        """:func:`~harness_core.routing.resolve_target` over the routes the harness serves (no
        aliases): the reading of ``/model`` when the REPL was given no configuration's."""
        return resolve_target({}, route, model, self.portal.call(self.conversation.harness.routes))

    def _mistyped_served(self, route: str | None, model: str | None) -> str | None:
        """:func:`~harness_core.routing.mistyped_route` over the routes the harness serves (no
        aliases): what the REPL says of a mistyped route when given no configuration's."""
        return mistyped_route({}, route, model, self.portal.call(self.conversation.harness.routes))

    def _model(self, argument: str) -> None:
        """``/model [ID]``: show the target, or set the model; ``ID`` is read as ``-m`` reads
        it (:attr:`resolve`): an alias, or, while no route was chosen explicitly, a
        ``route/model`` id, switches the route too, and the line says so."""
        if not argument:
            self.note(self.where())
            return
        conversation = self.conversation
        asked = conversation.route if self.route_chosen else None
        resolved, model = self.resolve(asked, argument)
        route, model = (resolved if resolved is not None else conversation.route), (model or argument)
        if not self._model_ok(route, model, f"/model {argument!r}", self.mistyped(asked, argument)):
            self.note(self.where())
            return
        before, _ = self._target()
        conversation.route, conversation.model = route, model
        now, _ = self._target()
        switched = f" (switched from route {before or '(none)'}: {argument} names route {now})" if now != before else ""
        self.note(self.where() + switched)

    def _model_ok(self, route: str | None, model: str, what: str = "", typo: str | None = None) -> bool:
        """Whether ``route`` resolves ``model``; else the error is shown, then ``what`` (the
        command as typed) with ``typo`` when the model id names a mistyped route
        (:func:`~harness_core.cli._hints.typo_hint`)."""
        try:
            self.portal.call(self.conversation.harness.resolve_model, route, model)
        except LlmError as exc:
            self.note(f"error: {exc}")
            hint = typo_hint(exc, what, typo)
            if hint is not None:
                self.note(f"  {hint}")
            return False
        return True

    def _system(self, argument: str) -> None:
        self.conversation.system = argument or None
        self.note(f"system prompt: {argument}" if argument else "system prompt removed")

    def _save(self, argument: str) -> None:
        if not argument:
            self.note("usage: /save PATH")
            return
        try:
            self.conversation.save(argument, redact=self.redact)
        except OSError as exc:
            self.note(f"error: cannot save to {argument}: {exc.strerror or exc}")
            return
        self.note(f"saved {len(self.conversation.messages)} messages to {argument}")

    def _load(self, argument: str) -> None:
        if not argument:
            self.note("usage: /load PATH")
            return
        current = self.conversation
        try:
            loaded = Conversation.load(
                argument,
                current.harness,
                tools=current.tools,
                max_steps=current.max_steps,
                options=current.options,
                approve=current.approve,
            )
        except LlmError as exc:
            self.note(f"error: {exc}")
            return
        self.conversation = loaded
        self.note(f"loaded {len(loaded.messages)} messages from {argument}; {self.where()}")

    def _attach(self, argument: str) -> None:
        if not argument:
            listed = ", ".join(block.describe() for block in self.attachments) or "none"
            self.note(f"attachments for the next message: {listed}")
            return
        try:
            words = [argument] if Path(argument).expanduser().exists() else shlex.split(argument)
        except ValueError as exc:  # an unclosed quote
            self.note(f'error: /attach: {exc} (quote a path holding spaces: /attach "my file.png")')
            return
        if len(words) > 2:
            self.note('error: /attach takes PATH|URL [TYPE]; quote a path holding spaces: /attach "my file.png"')
            return
        spec, media_type = words[0], (words[1] if len(words) == 2 else None)
        try:
            block = load_attachment(spec, media_type)
        except AttachError as exc:
            self.note(f"error: /attach: {exc}")
            return
        self.attachments.append(block)
        self.note(f"attached {block.describe()} to the next message")

    def _clear(self, argument: str) -> None:
        self.conversation.clear()
        self.attachments = []
        self.note("history cleared")

    def _help(self, argument: str) -> None:
        self.note(HELP)

    _commands: Final[dict[str, Callable[[Repl, str], None]]] = {
        "/route": _route,
        "/provider": _provider,
        "/model": _model,
        "/system": _system,
        "/attach": _attach,
        "/save": _save,
        "/load": _load,
        "/clear": _clear,
        "/help": _help,
    }
