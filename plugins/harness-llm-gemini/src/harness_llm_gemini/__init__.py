"""harness adapter for the Google Gemini API (``streamGenerateContent`` over SSE).

Entry point ``gemini = "harness_llm_gemini:GeminiPlugin"``. Importing this package is cheap:
httpx and the adapter load only when the plugin registers its adapter.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harness_llm_gemini.config import GeminiConfig, ModelConfig
from harness_llm_gemini.plugin import GeminiPlugin

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_llm_gemini.adapter import GeminiAdapter
    from harness_llm_gemini.translate import Translator

__all__ = ["GeminiAdapter", "GeminiConfig", "GeminiPlugin", "ModelConfig", "Translator"]

_LAZY = {"GeminiAdapter": "harness_llm_gemini.adapter", "Translator": "harness_llm_gemini.translate"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'harness_llm_gemini' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
