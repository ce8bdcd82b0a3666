"""The click command tree of ``harness``. Only :mod:`click` is imported here; the work of each
subcommand lives in :mod:`harness_core.cli._run` / :mod:`harness_core.cli._chat` /
:mod:`harness_core.cli._inspect` / :mod:`harness_core.cli._embed`, imported when that subcommand runs.

Exit codes: 0 success; 1 the generation ended with an error (or output could not be written);
2 usage or configuration error, including error finishes with code ``CONFIG``, ``NO_ADAPTER`` or
``UNSUPPORTED`` and a plugin that raised (a failed middleware); 130 interrupted (Ctrl-C; 128 + the
signal for SIGTERM 143 and SIGHUP 129); 141 stdout closed by its reader (broken pipe: the stream is
aborted, nothing more is printed).
"""

from __future__ import annotations

import functools
import math
import re
import sys
from collections.abc import Callable, Sequence
from typing import IO, Any, Final, TypeVar, cast

import click

from harness_core.cli._config_option import CONFIG_HELP, config_option, group_config
from harness_core.entrypoints import entry_points

__all__ = ["cli"]

_VERBOSE = re.compile(r"-v+")

_F = TypeVar("_F", bound=Callable[..., Any])

COMMAND_GROUP = "harness.commands"
"""Entry-point group of plugin subcommands: ``usage = "harness_usage.cli:usage"`` (a click command)."""


class FiniteRange(click.FloatRange):
    """A :class:`click.FloatRange` that also refuses ``nan`` and ``inf`` (Python's ``float()``
    accepts both, the range checks let ``nan`` through, and JSON has neither: a provider would
    receive ``null``). A usage error (exit 2) naming the option."""

    name = "finite float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


def _checked(field: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """An option callback handing the converted value to :class:`~harness_core.types.GenerateOptions`
    as ``field``, the owner of the rule: a value it refuses (``--max-tokens 2147483648``, above
    ``MAX_TOKENS_LIMIT``) is a usage error (exit 2) naming the option, as click's own range
    refusals are, not a traceback."""

    def check(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        from harness_core.types import GenerateOptions

        try:
            GenerateOptions(**{field: value})
        except (TypeError, ValueError) as error:
            raise click.BadParameter(str(error).removeprefix(f"GenerateOptions.{field} "), ctx, param) from None
        return value

    return check


def _generation_options(max_tokens_help: str) -> Callable[[_F], _F]:
    """The generation options ``harness run`` and ``harness chat`` share, in this order:
    ``--max-tokens`` (``max_tokens_help`` says per what), ``--temperature``, ``--reasoning-effort``;
    each value checked by :class:`~harness_core.types.GenerateOptions` (:func:`_checked`)."""

    def decorate(func: _F) -> _F:
        func = click.option("--reasoning-effort", help="reasoning effort id the model lists (e.g. off, low, high)")(
            func
        )
        func = click.option(
            "--temperature",
            type=FiniteRange(min=0),
            callback=_checked("temperature"),
            help="sampling temperature (at least 0)",
        )(func)
        return click.option(
            "--max-tokens", type=click.IntRange(min=1), callback=_checked("max_tokens"), help=max_tokens_help
        )(func)

    return decorate


def _config_option(func: Any) -> Any:
    return config_option()(func)


PROVIDER_NOTE = "warning: -p/--provider is deprecated: use -r/--route (the same plugins.yaml route)"
"""The one line ``-p/--provider`` writes on stderr (the old name of ``-r/--route``)."""


def _provider_note(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        click.echo(PROVIDER_NOTE, err=True)
    return value


def _route_option(help: str, dest: str = "route") -> Callable[[_F], _F]:
    """The options of a command that takes a route: ``-r/--route`` (the plugins.yaml entry a
    request goes to, passed to the command as ``dest``) and ``-p/--provider``, its deprecated old
    name: hidden from ``--help``, it writes :data:`PROVIDER_NOTE` on stderr and gives ``dest``
    its value. Both at once is a usage error (exit 2)."""

    def decorate(func: _F) -> _F:
        @functools.wraps(func)
        def command(*args: Any, **kwargs: Any) -> Any:
            old = kwargs.pop("deprecated_provider")
            if old is not None:
                if kwargs[dest] is not None:
                    raise click.UsageError("give -r/--route only (-p/--provider is its deprecated old name)")
                kwargs[dest] = old
            return func(*args, **kwargs)

        hidden = click.option(
            "-p",
            "--provider",
            "deprecated_provider",
            hidden=True,
            callback=_provider_note,
            help="deprecated: -r/--route",
        )
        return cast(_F, click.option("-r", "--route", dest, help=help)(hidden(command)))

    return decorate


def show_error(exc: click.ClickException, file: IO[Any] | None = None) -> None:
    """Write ``exc`` as every harness error is written: on stderr, one ``error: …`` line first (what
    is wrong), then, for a usage error, the command's usage line and the help hint click shows
    (click prints them before its ``Error:`` line, which a reader of the first line misses)."""
    out = file if file is not None else sys.stderr
    click.echo(f"error: {exc.format_message()}", file=out)
    ctx = exc.ctx if isinstance(exc, click.UsageError) else None
    if ctx is not None:
        hint = f"Try '{ctx.command_path} {max(ctx.help_option_names, key=len)}' for help."
        click.echo(f"{ctx.get_usage()}\n{hint}", file=out, color=ctx.color)


_WORD: Final = re.compile(r"[a-z][a-z0-9-]*")
_NEAR: Final = 0.8
"""How close a word must be to a command name to be taken for a typo of it
(:class:`difflib.SequenceMatcher` ratio: ``modles`` → ``models`` is 0.83, ``tool`` → ``tools`` 0.89)."""


def mistyped_command(word: str, commands: Sequence[str]) -> str | None:
    """The command ``word`` (the first argument of ``harness WORD …``, no command itself) is a
    typo of: a single lowercase word within :data:`_NEAR` of a name in ``commands``
    (:func:`difflib.get_close_matches`), else ``None`` (it is a prompt)."""
    if not _WORD.fullmatch(word):
        return None
    import difflib  # here: `harness --help` imports only click

    found = difflib.get_close_matches(word, commands, n=1, cutoff=_NEAR)
    return found[0] if found else None


class _HarnessGroup(click.Group):
    """A group that also offers the subcommands plugins declare in ``harness.commands``.

    Output that cannot be written (``harness logs > /dev/full``, a reader that went away) ends
    any subcommand as ``harness run`` ends: ``error: cannot write output: …`` (exit 1), or quietly
    with 141 for a closed pipe, never a traceback.

    Plugin subcommands are listed from entry-point metadata and imported only when run; a
    built-in command of the same name wins. Every :class:`click.ClickException` (a usage error,
    a plugin subcommand's own) is shown by :func:`show_error`, so every command's errors read
    ``error: …`` on stderr (click's own style is ``Error: …``); exit codes stay click's (2 for
    a usage error).
    """

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.ClickException as exc:
            raise _restyled(exc) from None
        except OSError as exc:  # writing --help failed
            raise _output_failed(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            raise _restyled(exc) from None
        except OSError as exc:  # a subcommand's output could not be written (click.echo raises)
            raise _output_failed(exc) from None

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """``harness "prompt" …`` (or ``harness -m fast "prompt"``) is short for ``harness run …``:
        after the group's own options, anything that is not a subcommand starts ``run`` — except a
        single lowercase word close to a command name (:func:`mistyped_command`: ``harness
        modles``), a usage error (exit 2) suggesting the command (``harness run modles`` sends it)."""
        position = 0
        while position < len(args):
            current = args[position]
            if current == "--verbose" or _VERBOSE.fullmatch(current) or current.startswith("--config="):
                position += 1
            elif current in ("-c", "--config"):  # the group's own -c takes a value
                position += 2
            elif current.startswith("-c") and len(current) > 2:  # -cFILE
                position += 1
            else:
                break
        if position < len(args):
            first = args[position]
            group_option = first in ("-h", "--help", "--version")
            if not group_option and first not in self.commands and first not in self.list_commands(ctx):
                near = mistyped_command(first, self.list_commands(ctx))
                if near is not None:
                    raise click.UsageError(
                        f"no command {first!r}: did you mean `harness {near}`? "
                        f"(to send it as a prompt: harness run {first})",
                        ctx,
                    )
                args = [*args[:position], "run", *args[position:]]
        return super().parse_args(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *entry_points(COMMAND_GROUP)})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = self.commands.get(cmd_name)
        if command is not None:
            return command
        entry = entry_points(COMMAND_GROUP).get(cmd_name)
        if entry is None:
            return None
        where = f"the {cmd_name!r} subcommand of {entry.dist.key} ({entry.value})"
        try:
            target = entry.load()
        except Exception as exc:
            raise click.UsageError(_masked(ctx, f"cannot load {where}: {type(exc).__name__}: {exc}")) from exc
        if not isinstance(target, click.Command):
            raise click.UsageError(f"{where} is no click command")
        return target

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(len(name) for name in self.list_commands(ctx))
        rows = [(name, command.get_short_help_str(limit)) for name, command in sorted(self.commands.items())]
        rows += [
            (name, f"(from plugin {entry.dist.key}: harness {name} --help)")  # not imported for --help
            for name, entry in sorted(entry_points(COMMAND_GROUP).items())
            if name not in self.commands
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _masked(ctx: click.Context, text: str) -> str:
    """``text`` (a plugin's import error, which may quote a value it read) through the masker of
    the config the command would use (``-c`` given to the group, else the usual search): every
    secret it names, from the file or the environment, is masked as in every other message."""
    from harness_core.loader import inspect_config

    return inspect_config(group_config(ctx), instantiate=False).redact(text)


def _output_failed(exc: OSError) -> BaseException:
    """What to raise for ``exc``: when it is standard output that failed (a full disk, a closed
    pipe), :class:`click.exceptions.Exit` with the code of
    :func:`~harness_core.cli._common.output_failure_code` (the ``error: cannot write output``
    line written; quiet 141 for a closed pipe); any other ``OSError`` is ``exc`` itself."""
    from harness_core.cli._common import stdout_failure

    code = stdout_failure(exc)
    return exc if code is None else click.exceptions.Exit(code)


def _restyled(exc: click.ClickException) -> click.ClickException:
    """``exc`` shown by :func:`show_error` when click reports it; a group run without its
    subcommand (``harness config``) keeps click's own showing: the group's help, exit 2."""
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):
        return exc
    exc.show = functools.partial(show_error, exc)  # type: ignore[method-assign]  # this one instance only
    return exc


def _verbosity(ctx: click.Context) -> int:
    """The ``-v`` count given to the ``harness`` group."""
    return int(ctx.find_root().params.get("verbose") or 0)


def _tool_options(func: Any) -> Any:
    func = click.option(
        "--max-steps",
        type=click.IntRange(min=1),
        default=8,
        show_default=True,
        help="most generations per prompt (each tool round trip is one more)",
    )(func)
    func = click.option(
        "--approve",
        is_flag=True,
        help="ask on the terminal before each tool call runs (a declined call is reported to the model)",
    )(func)
    return click.option(
        "-t",
        "--tool",
        "tools",
        metavar="NAME|GLOB",
        multiple=True,
        help="offer this tool to the model, or every tool matching a glob such as 'time_*' (repeatable; "
        "see `harness tools`; a name matching none lists the registered ones)",
    )(func)


@click.group(cls=_HarnessGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="harness-core", prog_name="harness")
@click.option("-v", "--verbose", count=True, help="more log output on stderr, with tracebacks (-vv: debug)")
@click.option("-c", "--config", "config", type=click.Path(dir_okay=False), help=CONFIG_HELP)
def cli(verbose: int, config: str | None) -> None:
    """harness: one streaming protocol for every LLM provider, with middleware around every stream.

    Plugins and their configs come from plugins.yaml (see `harness config check`); `-c FILE`
    picks the file, given here or after the subcommand (which wins).
    """
    from harness_core.cli._logging import configure_logging

    configure_logging(verbose)


@cli.command()
@click.argument("prompt", required=False)
@_route_option("the plugins.yaml route to use (default: `defaults.route`)")
@click.option("-m", "--model", help="the provider's model id (default: `defaults.model`)")
@click.option("--system", help="system prompt")
@_generation_options("upper bound on output tokens (at least 1)")
@click.option(
    "--top-p",
    type=FiniteRange(min=0, max=1),
    callback=_checked("top_p"),
    help="nucleus sampling: probability mass kept (0..1)",
)
@click.option("--seed", type=int, callback=_checked("seed"), help="sampling seed, for providers that support it")
@click.option("--stop", multiple=True, help="stop sequence (repeatable)")
@click.option("--tool-choice", help="auto, none, required, or the name of the tool the model must call")
@click.option(
    "-o",
    "--option",
    "provider_options",
    metavar="KEY=VALUE",
    multiple=True,
    help="provider option sent as is (repeatable; VALUE parsed as JSON when it is JSON), e.g. -o top_k=5",
)
@click.option("--no-stream", is_flag=True, help="print the reply once it is complete instead of as it arrives")
@click.option("-x", "--extract", is_flag=True, help="print only the first fenced code block of the reply")
@click.option("--no-log", is_flag=True, help="do not write this prompt to the prompt log (see `harness logs`)")
@click.option(
    "-C", "--continue", "continue_last", is_flag=True, help="continue the newest logged conversation (-c is --config)"
)
@click.option("--cid", help="continue the logged conversation with this id (see `harness logs`)")
@click.option(
    "-a",
    "--attach",
    "--attachment",
    "attach",
    metavar="PATH|URL",
    multiple=True,
    help="attach a file (media type from its content) or a URL the provider fetches (repeatable)",
)
@click.option(
    "--at",
    "--attach-type",
    "--attachment-type",
    "attach_type",
    nargs=2,
    metavar="PATH|URL TYPE",
    multiple=True,
    help="attach a file or URL with this media type, or set the type of the same `-a` file, "
    "e.g. `--at scan.bin image/png` (repeatable)",
)
@click.option(
    "--schema",
    metavar="JSON|FILE|SPEC",
    help="reply with JSON matching this schema: JSON text, a JSON file, or fields such as 'name, age int'",
)
@click.option(
    "--count-tokens",
    is_flag=True,
    help="print the input tokens this request would take on its route, counted by the provider "
    "(nothing is generated, logged or billed)",
)
@_tool_options
@_config_option
@click.option("--json", "as_json", is_flag=True, help="print every chunk as one JSON object per line")
@click.pass_context
def run(ctx: click.Context, /, prompt: str | None, as_json: bool, **options: Any) -> None:
    """Send PROMPT and stream the reply to stdout.

    Text piped on stdin comes first, then PROMPT (joined by a space, as `llm` does: `cat file |
    harness run "summarize:"`); stdin alone is the prompt, and PROMPT `-` reads the prompt from
    stdin only. Input must be UTF-8: undecodable bytes become U+FFFD, with one warning line.

    Reasoning is shown dimmed on a terminal (on stderr otherwise), tool calls are shown, usage and
    the finish reason go to stderr at the end. With `--tool NAME` (repeatable; a glob such as
    `--tool 'time_*'` offers every matching tool of `harness tools`) the model may call those
    tools: each call is executed (after a y/N question on the terminal with `--approve`), its
    result shown and sent back, until the model answers (at most `--max-steps` generations). `-a
    PATH|URL` attaches images, documents or audio (what the route's wire takes; a URL is passed on,
    never downloaded); `--at PATH TYPE` gives the media type (of the same `-a` file, else it
    attaches the file). `--schema` asks for JSON matching a schema and checks that the reply is
    JSON. Ctrl-C aborts cleanly, keeping the partial output (exit 130); SIGTERM and SIGHUP do the
    same (exit 143 and 129). Text from the model is shown with control characters made visible on a
    terminal (`--json` and pipes keep it exact). Errors are one `error: ...` line naming the route
    and plugin (`-v` adds the traceback); secrets of the config are redacted from all output.

    Every prompt and reply is written to the prompt log (`harness logs`) unless `--no-log` (or
    `~prompt-log:` in plugins.yaml). `-C/--continue` continues the newest logged conversation and
    `--cid ID` a given one, with its history and replay state (`-c` stays `--config`). `-m` also
    takes an alias of plugins.yaml's `aliases:`. `harness "prompt"` is short for this command.

    `--count-tokens` sends nothing to generate: it prints the input tokens the same request
    (prompt, system, attachments, tools, history) would take, counted by the route's provider
    (`{"input_tokens": N, "route": ..., "model": ...}` with `--json`); a route that cannot count
    is exit 2 (UNSUPPORTED). No middleware runs and nothing is logged.

    Exit codes: 0 stop/tool-calls/length/content-filter; 1 error finish, step limit, a `--schema`
    reply that is not JSON (INVALID_OUTPUT) or output that cannot be written; 2 usage or config
    error (empty prompt, unknown route or tool, a file that cannot be attached, a bad schema, an
    unsupported option, i.e. error codes CONFIG, NO_ADAPTER, UNSUPPORTED) or a failed middleware;
    130 aborted (128 + the signal: 143 SIGTERM, 129 SIGHUP); 141 stdout closed by its reader
    (e.g. `| head`: the stream is aborted quietly).
    """
    from harness_core.cli._request import RunRequest
    from harness_core.cli._run import execute

    ctx.exit(execute(RunRequest(prompt=prompt, as_json=as_json, verbose=_verbosity(ctx), **options)))


@cli.command()
@_route_option("the plugins.yaml route to use (default: `defaults.route`)")
@click.option("-m", "--model", help="the provider's model id (default: `defaults.model`)")
@click.option("--system", help="system prompt")
@_generation_options("upper bound on output tokens per generation (at least 1)")
@_tool_options
@_config_option
@click.pass_context
def chat(ctx: click.Context, /, **options: Any) -> None:
    """Chat with a model: a REPL keeping the conversation history.

    Each line you type is sent with the history so far; the reply streams to stdout. Commands:
    /route ROUTE [MODEL], /model ID, /system [TEXT], /attach PATH|URL [TYPE] (a file for the
    next message), /save PATH, /load PATH, /clear, /help, /quit. Ctrl-C aborts the reply being
    streamed (the partial reply is kept) and returns to the prompt; a second Ctrl-C discards it.
    Ctrl-D (end of input) or /quit leaves (exit 0). With `--tool NAME` the model may call those
    registered tools, as in `harness run`. A failed reply is shown as one `error: ...` line (as in
    `harness run`) and the REPL goes on.

    SIGTERM and SIGHUP abort the reply being streamed as Ctrl-C does, then leave.

    Exit codes: 0 end of input or /quit; 1 output that cannot be written; 2 usage or config error
    (e.g. an unknown tool, a middleware that failed to start); 129/143 SIGHUP/SIGTERM; 141 stdout
    closed by its reader.
    """
    from harness_core.cli._chat import run_chat

    ctx.exit(run_chat(verbose=_verbosity(ctx), **options))


@cli.command()
@_config_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@click.pass_context
def plugins(ctx: click.Context, config: str | None, as_json: bool) -> None:
    """List installed, enabled, disabled and failed plugins with versions and routes.

    Plugins named in plugins.yaml are imported, validated, built and started (no request is
    sent), as `harness run` and `config check` do: one that cannot start is listed as failed.
    """
    from harness_core.cli._inspect import show_plugins

    ctx.exit(show_plugins(config, as_json=as_json))


@cli.command()
@_route_option("only this route")
@_config_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@click.pass_context
def models(ctx: click.Context, route: str | None, config: str | None, as_json: bool) -> None:
    """List every route's models (`list_models`, else those plugins.yaml names), with capabilities.

    Exit codes: 0 listed; 1 a route's listing failed (the others are shown); 2 config error or
    unknown route.
    """
    from harness_core.cli._inspect import show_models

    ctx.exit(show_models(route, config, as_json=as_json))


@cli.group()
def config() -> None:
    """Inspect the configuration."""


@config.command()
@_config_option
@click.pass_context
def check(ctx: click.Context, config: str | None) -> None:
    """Validate plugins.yaml: import, validate and start every plugin; report every problem (exit 2)."""
    from harness_core.cli._inspect import check_config

    ctx.exit(check_config(config))


@cli.command()
@_config_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@click.pass_context
def tools(ctx: click.Context, config: str | None, as_json: bool) -> None:
    """List every tool the configuration offers: name, source plugin, description.

    Plugins' Python tools and the tools of every tool source (MCP servers are started for this,
    then stopped). Offer them with `harness run --tool NAME` or a glob (`--tool 'time_*'`).
    `--json`: one object per tool (`name`, `plugin`, `description`, `parameters`).

    Exit codes: 0 listed; 1 a tool source failed (the other tools are listed); 2 config error.
    """
    from harness_core.cli._inspect import show_tools

    ctx.exit(show_tools(config, as_json=as_json))


@cli.command()
@click.argument("route", required=False)
@_config_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@click.pass_context
def chain(ctx: click.Context, route: str | None, config: str | None, as_json: bool) -> None:
    """Show the middleware a stream to ROUTE passes through, outermost first, then its adapter.

    ROUTE defaults to `defaults.route`.
    """
    from harness_core.cli._inspect import show_chain

    ctx.exit(show_chain(route, config, as_json=as_json))


@cli.command()
@click.argument("text", required=False)
@_route_option("route to embed with (default: `defaults.route` when it embeds, else the only embedding route)")
@click.option("-m", "--model", help="the embedding model id, or an alias of plugins.yaml (default: the embedder's)")
@click.option("--dimensions", type=click.IntRange(min=1), help="ask a model that can shorten its vectors for this many")
@click.option(
    "--input-type",
    type=click.Choice(["query", "document"]),
    help="what the text is for, where the wire has such a notion (Gemini task types); ignored elsewhere",
)
@_config_option
@click.option("--json", "as_json", is_flag=True, help='print {"model", "route", "usage", "embedding"}')
@click.pass_context
def embed(ctx: click.Context, /, text: str | None, as_json: bool, **options: Any) -> None:
    """Embed TEXT (or standard input) and print its vector as a JSON array.

    `--json` prints one object with the model and route that served, the usage and the vector.

    Exit codes: 0 embedded; 1 the provider failed or output that cannot be written; 2 usage or
    config error (empty text, an unknown route NO_ADAPTER, a route that does not embed
    UNSUPPORTED, a failed middleware); 141 stdout closed by its reader.
    """
    from harness_core.cli._embed import embed_text

    ctx.exit(embed_text(text, as_json=as_json, verbose=_verbosity(ctx), **options))


@cli.command("embed-multi")
@click.argument("collection")
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.option(
    "--files",
    nargs=2,
    multiple=True,
    metavar="DIR GLOB",
    help="embed every file under DIR matching GLOB (e.g. `--files docs '**/*.md'`): id the relative path, "
    "content the text (repeatable)",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "tsv", "json", "jsonl"]),
    help="the format of FILE (default: from its suffix)",
)
@click.option(
    "--header/--no-header",
    default=True,
    show_default=True,
    help="a CSV/TSV FILE starts with a header row (--no-header: its first line is a row; an error for other input)",
)
@_route_option("route to embed with (an existing collection keeps its own)")
@click.option("-m", "--model", help="the embedding model id, or an alias (an existing collection keeps its own)")
@click.option("--dimensions", type=click.IntRange(min=1), help="ask a model that can shorten its vectors for this many")
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="rows per embedding call and per commit",
)
@click.option("--store", is_flag=True, help="store each row's content too (`harness similar` then shows it)")
@click.option(
    "-d",
    "--database",
    type=click.Path(dir_okay=False),
    help="collection database (default: <user data dir>/harness/embeddings.sqlite)",
)
@_config_option
@click.pass_context
def embed_multi(ctx: click.Context, /, collection: str, file: str | None, **options: Any) -> None:
    """Embed many rows into COLLECTION of an SQLite collection database.

    Rows come from FILE (CSV or TSV with a header, or without one given `--no-header`; a JSON
    array of objects, or JSON lines): the `id` and `content` columns (keys), else the first
    column is the id and the others, joined by a space, the content. Or from `--files DIR
    GLOB`: one row per file. A row whose content is unchanged since it was stored (SHA-256) is
    not embedded again, and each batch is committed: an interrupted run resumes where it
    stopped. A collection keeps the route, model and dimensions it was embedded with; asking
    for others is an error. Progress is shown on a terminal; a summary line goes to stderr.

    Exit codes: 0 done; 1 the provider failed (the batches before are kept); 2 bad input (a
    missing or malformed file, an id given twice), config error, NO_ADAPTER, UNSUPPORTED, or a
    collection embedded with another route, model or dimensions; 130 interrupted by Ctrl-C (143
    SIGTERM, 129 SIGHUP): the batches stored are kept, a rerun resumes.
    """
    from harness_core.cli._embed import embed_multi as run_embed_multi

    ctx.exit(run_embed_multi(collection, file, verbose=_verbosity(ctx), **options))


@cli.command()
@click.argument("collection")
@click.argument("text")
@click.option(
    "-n", "--number", "limit", type=click.IntRange(min=1), default=10, show_default=True, help="how many matches"
)
@click.option(
    "-d",
    "--database",
    type=click.Path(dir_okay=False),
    help="collection database (default: <user data dir>/harness/embeddings.sqlite)",
)
@_config_option
@click.option("--json", "as_json", is_flag=True, help='one JSON object per line: {"id", "score", "content"}')
@click.pass_context
def similar(ctx: click.Context, /, collection: str, text: str, **options: Any) -> None:
    """The rows of COLLECTION most similar to TEXT, best first (cosine similarity).

    TEXT is embedded with the collection's route, model and dimensions. Each line is `SCORE  ID
    CONTENT` (content when it was stored with `embed-multi --store`); `--json` prints one object
    per line.

    Exit codes: 0 listed; 1 the provider failed; 2 no such database or collection, config error.
    """
    from harness_core.cli._embed import similar as run_similar

    ctx.exit(run_similar(collection, text, verbose=_verbosity(ctx), **options))
