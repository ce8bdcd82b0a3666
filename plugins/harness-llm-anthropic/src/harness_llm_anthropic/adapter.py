"""The Anthropic adapter: serializer + translator on the adapter kit.

``POST {base_url}/v1/messages`` with ``stream: true``
(https://docs.anthropic.com/en/api/messages-streaming), headers ``x-api-key``,
``anthropic-version`` and the configured extras. The stages live in their own modules:
:mod:`~harness_llm_anthropic.serialize` (request body), :mod:`~harness_llm_anthropic.translate`
(events → chunks), :mod:`~harness_llm_anthropic.errors` (error classification); transport, HTTP
error mapping, abort racing and closing are the kit's (:class:`harness_core.kit.HttpAdapter`).

Error paths (``docs/stream-obligations.md``):

- **raised** :class:`LlmError`: invalid options (``UNSUPPORTED`` / ``BAD_REQUEST``, before any
  I/O), HTTP status errors (code from the Anthropic error type, else the status; ``retry_after``
  and ``request-id`` kept), a 2xx that is not ``text/event-stream`` (``PROTOCOL``), malformed
  events (``PROTOCOL``), timeouts (``TIMEOUT``), resets and EOF before ``message_stop``
  (``NETWORK``);
- **finish{error}**: an in-band ``error`` event (e.g. ``overloaded_error`` → ``OVERLOADED``).

Abort: the pending read is abandoned, the response closed, open blocks closed and the stream
ends with ``usage`` (when reported) and ``finish{aborted}``. Cancellation propagates; the
response is closed on every exit path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from harness_core import GenerateOptions, LlmError, ModelInfo
from harness_core.kit import HttpAdapter, request_json
from harness_llm_anthropic.config import AnthropicConfig
from harness_llm_anthropic.errors import PROVIDER, classifier
from harness_llm_anthropic.serialize import build_body
from harness_llm_anthropic.translate import Translator
from harness_llm_anthropic.wire import MODELS_DECODER

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_core.http import ErrorDetails

__all__ = ["AnthropicAdapter"]

_MODELS_PAGE: Final = 1000
_MODELS_PATH: Final = "/v1/models"
_COUNT_PATH: Final = "/v1/messages/count_tokens"
_COUNTED: Final = frozenset({"model", "messages", "system", "tools", "tool_choice", "thinking"})
"""The body fields ``count_tokens`` takes (https://docs.anthropic.com/en/api/messages-count-tokens)."""


class _Counted(msgspec.Struct):
    input_tokens: int


_COUNT_DECODER: Final = msgspec.json.Decoder(_Counted)


class AnthropicAdapter(HttpAdapter[AnthropicConfig]):
    """Streams the Anthropic Messages API into :data:`StreamChunk`.

    Args:
        config: the plugin config (:class:`~harness_llm_anthropic.config.AnthropicConfig`).
        provider: the plugin name on errors (default ``"anthropic"``).
        transport: an optional ``httpx.AsyncBaseTransport`` (tests, proxies).
    """

    provider_name = PROVIDER
    gen_ai_provider_name = "anthropic"
    stream_path = "/v1/messages"
    wire = "anthropic-messages"

    def auth_headers(self) -> dict[str, str]:
        """``x-api-key`` (when configured) and ``anthropic-version``."""
        headers = {"anthropic-version": self.config.anthropic_version}
        if self.config.api_key is not None:
            headers["x-api-key"] = self.config.api_key.get_secret_value()
        return headers

    def encode_request(self, options: GenerateOptions, info: ModelInfo) -> bytes:
        """The Messages API body (:func:`~harness_llm_anthropic.serialize.build_body`)."""
        config = self.config
        model = options.model or ""
        return build_body(
            options,
            max_tokens_default=config.max_tokens_default,
            budgets=config.budgets_for(model),
            default_effort=config.default_effort_for(model),
            structured_outputs=config.structured_outputs_for(model),
        )

    async def count_tokens(self, options: GenerateOptions) -> int:
        """``POST /v1/messages/count_tokens`` with the fields of the Messages body it takes
        (model, messages, system, tools, tool choice, thinking; cache marks included).

        Raises:
            LlmError: :meth:`encode_request`'s errors before any I/O; HTTP errors mapped like
                :meth:`stream`'s; ``PROTOCOL`` for a body without an integer ``input_tokens``.
        """
        if not options.model:
            raise LlmError("BAD_REQUEST", "options.model is required", provider=self.provider)
        body = msgspec.json.decode(self.encode_request(options, self.resolve_model(options.model)))
        content = msgspec.json.encode({k: v for k, v in body.items() if k in _COUNTED})
        counted = await request_json(
            self.client,
            _COUNT_PATH,
            _COUNT_DECODER.decode,
            method="POST",
            content=content,
            provider=self.provider,
            classifier=self.classify_error,
        )
        return counted.input_tokens

    def make_translator(self, options: GenerateOptions, request_id: str | None) -> Translator:
        """A fresh translator (tags ``replay_state`` and signatures with the requested model and
        signatures with :attr:`provider`)."""
        translator = Translator(model=options.model, provider=self.provider)
        translator.request_id = request_id
        return translator

    def classify_error(self, status: int | None, body: dict[str, Any] | None) -> ErrorDetails | None:
        """Anthropic's error types (:func:`~harness_llm_anthropic.errors.classifier`)."""
        return classifier(status, body)

    def resolve_model(self, model: str) -> ModelInfo:
        """Describe ``model``: configured token limits and the thinking effort ids (``off``
        first, then the budgets in increasing order). Any model id is accepted (the API
        decides)."""
        config = self.config
        budgets = config.budgets_for(model)
        efforts = ["off", *sorted(budgets, key=budgets.__getitem__)] if budgets else None
        spec = config.model_spec(model)
        return ModelInfo(
            model=model,
            context_window=spec.context_window if spec is not None else None,
            max_output_tokens=spec.max_output_tokens if spec is not None else None,
            reasoning_efforts=efforts,
            default_effort=config.default_effort_for(model) if efforts else None,
        )

    async def list_models(self) -> list[ModelInfo]:
        """``GET /v1/models`` (all pages), merged with the configured static facts.

        Raises:
            LlmError: HTTP errors mapped like :meth:`stream`'s; ``PROTOCOL`` for a body that is
                not a model list; ``TIMEOUT`` / ``NETWORK`` for transport faults.
        """
        models: list[ModelInfo] = []
        params: dict[str, str | int] = {"limit": _MODELS_PAGE}
        while True:
            page = await request_json(
                self.client,
                _MODELS_PATH,
                MODELS_DECODER.decode,
                params=params,
                provider=self.provider,
                classifier=self.classify_error,
            )
            for entry in page.data:
                info = self.resolve_model(entry.id)
                models.append(
                    msgspec.structs.replace(
                        info,
                        context_window=info.context_window or entry.max_input_tokens,
                        max_output_tokens=info.max_output_tokens or entry.max_tokens,
                    )
                )
            if not page.has_more or not page.last_id:
                return models
            params = {"limit": _MODELS_PAGE, "after_id": page.last_id}
