"""Wire types of the OpenAI Chat Completions streaming protocol, as msgspec Structs.

Source: the ``ChatCompletionChunk`` model of the official SDK
(openai/openai-python: ``src/openai/types/chat/chat_completion_chunk.py``) and the API reference
https://platform.openai.com/docs/api-reference/chat-streaming, widened for the fields
"OpenAI-compatible" servers add (PROTOCOLS §1.4): ``reasoning_content`` (DeepSeek, vLLM),
``reasoning`` (Ollama, Groq, OpenRouter), ``x_groq.usage`` (Groq), DeepSeek's prompt-cache
counters, in-band ``error`` objects (OpenAI, vLLM, OpenRouter; also top-level
``object: "error"`` and ``choices[].error``) and Mistral's list-of-parts ``content``.

Every field is optional and nullable and unknown fields are ignored, so a server that adds or
omits fields still decodes. The decoder is the per-token hot path: :func:`decode_chunk` uses one
reusable typed :class:`msgspec.json.Decoder`, which is faster than ``json.loads`` into dicts.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from harness_core.kit import decode_event

__all__ = [
    "ChatCompletionChunk",
    "Choice",
    "CompletionTokensDetails",
    "ContentPart",
    "Delta",
    "FunctionDelta",
    "PromptTokensDetails",
    "ToolCallFragment",
    "WireError",
    "WireUsage",
    "XGroq",
    "decode_chunk",
]


class FunctionDelta(msgspec.Struct, gc=False):
    """``delta.tool_calls[].function`` (and the deprecated ``delta.function_call``).

    ``name`` comes on the first fragment of a call only; ``arguments`` is a piece of raw JSON
    text, possibly ``""``.
    """

    name: str | None = None
    arguments: str | None = None


class ToolCallFragment(msgspec.Struct, gc=False):
    """One entry of ``delta.tool_calls``: ``index`` (absent on Gemini's endpoint), ``id`` and
    ``type`` on the first fragment of a call, ``function`` with name/arguments pieces."""

    index: int | None = None
    id: str | None = None
    type: str | None = None
    function: FunctionDelta | None = None


class ContentPart(msgspec.Struct, gc=False):
    """A part of a list-valued ``delta.content`` (Mistral): ``{"type": "text", "text": …}`` or
    ``{"type": "thinking", "thinking": [{"type": "text", "text": …}]}``."""

    type: str | None = None
    text: str | None = None
    thinking: list[ContentPart] | None = None


class Delta(msgspec.Struct, gc=False):
    """``choices[].delta``: the increment carried by one chunk."""

    content: str | list[ContentPart] | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    refusal: str | None = None
    tool_calls: list[ToolCallFragment] | None = None
    function_call: FunctionDelta | None = None


class WireError(msgspec.Struct, gc=False):
    """An error object: ``{"message", "type", "param", "code", "metadata"}``.

    ``code`` is a string for OpenAI (``"rate_limit_exceeded"``) and a number for OpenRouter and
    vLLM (HTTP-like status).
    """

    message: str | None = None
    type: str | None = None
    code: str | int | None = None
    param: Any = None
    metadata: dict[str, Any] | None = None


class Choice(msgspec.Struct, gc=False):
    """One element of ``choices``; only the choice with ``index == 0`` is used."""

    index: int = 0
    delta: Delta | None = None
    finish_reason: str | None = None
    error: WireError | None = None


class PromptTokensDetails(msgspec.Struct, gc=False):
    """``usage.prompt_tokens_details``."""

    cached_tokens: int | None = None


class CompletionTokensDetails(msgspec.Struct, gc=False):
    """``usage.completion_tokens_details``."""

    reasoning_tokens: int | None = None


class WireUsage(msgspec.Struct, gc=False):
    """``usage``: OpenAI's counts plus DeepSeek's ``prompt_cache_hit_tokens`` /
    ``prompt_cache_miss_tokens`` (https://api-docs.deepseek.com/api/create-chat-completion)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    prompt_tokens_details: PromptTokensDetails | None = None
    completion_tokens_details: CompletionTokensDetails | None = None
    prompt_cache_hit_tokens: int | None = None
    prompt_cache_miss_tokens: int | None = None


class XGroq(msgspec.Struct, gc=False):
    """Groq's ``x_groq`` extension; its ``usage`` has OpenAI's field names."""

    usage: WireUsage | None = None


class ChatCompletionChunk(msgspec.Struct, gc=False):
    """One ``data:`` payload of the stream.

    ``error`` is set on in-band errors (an object, or a bare string on some servers); a chunk
    with ``object == "error"`` is vLLM's/Mistral's top-level error shape, whose ``message`` /
    ``type`` / ``code`` sit at the top level.
    """

    id: str | None = None
    object: str | None = None
    model: str | None = None
    choices: list[Choice] | None = None
    usage: WireUsage | None = None
    x_groq: XGroq | None = None
    error: WireError | str | None = None
    message: str | None = None
    type: str | None = None
    code: str | int | None = None


_decoder: Final = msgspec.json.Decoder(type=ChatCompletionChunk)


def decode_chunk(
    data: str | bytes, *, incomplete: bool = False, provider: str | None = None, request_id: str | None = None
) -> ChatCompletionChunk:
    """Decode one ``data:`` payload (:func:`harness_core.kit.decode_event`; ``incomplete``: the
    event was cut by the end of the body).

    Raises:
        LlmError: ``PROTOCOL`` when ``data`` is not JSON or not a chunk object (``NETWORK`` when
            ``incomplete``); the message quotes at most 200 characters of it.
    """
    return decode_event(_decoder, data, "stream chunk", incomplete=incomplete, provider=provider, request_id=request_id)
