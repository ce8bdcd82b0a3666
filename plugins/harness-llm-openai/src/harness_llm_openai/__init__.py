"""harness adapter for the OpenAI Chat Completions and Responses streaming APIs and OpenAI-compatible servers.

Entry point ``openai = "harness_llm_openai:OpenAIPlugin"``. Importing this package is cheap:
httpx and the adapter load only when the plugin registers its adapter.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harness_llm_openai.config import Config, ModelConfig, Timeout
from harness_llm_openai.plugin import OpenAIPlugin

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_llm_openai.adapter import OpenAIAdapter
    from harness_llm_openai.responses_adapter import ResponsesAdapter

__all__ = ["Config", "ModelConfig", "OpenAIAdapter", "OpenAIPlugin", "ResponsesAdapter", "Timeout"]

_ADAPTERS = {"OpenAIAdapter": "harness_llm_openai.adapter", "ResponsesAdapter": "harness_llm_openai.responses_adapter"}

__version__ = "0.1.0"
"""The distribution's version (the single source: ``pyproject.toml`` reads it)."""


def __getattr__(name: str) -> Any:
    module = _ADAPTERS.get(name)
    if module is not None:
        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'harness_llm_openai' has no attribute {name!r}")
