"""A synchronous facade for scripts: :class:`SyncHarness`.

Runs a :class:`~harness_core.runtime.Harness` on one long-lived event loop in a background thread
(an anyio blocking portal, :func:`anyio.from_thread.start_blocking_portal`) for the lifetime of
the ``with`` block — not a new event loop per call, so connections and clients are reused::

    with SyncHarness.from_config() as harness:
        print(harness.generate(options).text)
        with harness.stream(options) as chunks:
            for chunk in chunks:
                ...

``options.abort`` may be fired from any thread, e.g. a signal handler.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Final, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

from harness_core.chain import ChainLink
from harness_core.plugininfo import LoadedPlugin, PluginFailure
from harness_core.runtime import GenerateResult, Harness
from harness_core.types import GenerateOptions, ModelInfo, StreamChunk

__all__ = ["SyncHarness"]

T = TypeVar("T")

_END: Final = object()


async def _next(iterator: Any) -> Any:
    """The next chunk of ``iterator``, or ``_END`` (``StopAsyncIteration`` cannot cross the portal)."""
    try:
        return await iterator.__anext__()
    except StopAsyncIteration:
        return _END


class SyncHarness:
    """Blocking access to a :class:`~harness_core.runtime.Harness` (same methods, no ``await``).

    Args:
        harness: the (not yet started) harness to run.
        backend: the anyio backend of the portal's event loop, ``"asyncio"`` or ``"trio"``.

    ``with sync_harness:`` starts the portal thread and the harness; leaving the block closes
    the harness and then the portal. Methods raise ``RuntimeError`` outside the block.
    """

    def __init__(self, harness: Harness, *, backend: str = "asyncio") -> None:
        self.harness = harness
        """The wrapped asynchronous harness (its methods must run on the portal)."""
        self._backend = backend
        self._stack: ExitStack | None = None
        self._portal: BlockingPortal | None = None
        self._open: set[_OpenStream] = set()

    @classmethod
    def from_config(cls, path: str | Path | None = None, *, backend: str = "asyncio") -> SyncHarness:
        """:meth:`Harness.from_config <harness_core.runtime.Harness.from_config>`, wrapped."""
        return cls(Harness.from_config(path), backend=backend)

    def __enter__(self) -> SyncHarness:
        if self._stack is not None:
            raise RuntimeError("this SyncHarness is already running")
        with ExitStack() as stack:
            portal = stack.enter_context(start_blocking_portal(self._backend))
            stack.enter_context(portal.wrap_async_context_manager(self.harness))
            self._stack = stack.pop_all()
            self._portal = portal
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        stack, self._stack, self._portal = self._stack, None, None
        if stack is not None:
            # A stream still open (an abandoned iterator) would keep the portal waiting forever:
            # close it first, like the async runtime closes every generator on exit.
            for handle in list(self._open):
                self._open.discard(handle)
                handle.close(None, None, None)
            stack.__exit__(exc_type, exc, tb)

    def _call(self, function: Callable[..., Any], *args: Any) -> Any:
        if self._portal is None:
            raise RuntimeError("the SyncHarness is not running: use `with SyncHarness(...) as harness:`")
        return self._portal.call(function, *args)

    def generate(self, options: GenerateOptions) -> GenerateResult:
        """:meth:`Harness.generate <harness_core.runtime.Harness.generate>`, blocking."""
        result: GenerateResult = self._call(self.harness.generate, options)
        return result

    def generate_object(
        self, options: GenerateOptions, type_: type[T], *, name: str | None = None, strict: bool = False
    ) -> T:
        """:meth:`Harness.generate_object <harness_core.runtime.Harness.generate_object>`, blocking."""
        result: T = self._call(
            functools.partial(self.harness.generate_object, name=name, strict=strict), options, type_
        )
        return result

    def stream(self, options: GenerateOptions) -> AbstractContextManager[Iterator[StreamChunk]]:
        """``with harness.stream(options) as chunks: for chunk in chunks: …`` — chunks as they arrive.

        Leaving the block closes the stream on the portal (every generator of the chain).
        """
        if self._portal is None:
            raise RuntimeError("the SyncHarness is not running: use `with SyncHarness(...) as harness:`")
        return self._stream(self._portal, options)

    @contextmanager
    def _stream(self, portal: BlockingPortal, options: GenerateOptions) -> Iterator[Iterator[StreamChunk]]:
        handle = _OpenStream(portal, portal.call(self.harness.stream, options))
        chunks = handle.enter()
        self._open.add(handle)
        try:
            yield _iterate(portal, chunks)
        except BaseException as exc:
            self._open.discard(handle)
            handle.close(type(exc), exc, exc.__traceback__)  # a stream context never suppresses
            raise
        else:
            self._open.discard(handle)
            handle.close(None, None, None)

    def routes(self) -> dict[str, str]:
        """:meth:`Harness.routes <harness_core.runtime.Harness.routes>`."""
        return self.harness.routes()

    def chain(self, route: str | None = None) -> list[ChainLink]:
        """:meth:`Harness.chain <harness_core.runtime.Harness.chain>`."""
        return self.harness.chain(route)

    def resolve_model(self, route: str | None = None, model: str | None = None) -> ModelInfo:
        """:meth:`Harness.resolve_model <harness_core.runtime.Harness.resolve_model>`."""
        info: ModelInfo = self._call(self.harness.resolve_model, route, model)
        return info

    def list_models(self, route: str | None = None) -> list[ModelInfo]:
        """:meth:`Harness.list_models <harness_core.runtime.Harness.list_models>`, blocking."""
        models: list[ModelInfo] = self._call(self.harness.list_models, route)
        return models

    @property
    def plugins(self) -> tuple[LoadedPlugin, ...]:
        """:attr:`Harness.plugins <harness_core.runtime.Harness.plugins>`."""
        return self.harness.plugins

    @property
    def failures(self) -> tuple[PluginFailure, ...]:
        """:attr:`Harness.failures <harness_core.runtime.Harness.failures>`."""
        return self.harness.failures


class _OpenStream:
    """A stream context entered on the portal, closable exactly once (by its ``with`` block or by
    :meth:`SyncHarness.__exit__`, whichever comes first)."""

    __slots__ = ("_closed", "_context")

    def __init__(self, portal: BlockingPortal, context: Any) -> None:
        self._context = portal.wrap_async_context_manager(context)
        self._closed = False

    def enter(self) -> Any:
        """Enter the stream context on the portal; returns the async iterator of chunks."""
        return self._context.__enter__()

    def close(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        """Exit the stream context (closing every generator of the chain). Later calls do nothing."""
        if not self._closed:
            self._closed = True
            self._context.__exit__(exc_type, exc, tb)


def _iterate(portal: BlockingPortal, chunks: Any) -> Iterator[StreamChunk]:
    """A plain iterator pulling each chunk of the async iterator ``chunks`` through ``portal``."""
    while True:
        chunk = portal.call(_next, chunks)
        if chunk is _END:
            return
        yield chunk
