"""``ResponsesAdapter``: the OpenAI Responses API streaming on the adapter kit (stages only).

``POST {base_url}/responses`` with ``stream: true``
(https://platform.openai.com/docs/api-reference/responses/create); the body comes from
:class:`~harness_llm_openai.responses_serialize.ResponsesSerializer`, the SSE events go through
:class:`~harness_llm_openai.responses_translate.ResponsesTranslator`. Authentication, the error
classifier, ``list_models`` and the ``models`` config are the Chat Completions adapter's
(:class:`~harness_llm_openai.adapter.OpenAIAdapter`); transport, abort racing and response
closing are the kit's. The plugin builds it for ``api: responses``.

Error paths (``docs/stream-obligations.md``): HTTP errors, non-SSE 2xx bodies, malformed
payloads and an EOF before ``response.completed`` / ``.incomplete`` / ``.failed`` **raise**
``LlmError``; ``response.failed`` and ``error`` events end the stream with ``finish{error}``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec

from harness_core import GenerateOptions, LlmError, ModelInfo
from harness_core.kit import request_json
from harness_llm_openai.adapter import OpenAIAdapter
from harness_llm_openai.config import OpenAIConfig
from harness_llm_openai.responses_serialize import ResponsesSerializer
from harness_llm_openai.responses_translate import ResponsesTranslator

if TYPE_CHECKING:  # pragma: no cover - typing only
    import httpx

__all__ = ["DEFAULT_REASONING_EFFORTS", "ResponsesAdapter"]

DEFAULT_REASONING_EFFORTS: Final = ["low", "medium", "high"]
"""Efforts a model matched by ``reasoning_models`` (and not described in ``models``) accepts:
the ones every OpenAI reasoning model takes."""
_COUNTED: Final = frozenset({"model", "input", "instructions", "tools", "tool_choice", "text", "reasoning"})
"""The body fields ``POST /responses/input_tokens`` takes."""


class _Counted(msgspec.Struct):
    input_tokens: int


_COUNT_DECODER: Final = msgspec.json.Decoder(_Counted)


class ResponsesAdapter(OpenAIAdapter):
    """Adapter for the OpenAI Responses API (OpenAI, Azure, vLLM, Ollama, OpenRouter …).

    Args:
        config: the plugin's validated :class:`~harness_llm_openai.config.OpenAIConfig` (its
            ``store``, ``reasoning_summary``, ``encrypted_reasoning`` and ``reasoning_models``
            fields apply here).
        provider: the plugin name, used for ``provider_options``, on errors and on
            ``replay_state``.
        transport: an httpx transport for the client (tests; default: the network).
    """

    stream_path = "/responses"
    wire = "openai-responses"

    def __init__(
        self, config: OpenAIConfig, *, provider: str | None = None, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        super().__init__(config, provider=provider, transport=transport)
        self.responses_serializer = ResponsesSerializer(
            provider=self.provider,
            store=config.store,
            encrypted_reasoning=config.encrypted_reasoning,
            reasoning_summary=config.reasoning_summary,
        )

    def resolve_model(self, model: str) -> ModelInfo:
        """The ``models`` config entry; else, for an id starting with one of
        ``reasoning_models``, a reasoning model accepting :data:`DEFAULT_REASONING_EFFORTS`;
        else a model with no facts."""
        if model in self.config.models or not model.startswith(tuple(self.config.reasoning_models)):
            return super().resolve_model(model)
        return ModelInfo(model=model, reasoning_efforts=list(DEFAULT_REASONING_EFFORTS))

    def encode_request(self, options: GenerateOptions, info: ModelInfo) -> bytes:
        """The Responses body (:meth:`ResponsesSerializer.encode`); a model with reasoning
        efforts is a reasoning model (summaries and encrypted reasoning are asked for)."""
        return self.responses_serializer.encode(options, info, reasoning=info.reasoning_efforts is not None)

    async def count_tokens(self, options: GenerateOptions) -> int:
        """``POST /responses/input_tokens``
        (https://platform.openai.com/docs/api-reference/responses/input-tokens) with the fields
        of the Responses body it takes (model, input, instructions, tools, tool choice, text
        format, reasoning); returns ``input_tokens``.

        Raises:
            LlmError: ``BAD_REQUEST`` without a model and the serializer's errors, before any I/O;
                HTTP errors mapped like :meth:`stream`'s; ``PROTOCOL`` for a body without an
                integer ``input_tokens``.
        """
        if not options.model:
            raise LlmError("BAD_REQUEST", "options.model is required", provider=self.provider)
        body = msgspec.json.decode(self.encode_request(options, self.resolve_model(options.model)))
        counted = await request_json(
            self.client,
            "/responses/input_tokens",
            _COUNT_DECODER.decode,
            method="POST",
            content=msgspec.json.encode({k: v for k, v in body.items() if k in _COUNTED}),
            provider=self.provider,
            classifier=self.classify_error,
        )
        return counted.input_tokens

    def make_translator(self, options: GenerateOptions, request_id: str | None) -> ResponsesTranslator:
        """A fresh translator for one response, tagging ``replay_state`` with the model."""
        config = self.config
        return ResponsesTranslator(
            provider=self.provider,
            model=options.model or "",
            signed_reasoning=config.store or config.encrypted_reasoning,
            stored=config.store,
            request_id=request_id,
        )
