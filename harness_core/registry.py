"""The route registry: which adapter serves which route, and which plugin owns it (docs/runtime.md).

Plugins register adapters through the ``register_adapter`` hook with a ``register`` function
the runtime binds to the plugin's plugins.yaml key (:meth:`RouteRegistry.bind`). One adapter per
route; a taken route raises ``LlmError("DUPLICATE_ROUTE")`` naming both owners; a multi-route
registration is all-or-nothing; the returned handle unregisters exactly that registration.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from harness_core.adapter import LlmAdapter
from harness_core.errors import LlmError
from harness_core.hookspecs import RegisterAdapter
from harness_core.plugininfo import plugin_name

__all__ = ["DuplicateRoute", "Registration", "RouteRegistry"]


class DuplicateRoute(LlmError):
    """``DUPLICATE_ROUTE``: plugin ``owner`` registered ``route``, which plugin ``taken``
    registered first (``taken`` ``None``: one registration of ``owner`` lists it twice). The
    message names both plugins; the runtime adds where plugins.yaml declares the route
    (:func:`~harness_core.routing.duplicate_route_places`)."""

    def __init__(self, route: str, owner: str, taken: str | None) -> None:
        if taken is None:
            message = f"plugin {owner!r} lists route {route!r} twice"
        else:
            message = f"route {route!r} of plugin {owner!r} is already registered by plugin {taken!r}"
        super().__init__("DUPLICATE_ROUTE", message)
        self.route = route
        self.owner = owner
        self.taken = taken


class Registration:
    """One successful ``register(routes, adapter)`` call by the plugin ``owner``."""

    __slots__ = ("_gen_ai_provider", "adapter", "owner", "routes")

    def __init__(self, owner: str, routes: tuple[str, ...], adapter: Any) -> None:
        self.owner = owner
        self.routes = routes
        self.adapter = adapter
        self._gen_ai_provider: tuple[str | None] | None = None  # resolved on first use

    def gen_ai_provider(self) -> str | None:
        """The GenAI provider of this registration's routes (``gen_ai.provider.name``), asked of
        the adapter once (:meth:`LlmAdapter.gen_ai_provider
        <harness_core.adapter.LlmAdapter.gen_ai_provider>`, handed the owner's entry-point name);
        an embedder that is no :class:`~harness_core.adapter.LlmAdapter` is named by its plugin.
        An adapter that raises: the exception propagates (a bug in the adapter, not hidden)."""
        resolved = self._gen_ai_provider
        if resolved is None:
            name = plugin_name(self.owner)
            adapter = self.adapter
            resolved = self._gen_ai_provider = (
                (adapter.gen_ai_provider(name) if isinstance(adapter, LlmAdapter) else name),
            )
        return resolved[0]

    def __repr__(self) -> str:
        return (
            f"Registration(owner={self.owner!r}, routes={list(self.routes)!r}, adapter={type(self.adapter).__name__})"
        )


class RouteRegistry:
    """Route name → :class:`Registration` (adapter and owning plugin key).

    Not thread-safe: the runtime registers on its event loop, before any stream starts.
    """

    __slots__ = ("_adapters", "_kind", "_routes")

    def __init__(self, kind: type = LlmAdapter) -> None:
        self._kind = kind  # the adapter base class registrations must be (LlmAdapter, EmbeddingAdapter)
        self._routes: dict[str, Registration] = {}
        self._adapters: dict[int, Any] = {}  # every adapter ever registered, by identity, in order

    def register(self, owner: str, routes: Sequence[str], adapter: Any) -> Callable[[], None]:
        """Serve ``routes`` with ``adapter`` on behalf of the plugin ``owner`` (its plugins.yaml key).

        Returns ``unregister()``, which removes exactly this registration (idempotent; it never
        touches a later registration of the same route).

        Raises:
            DuplicateRoute: (an :class:`LlmError` ``DUPLICATE_ROUTE``) when a route is taken
                (naming both owners) or listed twice; nothing is registered then (all-or-nothing).
            TypeError: ``routes`` is a single string or holds a non-string, or ``adapter`` is not
                an :class:`~harness_core.adapter.LlmAdapter`.
            ValueError: ``routes`` is empty or holds an empty name.
        """
        if isinstance(routes, str):
            raise TypeError(f"routes must be a list of route names, not the string {routes!r} (write [{routes!r}])")
        names = tuple(routes)
        if not names:
            raise ValueError(f"plugin {owner!r} registered an adapter for no route")
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"plugin {owner!r}: route names must be strings, got {name!r}")
            if not name:
                raise ValueError(f"plugin {owner!r}: a route name is empty")
        if not isinstance(adapter, self._kind):
            raise TypeError(f"plugin {owner!r}: expected an {self._kind.__name__} instance, got {adapter!r}")
        seen: set[str] = set()
        for name in names:
            taken = self._routes.get(name)
            if taken is not None:
                raise DuplicateRoute(name, owner, taken.owner)
            if name in seen:
                raise DuplicateRoute(name, owner, None)
            seen.add(name)
        registration = Registration(owner, names, adapter)
        for name in names:
            self._routes[name] = registration
        self._adapters.setdefault(id(adapter), adapter)

        return functools.partial(self._remove, registration)

    def _remove(self, registration: Registration) -> None:
        for name in registration.routes:
            if self._routes.get(name) is registration:
                del self._routes[name]

    def bind(self, owner: str) -> RegisterAdapter:
        """The ``register(routes, adapter) -> unregister`` function handed to plugin ``owner``'s hook."""

        def register(routes: Sequence[str], adapter: Any) -> Callable[[], None]:
            return self.register(owner, routes, adapter)

        return register

    def get(self, route: str) -> Registration | None:
        """The registration serving ``route``, or ``None``."""
        return self._routes.get(route)

    def routes(self) -> dict[str, str]:
        """Route → owning plugin key, in registration order."""
        return {name: registration.owner for name, registration in self._routes.items()}

    def remove_owner(self, owner: str) -> None:
        """Unregister every route ``owner`` holds (rolls back a plugin whose hook failed)."""
        for name in [name for name, registration in self._routes.items() if registration.owner == owner]:
            del self._routes[name]

    def adapters(self) -> list[Any]:
        """Every distinct adapter ever registered, in registration order (the runtime closes them)."""
        return list(self._adapters.values())
