"""harness adapter for the Anthropic Messages streaming API.

Entry point ``anthropic = "harness_llm_anthropic:AnthropicPlugin"``. Importing this package is
cheap: httpx and the adapter load only when the plugin registers its adapter.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harness_llm_anthropic.config import AnthropicConfig, ModelConfig, Timeout
from harness_llm_anthropic.plugin import AnthropicPlugin

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_llm_anthropic.adapter import AnthropicAdapter

__all__ = ["AnthropicAdapter", "AnthropicConfig", "AnthropicPlugin", "ModelConfig", "Timeout"]

__version__ = "0.1.0"
"""The distribution's version (the single source: ``pyproject.toml`` reads it)."""


def __getattr__(name: str) -> Any:
    if name == "AnthropicAdapter":
        return importlib.import_module("harness_llm_anthropic.adapter").AnthropicAdapter
    raise AttributeError(f"module 'harness_llm_anthropic' has no attribute {name!r}")
