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

import sys
from typing import TYPE_CHECKING, Any

import anyio

from harness_core.abort import AbortSignal
from harness_core.attach import STDIN, AttachError, load_attachments
from harness_core.cli._approve import terminal_approval
from harness_core.cli._common import (
    EXIT_ABORTED,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    Sink,
    load_for_start,
    output_failure_code,
    report_error,
    warn_start_failures,
)
from harness_core.cli._count import count
from harness_core.cli._hints import Hints
from harness_core.cli._interrupts import Interrupts
from harness_core.cli._options import parse_tool_choice, unoffered_tool_choice
from harness_core.cli._render import CYAN, DIM, RESET, Renderer
from harness_core.cli._request import (
    RunRequest,
    binary_stdin,
    check_provider_options,
    clean_option,
    prepare,
    read_prompt,
)
from harness_core.cli._schema import SchemaError, parse_schema
from harness_core.cli._text import UNDECODABLE_WARNING
from harness_core.errors import LlmError
from harness_core.loader import LoadedConfig
from harness_core.types import GenerateOptions, Message

if TYPE_CHECKING:
    from harness_core.conversation import ApproveCallback
    from harness_core.runtime import Harness

__all__ = [
    "CYAN",  # the names below were defined here before the split; kept importable from this module
    "DIM",
    "RESET",
    "Renderer",
    "RunRequest",
    "execute",
    "read_prompt",
    "run_prompt",
    "warn_start_failures",
]


def run_prompt(prompt: str | None, **fields: Any) -> int:
    """Run one generation for ``harness run`` from the command line's values: builds the
    :class:`~harness_core.cli._request.RunRequest` (``fields`` are its fields) and returns
    :func:`execute`'s exit code.

    Raises ``TypeError`` for a name that is no field of the request.
    """
    return execute(RunRequest(prompt=prompt, **fields))


def execute(request: RunRequest) -> int:
    """Run ``request``; returns the exit code (0, 1, 2, 128 + a signal or 141: see the module
    docstring).

    The prompt is built by :func:`~harness_core.cli._request.read_prompt` (stdin, then the
    argument); the prompt, system, model and route are cleaned of undecodable bytes
    (:mod:`harness_core.cli._text`). With tools (names or globs,
    :meth:`~harness_core.runtime.Harness.select_tools`) the tool round trip runs, at most
    ``max_steps`` generations; a name matching no tool is a usage error (exit 2); ``approve``
    asks on the terminal before each call (:mod:`harness_core.cli._approve`). Attachments become
    :class:`~harness_core.types.FileBlock` s after the prompt
    (:func:`~harness_core.attach.load_attachments`); ``schema`` sets ``response_format`` and a
    reply that is not JSON fails with ``INVALID_OUTPUT`` (exit 1). A file that cannot be
    attached or a bad schema is exit 2. ``count_tokens`` prints the input tokens of the same
    request instead of generating (:mod:`harness_core.cli._count`; nothing is logged).
    """
    out, err = Sink(sys.stdout, name="stdout"), Sink(sys.stderr, name="stderr")
    try:
        if out.failure is not None:  # stdout is closed (`>&-`): nowhere to put a reply, send nothing
            return output_failure_code(out, err)
        attach, attach_type = request.attach, request.attach_type
        attaches_stdin = STDIN in attach or any(spec == STDIN for spec, _ in attach_type)
        if attaches_stdin and request.prompt == STDIN:
            err.write("error: stdin holds either the prompt (PROMPT -) or an attachment (-a -), not both\n")
            return EXIT_USAGE
        prompt, replaced = read_prompt(request.prompt, None if attaches_stdin else sys.stdin)
        route, bad_route = clean_option(request.route)
        model, bad_model = clean_option(request.model)
        system, bad_system = clean_option(request.system)
        if replaced or bad_route or bad_model or bad_system:
            err.write(UNDECODABLE_WARNING + "\n")
        schema = request.schema
        try:
            files = load_attachments(attach, attach_type, stdin=binary_stdin(sys.stdin) if attaches_stdin else None)
            response_format = parse_schema(schema) if schema is not None else None
        except (AttachError, SchemaError) as exc:
            option = "--schema" if isinstance(exc, SchemaError) else "--attach"
            err.write(f"error: {option}: {exc}\n")
            return EXIT_USAGE
        if not prompt.strip():
            err.write("error: empty prompt (nothing to send: pass PROMPT or pipe text on stdin)\n")
            return EXIT_USAGE
        tool_choice = parse_tool_choice(request.tool_choice)
        unoffered = None if request.tools else unoffered_tool_choice(tool_choice, ())  # else: once they are known
        if unoffered is not None:
            err.write(f"error: {unoffered}\n")
            return EXIT_USAGE
        loaded = load_for_start(request.config, err)
        if loaded is None:
            return EXIT_USAGE
        out.redact = loaded.redact
        abort = AbortSignal()
        prepared = prepare(
            loaded,
            err,
            GenerateOptions(
                route=route,
                model=model,
                messages=[Message.user(prompt, *files)],
                system=system,
                max_tokens=request.max_tokens,
                temperature=request.temperature,
                reasoning_effort=request.reasoning_effort,
                response_format=response_format,
                top_p=request.top_p,
                seed=request.seed,
                stop=list(request.stop) or None,
                tool_choice=tool_choice,
                abort=abort,
            ),
            provider_options=request.provider_options,
            log=not request.no_log,  # --count-tokens writes nothing (no middleware runs), but -C/--cid read the log
            continue_last=request.continue_last,
            cid=request.cid,
        )
        if prepared is None:
            return EXIT_USAGE
        options = prepared
        renderer = Renderer(
            out,
            err,
            as_json=request.as_json,
            tty=out.isatty(),
            redact=loaded.redactor,
            abort=abort,
            expect_json=schema is not None,
        )
        renderer.hold_text = request.no_stream or request.extract
        renderer.extract = request.extract
        renderer.hints = Hints(loaded, route=route, model=model)
        asker = terminal_approval(sys.stdin, err) if request.approve else None
        tools, verbose = tuple(request.tools), request.verbose
        if request.count_tokens:
            return anyio.run(count, loaded, options, renderer, tools, verbose)
        return anyio.run(_generate, loaded, options, abort, renderer, tools, request.max_steps, verbose, asker)
    except KeyboardInterrupt:  # Ctrl-C before the signal watcher was installed (e.g. reading stdin)
        out.end_line()
        err.end_line()
        err.write("interrupted\n")
        return EXIT_ABORTED


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
    from harness_core.runtime import Harness

    interrupts = Interrupts(abort, renderer)
    failures: list[Exception] = []
    try:
        harness = Harness.from_loaded(loaded)
        harness.strict = renderer.as_json  # readers of --json get a checked stream, errors name the layer
        async with harness, anyio.create_task_group() as group:
            warn_start_failures(renderer.note, loaded.failures, harness.failures)
            await group.start(interrupts.watch, group.cancel_scope)
            try:  # caught here: raised through the task group it would become an ExceptionGroup
                check_provider_options(harness, options)
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
    if failures:
        return _report_failures(renderer, failures, verbose)
    if interrupts.hard:
        renderer.note("interrupted")
        return interrupts.exit_code
    code = renderer.end()
    return interrupts.exit_code if code == EXIT_ABORTED else code


def _report_failures(renderer: Renderer, failures: list[Exception], verbose: int) -> int:
    """Report what stopped a generation (the step limit, an :class:`LlmError` as a stream's error
    finish is, with its cause and hint: :meth:`Renderer.report`; else a plugin's exception) and
    return the exit code. (A function of its own: on CPython 3.11 the lines after an event loop
    that cancelled tasks may go untraced, cpython#106749.)"""
    from harness_core.conversation import MaxStepsExceeded

    code = EXIT_OK
    for failure in failures:
        if isinstance(failure, MaxStepsExceeded):
            renderer.note(f"error: {failure} (raise --max-steps)")
            code = max(code, EXIT_ERROR)
        elif isinstance(failure, LlmError):
            code = max(code, renderer.report(failure))
        else:
            reported = report_error(
                renderer.note, failure, route=renderer.route, source=renderer.source, verbose=verbose
            )
            code = max(code, reported)
    return code


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

    Raises ``LlmError`` (``CONFIG`` for a name matching no tool or a tool source that failed, or
    a ``--tool-choice`` naming a tool not offered,
    else an error finish) and
    :class:`~harness_core.conversation.MaxStepsExceeded`.
    """
    from harness_core.conversation import Conversation

    selected = await harness.select_tools(tools)  # an unknown name is the command line's fault, not a route's
    unoffered = unoffered_tool_choice(options.tool_choice, [item.name for item in selected])
    if unoffered is not None:
        raise LlmError("CONFIG", unoffered)
    route = harness.apply_defaults(options).route
    renderer.route, renderer.source = route, harness.routes().get(route) if route is not None else None
    conversation = Conversation(harness, tools=selected, max_steps=max_steps, options=options, approve=approve)
    reply = await conversation.send(
        options.messages[-1], abort=abort, on_chunk=renderer.feed, on_tool_result=renderer.tool_result
    )
    renderer.finish = reply.finish  # an abort while tools ran is no chunk: take the reply's finish
    renderer.usage = reply.usage  # summed over the steps
