"""Request building: :class:`GenerateOptions` → the arguments of any-llm's ``acompletion``.

any-llm takes OpenAI Chat Completions shaped arguments (``messages`` with ``system`` / ``user`` /
``assistant`` (``tool_calls``) / ``tool`` roles, ``tools`` as ``{"type": "function", …}``;
https://platform.openai.com/docs/api-reference/chat/create) and converts them for each provider,
so the openai plugin's serializer builds them; this module adds what any-llm carries beyond
that wire: replayed reasoning with its signature (``reasoning`` + ``extra_content`` on an
assistant message: Anthropic thinking) and ``extra_content`` on tool calls (Gemini thought
signatures), both taken from the replay state of an earlier turn of the same model; and it
refuses files any-llm does not take from the provider (``UNSUPPORTED``, before any request).
"""

from __future__ import annotations

from typing import Any, Final

from harness_core import FileBlock, GenerateOptions, LlmError, Message, ModelInfo, ReasoningBlock
from harness_core.kit import check_cache_ttls, check_detail, unsupported_file
from harness_llm_openai.serialize import IMAGE_TYPES, RequestSerializer

__all__ = ["ANYLLM_EFFORTS", "NO_BREAKPOINTS", "CompletionRequest", "RequestBuilder"]

ANYLLM_EFFORTS: Final = ("off", "minimal", "low", "medium", "high", "xhigh", "max")
"""The effort ids any-llm maps onto each provider's own control (``"off"`` is its ``"none"``),
in increasing order; leaving ``reasoning_effort`` unset keeps the provider's default."""

NO_BREAKPOINTS: Final = frozenset({"bedrock", "anthropic", "azureanthropic", "vertexaianthropic"})
"""any-llm providers whose caching needs explicit breakpoints that any-llm's completion API does
not carry (any-llm-sdk 1.40: no Bedrock ``cachePoint`` anywhere; the Converse conversion keeps a
text part's text only, the Anthropic one drops ``cache_control``): a cache mark changes nothing
there, and one with a TTL is ``UNSUPPORTED``. The other providers cache implicitly, if at all."""

_SIGNED_UNSUPPORTED: Final = ("seed",)
"""Options the Anthropic Messages API has no field for (any-llm would pass them on and fail)."""


class CompletionRequest:
    """The arguments of one ``acompletion`` call: ``model``, ``messages`` and keyword ``arguments``."""

    __slots__ = ("arguments", "messages", "model")

    def __init__(self, model: str, messages: list[dict[str, Any]], arguments: dict[str, Any]) -> None:
        self.model = model
        self.messages = messages
        self.arguments = arguments


class RequestBuilder(RequestSerializer):
    """Builds ``acompletion`` arguments for one any-llm provider.

    Args:
        provider: the plugin name (``anyllm``): ``provider_options[provider]`` is merged last.
        library_provider: the any-llm provider name, named in errors.
        include_usage: send ``stream_options.include_usage``.
        signed_reasoning: the provider signs its reasoning (Anthropic family): replay it with
            its signature, and refuse ``seed``.
        images / pdf: any-llm takes image / PDF ``FileBlock``s for the provider.
        options: the config's per-request fields, merged before ``provider_options``.
    """

    def __init__(
        self,
        *,
        provider: str = "anyllm",
        library_provider: str,
        include_usage: bool = True,
        signed_reasoning: bool = False,
        images: bool = False,
        pdf: bool = False,
        options: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(provider=provider, include_usage=include_usage, max_tokens_field="max_tokens")
        self.library_provider = library_provider
        self.signed_reasoning = signed_reasoning
        self.images = images
        self.pdf = pdf
        self.options = dict(options or {})

    def request(self, options: GenerateOptions, info: ModelInfo) -> CompletionRequest:
        """The ``acompletion`` arguments for ``options`` sent to ``info.model``.

        Raises:
            LlmError: ``UNSUPPORTED`` for an option the provider cannot honour (named), a
                ``reasoning_effort`` the model does not list, ``n`` > 1 or logprobs;
                ``BAD_REQUEST`` for a message the protocol cannot express.
        """
        if self.signed_reasoning:
            for name in _SIGNED_UNSUPPORTED:
                if getattr(options, name) is not None:
                    raise LlmError(
                        "UNSUPPORTED",
                        f"option {name!r} is not supported by any-llm provider {self.library_provider!r}",
                        provider=self.provider,
                    )
        if self.library_provider in NO_BREAKPOINTS:
            why = f"any-llm carries no cache breakpoint to provider {self.library_provider!r}: no prompt caching"
        else:
            why = f"any-llm provider {self.library_provider!r} caches implicitly, if at all"
        check_cache_ttls(self.provider, options, why=why)
        body = self.body(options, info)
        arguments = {**self.options, **body}
        model = arguments.pop("model")
        messages = arguments.pop("messages")
        return CompletionRequest(model, messages, arguments)

    def file_part(self, block: FileBlock) -> dict[str, Any]:
        """The OpenAI content part any-llm converts for the provider (``image_url``, ``file``),
        for the media any-llm takes from it.

        Raises:
            LlmError: ``UNSUPPORTED`` naming the file for images or PDFs the provider does not
                take through any-llm, and for audio and an image ``detail`` of ``low`` / ``high``
                (any-llm's conversion of ``input_audio`` and ``detail`` is not verified per
                provider); the openai plugin's checks (URL, size) otherwise.
        """
        if block.media_type in IMAGE_TYPES:
            accepted = self.images
        elif block.media_type == "application/pdf":
            accepted = self.pdf
        else:
            accepted = False
        if not accepted:
            raise unsupported_file(self.provider, block, f"any-llm provider {self.library_provider!r} does not take it")
        check_detail(self.provider, block, wire=f"any-llm provider {self.library_provider!r} (not verified)")
        return super().file_part(block)

    def assistant_message(self, message: Message, model: str) -> dict[str, Any]:
        """The openai plugin's assistant turn, plus the replay state of the same model:
        ``reasoning`` and ``extra_content`` (signature) on the message, ``extra_content`` on
        each tool call it names."""
        wire = super().assistant_message(message, model)
        state = message.replay_state
        if not isinstance(state, dict) or state.get("model") != model:
            return wire  # signatures are bound to the model that made them
        extra = state.get("extra_content")
        if isinstance(extra, dict):
            wire["extra_content"] = extra
            reasoning = "".join(b.text for b in message.content if isinstance(b, ReasoningBlock))
            if reasoning:
                wire["reasoning"] = reasoning
        calls = state.get("tool_calls")
        if isinstance(calls, dict):
            for call in wire.get("tool_calls", ()):
                call_extra = calls.get(call["id"])
                if isinstance(call_extra, dict):
                    call["extra_content"] = call_extra
        return wire
