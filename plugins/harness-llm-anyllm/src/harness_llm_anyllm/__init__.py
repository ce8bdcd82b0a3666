"""harness adapter for the long tail of providers, through the any-llm library (mozilla-ai).

Entry point ``anyllm = "harness_llm_anyllm:AnyLLMPlugin"``. Importing this package is cheap:
any-llm and the provider SDKs load on an adapter's first request.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harness_llm_anyllm.config import AnyLLMConfig, Config, ModelConfig
from harness_llm_anyllm.plugin import AnyLLMPlugin
from harness_llm_anyllm.providers import PROVIDERS, ProviderFacts

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_llm_anyllm.adapter import AnyLLMAdapter

__all__ = ["PROVIDERS", "AnyLLMAdapter", "AnyLLMConfig", "AnyLLMPlugin", "Config", "ModelConfig", "ProviderFacts"]


def __getattr__(name: str) -> Any:
    if name == "AnyLLMAdapter":
        return importlib.import_module("harness_llm_anyllm.adapter").AnyLLMAdapter
    raise AttributeError(f"module 'harness_llm_anyllm' has no attribute {name!r}")
