"""What one ``harness run`` asks (:class:`RunRequest`, built once from the command line) and how it
becomes :class:`~harness_core.types.GenerateOptions`: the prompt read from stdin and the argument,
a model alias resolved, ``-o`` options keyed by the route's plugin, a logged conversation continued.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

import msgspec

from harness_core.cli._common import Sink, isatty, resolve_flags
from harness_core.cli._options import owner_name, parse_options, served_routes
from harness_core.cli._text import clean_argument, read_stdin
from harness_core.errors import LlmError
from harness_core.fields import RefusedField, pass_through
from harness_core.loader import LoadedConfig
from harness_core.routing import default_route, route_suggestion
from harness_core.types import GenerateOptions

if TYPE_CHECKING:  # pragma: no cover - typing only (the runtime loads when a command starts it)
    from harness_core.runtime import Harness

__all__ = ["RunRequest", "binary_stdin", "check_provider_options", "clean_option", "prepare", "read_prompt"]


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    """One ``harness run`` as the command line gave it (raw values: cleaning and reading stdin
    happen when it runs, :func:`harness_core.cli._run.execute`).

    Prompt parts: ``prompt`` (the argument; ``-`` reads stdin only), ``system``, ``attach`` (paths
    or URLs) and ``attach_type`` (``(path or URL, media type)`` pairs), ``schema`` (``--schema``).
    Target: ``route`` (``-r``) and ``model`` (``-m``, an alias allowed). Options: ``max_tokens``,
    ``temperature``, ``reasoning_effort``, ``top_p``, ``seed``, ``stop``, ``tool_choice``,
    ``provider_options`` (``-o key=value`` texts). Output: ``as_json``, ``no_stream``,
    ``extract``, ``verbose`` (tracebacks). Tools: ``tools`` (names or globs), ``max_steps``,
    ``approve``. Conversation: ``no_log``, ``continue_last`` (``-C``), ``cid``. ``config`` is the
    plugins.yaml path; ``count_tokens`` counts the input tokens instead of generating.
    """

    prompt: str | None = None
    as_json: bool = False
    route: str | None = None
    model: str | None = None
    system: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    reasoning_effort: str | None = None
    config: str | None = None
    tools: Sequence[str] = ()
    max_steps: int = 8
    verbose: int = 0
    top_p: float | None = None
    seed: int | None = None
    stop: Sequence[str] = ()
    tool_choice: str | None = None
    provider_options: Sequence[str] = ()
    no_stream: bool = False
    extract: bool = False
    no_log: bool = False
    continue_last: bool = False
    cid: str | None = None
    attach: Sequence[str] = ()
    attach_type: Sequence[tuple[str, str]] = ()
    schema: str | None = None
    approve: bool = False
    count_tokens: bool = False


def prepare(
    loaded: LoadedConfig,
    err: Sink,
    options: GenerateOptions,
    *,
    provider_options: Sequence[str],
    log: bool,
    continue_last: bool,
    cid: str | None,
) -> GenerateOptions | None:
    """``options`` completed from the command line's habits: a model alias or a ``route/model``
    id resolved (:meth:`LoadedConfig.resolve_target <harness_core.loader.LoadedConfig.resolve_target>`), ``-o``
    options keyed by the route's plugin, the prompt log attached, a logged conversation's
    history prepended. ``None`` (after an ``error:`` line) for a usage error (``-o`` for a route
    no plugin serves names the closest one: :func:`~harness_core.routing.route_suggestion`)."""
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
    target = resolve_flags(loaded, options.route, options.model)  # before a continued conversation fills in
    provider, model = target
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
        provider = provider if provider is not None else found.options.route
        model = model if model is not None else found.options.model
        metadata[CONVERSATION_KEY] = found.conversation_id
    extra: dict[str, dict[str, Any]] = {}
    if provider_options:
        try:
            parsed = parse_options(provider_options)
        except ValueError as exc:
            err.write(f"error: {exc}\n")
            return None
        served = served_routes(loaded)
        route = provider if provider is not None else default_route(loaded.defaults, served)
        owner = owner_name(loaded, route)
        if owner is None:
            hint = route_suggestion(route, served) if route is not None else ""
            named = f"{route!r} is none{hint}" if route is not None else "none given (-r/--route) and no default route"
            err.write(f"error: -o needs a route served by a plugin of plugins.yaml; {named}\n")
            return None
        extra[owner] = parsed
    return msgspec.structs.replace(
        options,
        route=provider,
        model=model,
        messages=messages,
        system=system,
        provider_options=extra,
        metadata=metadata,
    )


def check_provider_options(harness: Harness, options: GenerateOptions) -> None:
    """Apply the field rule (:mod:`harness_core.fields`, the gateway's too) to the ``-o`` options
    of ``options``: they are addressed to the route's own plugin, so they reach its adapter
    unchanged when it takes provider options and are refused otherwise (the mock's routes), never
    dropped. The vocabulary's own fields were refused earlier, naming their flag
    (:data:`~harness_core.cli._options.OWNED_OPTIONS`).

    Raises:
        LlmError: ``UNSUPPORTED`` (exit 2) naming the first option (``-o delay``) and the route
            that cannot take it; ``NO_ADAPTER`` for an unknown route.
    """
    if not options.provider_options:
        return
    target = harness.route_target(harness.apply_defaults(options).route)
    for fields in options.provider_options.values():
        try:
            pass_through(fields, (), (), wire=None, target=target, path=lambda key: f"-o {key}")
        except RefusedField as refused:
            raise LlmError("UNSUPPORTED", str(refused)) from None


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


def binary_stdin(stdin: TextIO | None) -> BinaryIO | None:
    """The byte stream under ``stdin`` (``-a -`` reads bytes: an image is no text); ``None`` when closed."""
    return stdin.buffer if stdin is not None else None


def clean_option(value: str | None) -> tuple[str | None, bool]:
    """An optional text option from argv cleaned by :func:`clean_argument` (``None`` stays)."""
    return clean_argument(value) if value is not None else (None, False)
