"""``harness plugins``, ``harness config check`` and ``harness chain``.

``plugins`` and ``config check`` both import, validate, build and start every plugin named in
plugins.yaml (never the disabled ones), so they report the same status ``harness run`` meets: a
plugin whose constructor raises or whose ``llm_stream`` is not an async generator is ``failed``,
never ``enabled``. Starting registers adapters and builds the middleware chain; it sends no
request. ``plugins`` lists every plugin with its state and routes (the routes it registered);
``config check`` reports every problem and failure at once (exit 2 when there is any).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import anyio
import msgspec

from harness_core.cli._common import EXIT_ERROR, EXIT_OK, EXIT_USAGE, Sink, load_for_start, output_failure_code
from harness_core.errors import LlmError
from harness_core.loader import LoadedConfig, PluginEntry, inspect_config
from harness_core.loader.check import every_problem, failure_line, start_problems
from harness_core.plugininfo import adapter_failures
from harness_core.routing import default_model
from harness_core.secret import redacted_logging
from harness_core.types import ModelInfo

__all__ = ["NO_COUNT_MIDDLEWARE", "NO_EMBED_MIDDLEWARE", "check_config", "show_chain", "show_models", "show_plugins"]


def show_plugins(config: str | None, *, as_json: bool) -> int:
    """Print the plugin table (or JSON); always exit 0: problems are part of the listing.

    Plugins are built and the harness started as ``config check`` does, so a plugin that cannot
    start is listed as ``failed`` with its reason. Every line goes through
    :meth:`LoadedConfig.redact`. Each problem is printed once: the config problems, then the
    messages of plugins that failed to import, build or start.
    """
    from harness_core.cli._promptlog import BY_DEFAULT, PROMPT_LOG, attach_default_prompt_log

    loaded = inspect_config(config)
    problems = [str(p) for p in loaded.problems]
    if not problems:
        attach_default_prompt_log(loaded)  # the prompt log a run writes, though plugins.yaml does not list it
        for entry in loaded.entries:
            if entry.name == PROMPT_LOG and entry.state == "installed":  # so attached (or failed: marked below)
                entry.state, entry.is_middleware, entry.message = "enabled", True, BY_DEFAULT
                entry.kind = "middleware"
        with redacted_logging(loaded.redact):
            problems = anyio.run(start_problems, loaded)
        _mark_failures(loaded, problems)
    out = Sink(sys.stdout)
    if as_json:
        document = {
            "config": loaded.source,
            "defaults": msgspec.to_builtins(loaded.defaults),
            "plugins": [msgspec.to_builtins(entry) for entry in loaded.entries],
            "problems": problems,
        }
        out.write(msgspec.json.encode(_redact_data(document, loaded.redact)).decode() + "\n")
        return _written(out, EXIT_OK)
    lines = [f"config: {loaded.source}"]
    rows = [("KEY", "STATE", "KIND", "DISTRIBUTION", "ROUTES")]
    rows += [_row(entry) for entry in loaded.entries]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, row[4]]))
    # an invalid entry's message (or a plugin the chain refused) is one of the problems already
    notes = [
        f"{entry.key}: {entry.message}"
        for entry in loaded.entries
        if entry.message and entry.state == "failed" and entry.message not in problems
    ]
    lines += [f"note: {entry.key}: {entry.message}" for entry in loaded.entries if entry.message == BY_DEFAULT]
    lines += [f"! {line}" for line in [*notes, *problems]]
    out.write("".join(loaded.redact(line) + "\n" for line in lines))
    return _written(out, EXIT_OK)


def _written(out: Sink, code: int) -> int:
    """``code``, unless writing ``out`` (stdout) failed: then the code of
    :func:`~harness_core.cli._common.output_failure_code` (1 after an ``error:`` line, 141 for
    a closed pipe)."""
    if out.failure is None:
        return code
    return output_failure_code(out, Sink(sys.stderr, name="stderr"))


def _mark_failures(loaded: LoadedConfig, problems: list[str]) -> None:
    """Entries of plugins that failed to build or start become ``failed``, with the reason.

    ``problems`` are the start problems: the middleware chain refuses a plugin (an ``llm_stream``
    that is no async generator) with a ``CONFIG`` error naming it as ``plugin 'key':``.
    """
    failed = {failure.key: failure_line(failure) for failure in loaded.failures}
    for entry in loaded.entries:
        refused = [problem for problem in problems if problem.startswith(f"CONFIG: plugin {entry.key!r}:")]
        message = failed.get(entry.key) or next(iter(refused), None)
        if message is not None and entry.state == "enabled":
            entry.state = "failed"
            entry.message = message


def _row(entry: PluginEntry) -> tuple[str, str, str, str, str]:
    kind = entry.kind or "-"  # (what its hooks make it: harness_core.plugininfo.plugin_kind)
    dist = f"{entry.dist} {entry.version}" if entry.dist else "-"
    routes = ", ".join(entry.routes) if entry.routes else "-"
    return entry.key, entry.state, kind, dist, routes


def _redact_data(value: Any, redact: Callable[[str], str]) -> Any:
    """``value`` (JSON-like builtins) with every string, keys included, redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redact_data(item, redact) for item in value]
    if isinstance(value, dict):
        return {_redact_data(key, redact): _redact_data(item, redact) for key, item in value.items()}
    return value


def check_config(config: str | None) -> int:
    """Validate, build and start everything; print every problem; exit 2 when there is one.

    Every problem in one run: the loader's (each plugin's config, field by field), then what the
    start of the plugins whose config is valid finds (built even when others are not:
    :func:`~harness_core.loader.inspect_config` ``partial``): a route the config names that no
    plugin serves, a start failure (``DUPLICATE_ROUTE``), a ``defaults.route`` that no started
    plugin serves and a ``defaults.model`` the default route's adapter rejects, each with its
    YAML line; then every plugin failure (import, build, start). An adapter plugin whose config
    is invalid counts, for that start, as an adapter plugin that failed (:mod:`harness_core.loader.check`):
    a route only it could serve is said to maybe be its. Log records emitted while the harness
    starts (a failing plugin's traceback) and every printed line are redacted.
    """
    loaded = inspect_config(config, partial=True)
    out = Sink(sys.stdout)
    with redacted_logging(loaded.redact):  # (a document that did not parse starts nothing)
        lines = [str(problem) for problem in anyio.run(every_problem, loaded)]  # as harness serve lists them
    if lines:
        text = f"{loaded.source}: {len(lines)} problem{'s' if len(lines) != 1 else ''}\n"
        text += "".join(f"  - {line}\n" for line in lines)
        out.write(loaded.redact(text))
        return _written(out, EXIT_USAGE)
    keys = ", ".join(plugin.key for plugin in loaded.plugins) or "none"
    defaults = loaded.defaults
    route, model = defaults.route or "-", defaults.model or "-"
    text = f"{loaded.source}: ok; plugins: {keys}; defaults: route={route}, model={model}\n"
    out.write(loaded.redact(text))
    return _written(out, EXIT_OK)


NO_COUNT_MIDDLEWARE = "none (no middleware wraps llm_count_tokens: a count goes to the route's adapter)"
"""What ``harness chain`` says of an empty token-count chain (after ``token counts (outermost first):``)."""

NO_EMBED_MIDDLEWARE = "none (no middleware wraps llm_embed: an embedding call goes to the route's adapter)"
"""What ``harness chain`` says of an empty embedding chain (after ``embedding calls (outermost first):``)."""


def show_chain(route: str | None, config: str | None, *, as_json: bool) -> int:
    """Print the middleware order for ``route`` (default route when ``None``), then its adapter.

    The default route is ``defaults.route``, else the only route served when exactly one is
    (the output says so). The ``llm_embed`` middleware an embedding call passes through follow
    (``embed_chain`` in ``--json``), or :data:`NO_EMBED_MIDDLEWARE` when none does (an empty
    ``embed_chain``), then the ``llm_count_tokens`` middleware a token count (``harness run
    --count-tokens``) passes through (``count_chain``), or :data:`NO_COUNT_MIDDLEWARE` when none
    does (an empty ``count_chain``). Everything
    printed, and every log record emitted while the harness runs, is redacted.
    """
    from harness_core.cli._promptlog import BY_DEFAULT, PROMPT_LOG, attach_default_prompt_log

    err = Sink(sys.stderr)
    loaded = load_for_start(config, err)
    if loaded is None:
        return EXIT_USAGE
    notes = {PROMPT_LOG: BY_DEFAULT} if attach_default_prompt_log(loaded) else {}
    try:
        loaded.require_complete()  # the default prompt log may have failed to start
    except LlmError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_USAGE
    try:
        with redacted_logging(loaded.redact):
            target, links, embed_links, count_links = anyio.run(_chain, loaded, route, notes)
    except LlmError as exc:
        err.write(loaded.redact(f"error: {exc}") + "\n")
        return EXIT_USAGE
    out = Sink(sys.stdout)
    if as_json:
        document = {"route": target, "chain": links, "embed_chain": embed_links, "count_chain": count_links}
        document = _redact_data(document, loaded.redact)
        out.write(msgspec.json.encode(document).decode() + "\n")
        return _written(out, EXIT_OK)
    if target is None:
        shown = "none given (pass ROUTE or set defaults.route): middleware only"
    elif route is None and loaded.defaults.route is None:
        shown = f"{target} (the only route served; no defaults.route)"
    else:
        shown = target
    text = f"route: {shown} (outermost first)\n"
    text += "".join(
        f"{number}. {link['key']} ({link['tier']})" + (f": {link['detail']}" if "detail" in link else "") + "\n"
        for number, link in enumerate(links, 1)
    )
    if embed_links:
        text += "embedding calls (outermost first):\n"
        text += "".join(f"{n}. {link['key']} ({link['tier']})\n" for n, link in enumerate(embed_links, 1))
    else:  # said, not left out, as an empty count chain is: `harness embed` then reaches the adapter directly
        text += f"embedding calls (outermost first): {NO_EMBED_MIDDLEWARE}\n"
    if count_links:
        text += "token counts (outermost first):\n"
        text += "".join(f"{n}. {link['key']} ({link['tier']})\n" for n, link in enumerate(count_links, 1))
    else:  # said, not left out: `run --count-tokens` then reaches the adapter with no middleware between
        text += f"token counts (outermost first): {NO_COUNT_MIDDLEWARE}\n"
    out.write(loaded.redact(text))
    return _written(out, EXIT_OK)


async def _chain(
    loaded: LoadedConfig, route: str | None, notes: dict[str, str]
) -> tuple[str | None, list[dict[str, str]], list[dict[str, str]], list[dict[str, str]]]:
    """The route shown (``route``, else the harness's default route), its links, the
    ``llm_embed`` links and the ``llm_count_tokens`` links (``key``, ``tier``); a middleware
    with a ``describe_chain(route) -> str | None`` method adds its ``detail`` (``fallback`` lists
    its targets), else ``notes`` give it by plugin key (the prompt log on by default). A plugin
    that is both a middleware and the route's adapter (a balance pool) is described at its first
    link only; the later one says ``the same plugin as link N``."""
    from harness_core.runtime import Harness

    instances = {plugin.key: plugin.instance for plugin in loaded.plugins}
    async with Harness.from_loaded(loaded) as harness:
        target = route if route is not None else harness.default_route()
        links: list[dict[str, str]] = []
        numbers: dict[str, int] = {}  # plugin key -> the number of its first link
        for number, link in enumerate(harness.chain(target), 1):
            entry = {"key": link.key, "tier": link.tier}
            describe = getattr(instances.get(link.key), "describe_chain", None)
            if link.key in numbers:  # a middleware serving the route too (balance): described once
                detail: object = f"the same plugin as link {numbers[link.key]}"
            else:
                numbers[link.key] = number
                detail = describe(target) if callable(describe) else notes.get(link.key)
            if detail:
                entry["detail"] = str(detail)
            links.append(entry)
        embed_links = [{"key": link.key, "tier": link.tier} for link in harness.embed_chain()]
        count_links = [{"key": link.key, "tier": link.tier} for link in harness.count_chain()]
        return target, links, embed_links, count_links


def show_models(route: str | None, config: str | None, *, as_json: bool) -> int:
    """Print every route's models (or only ``route``'s) with what the adapter knows of each.

    Models come from the adapter's ``list_models``; an adapter that cannot list them contributes
    the models the config names for its route (``defaults.model`` on the default route, and the
    ``aliases:`` pointing at it). Capabilities come from ``resolve_model``. A route whose listing
    fails, or an adapter plugin that failed to start (its routes cannot be listed), is reported on
    stderr (exit 1) and the others are still shown.
    """
    err = Sink(sys.stderr)
    loaded = load_for_start(config, err)
    if loaded is None:
        return EXIT_USAGE
    try:
        with redacted_logging(loaded.redact):
            listing = anyio.run(_models, loaded, route)
    except LlmError as exc:
        err.write(loaded.redact(f"error: {exc}") + "\n")
        return EXIT_USAGE
    return _print_models(loaded, listing, err, as_json=as_json)


NO_LIST = "no model list (its adapter cannot list models and plugins.yaml names none): pass -m MODEL"
"""What ``harness models`` says of a route it can list no model of."""

NO_EMBED_LIST = "embeddings: no model list (its embedder lists none): pass -m MODEL to `harness embed`"
"""What ``harness models`` says of an embedding route whose embedder lists no model."""

EMBEDDINGS = "embeddings"
"""The marker of an embedding model in ``harness models`` (a word after the model; ``"embeddings": true`` in JSON)."""


class _Listing(NamedTuple):
    """What ``harness models`` found: the generation models, the embedding models, the listing
    failures, and the routes (generation, embedding) with nothing to list."""

    models: list[ModelInfo]
    embedding: list[ModelInfo]
    problems: list[str]
    unlisted: list[str]
    unlisted_embedding: list[str]


def _print_models(loaded: LoadedConfig, listing: _Listing, err: Sink, *, as_json: bool) -> int:
    """Write the models of ``listing`` (a table or JSON), the embedding models after them marked
    ``embeddings``, a line per unlisted route (a ``note:`` on stderr with ``--json``, whose rows
    are models) and the problems; the exit code of ``harness models``."""
    for problem in listing.problems:
        err.write(loaded.redact(f"error: {problem}") + "\n")
    out = Sink(sys.stdout)
    rows = [msgspec.to_builtins(info) for info in listing.models]
    rows += [{**msgspec.to_builtins(info), EMBEDDINGS: True} for info in listing.embedding]
    if as_json:
        notes = [f"route {name!r}: {NO_LIST}" for name in listing.unlisted]
        notes += [f"route {name!r}: {NO_EMBED_LIST}" for name in listing.unlisted_embedding]
        for note in notes:
            err.write(loaded.redact(f"note: {note}") + "\n")
        out.write(loaded.redact(msgspec.json.encode(_redact_data(rows, loaded.redact)).decode()) + "\n")
    else:
        lines = [
            f"{info.route}/{info.model}"
            + (f"  context {info.context_window}" if info.context_window is not None else "")
            + (f"  max output {info.max_output_tokens}" if info.max_output_tokens is not None else "")
            + (f"  efforts {','.join(info.reasoning_efforts)}" if info.reasoning_efforts else "")
            for info in listing.models
        ]
        lines += [f"{name}  {NO_LIST}" for name in listing.unlisted]
        lines += [f"{info.route}/{info.model}  {EMBEDDINGS}" for info in listing.embedding]
        lines += [f"{name}  {NO_EMBED_LIST}" for name in listing.unlisted_embedding]
        out.write(loaded.redact("".join(f"{line}\n" for line in lines) or "no models\n"))
    return _written(out, EXIT_ERROR if listing.problems else EXIT_OK)


async def _models(loaded: LoadedConfig, route: str | None) -> _Listing:
    """The models of ``route`` (every route when ``None``), its embedding models (those of every
    embedding route), the listing failures, and the routes whose adapter cannot list models and
    for which plugins.yaml names none (or whose embedder lists none)."""
    from harness_core.runtime import Harness

    models: list[ModelInfo] = []
    embedding: list[ModelInfo] = []
    problems: list[str] = []
    unlisted: list[str] = []
    unlisted_embedding: list[str] = []
    async with Harness.from_loaded(loaded) as harness:
        embedders = harness.embed_routes()
        embeds_only = route is not None and route in embedders and route not in harness.routes()
        routes = [] if embeds_only else [route] if route is not None else sorted(harness.routes())
        for name in routes:
            try:
                listed = await harness.list_models(name)
            except LlmError as exc:
                if exc.code != "UNSUPPORTED":
                    if exc.code == "NO_ADAPTER":
                        raise
                    problems.append(f"route {name!r}: {exc}")
                    continue
                configured = [default_model(loaded.defaults, name)]
                configured += [
                    target.partition("/")[2] for target in loaded.aliases.values() if target.startswith(f"{name}/")
                ]
                listed = [harness.resolve_model(name, model) for model in dict.fromkeys(m for m in configured if m)]
                if not listed:
                    unlisted.append(name)
            models.extend(listed)
        if route is None:  # the routes of adapters that failed to start are in no listing: say so
            # (a middleware that failed stops the start before this: fail closed)
            for failure in adapter_failures(harness.failures):
                owned = ", ".join(repr(name) for name in failure.routes or [])
                problems.append(f"route {owned}: {failure_line(failure)}" if owned else failure_line(failure))
        for name in [route] if route in embedders else sorted(embedders) if route is None else []:
            try:
                listed = await harness.list_embedding_models(name)
            except LlmError as exc:
                problems.append(f"route {name!r} (embeddings): {exc}")
                continue
            embedding.extend(listed)
            if not listed:
                unlisted_embedding.append(name)
    return _Listing(models, embedding, problems, unlisted, unlisted_embedding)


def show_tools(config: str | None, *, as_json: bool) -> int:
    """Print every tool the configuration offers (``harness tools``): name, owning plugin and
    description, or with ``as_json`` one JSON object per line (``name``, ``plugin``,
    ``description``, ``parameters``). Every tool source is listed (an MCP server started, then
    stopped with the harness); one that fails is an ``error:`` line on stderr naming its plugin
    (exit 1) and the other tools are still shown. Everything printed is redacted.
    """
    err = Sink(sys.stderr)
    loaded = load_for_start(config, err)
    if loaded is None:
        return EXIT_USAGE
    try:
        with redacted_logging(loaded.redact):
            rows, problems = anyio.run(_tools, loaded)
    except LlmError as exc:
        return _start_failed(loaded, err, exc)
    return _print_tools(loaded, rows, problems, err, as_json=as_json)


def _start_failed(loaded: LoadedConfig, err: Sink, exc: LlmError) -> int:
    """Report that the harness could not start; exit 2. (A function of its own: on CPython 3.11
    the lines after an event loop that cancelled tasks may go untraced, cpython#106749.)"""
    err.write(loaded.redact(f"error: {exc}") + "\n")
    return EXIT_USAGE


def _print_tools(
    loaded: LoadedConfig, rows: list[dict[str, Any]], problems: list[str], err: Sink, *, as_json: bool
) -> int:
    """Write the tool ``rows`` (a table or JSON lines) and ``problems``; the exit code of ``harness tools``."""
    for problem in problems:
        err.write(loaded.redact(f"error: {problem}") + "\n")
    out = Sink(sys.stdout, redact=loaded.redact)
    if as_json:
        out.write("".join(msgspec.json.encode(_redact_data(row, loaded.redact)).decode() + "\n" for row in rows))
    else:
        width = max((len(row["name"]) for row in rows), default=0)
        lines = [
            f"{row['name']:<{width}}  [{row['plugin']}]  {(row['description'].splitlines() or [''])[0]}".rstrip()
            for row in rows
        ]
        out.write("".join(f"{line}\n" for line in lines) or "no tools\n")
    return _written(out, EXIT_ERROR if problems else EXIT_OK)


async def _tools(loaded: LoadedConfig) -> tuple[list[dict[str, Any]], list[str]]:
    """The tool rows of :func:`show_tools` and the failures of tool sources."""
    from harness_core.runtime import Harness

    async with Harness.from_loaded(loaded) as harness:
        listed, failures = await harness.list_tools()
    rows = [
        {"name": item.name, "plugin": owner, "description": item.description, "parameters": item.parameters}
        for item, owner in listed
    ]
    return rows, [str(error) for error in failures.values()]
