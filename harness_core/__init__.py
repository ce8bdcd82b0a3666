"""harness: a pluggy-based plugin host for LLM provider adapters.

The public API for applications and plugin authors. Every name loads on first use, so
``import harness_core`` costs nothing on the CLI's fast paths (``harness --help``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness_core._lazy import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only; at run time names load on first use
    from harness_core.abort import AbortSignal
    from harness_core.adapter import LlmAdapter
    from harness_core.assembler import BlockAssembler
    from harness_core.attach import AttachError, detect_media_type, load_attachment, parse_media_type
    from harness_core.chain import ChainLink
    from harness_core.config import EnvFallback
    from harness_core.conversation import Conversation, ConversationState, MaxStepsExceeded, Reply
    from harness_core.errors import ErrorCode, Failure, InvalidOutputError, LlmError
    from harness_core.hookspecs import hookimpl
    from harness_core.outfile import WriteFailureLog, check_output_file, write_in_thread
    from harness_core.runtime import GenerateResult, Harness, StreamContext
    from harness_core.secret import (
        ChunkScrubber,
        ConnectionString,
        RedactFilter,
        Redactor,
        Secret,
        SecretMasking,
        mask_strings,
        redacted_logging,
    )
    from harness_core.structured import decode_output, response_format_for
    from harness_core.sync import SyncHarness
    from harness_core.tools import Tool, ToolRegistry, tool
    from harness_core.types import (
        BlockEnd,
        BlockStart,
        CacheMark,
        ContentBlock,
        FileBlock,
        Finish,
        FinishReason,
        GenerateOptions,
        JsonObjectFormat,
        JsonSchemaFormat,
        Message,
        ModelInfo,
        NamedToolChoice,
        ReasoningBlock,
        ReasoningDelta,
        ResponseFormat,
        StreamChunk,
        TextBlock,
        TextDelta,
        TokenUsage,
        ToolCallBlock,
        ToolCallDelta,
        ToolResultBlock,
        ToolSpec,
        Usage,
        cache_breakpoint,
        canonical_json,
    )

__all__ = [
    "AbortSignal",
    "AttachError",
    "BlockAssembler",
    "BlockEnd",
    "BlockStart",
    "CacheMark",
    "ChainLink",
    "ChunkScrubber",
    "ConnectionString",
    "ContentBlock",
    "Conversation",
    "ConversationState",
    "EnvFallback",
    "ErrorCode",
    "Failure",
    "FileBlock",
    "Finish",
    "FinishReason",
    "GenerateOptions",
    "GenerateResult",
    "Harness",
    "InvalidOutputError",
    "JsonObjectFormat",
    "JsonSchemaFormat",
    "LlmAdapter",
    "LlmError",
    "MaxStepsExceeded",
    "Message",
    "ModelInfo",
    "NamedToolChoice",
    "ReasoningBlock",
    "ReasoningDelta",
    "RedactFilter",
    "Redactor",
    "Reply",
    "ResponseFormat",
    "Secret",
    "SecretMasking",
    "StreamChunk",
    "StreamContext",
    "SyncHarness",
    "TextBlock",
    "TextDelta",
    "TokenUsage",
    "Tool",
    "ToolCallBlock",
    "ToolCallDelta",
    "ToolRegistry",
    "ToolResultBlock",
    "ToolSpec",
    "Usage",
    "WriteFailureLog",
    "cache_breakpoint",
    "canonical_json",
    "check_output_file",
    "decode_output",
    "detect_media_type",
    "hookimpl",
    "load_attachment",
    "mask_strings",
    "parse_media_type",
    "redacted_logging",
    "response_format_for",
    "tool",
    "write_in_thread",
]

__version__ = "0.1.0"
"""The distribution's version (the single source: ``pyproject.toml`` reads it)."""
_LAZY = {
    "WriteFailureLog": "harness_core.outfile",
    "check_output_file": "harness_core.outfile",
    "write_in_thread": "harness_core.outfile",
    "ChainLink": "harness_core.chain",
    "StreamContext": "harness_core.runtime",
    "ToolRegistry": "harness_core.tools",
    "ConversationState": "harness_core.conversation",
    "MaxStepsExceeded": "harness_core.conversation",
    "AbortSignal": "harness_core.abort",
    "AttachError": "harness_core.attach",
    "detect_media_type": "harness_core.attach",
    "load_attachment": "harness_core.attach",
    "parse_media_type": "harness_core.attach",
    "BlockAssembler": "harness_core.assembler",
    "BlockEnd": "harness_core.types",
    "BlockStart": "harness_core.types",
    "CacheMark": "harness_core.types",
    "cache_breakpoint": "harness_core.types",
    "ContentBlock": "harness_core.types",
    "Conversation": "harness_core.conversation",
    "EnvFallback": "harness_core.config",
    "ErrorCode": "harness_core.errors",
    "Failure": "harness_core.errors",
    "FileBlock": "harness_core.types",
    "JsonObjectFormat": "harness_core.types",
    "JsonSchemaFormat": "harness_core.types",
    "ResponseFormat": "harness_core.types",
    "Finish": "harness_core.types",
    "FinishReason": "harness_core.types",
    "GenerateOptions": "harness_core.types",
    "GenerateResult": "harness_core.runtime",
    "Harness": "harness_core.runtime",
    "LlmAdapter": "harness_core.adapter",
    "LlmError": "harness_core.errors",
    "InvalidOutputError": "harness_core.errors",
    "Message": "harness_core.types",
    "ModelInfo": "harness_core.types",
    "NamedToolChoice": "harness_core.types",
    "ReasoningBlock": "harness_core.types",
    "ReasoningDelta": "harness_core.types",
    "Reply": "harness_core.conversation",
    "ChunkScrubber": "harness_core.secret",
    "RedactFilter": "harness_core.secret",
    "Redactor": "harness_core.secret",
    "Secret": "harness_core.secret",
    "SecretMasking": "harness_core.secret",
    "ConnectionString": "harness_core.secret",
    "redacted_logging": "harness_core.secret",
    "mask_strings": "harness_core.secret",
    "StreamChunk": "harness_core.types",
    "SyncHarness": "harness_core.sync",
    "TextBlock": "harness_core.types",
    "TextDelta": "harness_core.types",
    "TokenUsage": "harness_core.types",
    "Tool": "harness_core.tools",
    "ToolCallBlock": "harness_core.types",
    "ToolCallDelta": "harness_core.types",
    "ToolResultBlock": "harness_core.types",
    "ToolSpec": "harness_core.types",
    "Usage": "harness_core.types",
    "canonical_json": "harness_core.types",
    "decode_output": "harness_core.structured",
    "response_format_for": "harness_core.structured",
    "hookimpl": "harness_core.hookspecs",
    "tool": "harness_core.tools",
}


__getattr__ = lazy_exports(__name__, _LAZY)
