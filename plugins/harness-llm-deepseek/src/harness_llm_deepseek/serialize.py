"""DeepSeek request serializer: the OpenAI one plus ``thinking`` and ``reasoning_content``.

Wire facts (https://api-docs.deepseek.com/guides/thinking_mode,
https://api-docs.deepseek.com/api/create-chat-completion):

- thinking mode is chosen by the model (``deepseek-reasoner`` thinks, ``deepseek-chat`` does
  not) or by the request field ``"thinking": {"type": "enabled" | "disabled"}``;
- in thinking mode, an assistant turn that called tools must carry its reasoning back as
  ``reasoning_content`` in every later request, else the API answers 400 ("The
  reasoning_content in the thinking mode must be passed back to the API"). The older
  ``deepseek-reasoner`` rejected the field instead, hence the per-model ``replay_reasoning``;
- the chat API takes text only: every file raises ``UNSUPPORTED`` naming it;
- JSON output is ``response_format: {"type": "json_object"}`` only
  (https://api-docs.deepseek.com/guides/json_mode): a ``JsonSchemaFormat`` raises
  ``UNSUPPORTED``.
"""

from __future__ import annotations

from typing import Any

from harness_core import (
    FileBlock,
    JsonObjectFormat,
    JsonSchemaFormat,
    LlmError,
    Message,
    ModelInfo,
    ReasoningBlock,
    ToolCallBlock,
)
from harness_core.kit import unsupported_file
from harness_llm_deepseek.config import DeepSeekConfig
from harness_llm_openai.serialize import RequestSerializer

__all__ = ["DeepSeekSerializer"]


class DeepSeekSerializer(RequestSerializer):
    """:class:`~harness_llm_openai.serialize.RequestSerializer` with DeepSeek's thinking policy.

    Args:
        config: the plugin config (plugin-level and per-model ``thinking`` / ``replay_reasoning``).
        include_usage / max_tokens_field: as for the base class.
    """

    def __init__(
        self, config: DeepSeekConfig, *, include_usage: bool = True, max_tokens_field: str = "max_tokens"
    ) -> None:
        super().__init__(provider="deepseek", include_usage=include_usage, max_tokens_field=max_tokens_field)
        self.config = config

    def effort_fields(self, effort: str | None, info: ModelInfo) -> dict[str, Any]:
        """``thinking`` from the effort id (``"off"`` → disabled, other listed ids → enabled), else
        from the model's or the plugin's configured ``thinking``; nothing when none is set."""
        if effort is None:
            model = self.config.models.get(info.model)
            mode = model.thinking if model is not None and model.thinking is not None else self.config.thinking
            if mode is None:
                return {}
            effort = mode
        return {"thinking": {"type": "disabled" if effort == "off" else "enabled"}}

    def replays_reasoning(self, model: str) -> bool:
        """Whether reasoning goes back as ``reasoning_content`` for ``model``."""
        known = self.config.models.get(model)
        if known is not None and known.replay_reasoning is not None:
            return known.replay_reasoning
        return self.config.replay_reasoning

    def assistant_message(self, message: Message, model: str) -> dict[str, Any]:
        """The OpenAI assistant turn, plus ``reasoning_content`` (reasoning blocks joined) on
        turns with tool calls when the model's policy says so."""
        wire = super().assistant_message(message, model)
        reasoning = [block.text for block in message.content if isinstance(block, ReasoningBlock)]
        has_calls = any(isinstance(block, ToolCallBlock) for block in message.content)
        if reasoning and has_calls and self.replays_reasoning(model):
            wire["reasoning_content"] = "".join(reasoning)
        return wire

    def file_part(self, block: FileBlock) -> dict[str, Any]:
        """Never returns: DeepSeek's chat API takes text only (``UNSUPPORTED`` naming the file)."""
        raise unsupported_file(self.provider, block, "the DeepSeek chat API takes text only")

    def response_format(self, fmt: JsonSchemaFormat | JsonObjectFormat) -> dict[str, Any]:
        """``{"type": "json_object"}`` for JSON mode; a schema raises ``UNSUPPORTED``."""
        if isinstance(fmt, JsonSchemaFormat):
            raise LlmError(
                "UNSUPPORTED",
                f"response_format with a JSON schema ({fmt.name!r}) is not supported by DeepSeek, which has"
                " JSON mode only (use JsonObjectFormat and describe the shape in the prompt)",
                provider=self.provider,
                field="response_format",
            )
        return {"type": "json_object"}
