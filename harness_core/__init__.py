"""harness: a pluggy-based plugin host for LLM provider adapters.

The public API for applications and plugin authors. Heavy modules (the runtime) load on first
use, so ``import harness_core`` stays cheap for the CLI's fast paths.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harness_core.abort import AbortSignal
from harness_core.adapter import LlmAdapter
from harness_core.errors import ErrorCode, LlmError
from harness_core.hookspecs import hookimpl
from harness_core.secret import Secret
from harness_core.types import (
    BlockEnd,
    BlockStart,
    ContentBlock,
    Failure,
    Finish,
    FinishReason,
    GenerateOptions,
    Message,
    ModelInfo,
    NamedToolChoice,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    ToolSpec,
    Usage,
    canonical_json,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_core.assembler import BlockAssembler
    from harness_core.config import EnvFallback
    from harness_core.runtime import GenerateResult, Harness
    from harness_core.sync import SyncHarness

__all__ = [
    "AbortSignal",
    "BlockAssembler",
    "BlockEnd",
    "BlockStart",
    "ContentBlock",
    "EnvFallback",
    "ErrorCode",
    "Failure",
    "Finish",
    "FinishReason",
    "GenerateOptions",
    "GenerateResult",
    "Harness",
    "LlmAdapter",
    "LlmError",
    "Message",
    "ModelInfo",
    "NamedToolChoice",
    "ReasoningBlock",
    "ReasoningDelta",
    "Secret",
    "StreamChunk",
    "SyncHarness",
    "TextBlock",
    "TextDelta",
    "TokenUsage",
    "ToolCallBlock",
    "ToolCallDelta",
    "ToolResultBlock",
    "ToolSpec",
    "Usage",
    "canonical_json",
    "hookimpl",
]

_LAZY = {
    "BlockAssembler": "harness_core.assembler",
    "EnvFallback": "harness_core.config",
    "GenerateResult": "harness_core.runtime",
    "Harness": "harness_core.runtime",
    "SyncHarness": "harness_core.sync",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'harness_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
