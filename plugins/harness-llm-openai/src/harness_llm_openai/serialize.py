"""Request serializer: :class:`GenerateOptions` → the Chat Completions request body.

Wire format: https://platform.openai.com/docs/api-reference/chat/create (``messages`` with
``system`` / ``user`` / ``assistant`` (``tool_calls``) / ``tool`` (``tool_call_id``) roles,
``tools`` as ``{"type": "function", "function": {...}}``, ``stream_options.include_usage``).

Everything an OpenAI-style server cannot honour is rejected with ``LlmError("UNSUPPORTED")``
naming the field, before any I/O.

Media (:class:`~harness_core.types.FileBlock`, user messages only; ``content`` becomes a list of
parts in block order; https://platform.openai.com/docs/guides/images-vision,
https://platform.openai.com/docs/guides/pdf-files, https://platform.openai.com/docs/guides/audio):

- ``image/png|jpeg|gif|webp`` → ``{"type": "image_url", "image_url": {"url": <https URL or
  data: URL>, "detail"?}}`` (``detail``: :attr:`FileBlock.detail` when set);
- ``application/pdf`` → ``{"type": "file", "file": {"file_data": <data: URL>, "filename"}}``
  (bytes only: the wire has no URL source for files);
- ``audio/wav`` / ``audio/mpeg`` (also ``audio/x-wav``, ``audio/mp3``) →
  ``{"type": "input_audio", "input_audio": {"data": <base64>, "format": "wav" | "mp3"}}``
  (bytes only);
- anything else, a URL where bytes are needed, or more than ``max_file_bytes`` (20 MB) raises
  ``UNSUPPORTED`` naming the media type, the source kind or the size. URLs are passed to the
  provider as they are, never downloaded here.
- a tool result with ``files`` raises ``UNSUPPORTED`` naming the route and the media type: a
  ``tool`` message's ``content`` is a string or text parts only (API reference); no image is
  moved into a made-up user turn behind the caller's back (the model would read it as the user's).

Tools: ``{"type": "function", "function": {name, description?, parameters, strict?}}``, ``strict:
true`` for a :attr:`ToolSpec.strict` tool (https://platform.openai.com/docs/guides/function-calling).

Structured output (https://platform.openai.com/docs/guides/structured-outputs):
``JsonSchemaFormat`` → ``response_format: {"type": "json_schema", "json_schema": {name, schema,
strict, description?}}``; ``JsonObjectFormat`` → ``{"type": "json_object"}``.

Tool-call ``arguments`` travel as the exact string the model
produced (never parsed). ``provider_options[<plugin name>]`` is merged into the body last, as
given. Reasoning blocks have no input field on OpenAI and are not sent; subclasses (DeepSeek)
override :meth:`RequestSerializer.assistant_message` and :meth:`RequestSerializer.effort_fields`.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from harness_core import (
    FileBlock,
    GenerateOptions,
    JsonObjectFormat,
    JsonSchemaFormat,
    LlmError,
    Message,
    ModelInfo,
    NamedToolChoice,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSpec,
)
from harness_core.kit import base64_data, check_cache_ttls, check_file, data_url, unsupported_file

__all__ = ["AUDIO_FORMATS", "IMAGE_TYPES", "MAX_FILE_BYTES", "MEDIA_TYPES", "RequestSerializer", "check_effort"]

_encoder = msgspec.json.Encoder()

MAX_FILE_BYTES: Final = 20 * 1024 * 1024
"""OpenAI's per-file limit for inline media (20 MB)."""
IMAGE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Image media types the Chat Completions ``image_url`` part takes (also as a URL)."""
AUDIO_FORMATS: Final = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}
"""Audio media types OpenAI's ``input_audio`` part takes → its ``format`` value."""
MEDIA_TYPES: Final = IMAGE_TYPES | {"application/pdf", *AUDIO_FORMATS}
"""Every media type the Chat Completions wire takes inline."""


def check_effort(provider: str, effort: str | None, info: ModelInfo) -> None:
    """Check that ``effort`` (``None``: none asked) is one of ``info.reasoning_efforts``.

    Raises:
        LlmError: ``UNSUPPORTED`` naming the effort, the model and the efforts it supports.
    """
    if effort is not None and effort not in (info.reasoning_efforts or ()):
        raise LlmError(
            "UNSUPPORTED",
            f"reasoning_effort {effort!r} is not supported by model {info.model!r}"
            f" (supported: {info.reasoning_efforts or 'none configured'})",
            provider=provider,
            field="reasoning_effort",
        )


class RequestSerializer:
    """Builds request bodies for one OpenAI-compatible server.

    Args:
        provider: the plugin name; ``options.provider_options[provider]`` is merged into the body.
        include_usage: send ``stream_options: {"include_usage": true}`` (some compatible servers
            reject ``stream_options``; turn it off for them).
        max_tokens_field: the wire name for ``options.max_tokens`` (``"max_tokens"`` or
            ``"max_completion_tokens"``, which OpenAI's reasoning models require).
    """

    def __init__(
        self,
        *,
        provider: str = "openai",
        include_usage: bool = True,
        max_tokens_field: str = "max_tokens",
        max_file_bytes: int = MAX_FILE_BYTES,
    ) -> None:
        self.provider = provider
        self.include_usage = include_usage
        self.max_tokens_field = max_tokens_field
        self.max_file_bytes = max_file_bytes

    def encode(self, options: GenerateOptions, info: ModelInfo) -> bytes:
        """The JSON request body (UTF-8 bytes) for ``options`` sent to the model ``info.model``.

        Raises:
            LlmError: ``UNSUPPORTED`` for an option the protocol cannot honour (``n`` > 1,
                ``logprobs``, ``top_logprobs``, ``stream: false`` in provider options, or a
                ``reasoning_effort`` the model does not list); ``BAD_REQUEST`` for a message
                the protocol cannot express.
        """
        return _encoder.encode(self.body(options, info))

    def body(self, options: GenerateOptions, info: ModelInfo) -> dict[str, Any]:
        """The request body as a dict (see :meth:`encode`). Cache marks change nothing (the API
        caches prompt prefixes implicitly; ``prompt_cache_key`` / ``prompt_cache_retention``
        travel in provider options); a mark with a TTL raises ``UNSUPPORTED``."""
        check_cache_ttls(self.provider, options)
        extra = options.provider_options.get(self.provider, {})
        self._check_extra(extra)
        body: dict[str, Any] = {"model": info.model, "messages": self.messages(options, info.model), "stream": True}
        if self.include_usage:
            body["stream_options"] = {"include_usage": True}
        if options.tools:
            body["tools"] = [self._tool(spec) for spec in options.tools]
        if options.tool_choice is not None:
            choice = options.tool_choice
            body["tool_choice"] = (
                {"type": "function", "function": {"name": choice.name}}
                if isinstance(choice, NamedToolChoice)
                else choice
            )
        if options.max_tokens is not None:
            body[self.max_tokens_field] = options.max_tokens
        for name in ("temperature", "top_p", "seed", "stop"):
            value = getattr(options, name)
            if value is not None:
                body[name] = value
        check_effort(self.provider, options.reasoning_effort, info)
        body.update(self.effort_fields(options.reasoning_effort, info))
        if options.response_format is not None:
            body["response_format"] = self.response_format(options.response_format)
        body.update(extra)
        return body

    # ------------------------------------------------------------------ hooks

    def effort_fields(self, effort: str | None, info: ModelInfo) -> dict[str, Any]:
        """Wire fields for a listed effort id (``None``: the caller chose none):
        ``{"reasoning_effort": effort}``, ``"off"`` sent as OpenAI's ``"none"``; nothing for ``None``."""
        if effort is None:
            return {}
        return {"reasoning_effort": "none" if effort == "off" else effort}

    def response_format(self, fmt: JsonSchemaFormat | JsonObjectFormat) -> dict[str, Any]:
        """The ``response_format`` field: ``json_schema`` (name, schema, strict, description) or
        ``json_object``. Servers with JSON mode only override this to reject a schema."""
        if isinstance(fmt, JsonObjectFormat):
            return {"type": "json_object"}
        schema: dict[str, Any] = {"name": fmt.name, "schema": fmt.schema, "strict": fmt.strict}
        if fmt.description is not None:
            schema["description"] = fmt.description
        return {"type": "json_schema", "json_schema": schema}

    def file_part(self, block: FileBlock) -> dict[str, Any]:
        """The content part for a :class:`FileBlock` (mapping in the module docstring).

        Raises:
            LlmError: ``UNSUPPORTED`` naming the media type, the source kind or the size.
        """
        check_file(
            self.provider,
            block,
            media_types=MEDIA_TYPES,
            max_bytes=self.max_file_bytes,
            url_types=IMAGE_TYPES,
            detail=True,
        )
        if block.media_type in IMAGE_TYPES:
            image = {"url": block.url if block.url is not None else data_url(block)}
            if block.detail is not None:
                image["detail"] = block.detail
            return {"type": "image_url", "image_url": image}
        audio = AUDIO_FORMATS.get(block.media_type)
        if audio is not None:
            return {"type": "input_audio", "input_audio": {"data": base64_data(block), "format": audio}}
        file: dict[str, str] = {"file_data": data_url(block)}
        if block.filename:
            file["filename"] = block.filename
        return {"type": "file", "file": file}

    def assistant_message(self, message: Message, model: str) -> dict[str, Any]:
        """An assistant turn: ``content`` (text blocks joined, ``None`` beside tool calls with no
        text) and ``tool_calls`` with the arguments string byte-exact. Reasoning is dropped; a file
        raises ``BAD_REQUEST``."""
        if message.files:
            raise LlmError("BAD_REQUEST", "an assistant message cannot hold a file", provider=self.provider)
        text = "".join(block.text for block in message.content if isinstance(block, TextBlock))
        calls = [
            {"id": block.id, "type": "function", "function": {"name": block.name, "arguments": block.arguments}}
            for block in message.content
            if isinstance(block, ToolCallBlock)
        ]
        wire: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
        if calls:
            wire["tool_calls"] = calls
        return wire

    # ------------------------------------------------------------------ messages

    def messages(self, options: GenerateOptions, model: str) -> list[dict[str, Any]]:
        """The ``messages`` array: ``options.system`` first, then each turn; tool results become
        ``role: tool`` messages (before any text of the same turn)."""
        out: list[dict[str, Any]] = []
        if options.system:
            out.append({"role": "system", "content": options.system})
        for message in options.messages:
            if message.role == "assistant":
                out.append(self.assistant_message(message, model))
                continue
            parts: list[dict[str, Any]] = []
            for block in message.content:
                if isinstance(block, ToolResultBlock):
                    if block.files:  # a tool message's content is text only (Chat Completions)
                        raise unsupported_file(
                            self.provider,
                            block.files[0],
                            f"route {options.route!r}: a Chat Completions tool message takes text only, "
                            "not media in a tool result (use a route on the Responses API, Anthropic or Gemini)",
                        )
                    out.append({"role": "tool", "tool_call_id": block.tool_call_id, "content": block.content})
                elif isinstance(block, TextBlock):
                    parts.append({"type": "text", "text": block.text})
                elif isinstance(block, FileBlock):
                    if message.role != "user":
                        raise LlmError(
                            "BAD_REQUEST", f"a {message.role} message cannot hold a file", provider=self.provider
                        )
                    parts.append(self.file_part(block))
                elif isinstance(block, ToolCallBlock):
                    raise LlmError(
                        "BAD_REQUEST", f"a {message.role} message cannot hold a tool call", provider=self.provider
                    )
                else:
                    assert isinstance(block, ReasoningBlock)  # no input field for reasoning: dropped
            if parts:
                if message.role == "tool":
                    raise LlmError(
                        "BAD_REQUEST", "a tool message holds text outside a tool result", provider=self.provider
                    )
                content: str | list[dict[str, Any]] = (
                    parts[0]["text"] if len(parts) == 1 and "text" in parts[0] else parts
                )
                out.append({"role": message.role, "content": content})
        return out

    @staticmethod
    def _tool(spec: ToolSpec) -> dict[str, Any]:
        function: dict[str, Any] = {"name": spec.name}
        if spec.description:
            function["description"] = spec.description
        function["parameters"] = spec.parameters
        if spec.strict:
            function["strict"] = True
        return {"type": "function", "function": function}

    def _check_extra(self, extra: dict[str, Any]) -> None:
        """Reject provider options this adapter cannot honour in a stream of one choice; the
        error's ``field`` is ``provider_options.<key>`` of the first one refused (a gateway names
        its client's field)."""
        problems: list[tuple[str, str]] = []
        n = extra.get("n")
        if n is not None and n != 1:
            problems.append(("n", f"n={n!r} (one choice per stream)"))
        if extra.get("logprobs"):
            problems.append(("logprobs", "logprobs (no slot in the stream protocol)"))
        if extra.get("top_logprobs") is not None:
            problems.append(("top_logprobs", "top_logprobs (no slot in the stream protocol)"))
        if "stream" in extra and extra["stream"] is not True:
            problems.append(("stream", "stream (only streaming is supported)"))
        if problems:
            raise LlmError(
                "UNSUPPORTED",
                f"provider_options[{self.provider!r}] not supported: " + ", ".join(text for _, text in problems),
                provider=self.provider,
                field=f"provider_options.{problems[0][0]}",
            )
