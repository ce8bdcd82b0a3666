"""The runtime a gateway serves from, and its atomic replacement on reload.

A :class:`GatewayRuntime` is one started :class:`~harness_core.Harness` built from one reading of
``plugins.yaml``, with that file's ``gateway`` config. :class:`RuntimeHolder` hands the current
one to each request (counting it in flight) and swaps in a new one atomically: new requests use
the new runtime at once, requests in flight finish on the old one, which is closed when they are
done (or after ``drain_timeout`` seconds, when the remaining ones are cancelled).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Final

import anyio
import msgspec

from harness_core import (
    AbortSignal,
    ConfigPath,
    Harness,
    LlmError,
    LoadedConfig,
    adapter_failures,
    find_config,
    load_complete,
    parse_model_id,
    route_suggestion,
)
from harness_core.kit import HttpProviderConfig
from harness_core.middleware import snippet
from harness_gateway.config import GatewayConfig, GatewayPlugin
from harness_gateway.errors import GatewayError, from_failure
from harness_gateway.keys import mask_keys

__all__ = ["ABORT_GRACE", "POOL_SIZE", "GatewayRuntime", "RuntimeHolder", "load_runtime", "provider_defaults"]

logger = logging.getLogger(__name__)

ABORT_GRACE: Final = 2.0
"""Seconds an aborted generation may take to end (its terminal event, its partial usage) before
it is cancelled: after a client's disconnect (:mod:`harness_gateway.relay`) and after the drain
timeout (:meth:`RuntimeHolder.retire`)."""

POOL_SIZE: Final = 1000
"""The connection pool of every HTTP provider in the gateway whose plugins.yaml entry does not
set ``max_connections``: the adapters' default (20) suits one CLI process, while a gateway with
more streams in flight to one provider would queue them in the pool (BENCHMARKS.md, "Gateway")."""


class GatewayRuntime:
    """A started harness plus the gateway config read with it."""

    def __init__(
        self,
        harness: Harness,
        config: GatewayConfig,
        source: str,
        redact: Callable[[str], str] = str,
        aliases: dict[str, str] | None = None,
    ) -> None:
        self.harness = harness
        self.aliases: dict[str, str] = dict(config.aliases) if aliases is None else aliases
        """Model alias → ``route/model``: plugins.yaml's ``aliases:`` and the gateway's own (which win)."""
        self.redact = redact
        """Scrubs this configuration's secrets and the gateway's own keys from text (log handlers,
        console records, the ledger)."""
        self.config = config
        self.source = source
        self.in_flight = 0
        self.idle = anyio.Event()
        self.idle.set()
        self.scopes: set[anyio.CancelScope] = set()
        self.aborts: set[AbortSignal] = set()
        """The abort signals of the generations running on this runtime (:meth:`abort_all`)."""
        self.drained: set[AbortSignal] = set()
        """The signals :meth:`abort_all` fired (not one fired before it, by the client or the
        console): their generations end with the gateway's drain error
        (:func:`~harness_gateway.errors.public_abort`). A generation discards its own when it ends."""
        self.prices = config.price_book()
        self._stack = AsyncExitStack()

    def abort_all(self, reason: str) -> int:
        """Fire the abort signal of every generation running on this runtime (each then ends as
        a client's disconnect does, the usage so far charged, but its client, still there, gets
        its dialect's in-stream error or an error response: 503, the gateway is shutting down or
        reloading, :data:`~harness_gateway.errors.DRAINED`); how many were running. Called at
        the drain timeout, before what is left is cancelled; ``reason`` is the signal's (the
        core's finish carries it), what clients, observers and the console are shown is
        :data:`~harness_gateway.errors.DRAINED` (:meth:`~harness_gateway.relay.Relay.shown_abort`)."""
        running = list(self.aborts)
        for abort in running:
            if not abort.fired:
                self.drained.add(abort)
                abort.fire(reason)
        return len(running)

    def resolve(self, requested: str, *, embeddings: bool = False) -> tuple[str, str, str]:
        """``(route, model, owner key)`` for a request's ``model`` (``route/model`` or an alias).

        ``embeddings``: resolve for ``POST /v1/embeddings``: a route with an embedder is served (its
        embedder's owner), and so is a route that only streams (the embedding boundary then answers
        ``UNSUPPORTED`` naming it, a 400).

        Raises:
            GatewayError: 404 naming the model when it is neither an alias nor ``route/model`` of a
                served route.
        """
        target = self.aliases.get(requested, requested)
        route, model = parse_model_id(target) or (target.partition("/")[0], "")  # as the command line reads -m
        owner = self.harness.route_owner(route, embeddings=embeddings) if model else None
        if owner is None:  # the route table is built for the error only
            served = self.harness.routes()
            if embeddings:
                served = {**served, **self.harness.embed_routes()}
            raise self.not_served(requested, route, served, model)
        return route, model, owner

    def not_served(self, requested: str, route: str, served: Mapping[str, str], model: str = "") -> GatewayError:
        """The error for a request's ``model`` that names no served route (``served``: route → owner).

        When the adapter plugin that would serve ``route`` failed (docs/loader.md: under ``serve``
        its routes fail naming why), the error ``harness run`` gives
        (:meth:`~harness_core.Harness.no_adapter`: ``CONFIG: route 'R' is unavailable: …``, the
        located cause), with its status (:func:`~harness_gateway.errors.from_failure`: 500, a fault
        of the gateway's configuration, not of the request). Otherwise a 404 naming the served
        routes, and the adapter plugins that failed when some did (one of them may own it); for a
        ``route/model`` id (``model``: its model part) whose route is a typo of a served one, the
        id meant (``did you mean 'mock/echo'?``, :func:`~harness_core.routing.route_suggestion`,
        the runtime's own)."""
        error = self.harness.no_adapter(route)
        if error.code != "NO_ADAPTER":
            unavailable = from_failure(error.to_failure())
            unavailable.param = "model"
            return unavailable
        routes = ", ".join(sorted(served)) or "none"
        failed = "; ".join(f.message for f in adapter_failures(self.harness.failures))
        causes = f"; adapter plugins that failed (one may own it): {failed}" if failed else ""
        hint = route_suggestion(route, served, model=model) if model else ""
        return GatewayError(
            404,
            f"model {snippet(repr(requested))} is not served here{hint}: use `route/model` (routes: {routes}) "
            f"or an alias (GET /v1/models lists them){causes}",
            code="model_not_found",
            param="model",
        )

    def warn_unavailable(self) -> None:
        """Log one warning per adapter plugin that failed (its routes are unavailable: the loader's
        located reason, ``PluginFailure.unavailable_note``), as ``harness run`` warns; a request for
        one of its routes gets :meth:`not_served`'s error."""
        for failure in adapter_failures(self.harness.failures):  # a middleware's stops the start
            logger.warning("%s", failure.unavailable_note())

    async def aclose(self) -> None:
        """Close the harness (adapters and plugins)."""
        await self._stack.aclose()


async def load_runtime(path: str | Path | None) -> GatewayRuntime:
    """Read and validate ``path`` (the usual config search when ``None``) and start its harness,
    its HTTP providers built with the gateway's defaults (:func:`provider_defaults`).

    Raises:
        ConfigError: (an :class:`LlmError` with code ``CONFIG``) every located problem (file,
            plugin, field, line) when the file is invalid, the same list as ``harness config
            check`` (:func:`harness_core.loader.check.load_complete`: the loader's, then what the
            start of the valid plugins finds, then every plugin failure) (an unset ``${{ env.X }}`` in the
            ``gateway`` entry among them) or a plugin that fails closed failed to load
            (:meth:`~harness_core.loader.LoadedConfig.require_complete`).
    """
    # every problem, as `harness config check` lists them; a policy plugin dropped: never serve
    loaded = await load_complete(find_config(path), configure=provider_defaults)
    gateway = next((p.instance for p in loaded.plugins if isinstance(p.instance, GatewayPlugin)), None)
    config = gateway.config if gateway is not None else GatewayConfig()
    harness = Harness.from_loaded(loaded, mask=mask_keys)  # the gateway's own keys are secrets too
    runtime = GatewayRuntime(harness, config, loaded.source, harness.redact)
    await runtime._stack.enter_async_context(harness)
    runtime.aliases = merged_aliases(loaded, config, harness.default_route())  # the routes served are known now
    return runtime


def provider_defaults(
    configs: Mapping[str, msgspec.Struct], lines: Mapping[ConfigPath, int], size: int = POOL_SIZE
) -> dict[str, msgspec.Struct]:
    """The gateway's defaults for the HTTP providers of one load, as the loader's ``configure``
    (:data:`harness_core.loader.Configure`: applied to the validated configs before any plugin is
    built, so every load has its own and no built instance is changed): for every
    :class:`~harness_core.kit.HttpProviderConfig` in ``configs`` (by plugins.yaml key), a pool of
    ``size`` connections unless its entry sets ``max_connections``, and ``timeout.read`` = the
    ``gateway`` entry's ``upstream_read_timeout`` (default config when there is none) unless its
    entry sets ``timeout.read`` (a stalled upstream then ends the stream with a ``TIMEOUT`` error
    instead of holding the client for the adapters' 600 s). ``lines`` (the YAML lines by document
    path) tells what an entry sets. Returns the replaced configs only."""
    gateway = next((c for c in configs.values() if isinstance(c, GatewayConfig)), GatewayConfig())
    read = gateway.upstream_read_timeout
    replaced: dict[str, msgspec.Struct] = {}
    for key, settings in configs.items():
        if not isinstance(settings, HttpProviderConfig):
            continue
        if ("plugins", key, "max_connections") not in lines:
            settings = msgspec.structs.replace(settings, max_connections=size)
        if read is not None and ("plugins", key, "timeout", "read") not in lines:
            settings = msgspec.structs.replace(settings, timeout=msgspec.structs.replace(settings.timeout, read=read))
        replaced[key] = settings
    return replaced


def merged_aliases(loaded: LoadedConfig, config: GatewayConfig, default_route: str | None) -> dict[str, str]:
    """plugins.yaml's top-level ``aliases:`` as ``route/model``, then the gateway's own (which win).

    The command line's rule (:meth:`LoadedConfig.resolve_alias
    <harness_core.loader.LoadedConfig.resolve_alias>`): a plain model id stands for that model on
    ``default_route`` (:meth:`Harness.default_route <harness_core.Harness.default_route>`:
    ``defaults.route``, else the only route served); without a default route it cannot be served
    and is left out."""
    merged: dict[str, str] = {}
    for name in loaded.aliases:
        route, model = loaded.resolve_alias(None, name)
        route = route if route is not None else default_route
        if route is not None and model is not None:
            merged[name] = f"{route}/{model}"
    merged.update(config.aliases)
    return merged


class RuntimeHolder:
    """The current :class:`GatewayRuntime`; requests borrow it with :meth:`use`."""

    def __init__(self, runtime: GatewayRuntime) -> None:
        self.current = runtime
        self.closing = False
        self.refused: str | None = None
        """The problems of the last reload refused since the runtime was last replaced (each
        problem is logged once: a SIGHUP and ``--reload``'s watch of one edit refuse it twice)."""

    @contextlib.asynccontextmanager
    async def use(self) -> AsyncIterator[GatewayRuntime]:
        """Borrow the current runtime for one request (it is not closed while borrowed)."""
        runtime = self.current
        runtime.in_flight += 1
        runtime.idle = anyio.Event() if runtime.in_flight == 1 else runtime.idle
        scope = anyio.CancelScope()
        runtime.scopes.add(scope)
        try:
            with scope:
                yield runtime
        finally:
            runtime.scopes.discard(scope)
            runtime.in_flight -= 1
            if runtime.in_flight == 0:
                runtime.idle.set()

    async def swap(self, new: GatewayRuntime) -> None:
        """Make ``new`` current, then drain and close the old runtime (bounded by the ``drain_timeout``
        of ``new``: the file just read says how long a drain may take)."""
        old, self.current = self.current, new
        logger.info("runtime replaced from %s; draining %d request(s) on the old one", new.source, old.in_flight)
        await self.retire(old, new.config.drain_timeout)

    async def retire(self, runtime: GatewayRuntime, drain_timeout: float | None = None) -> None:
        """Wait up to ``drain_timeout`` (default: ``runtime``'s) for ``runtime``'s requests, then abort its generations
        (:meth:`GatewayRuntime.abort_all`: each ends with its aborted terminal event and is
        charged what it used) and wait up to :data:`ABORT_GRACE` more, cancel what is left, and
        close it."""
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(runtime.config.drain_timeout if drain_timeout is None else drain_timeout):
                await runtime.idle.wait()
            if runtime.in_flight and runtime.abort_all("the gateway's drain timeout passed"):
                logger.warning("aborting the generations still running after the drain timeout")
                with anyio.move_on_after(ABORT_GRACE):
                    await runtime.idle.wait()
            if runtime.in_flight:
                logger.warning("cancelling %d request(s) still running after the drain timeout", runtime.in_flight)
                for scope in list(runtime.scopes):
                    scope.cancel()
            try:
                await runtime.aclose()
            except Exception:
                logger.exception("closing the old runtime failed")

    async def reload(self, path: str | Path | None) -> bool:
        """Re-read ``path`` and :meth:`swap` to it; an invalid file keeps the current runtime.

        Returns whether the runtime was replaced. Located errors are logged, never raised; the
        same problems as the last refused reload's are not logged again (one line says so).
        """
        try:
            new = await load_runtime(path)
        except LlmError as exc:
            if str(exc) == self.refused:
                logger.error("reload refused, keeping the current runtime: the same problems as the last reload's")
            else:
                logger.error("reload refused, keeping the current runtime: %s", exc)
            self.refused = str(exc)
            return False
        self.refused = None
        new.warn_unavailable()
        await self.swap(new)
        return True
