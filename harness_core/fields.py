"""The rule for request fields the vocabulary does not model: one owner for every caller.

A field either maps into harness's vocabulary (the caller reads it), or reaches a route that takes
it unchanged (as ``provider_options`` of the route's plugin), or is refused naming the field and
the route (docs/gateway.md#no-field-is-dropped-in-silence). A caller's short ignore list (fields
that change no output: ``user``, ``metadata`` …) is dropped where the route cannot take it.

Which route takes a field unchanged (:meth:`FieldTarget.takes`):

- a field of a **wire** (a gateway dialect's body: ``"openai-chat"``, ``"anthropic-messages"`` …)
  reaches a route whose adapter speaks that same wire (:attr:`harness_core.LlmAdapter.wire`);
- a field addressed to the **route's own plugin** (``harness run -o key=value``, ``wire=None``)
  reaches any route whose adapter merges provider options into its request
  (:attr:`harness_core.LlmAdapter.takes_provider_options`; the mock does not).

The gateway's dialects (``harness_gateway.request.pass_through``) and the CLI's ``-o``
(``harness_core.cli._request``) both call :func:`pass_through`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

import msgspec

__all__ = ["FieldTarget", "RefusedField", "pass_through"]


class FieldTarget(msgspec.Struct, frozen=True):
    """The route a request goes to, as the field rule needs it.

    ``wire`` is what its adapter speaks (:meth:`harness_core.Harness.route_wire`; ``None`` for
    none in particular), ``options_key`` the entry-point name of its plugin (the
    ``provider_options`` key), ``takes_options`` whether its adapter merges provider options into
    its request (:meth:`harness_core.Harness.route_target`; ``False`` for an embedding route: the
    embedding vocabulary has no provider options).
    """

    route: str
    wire: str | None
    options_key: str
    takes_options: bool = True

    def takes(self, wire: str | None) -> bool:
        """Whether fields of ``wire`` reach this route unchanged (``wire=None``: fields addressed
        to this route's own plugin, as ``harness run -o`` gives them)."""
        return self.takes_options and (wire is None or wire == self.wire)


class RefusedField(ValueError):
    """A field no route of the request can take: ``field`` is its display path (``top_k``,
    ``output_config.effort``), ``reason`` says why, naming the route."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def pass_through(
    fields: Mapping[str, Any],
    mapped: Collection[str],
    ignored: Collection[str],
    *,
    wire: str | None,
    target: FieldTarget | None,
    path: Callable[[str], str] = str,
) -> dict[str, Any]:
    """The fields of ``fields`` outside ``mapped`` that reach ``target`` unchanged.

    Args:
        fields: the request's fields (a JSON object's, or ``-o`` pairs), in request order.
        mapped: the fields the caller reads into the vocabulary.
        ignored: fields that change no output, dropped where ``target`` cannot take them. A
            field whose value is ``None`` (JSON ``null``: what an SDK sends for an option left
            unset) asks for nothing and is dropped there too; ``target`` taking the fields gets
            it unchanged.
        wire: the wire the fields are written for (a gateway dialect's); ``None`` for fields
            addressed to the route's own plugin (``harness run -o``).
        target: the route; ``None`` when there is none (then nothing may pass).
        path: how a refusal names a field (the gateway prefixes a nested object's path).

    Returns the fields to merge into the route's request (``{}`` when none pass).

    Raises:
        RefusedField: for the first field (in request order) that is neither mapped, nor
            taken by ``target``, nor ignored, naming it and the route.
    """
    extra = {key: value for key, value in fields.items() if key not in mapped}
    if target is not None and target.takes(wire):
        return extra
    for key, value in extra.items():
        if key not in ignored and value is not None:  # a null asks for nothing: dropped as absent
            raise RefusedField(path(key), _why(wire, target))
    return {}


def _why(wire: str | None, target: FieldTarget | None) -> str:
    if target is None:
        who, because = "this request", "no route receives it"
    elif not target.takes_options:
        who, because = f"route {target.route!r}", "its adapter takes no provider options"
    else:  # the route takes options, of another wire
        who, because = f"route {target.route!r}", f"only a route speaking the {wire} wire receives it unchanged"
    return (
        f"{who} cannot take this field: it is not mapped into harness's vocabulary and {because} "
        "(docs/gateway.md#no-field-is-dropped-in-silence)"
    )
