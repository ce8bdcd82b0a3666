"""What the gateway tells observers about each generation it serves (the console listens here).

An observer is registered on :attr:`harness_gateway.Gateway.observers`. For every admitted
request the gateway calls :meth:`Observer.started` with a :class:`RunInfo` before the first chunk,
:meth:`RunWatch.chunk` with every chunk of the harness stream (synchronously, on the request's
task: keep it cheap), and :meth:`RunWatch.ended` once with a :class:`RunEnd`, after the ledger
row was settled, shielded from cancellation however the stream ended. An embedding call
(``dialect`` ``"embeddings"``) has no stream: its watches see a ``Usage`` chunk (when the route
reported usage) and a ``Finish`` when it ends (``stop``, ``error`` with the failure, or ``aborted``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from harness_core import AbortSignal, EmbedOptions, Failure, GenerateOptions, StreamChunk, TokenUsage

__all__ = ["Observer", "RunEnd", "RunInfo", "RunWatch"]


@dataclass(frozen=True)
class RunInfo:
    """One admitted generation.

    Fields:
        ticket: the ledger row id. request_id: the ``x-request-id`` echoed to the client.
        dialect: ``"openai"``, ``"anthropic"`` or ``"responses"`` (the client's wire format: :attr:`Dialect.name`),
            or ``"embeddings"`` for a ``POST /v1/embeddings`` call.
        key_id / key_name: the caller's key (``None`` for the master key or anonymous callers).
        route / model: what was requested (after alias resolution).
        options: the request as the runtime receives it (messages, tools, sampling); for an
            embedding call the :class:`~harness_core.embedding.EmbedOptions` (its inputs).
        abort: fires the upstream abort (the stream then ends with ``finish{aborted}``).
        started_at: unix seconds.
    """

    ticket: str
    request_id: str
    dialect: str
    key_id: str | None
    key_name: str | None
    route: str
    model: str
    options: GenerateOptions | EmbedOptions
    abort: AbortSignal
    started_at: float


@dataclass(frozen=True)
class RunEnd:
    """How a generation ended.

    Fields:
        status: ``complete``, ``aborted`` or ``error`` (the ledger row's status).
        usage: the stream's token usage (``None`` when none was reported). cost: USD charged.
        first_token_s / latency_s: seconds from admission to the first content chunk (``None``
            without content) and to the end.
        served_route / served_model: what produced the stream (differs after a fallback).
        attempts: fallback targets tried before the served one, as ``"route/model: reason"``.
        failure: the error of an ``error`` finish, if any.
    """

    status: str
    usage: TokenUsage | None
    cost: float
    first_token_s: float | None
    latency_s: float
    served_route: str | None
    served_model: str | None
    attempts: tuple[str, ...]
    failure: Failure | None


class RunWatch(Protocol):
    """Follows one generation."""

    def chunk(self, chunk: StreamChunk) -> None:
        """Called with every chunk, in order."""

    async def ended(self, end: RunEnd) -> None:
        """Called once at the end (shielded)."""


class Observer(Protocol):
    """Told about every generation the gateway serves."""

    def started(self, info: RunInfo) -> RunWatch:
        """A watch for the generation ``info`` (called before its first chunk)."""
