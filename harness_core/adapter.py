"""The adapter interface: :class:`LlmAdapter`.

An adapter translates one provider's wire protocol into the :data:`StreamChunk` protocol.
Plugins register adapter instances for routes through the ``register_adapter`` hook.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from typing import ClassVar

from harness_core.errors import LlmError
from harness_core.types import GenerateOptions, ModelInfo, StreamChunk

__all__ = ["LlmAdapter"]


class LlmAdapter(abc.ABC):
    """Base class of every provider adapter.

    Subclasses implement :meth:`stream` as an **async generator** that keeps the stream
    obligations of docs/stream-obligations.md: block-start → deltas → block-end per block, at most one ``usage``
    after the blocks, exactly one ``finish`` last. Transport and protocol faults raise
    :class:`~harness_core.errors.LlmError`; faults the provider reports in-band end the stream
    with ``finish{error}`` (never both). When ``options.abort`` fires the adapter stops reading,
    closes its connection and finishes with ``finish{aborted}``; task cancellation propagates.

    Optional overrides: :meth:`resolve_model`, :meth:`list_models`, :meth:`count_tokens`,
    :meth:`aclose`, :attr:`default_model`, :meth:`gen_ai_provider`.

    Class attribute ``wire``: the request wire the adapter speaks (``"anthropic-messages"``,
    ``"openai-chat"``, ``"openai-responses"``, ``"gemini"``; ``None`` for none in particular). A
    gateway dialect of the same wire hands request fields the vocabulary lacks to such a route
    unchanged, as ``provider_options`` (docs/gateway.md#no-field-is-dropped-in-silence).
    """

    wire: ClassVar[str | None] = None

    takes_provider_options: ClassVar[bool] = True
    """Whether :meth:`stream` merges ``options.provider_options[<its plugin>]`` into its request
    (every HTTP adapter does); ``False`` makes ``harness run -o`` on its routes a refusal naming
    the option and the route (:mod:`harness_core.fields`), not an option dropped in silence."""

    default_model: str | None = None
    """The model id this adapter serves when a request names none and plugins.yaml's
    ``defaults:`` give none for its route (the mock's ``echo``); ``None``: the request goes on
    without a model (most providers then refuse it). The harness fills it in before the chain
    runs, so middleware (the prompt log, ``usage``) record the model that served the reply."""

    @abc.abstractmethod
    def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """Generate a reply to ``options`` as a stream of chunks (an async generator)."""

    def gen_ai_provider(self, plugin: str) -> str | None:
        """The GenAI provider this adapter calls, as the OpenTelemetry GenAI semantic conventions
        name it (``gen_ai.provider.name``: ``openai``, ``anthropic``, ``gcp.gemini``,
        ``aws.bedrock`` … https://opentelemetry.io/docs/specs/semconv/registry/attributes/gen-ai/),
        where one of their values applies; otherwise a custom value that names no real vendor
        wrongly. Telemetry (the ``otel`` middleware) reads it through
        :meth:`Harness.route_provider <harness_core.runtime.Harness.route_provider>`, resolved
        once per route, never per stream.

        ``plugin`` is the entry-point name of the plugin serving the route (``openai`` for the
        plugins.yaml key ``openai:eu``); the default returns it (an adapter that says nothing is
        named by its plugin). ``None``: the adapter calls no provider of its own (a ``balance``
        pool: the member that serves says it).
        """
        return plugin

    def resolve_model(self, model: str) -> ModelInfo:
        """Describe ``model`` (context window, reasoning efforts …). The default knows nothing
        beyond the id. Raises ``LlmError("NOT_FOUND")`` for a model the adapter rejects."""
        return ModelInfo(model=model)

    async def list_models(self) -> list[ModelInfo]:
        """The models this adapter can serve. Raises ``LlmError("UNSUPPORTED")`` by default."""
        raise LlmError("UNSUPPORTED", f"{type(self).__name__} cannot list models")

    async def count_tokens(self, options: GenerateOptions) -> int:
        """The input tokens ``options`` would take (messages, system prompt, tools), counted by
        the provider without generating; nothing is billed. Raises ``LlmError("UNSUPPORTED")``
        by default (a wire without a counting endpoint)."""
        raise LlmError("UNSUPPORTED", f"{type(self).__name__} cannot count tokens")

    async def aclose(self) -> None:  # noqa: B027 - optional hook with a no-op default
        """Release clients and connections; called once when the runtime closes."""
