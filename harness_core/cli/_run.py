"""``harness run``: stream one generation (or, with ``--tool``, a tool round trip) to the terminal.

Text goes to stdout as it arrives. Reasoning is dimmed on a terminal and goes to stderr when
stdout is not a terminal (so a pipe receives the answer only); tool calls likewise. Usage and
the finish reason are printed to stderr at the end. The first Ctrl-C fires the request's
:class:`~harness_core.abort.AbortSignal` (the stream ends with ``finish{aborted}``, partial output
kept, exit 130); a second one cancels at once.

Everything written (stdout and stderr, text and ``--json``) passes through the config's secret
redaction. Errors are one ``error: …`` line naming the code, HTTP status, route and plugin
(``--verbose`` adds the traceback of a raised exception); exception groups from the task group are
unwrapped. Exit codes: 0 the model finished (stop, tool-calls, length, content-filter); 1 an error
finish, the step limit, or output that cannot be written (disk full …); 2 a usage or config error:
an empty prompt, a config problem, an error finish with code ``CONFIG``, ``NO_ADAPTER`` (unknown
route, no default provider) or ``UNSUPPORTED`` (e.g. an unknown reasoning effort), or a plugin that
raised (a failed middleware, docs/loader.md); 130 aborted by Ctrl-C; 141 stdout was closed by its reader
(``harness run … | head``): the stream is aborted through its signal (closing the connection) and
the command stops quietly, as a Unix tool killed by SIGPIPE would.

With ``--tool NAME`` the prompt goes through a :class:`~harness_core.conversation.Conversation`
offering those registered tools: each tool call is executed, its result shown (like the call)
and sent back, until the model answers or ``--max-steps`` generations were made (exit 1).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

import anyio
import anyio.abc
import msgspec

from harness_core.abort import AbortSignal
from harness_core.attach import STDIN, AttachError, load_attachments
from harness_core.cli._approve import terminal_approval
from harness_core.cli._common import (
    ABORT_SIGNALS,
    EXIT_ABORTED,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    Sink,
    describe_error,
    exit_code_for,
    isatty,
    load_for_start,
    output_failure_code,
    report_error,
)
from harness_core.cli._options import first_code_block, owner_name, parse_options, parse_tool_choice
from harness_core.cli._schema import SchemaError, parse_schema
from harness_core.cli._text import UNDECODABLE_WARNING, clean_argument, for_terminal, read_stdin
from harness_core.errors import LlmError
from harness_core.loader import LoadedConfig
from harness_core.plugininfo import PluginFailure
from harness_core.secret import ChunkScrubber
from harness_core.types import (
    BlockEnd,
    Finish,
    FinishReason,
    GenerateOptions,
    Message,
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
    from harness_core.conversation import ApproveCallback
    from harness_core.runtime import Harness

__all__ = ["Renderer", "run_prompt", "warn_start_failures"]

DIM = "\x1b[2m"
CYAN = "\x1b[36m"
RESET = "\x1b[0m"


def run_prompt(
    prompt: str | None,
    *,
    as_json: bool,
    provider: str | None,
    model: str | None,
    system: str | None,
    max_tokens: int | None,
    temperature: float | None,
    reasoning_effort: str | None,
    config: str | None,
    tools: Sequence[str] = (),
    max_steps: int = 8,
    verbose: int = 0,
    top_p: float | None = None,
    seed: int | None = None,
    stop: Sequence[str] = (),
    tool_choice: str | None = None,
    provider_options: Sequence[str] = (),
    no_stream: bool = False,
    extract: bool = False,
    no_log: bool = False,
    continue_last: bool = False,
    cid: str | None = None,
    attach: Sequence[str] = (),
    attach_type: Sequence[tuple[str, str]] = (),
    schema: str | None = None,
    approve: bool = False,
    count_tokens: bool = False,
) -> int:
    """Run one generation for ``harness run``; returns the exit code (0, 1, 2, 128 + a signal
    or 141: see the module docstring).

    The prompt is built by :func:`read_prompt` (stdin, then ``prompt``); ``prompt``, ``system``,
    ``model`` and ``provider`` are cleaned of undecodable bytes (:mod:`harness_core.cli._text`).

    With ``tools`` (tool names or globs, :meth:`~harness_core.runtime.Harness.select_tools`)
    the tool round trip runs, at most ``max_steps`` generations; a name matching no tool is a
    usage error (exit 2); ``approve`` asks on the terminal before each call
    (:mod:`harness_core.cli._approve`). ``verbose`` shows tracebacks.
    ``top_p``/``seed``/``stop``/``tool_choice`` are sampling options, ``provider_options``
    ``key=value`` texts (:mod:`harness_core.cli._options`); ``no_stream``/``extract`` print the
    reply (or its first fenced code block) once complete; ``no_log`` keeps the prompt out of the
    prompt log, ``continue_last``/``cid`` continue a logged conversation
    (:mod:`harness_core.cli._promptlog`).
    ``attach`` (paths or URLs, media type detected) and ``attach_type`` (``(path or URL, media
    type)`` pairs, overriding the type of the same file in ``attach``:
    :func:`~harness_core.attach.load_attachments`) become :class:`~harness_core.types.FileBlock` s
    after the prompt; ``schema``
    (``--schema``) sets ``response_format`` and a reply that is not JSON fails with
    ``INVALID_OUTPUT`` (exit 1). A file that cannot be attached or a bad schema is exit 2.
    ``count_tokens`` prints the input tokens of the same request instead of generating
    (:meth:`~harness_core.runtime.Harness.count_tokens`; nothing is logged).
    """
    out, err = Sink(sys.stdout, name="stdout"), Sink(sys.stderr, name="stderr")
    try:
        if out.failure is not None:  # stdout is closed (`>&-`): nowhere to put a reply, send nothing
            return output_failure_code(out, err)
        attaches_stdin = STDIN in attach or any(spec == STDIN for spec, _ in attach_type)
        if attaches_stdin and prompt == STDIN:
            err.write("error: stdin holds either the prompt (PROMPT -) or an attachment (-a -), not both\n")
            return EXIT_USAGE
        prompt, replaced = read_prompt(prompt, None if attaches_stdin else sys.stdin)
        provider, bad_provider = _clean_option(provider)
        model, bad_model = _clean_option(model)
        system, bad_system = _clean_option(system)
        if replaced or bad_provider or bad_model or bad_system:
            err.write(UNDECODABLE_WARNING + "\n")
        try:
            files = load_attachments(attach, attach_type, stdin=_binary(sys.stdin) if attaches_stdin else None)
            response_format = parse_schema(schema) if schema is not None else None
        except (AttachError, SchemaError) as exc:
            option = "--schema" if isinstance(exc, SchemaError) else "--attach"
            err.write(f"error: {option}: {exc}\n")
            return EXIT_USAGE
        if not prompt.strip():
            err.write("error: empty prompt (nothing to send: pass PROMPT or pipe text on stdin)\n")
            return EXIT_USAGE
        loaded = load_for_start(config, err)
        if loaded is None:
            return EXIT_USAGE
        out.redact = loaded.redact
        abort = AbortSignal()
        prepared = _prepare(
            loaded,
            err,
            GenerateOptions(
                provider=provider,
                model=model,
                messages=[Message.user(prompt, *files)],
                system=system,
                max_tokens=max_tokens,
                temperature=temperature,
                reasoning_effort=reasoning_effort,
                response_format=response_format,
                top_p=top_p,
                seed=seed,
                stop=list(stop) or None,
                tool_choice=parse_tool_choice(tool_choice),
                abort=abort,
            ),
            provider_options=provider_options,
            log=not no_log,  # --count-tokens writes nothing (no middleware runs), but -C/--cid read the log
            continue_last=continue_last,
            cid=cid,
        )
        if prepared is None:
            return EXIT_USAGE
        options = prepared
        renderer = Renderer(
            out,
            err,
            as_json=as_json,
            tty=out.isatty(),
            redact=loaded.redactor,
            abort=abort,
            expect_json=schema is not None,
        )
        renderer.hold_text = no_stream or extract
        renderer.extract = extract
        renderer.hints = _Hints(loaded, provider=provider, model=model)
        asker = terminal_approval(sys.stdin, err) if approve else None
        if count_tokens:
            return anyio.run(_count, loaded, options, renderer, tuple(tools), verbose)
        return anyio.run(_generate, loaded, options, abort, renderer, tuple(tools), max_steps, verbose, asker)
    except KeyboardInterrupt:  # Ctrl-C before the signal watcher was installed (e.g. reading stdin)
        out.end_line()
        err.end_line()
        err.write("interrupted\n")
        return EXIT_ABORTED


def _prepare(
    loaded: LoadedConfig,
    err: Sink,
    options: GenerateOptions,
    *,
    provider_options: Sequence[str],
    log: bool,
    continue_last: bool,
    cid: str | None,
) -> GenerateOptions | None:
    """``options`` completed from the command line's habits: a model alias resolved, ``-o``
    options keyed by the route's plugin, the prompt log attached, a logged conversation's
    history prepended. ``None`` (after an ``error:`` line) for a usage error."""
    from harness_core.cli._promptlog import CONVERSATION_KEY, attach_prompt_log, why_no_prompt_log

    logger = attach_prompt_log(loaded, enabled=log)
    try:
        loaded.require_complete()  # the default prompt log, built only now, may have failed to start
    except LlmError as exc:
        err.write(f"error: {exc}\n")
        return None
    metadata: dict[str, object] = {}
    messages = options.messages
    system = options.system
    provider, model = options.provider, options.model
    if continue_last or cid is not None:
        if logger is None:
            err.write(f"error: --continue/--cid need the prompt log: {why_no_prompt_log(loaded, enabled=log)}\n")
            return None
        found = logger.continuation(cid)
        if found is None:
            which = f"conversation {cid!r}" if cid is not None else "conversation"
            err.write(f"error: no logged {which} to continue (see `harness logs`)\n")
            return None
        messages = [*found.history, *messages]
        system = system if system is not None else found.options.system
        provider = provider if provider is not None else found.options.provider
        model = model if model is not None else found.options.model
        metadata[CONVERSATION_KEY] = found.conversation_id
    provider, model = loaded.resolve_alias(provider, model)
    extra: dict[str, dict[str, Any]] = {}
    if provider_options:
        try:
            parsed = parse_options(provider_options)
        except ValueError as exc:
            err.write(f"error: {exc}\n")
            return None
        route = provider if provider is not None else loaded.defaults.provider
        owner = owner_name(loaded, route)
        if owner is None:
            err.write(f"error: -o needs a route served by a plugin of plugins.yaml; {route!r} is none\n")
            return None
        extra[owner] = parsed
    return msgspec.structs.replace(
        options,
        provider=provider,
        model=model,
        messages=messages,
        system=system,
        provider_options=extra,
        metadata=metadata,
    )


def read_prompt(prompt: str | None, stdin: TextIO | None) -> tuple[str, bool]:
    """The prompt of ``harness run``: returns ``(text, replaced)``.

    Standard input is read when ``prompt`` is ``-`` (then it alone is the prompt) or when it is
    neither closed nor a terminal: piped text comes first, then ``prompt``, joined by one space
    (what ``llm`` does: ``cat notes.txt | harness run "summarize:"``); stdin alone is the prompt.
    Undecodable bytes (stdin or the argument) become U+FFFD and ``replaced`` is ``True``.
    """
    piped, replaced = "", False
    if stdin is not None and (prompt == "-" or not isatty(stdin)):
        piped, replaced = read_stdin(stdin)
    if prompt is None or prompt == "-":
        return piped, replaced
    prompt, replaced_argument = clean_argument(prompt)
    text = f"{piped} {prompt}" if piped else prompt
    return text, replaced or replaced_argument


def _binary(stdin: TextIO | None) -> BinaryIO | None:
    """The byte stream under ``stdin`` (``-a -`` reads bytes: an image is no text); ``None`` when closed."""
    return stdin.buffer if stdin is not None else None


def _clean_option(value: str | None) -> tuple[str | None, bool]:
    """An optional text option from argv cleaned by :func:`clean_argument` (``None`` stays)."""
    return clean_argument(value) if value is not None else (None, False)


class _Interrupts:
    """Watches SIGINT, SIGTERM and SIGHUP for one run: the first fires ``abort`` (middleware
    cleanup runs, the usage row is written as aborted), a second cancels everything.

    :attr:`signum` is the first signal received; the run then exits with 128 + that number, the
    status a shell reports for a process that signal ended.
    """

    def __init__(self, abort: AbortSignal, renderer: Renderer) -> None:
        self.abort = abort
        self.renderer = renderer
        self.hard = False
        self.signum: int | None = None

    @property
    def exit_code(self) -> int:
        """128 + the first signal received (130 when none was: the caller saw an abort)."""
        return 128 + (self.signum if self.signum is not None else signal.SIGINT)

    async def watch(self, scope: anyio.CancelScope, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        with anyio.open_signal_receiver(*ABORT_SIGNALS) as signals:
            task_status.started()
            self.signum = await anext(signals)
            self.abort.fire(ABORT_SIGNALS[self.signum])
            again = "press Ctrl-C again" if self.signum == signal.SIGINT else "signal again"
            self.renderer.note(f"aborting… ({again} to quit at once)")
            await anext(signals)
            self.hard = True
            scope.cancel()


async def _generate(
    loaded: LoadedConfig,
    options: GenerateOptions,
    abort: AbortSignal,
    renderer: Renderer,
    tools: tuple[str, ...] = (),
    max_steps: int = 8,
    verbose: int = 0,
    approve: ApproveCallback | None = None,
) -> int:
    from harness_core.conversation import MaxStepsExceeded
    from harness_core.runtime import Harness

    interrupts = _Interrupts(abort, renderer)
    failures: list[Exception] = []
    try:
        harness = Harness.from_loaded(loaded)
        harness.strict = renderer.as_json  # readers of --json get a checked stream, errors name the layer
        async with harness, anyio.create_task_group() as group:
            warn_start_failures(renderer.note, loaded.failures, harness.failures)
            await group.start(interrupts.watch, group.cancel_scope)
            try:  # caught here: raised through the task group it would become an ExceptionGroup
                if tools:
                    await _converse(harness, options, abort, renderer, tools, max_steps, approve)
                else:
                    await _stream(harness, options, renderer)
            except Exception as exc:
                failures.append(exc)
            group.cancel_scope.cancel()
    except Exception as exc:  # the harness could not start (or stop): groups are unwrapped when reported
        failures.append(exc)
    renderer.release_text()
    if renderer.out.failure is not None:
        return output_failure_code(renderer.out, renderer.err)
    code = EXIT_OK
    for failure in failures:
        if isinstance(failure, MaxStepsExceeded):
            renderer.note(f"error: {failure} (raise --max-steps)")
            code = max(code, EXIT_ERROR)
        else:
            reported = report_error(
                renderer.note, failure, route=renderer.route, source=renderer.source, verbose=verbose
            )
            code = max(code, reported)
    if failures:
        return code
    if interrupts.hard:
        renderer.note("interrupted")
        return interrupts.exit_code
    code = renderer.end()
    return interrupts.exit_code if code == EXIT_ABORTED else code


async def _count(
    loaded: LoadedConfig, options: GenerateOptions, renderer: Renderer, tools: tuple[str, ...], verbose: int
) -> int:
    """``harness run --count-tokens``: the input tokens of ``options`` (with the specs of the
    ``tools`` named) on its route, printed as a number (``--json``: an object with the route and
    model); errors are reported as for a generation (``UNSUPPORTED``: exit 2)."""
    from harness_core.runtime import Harness

    harness = Harness.from_loaded(loaded)
    try:
        async with harness:
            warn_start_failures(renderer.note, loaded.failures, harness.failures)
            options = harness.apply_defaults(options)
            route = options.provider
            renderer.route, renderer.source = route, harness.routes().get(route) if route is not None else None
            selected = await harness.select_tools(tools)
            if selected:
                options = msgspec.structs.replace(options, tools=[item.spec for item in selected])
            counted = await harness.count_tokens(options)
    except Exception as exc:  # groups are unwrapped when reported
        return report_error(renderer.note, exc, route=renderer.route, source=renderer.source, verbose=verbose)
    out = renderer.out
    if renderer.as_json:
        body = {"input_tokens": counted, "route": options.provider, "model": options.model}
        out.write(renderer.redact(msgspec.json.encode(body).decode()) + "\n")
    else:
        out.write(f"{counted}\n")
    return output_failure_code(out, renderer.err) if out.failure is not None else EXIT_OK


def warn_start_failures(
    note: Callable[[str], None], known: Sequence[PluginFailure], failures: Sequence[PluginFailure]
) -> None:
    """Write (``note``) one ``warning:`` line per adapter plugin in ``failures`` (the started
    harness's) that is not in ``known`` (reported before the start): its routes are unavailable,
    the others work. A middleware that fails stops the start instead (an error)."""
    for failure in failures:
        if not failure.is_middleware and failure not in known:
            note(f"warning: plugin {failure.key!r} failed to start: {failure.message}; its routes are unavailable")


async def _stream(harness: Harness, options: GenerateOptions, renderer: Renderer) -> None:
    """One generation through ``harness.stream``; the renderer learns the route served and its owner."""
    context = harness.stream(options)
    requested = (context.route, context.model)
    try:
        async with context as chunks:
            async for chunk in chunks:
                renderer.feed(chunk)
    finally:
        renderer.route, renderer.source = context.route, context.source
        if (context.route, context.model) != requested:  # a middleware (fallback) served another target
            renderer.served_by = f"{context.route}/{context.model}" if context.model else context.route


async def _converse(
    harness: Harness,
    options: GenerateOptions,
    abort: AbortSignal,
    renderer: Renderer,
    tools: tuple[str, ...],
    max_steps: int,
    approve: ApproveCallback | None = None,
) -> None:
    """The tool round trip of ``run --tool``: the prompt (the last message of ``options``) sent
    through a :class:`~harness_core.conversation.Conversation` offering the tools ``tools``
    name (names or globs; tool sources such as MCP servers start here), ``approve`` asked
    before each call.

    Raises ``LlmError`` (``CONFIG`` for a name matching no tool or a tool source that failed,
    else an error finish) and
    :class:`~harness_core.conversation.MaxStepsExceeded`.
    """
    from harness_core.conversation import Conversation

    selected = await harness.select_tools(tools)  # an unknown name is the command line's fault, not a route's
    route = harness.apply_defaults(options).provider
    renderer.route, renderer.source = route, harness.routes().get(route) if route is not None else None
    conversation = Conversation(harness, tools=selected, max_steps=max_steps, options=options, approve=approve)
    reply = await conversation.send(
        options.messages[-1], abort=abort, on_chunk=renderer.feed, on_tool_result=renderer.tool_result
    )
    renderer.finish = reply.finish  # an abort while tools ran is no chunk: take the reply's finish
    renderer.usage = reply.usage  # summed over the steps


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
        self.hints: _Hints | None = None

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
            error = LlmError.from_failure(failure)
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


class _Hints:
    """What to do about an error finish that the command line or a missing config explains.

    ``loaded`` is the configuration in use, ``provider``/``model`` what ``-p``/``-m`` gave.
    """

    def __init__(self, loaded: LoadedConfig, *, provider: str | None, model: str | None) -> None:
        self.loaded = loaded
        defaults = loaded.defaults
        # the runtime applies defaults.model only to the default provider (or when none is set)
        default_applies = defaults.provider is None or provider in (None, defaults.provider)
        self.no_model = model is None and (defaults.model is None or not default_applies)

    def cause(self, error: LlmError) -> str | None:
        """The command line's mistake that explains ``error``, shown before the provider's
        answer (exit 2: a usage error), or ``None``: ``BAD_REQUEST`` (a provider's HTTP 400, or
        the adapter refusing to send) when no model was given and ``defaults.model`` does not
        apply."""
        if error.code == "BAD_REQUEST" and self.no_model:
            return "no model was given: pass -m MODEL or set defaults.model in plugins.yaml"
        return None

    def for_error(self, error: LlmError) -> str | None:
        """One hint line shown after ``error``, or ``None``: ``NO_ADAPTER`` without a config
        file (the built-in default is in use; names the installed plugins it does not enable
        and how to enable them; exit 2)."""
        loaded = self.loaded
        if error.code == "NO_ADAPTER" and loaded.path is None:
            idle = sorted(entry.key for entry in loaded.entries if entry.state == "installed")
            names = ", ".join(idle) if idle else "none"
            return (
                "no plugins.yaml was found, so the built-in default (the mock plugin) is in use; "
                f"installed plugins not enabled: {names} (list them in plugins.yaml or pass -c FILE; "
                "see `harness config check`)"
            )
        return None
