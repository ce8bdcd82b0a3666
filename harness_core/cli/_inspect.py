"""``harness plugins``, ``harness config check`` and ``harness chain``.

``plugins`` imports the plugins named in plugins.yaml (never the disabled ones) and validates
their configs, but does not build or start them: routes shown come from each config's
``routes`` field, so no adapter starts and no provider SDK is needed for the listing (an adapter
plugin's module must keep its import light, e.g. import httpx lazily). ``config check`` goes all
the way: it builds every plugin and starts the harness (adapter registration, middleware chain),
then reports every problem and failure at once (exit 2 when there is any).
"""

from __future__ import annotations

import sys

import anyio
import msgspec

from harness_core.cli._common import EXIT_OK, EXIT_USAGE, Sink, load_for_start
from harness_core.errors import LlmError
from harness_core.loader import LoadedConfig, PluginEntry, inspect_config
from harness_core.plugininfo import PluginFailure

__all__ = ["check_config", "show_chain", "show_plugins"]


def show_plugins(config: str | None, *, as_json: bool) -> int:
    """Print the plugin table (or JSON); always exit 0: problems are part of the listing."""
    loaded = inspect_config(config, instantiate=False)
    out = Sink(sys.stdout)
    problems = [loaded.redact(str(p)) for p in loaded.problems]
    if as_json:
        document = {
            "config": loaded.source,
            "defaults": msgspec.to_builtins(loaded.defaults),
            "plugins": [msgspec.to_builtins(entry) for entry in loaded.entries],
            "problems": problems,
        }
        out.write(msgspec.json.encode(document).decode() + "\n")
        return EXIT_OK
    out.write(f"config: {loaded.source}\n")
    rows = [("KEY", "STATE", "KIND", "DISTRIBUTION", "ROUTES")]
    rows += [_row(entry) for entry in loaded.entries]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        out.write("  ".join([*cells, row[4]]) + "\n")
    notes = [f"{entry.key}: {entry.message}" for entry in loaded.entries if entry.message]
    for line in [*notes, *problems]:
        out.write(f"! {line}\n")
    return EXIT_OK


def _row(entry: PluginEntry) -> tuple[str, str, str, str, str]:
    kind = {True: "middleware", False: "adapter", None: "-"}[entry.is_middleware]
    dist = f"{entry.dist} {entry.version}" if entry.dist else "-"
    routes = ", ".join(entry.routes) if entry.routes else "-"
    return entry.key, entry.state, kind, dist, routes


def check_config(config: str | None) -> int:
    """Validate, build and start everything; print every problem; exit 2 when there is one."""
    loaded = inspect_config(config)
    out = Sink(sys.stdout)
    lines = [loaded.redact(str(problem)) for problem in loaded.problems]
    if not lines:
        started = anyio.run(_start, loaded)
        lines = [loaded.redact(line) for line in started]
    lines += [_failure_line(failure) for failure in loaded.failures]
    if lines:
        out.write(f"{loaded.source}: {len(lines)} problem{'s' if len(lines) != 1 else ''}\n")
        for line in lines:
            out.write(f"  - {line}\n")
        return EXIT_USAGE
    keys = ", ".join(plugin.key for plugin in loaded.plugins) or "none"
    defaults = loaded.defaults
    out.write(f"{loaded.source}: ok; plugins: {keys}; defaults: provider={defaults.provider}, model={defaults.model}\n")
    return EXIT_OK


def _failure_line(failure: PluginFailure) -> str:
    kind = "middleware" if failure.is_middleware else "adapter"
    return f"{failure.message} [{kind}, stage {failure.stage}]"


async def _start(loaded: LoadedConfig) -> list[str]:
    """Start and stop the harness; the problems found on the way (failures are added to ``loaded``)."""
    from harness_core.runtime import Harness

    harness = Harness(loaded.plugins, defaults=loaded.defaults, failures=())
    problems: list[str] = []
    try:
        async with harness:
            pass
    except LlmError as exc:
        problems.append(str(exc))
    failures = harness.failures
    loaded.failures.extend(failures)
    return [] if failures else problems


def show_chain(route: str | None, config: str | None, *, as_json: bool) -> int:
    """Print the middleware order for ``route`` (default route when ``None``), then its adapter."""
    err = Sink(sys.stderr)
    loaded = load_for_start(config, err)
    if loaded is None:
        return EXIT_USAGE
    target = route if route is not None else loaded.defaults.provider
    try:
        links = anyio.run(_chain, loaded, target)
    except LlmError as exc:
        err.write(loaded.redact(f"error: {exc}") + "\n")
        return EXIT_USAGE
    out = Sink(sys.stdout)
    if as_json:
        out.write(msgspec.json.encode({"route": target, "chain": links}).decode() + "\n")
        return EXIT_OK
    out.write(f"route: {target or '-'} (outermost first)\n")
    for number, link in enumerate(links, 1):
        out.write(f"{number}. {link['key']} ({link['tier']})\n")
    return EXIT_OK


async def _chain(loaded: LoadedConfig, route: str | None) -> list[dict[str, str]]:
    from harness_core.runtime import Harness

    async with Harness(loaded.plugins, defaults=loaded.defaults, failures=loaded.failures) as harness:
        return [{"key": link.key, "tier": link.tier} for link in harness.chain(route)]
