"""The chunk translation: any-llm's ``ChatCompletionChunk`` objects in, harness stream chunks out.

any-llm converts every provider's stream into OpenAI-shaped chunks (pydantic models of
``any_llm.types.completion``: https://github.com/mozilla-ai/any-llm, ``src/any_llm/types/completion.py``).
Each one is turned into the openai plugin's wire struct and fed to its state machine
(:class:`harness_llm_openai.translate.ChunkTranslator`: blocks opened and closed in order, tool-call
arguments passed through raw, usage held and emitted once before ``finish``, finish reasons
mapped with ``raw`` kept). On top of that this translator keeps what any-llm carries beyond the
OpenAI wire:

- ``delta.reasoning.content`` → reasoning blocks; for providers that sign their reasoning
  (Anthropic family) the block writer opens them ``signed`` (``signed_reasoning``).
- ``delta.extra_content`` (Anthropic's thinking ``signature``) and a tool call's
  ``extra_content`` (Gemini's ``thought_signature``) → ``finish.replay_state`` as
  ``{"model", "extra_content", "tool_calls": {call id: extra_content}}``.
- ``usage.prompt_tokens_details.cache_write_tokens`` (Anthropic cache writes) →
  ``cache_write_tokens``, beside cache reads and reasoning tokens.

An error the library raises while reading is the provider's in-band error (Anthropic's
``event: error``, OpenAI's ``data: {"error": …}``) unless it is a transport or protocol fault:
:meth:`fail` then ends the stream with ``finish{error}``. The library's stream has no terminal
marker of its own: it simply ends.   :meth:`end_of_input` then
finishes the stream after a finish reason and raises ``NETWORK`` without one (a cut stream).
"""

from __future__ import annotations

from typing import Any

from harness_core import FinishReason, LlmError, StreamChunk, TokenUsage
from harness_llm_openai.translate import ChunkTranslator
from harness_llm_openai.wire import ChatCompletionChunk, Choice, Delta, FunctionDelta, ToolCallFragment

__all__ = ["LibraryChunkTranslator", "usage_from_library"]


def usage_from_library(usage: Any) -> TokenUsage | None:
    """Token usage from any-llm's ``CompletionUsage`` (``None`` when it holds no counts).

    ``prompt_tokens`` already includes cache reads and writes (any-llm folds Anthropic's
    separate counters in), ``completion_tokens`` includes reasoning tokens.
    """
    if usage is None or (usage.prompt_tokens is None and usage.completion_tokens is None):
        return None
    prompt = usage.prompt_tokens_details
    completion = usage.completion_tokens_details
    return TokenUsage(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        cache_read_tokens=getattr(prompt, "cached_tokens", None),
        cache_write_tokens=getattr(prompt, "cache_write_tokens", None),
        reasoning_tokens=getattr(completion, "reasoning_tokens", None),
    )


class LibraryChunkTranslator(ChunkTranslator):
    """Translate one any-llm chunk stream into harness :data:`StreamChunk` lists.

    Args:
        provider: the plugin name stamped on failures (``anyllm``).
        model: the requested model id, recorded in the replay state (signatures are model-bound).
        signed_reasoning: mark reasoning blocks ``signed`` (the provider signs them).

    Use :meth:`feed_library` per library chunk, then :meth:`end_of_input` when the library's iterator
    ends, or :meth:`abort`.
    """

    def __init__(self, *, provider: str = "anyllm", model: str, signed_reasoning: bool = False) -> None:
        super().__init__(provider=provider, signed_reasoning=signed_reasoning)
        self.model = model
        self._extra: dict[str, Any] = {}
        self._call_extra: dict[str, dict[str, Any]] = {}
        self._call_ids: dict[int, str] = {}

    def feed_library(self, chunk: Any) -> list[StreamChunk]:
        """Translate one any-llm ``ChatCompletionChunk``; returns the chunks it produces (none
        once the stream ended: the library's iterator ends right after its last chunk)."""
        usage = usage_from_library(chunk.usage)
        if usage is not None:
            self._writer.usage = usage  # last wins; emitted once, after the blocks
        choices = [self._choice(choice) for choice in chunk.choices or () if choice.index == 0][:1]
        return self.feed_chunk(ChatCompletionChunk(choices=choices))

    def _choice(self, choice: Any) -> Choice:
        delta = choice.delta
        reasoning = delta.reasoning.content if delta.reasoning is not None else None
        if isinstance(delta.extra_content, dict):
            _merge(self._extra, delta.extra_content)
        fragments = None
        if delta.tool_calls:
            fragments = [self._fragment(call) for call in delta.tool_calls]
        wire = Delta(content=delta.content, reasoning=reasoning, refusal=delta.refusal, tool_calls=fragments)
        return Choice(index=0, delta=wire, finish_reason=choice.finish_reason)

    def _fragment(self, call: Any) -> ToolCallFragment:
        function = call.function
        if call.id:
            self._call_ids[call.index] = call.id
        extra = getattr(call, "extra_content", None)
        call_id = call.id or self._call_ids.get(call.index)
        if isinstance(extra, dict) and call_id is not None:
            _merge(self._call_extra.setdefault(call_id, {}), extra)
        return ToolCallFragment(
            index=call.index,
            id=call.id,
            type=call.type,
            function=None if function is None else FunctionDelta(name=function.name, arguments=function.arguments),
        )

    def fail(self, error: LlmError) -> list[StreamChunk]:
        """The provider reported ``error`` inside the stream (the library raised it while
        reading): close open blocks, emit usage when known, ``finish{error}`` carrying it."""
        return self._writer.finish(FinishReason("error", raw=self._finish_raw, failure=error.to_failure()))

    def replay_state(self) -> dict[str, Any] | None:
        """What a later turn of the same model needs back (``None`` when the provider sent nothing)."""
        state: dict[str, Any] = {}
        signature = {key: value for key, value in self._extra.items() if key != "anthropic"}
        anthropic = self._extra.get("anthropic")
        if isinstance(anthropic, dict) and "signature" in anthropic:
            signature["anthropic"] = {"signature": anthropic["signature"]}
        if signature:
            state["extra_content"] = signature
        if self._call_extra:
            state["tool_calls"] = dict(self._call_extra)
        if not state:
            return None
        state["model"] = self.model
        return state


def _merge(target: dict[str, Any], extra: dict[str, Any]) -> None:
    """Merge one ``extra_content`` fragment into ``target``, namespace by namespace, last value
    of a key winning (Anthropic sends each thinking block's signature whole, in one delta)."""
    for namespace, values in extra.items():
        slot = target.get(namespace)
        if isinstance(slot, dict) and isinstance(values, dict):
            slot.update(values)
        else:
            target[namespace] = dict(values) if isinstance(values, dict) else values
