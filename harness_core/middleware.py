"""The middleware-author face: everything a middleware (or a sink: a ledger, a trace, telemetry)
needs, and nothing more. How to write one: ``docs/hooks.md``.

- the hooks: :data:`hookimpl`; the ``call_next`` types :data:`CallNext` (``llm_stream``),
  :data:`EmbedCallNext` (``llm_embed``), :data:`CountCallNext` (``llm_count_tokens``),
  :data:`ToolCallNext` (``llm_tool_call``),
  :data:`RegisterAdapter` (``register_adapters``) and :class:`ProviderLookup`
  (``use_route_providers``: the GenAI provider of a route, for telemetry);
- what a stream carries: :class:`GenerateOptions` in, :data:`StreamChunk` out (the chunk kinds
  :class:`BlockStart`, :class:`TextDelta`, :class:`ReasoningDelta`, :class:`ToolCallDelta`,
  :class:`BlockEnd`, :class:`Usage`, :class:`Finish` with its :class:`FinishReason`), the content
  blocks, :class:`Message`, :class:`ModelInfo`, :class:`TokenUsage`, :func:`canonical_json`;
- embedding calls: :class:`EmbedOptions` in, :class:`Embeddings` out;
- errors: :class:`LlmError`, :class:`Failure`, :data:`ErrorCode`; :func:`failure_finish` (the
  ``finish`` ending a stream with a failure); :func:`snippet` (the excerpt an error message quotes);
- the stream's record: :class:`StreamRecord` (:func:`open_record`, :func:`record_of`,
  :func:`embed_record`, :class:`Attempt`) and :func:`observe` (watch a stream, account at the
  end: :class:`StreamEnd`, :class:`ReadScope`);
- streams: :class:`LlmAdapter`, :class:`BlockAssembler` (chunks into a result),
  :func:`close_stream`, :class:`AbortSignal`, :func:`race` and :data:`ABORTED`;
- secrets: :class:`Redactor`, :class:`ChunkScrubber` (masking a stream whatever its split),
  :class:`SecretMasking` (the ``use_redactor`` mixin), :func:`mask_strings`, :data:`MASK`;
- output files: :func:`check_output_file`, :func:`private_file`, :func:`write_in_thread`,
  :class:`WriteFailureLog`.

Each name is defined in one module of the core and re-exported here (and, for the vocabulary, by
:mod:`harness_core`); names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness_core._lazy import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only; at run time names load on first use
    from harness_core.abort import ABORTED, Aborted, AbortSignal, race
    from harness_core.adapter import LlmAdapter
    from harness_core.assembler import BlockAssembler, failure_finish
    from harness_core.chain import close_stream
    from harness_core.embedding import EmbedCallNext, Embeddings, EmbedOptions
    from harness_core.errors import ErrorCode, Failure, LlmError, snippet
    from harness_core.hookspecs import CallNext, CountCallNext, ProviderLookup, RegisterAdapter, ToolCallNext, hookimpl
    from harness_core.outfile import WriteFailureLog, check_output_file, private_file, write_in_thread
    from harness_core.record import (
        Attempt,
        ReadScope,
        StreamEnd,
        StreamRecord,
        embed_record,
        observe,
        open_embed_record,
        open_record,
        record_of,
    )
    from harness_core.secret import MASK, ChunkScrubber, Redactor, SecretMasking, mask_strings
    from harness_core.types import (
        BlockEnd,
        BlockStart,
        ContentBlock,
        FileBlock,
        Finish,
        FinishKind,
        FinishReason,
        GenerateOptions,
        Message,
        ModelInfo,
        ReasoningBlock,
        ReasoningDelta,
        ReasoningSignature,
        StreamChunk,
        TextBlock,
        TextDelta,
        TokenUsage,
        ToolCallBlock,
        ToolCallDelta,
        ToolResultBlock,
        Usage,
        canonical_json,
    )

__all__ = [
    "ABORTED",
    "MASK",
    "AbortSignal",
    "Aborted",
    "Attempt",
    "BlockAssembler",
    "BlockEnd",
    "BlockStart",
    "CallNext",
    "ChunkScrubber",
    "ContentBlock",
    "CountCallNext",
    "EmbedCallNext",
    "EmbedOptions",
    "Embeddings",
    "ErrorCode",
    "Failure",
    "FileBlock",
    "Finish",
    "FinishKind",
    "FinishReason",
    "GenerateOptions",
    "LlmAdapter",
    "LlmError",
    "Message",
    "ModelInfo",
    "ProviderLookup",
    "ReadScope",
    "ReasoningBlock",
    "ReasoningDelta",
    "ReasoningSignature",
    "Redactor",
    "RegisterAdapter",
    "SecretMasking",
    "StreamChunk",
    "StreamEnd",
    "StreamRecord",
    "TextBlock",
    "TextDelta",
    "TokenUsage",
    "ToolCallBlock",
    "ToolCallDelta",
    "ToolCallNext",
    "ToolResultBlock",
    "Usage",
    "WriteFailureLog",
    "canonical_json",
    "check_output_file",
    "close_stream",
    "embed_record",
    "failure_finish",
    "hookimpl",
    "mask_strings",
    "observe",
    "open_embed_record",
    "open_record",
    "private_file",
    "race",
    "record_of",
    "snippet",
    "write_in_thread",
]

_LAZY = {
    "ABORTED": "harness_core.abort",
    "AbortSignal": "harness_core.abort",
    "Aborted": "harness_core.abort",
    "race": "harness_core.abort",
    "LlmAdapter": "harness_core.adapter",
    "BlockAssembler": "harness_core.assembler",
    "failure_finish": "harness_core.assembler",
    "close_stream": "harness_core.chain",
    "Attempt": "harness_core.record",
    "ReadScope": "harness_core.record",
    "StreamEnd": "harness_core.record",
    "StreamRecord": "harness_core.record",
    "embed_record": "harness_core.record",
    "observe": "harness_core.record",
    "open_embed_record": "harness_core.record",
    "open_record": "harness_core.record",
    "record_of": "harness_core.record",
    "EmbedCallNext": "harness_core.embedding",
    "EmbedOptions": "harness_core.embedding",
    "Embeddings": "harness_core.embedding",
    "ErrorCode": "harness_core.errors",
    "Failure": "harness_core.errors",
    "LlmError": "harness_core.errors",
    "snippet": "harness_core.errors",
    "CallNext": "harness_core.hookspecs",
    "CountCallNext": "harness_core.hookspecs",
    "ProviderLookup": "harness_core.hookspecs",
    "RegisterAdapter": "harness_core.hookspecs",
    "ToolCallNext": "harness_core.hookspecs",
    "hookimpl": "harness_core.hookspecs",
    "WriteFailureLog": "harness_core.outfile",
    "check_output_file": "harness_core.outfile",
    "private_file": "harness_core.outfile",
    "write_in_thread": "harness_core.outfile",
    "MASK": "harness_core.secret",
    "ChunkScrubber": "harness_core.secret",
    "Redactor": "harness_core.secret",
    "SecretMasking": "harness_core.secret",
    "mask_strings": "harness_core.secret",
    **dict.fromkeys(
        [
            "BlockEnd",
            "BlockStart",
            "ContentBlock",
            "FileBlock",
            "Finish",
            "FinishKind",
            "FinishReason",
            "GenerateOptions",
            "Message",
            "ModelInfo",
            "ReasoningBlock",
            "ReasoningDelta",
            "ReasoningSignature",
            "StreamChunk",
            "TextBlock",
            "TextDelta",
            "TokenUsage",
            "ToolCallBlock",
            "ToolCallDelta",
            "ToolResultBlock",
            "Usage",
            "canonical_json",
        ],
        "harness_core.types",
    ),
}

__getattr__ = lazy_exports(__name__, _LAZY)
