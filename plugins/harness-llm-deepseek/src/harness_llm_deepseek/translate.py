"""DeepSeek chunk translation: the OpenAI state machine with DeepSeek's usage and finish reasons.

- ``usage.prompt_cache_hit_tokens`` → ``cache_read_tokens`` (DeepSeek's context cache,
  https://api-docs.deepseek.com/guides/kv_cache); ``prompt_tokens`` already includes hits and
  misses, as docs/vocabulary.md wants.
- ``finish_reason: "insufficient_system_resource"`` ends the stream in-band with
  ``finish{error}`` and code ``OVERLOADED`` (retryable).
"""

from __future__ import annotations

from typing import Final

import msgspec

from harness_core import ErrorCode, TokenUsage
from harness_llm_openai.translate import DEFAULT_ERROR_FINISH_REASONS, ChunkTranslator
from harness_llm_openai.wire import WireUsage

__all__ = ["DEEPSEEK_ERROR_FINISH_REASONS", "DeepSeekTranslator"]

DEEPSEEK_ERROR_FINISH_REASONS: Final[dict[str, ErrorCode]] = {
    **DEFAULT_ERROR_FINISH_REASONS,
    "insufficient_system_resource": "OVERLOADED",
}


class DeepSeekTranslator(ChunkTranslator):
    """:class:`~harness_llm_openai.translate.ChunkTranslator` for DeepSeek responses."""

    def __init__(self, *, request_id: str | None = None) -> None:
        super().__init__(provider="deepseek", error_finish_reasons=DEEPSEEK_ERROR_FINISH_REASONS, request_id=request_id)

    def usage_from_wire(self, usage: WireUsage) -> TokenUsage:
        """OpenAI's mapping, with ``prompt_cache_hit_tokens`` as ``cache_read_tokens`` when sent."""
        base = super().usage_from_wire(usage)
        if usage.prompt_cache_hit_tokens is None:
            return base
        return msgspec.structs.replace(base, cache_read_tokens=usage.prompt_cache_hit_tokens)
