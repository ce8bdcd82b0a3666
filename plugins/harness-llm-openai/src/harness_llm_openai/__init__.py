"""harness adapter for the OpenAI Chat Completions streaming API and OpenAI-compatible servers.

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

__all__ = ["Config", "ModelConfig", "OpenAIAdapter", "OpenAIPlugin", "Timeout"]

__version__ = "0.1.0"
"""The distribution's version (the single source: ``pyproject.toml`` reads it)."""


def __getattr__(name: str) -> Any:
    if name == "OpenAIAdapter":
        return importlib.import_module("harness_llm_openai.adapter").OpenAIAdapter
    raise AttributeError(f"module 'harness_llm_openai' has no attribute {name!r}")
