"""harness adapter for DeepSeek's OpenAI-compatible Chat Completions API.

Entry point ``deepseek = "harness_llm_deepseek:DeepSeekPlugin"``. Built on the stages of
``harness-llm-openai`` (serializer, translator, adapter), specialised where DeepSeek differs:
``reasoning_content`` sent back on tool-call turns, the ``thinking`` request field, prompt-cache
usage counters and the ``insufficient_system_resource`` finish reason. Importing this package is
cheap: httpx loads only when the plugin registers its adapter.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harness_llm_deepseek.config import DeepSeekConfig, DeepSeekModelConfig
from harness_llm_deepseek.plugin import DeepSeekPlugin

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_llm_deepseek.adapter import DeepSeekAdapter

__all__ = ["DeepSeekAdapter", "DeepSeekConfig", "DeepSeekModelConfig", "DeepSeekPlugin"]

__version__ = "0.1.0"
"""The distribution's version (the single source: ``pyproject.toml`` reads it)."""


def __getattr__(name: str) -> Any:
    if name == "DeepSeekAdapter":
        return importlib.import_module("harness_llm_deepseek.adapter").DeepSeekAdapter
    raise AttributeError(f"module 'harness_llm_deepseek' has no attribute {name!r}")
