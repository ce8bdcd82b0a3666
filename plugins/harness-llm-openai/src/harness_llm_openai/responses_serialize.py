"""Request serializer of the Responses API: :class:`GenerateOptions` → the ``POST /responses`` body.

Wire format: https://platform.openai.com/docs/api-reference/responses/create. Everything here runs
before any I/O, so every :class:`LlmError` it raises means no request was sent.

Mapping:

- ``instructions`` = ``options.system``; ``input`` is a list of items in conversation order:
  ``system`` / ``user`` messages as ``{role, content}`` (one text part as a string, otherwise
  ``input_text`` / file parts); tool results (in ``tool`` or ``user`` messages) as
  ``{type: function_call_output, call_id, output}``; an assistant turn as its items in block
  order: text as ``{role: assistant, content: [{type: output_text, text}]}``, tool calls as
  ``{type: function_call, call_id, name, arguments}`` (arguments byte-exact), and reasoning
  blocks as ``{type: reasoning, id, encrypted_content, summary}`` exactly as the turn's
  ``replay_state`` (written by :class:`~harness_llm_openai.responses_translate.ResponsesTranslator`
  for the same plugin and model) recorded them. Reasoning without that state is dropped (the
  wire has no input for unsigned reasoning, and encrypted reasoning is bound to its model);
  function calls and messages are sent without their item ids, which ``store: false`` does not
  keep.
- ``store`` (default ``false``, the only mode that keeps no data at OpenAI); then reasoning
  models get ``include: ["reasoning.encrypted_content"]`` so their reasoning can be replayed.
- ``tools`` → ``{type: function, name, description, parameters, strict}``, ``strict`` the tool's
  :attr:`ToolSpec.strict`, always sent (the Responses API defaults it to true, which would
  reject ordinary schemas); ``tool_choice``
  ``auto`` / ``none`` / ``required`` / ``{type: function, name}``.
- ``max_tokens`` → ``max_output_tokens``; ``temperature``, ``top_p``; ``seed`` and ``stop`` have
  no field and raise ``UNSUPPORTED``.
- ``reasoning_effort`` (one of the model's listed efforts; ``off`` sent as ``none``) →
  ``reasoning: {effort, summary}``; a reasoning model without an effort gets ``reasoning:
  {summary}`` (summaries are only streamed when asked for).
- ``response_format`` (https://platform.openai.com/docs/guides/structured-outputs?api-mode=responses)
  → ``text: {format: {type: json_schema, name, schema, strict, description?}}`` or
  ``{type: json_object}``.
- Files (user messages only; https://platform.openai.com/docs/guides/images-vision?api-mode=responses,
  https://platform.openai.com/docs/guides/pdf-files?api-mode=responses): ``image/png|jpeg|gif|webp``
  → ``{type: input_image, image_url: <URL or data: URL>, detail}`` (:attr:`FileBlock.detail`,
  ``auto`` when unset); ``application/pdf`` → ``{type: input_file, file_data: <data: URL>,
  filename}`` or ``{type: input_file, file_url}``;
  ``audio/wav|mpeg`` → ``{type: input_audio, input_audio: {data, format}}`` (bytes only); other
  types, a URL for audio or more than 20 MB raise ``UNSUPPORTED`` naming it. URLs are passed on,
  never downloaded here. A tool result with ``files`` sends ``output`` as a list: an
  ``input_text`` part, then each image or PDF as above (audio raises ``UNSUPPORTED``: the
  output takes ``input_text`` / ``input_image`` / ``input_file`` only).
- ``provider_options[<plugin name>]`` is merged into the body last, as given (``stream`` stays true).
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
from harness_llm_openai.responses_translate import REPLAY_API, REPLAY_VERSION
from harness_llm_openai.serialize import AUDIO_FORMATS, IMAGE_TYPES, MAX_FILE_BYTES, MEDIA_TYPES, check_effort

__all__ = ["ENCRYPTED_REASONING", "ResponsesSerializer", "replay_entries"]

ENCRYPTED_REASONING: Final = "reasoning.encrypted_content"
"""The ``include`` value that makes reasoning items carry ``encrypted_content``."""
_URL_TYPES: Final = IMAGE_TYPES | {"application/pdf"}
_SEPARATOR_CHARS: Final = 2  # the blank line the translator puts between summary parts
_encoder: Final = msgspec.json.Encoder()


def replay_entries(message: Message, provider: str, model: str) -> dict[str, Any]:
    """The reasoning entries (our block index → ``{id, encrypted_content?, summary? | text?}``)
    of an assistant ``message`` usable for a request to ``model`` by plugin ``provider``.

    Only state the Responses translator wrote (``v`` 1, ``api: responses``) for the same plugin
    and model counts; anything else yields an empty mapping (its reasoning is then dropped).
    """
    state = message.replay_state
    if (
        not isinstance(state, dict)
        or state.get("v") != REPLAY_VERSION
        or state.get("api") != REPLAY_API
        or state.get("provider") != provider
        or state.get("model") != model
    ):
        return {}
    entries = state.get("reasoning")
    return entries if isinstance(entries, dict) else {}


def _summary(text: str, lengths: object) -> list[dict[str, str]]:
    """The ``summary`` parts of a reasoning block: its text cut back into the parts the
    translator joined (``lengths``); the whole text as one part when the lengths do not fit it."""
    if (
        isinstance(lengths, list)
        and lengths
        and all(isinstance(n, int) and n >= 0 for n in lengths)
        and sum(lengths) + _SEPARATOR_CHARS * (len(lengths) - 1) == len(text)
    ):
        parts: list[str] = []
        start = 0
        for length in lengths:
            parts.append(text[start : start + length])
            start += length + _SEPARATOR_CHARS
        return [{"type": "summary_text", "text": part} for part in parts]
    return [{"type": "summary_text", "text": text}] if text else []


class ResponsesSerializer:
    """Builds Responses API request bodies for one server.

    Args:
        provider: the plugin name; ``options.provider_options[provider]`` is merged into the body,
            and only ``replay_state`` written under this name is replayed.
        store: send ``store: true`` (OpenAI keeps the response; reasoning is then replayable by
            id). Default ``false``.
        encrypted_reasoning: ask reasoning models for ``encrypted_content`` when ``store`` is
            false (without it their reasoning cannot be replayed).
        reasoning_summary: ``reasoning.summary`` sent to reasoning models (``"auto"``,
            ``"concise"``, ``"detailed"``; ``None`` sends none, and no summary is streamed).
        max_file_bytes: the largest inline file, in bytes.
    """

    def __init__(
        self,
        *,
        provider: str = "openai",
        store: bool = False,
        encrypted_reasoning: bool = True,
        reasoning_summary: str | None = "auto",
        max_file_bytes: int = MAX_FILE_BYTES,
    ) -> None:
        self.provider = provider
        self.store = store
        self.encrypted_reasoning = encrypted_reasoning
        self.reasoning_summary = reasoning_summary
        self.max_file_bytes = max_file_bytes

    def encode(self, options: GenerateOptions, info: ModelInfo, *, reasoning: bool = False) -> bytes:
        """The JSON request body (UTF-8 bytes) for ``options`` sent to ``info.model``
        (``reasoning``: the model reasons, see :meth:`body`).

        Raises:
            LlmError: ``UNSUPPORTED`` for an option the wire cannot honour (``seed``, ``stop``,
                a ``reasoning_effort`` the model does not list, a file it cannot take,
                ``stream: false`` in provider options); ``BAD_REQUEST`` for a message the wire
                cannot express.
        """
        return _encoder.encode(self.body(options, info, reasoning=reasoning))

    def body(self, options: GenerateOptions, info: ModelInfo, *, reasoning: bool = False) -> dict[str, Any]:
        """The request body as a dict (see :meth:`encode`). ``reasoning`` (or an effort) adds
        ``reasoning.summary`` and, without ``store``, ``include`` of the encrypted reasoning.
        Cache marks change nothing (implicit caching); one with a TTL raises ``UNSUPPORTED``."""
        check_cache_ttls(self.provider, options)
        extra = options.provider_options.get(self.provider, {})
        if "stream" in extra and extra["stream"] is not True:
            raise LlmError(
                "UNSUPPORTED",
                f"provider_options[{self.provider!r}] not supported: stream (only streaming is supported)",
                provider=self.provider,
            )
        unsupported = [name for name in ("seed", "stop") if getattr(options, name) is not None]
        if unsupported:
            raise LlmError(
                "UNSUPPORTED",
                f"the Responses API has no {' or '.join(unsupported)} parameter",
                provider=self.provider,
            )
        check_effort(self.provider, options.reasoning_effort, info)
        body: dict[str, Any] = {
            "model": info.model,
            "input": self.input_items(options, info.model),
            "stream": True,
            "store": self.store,
        }
        if options.system:
            body["instructions"] = options.system
        if options.tools:
            body["tools"] = [self._tool(spec) for spec in options.tools]
        choice = options.tool_choice
        if choice is not None:
            body["tool_choice"] = (
                {"type": "function", "name": choice.name} if isinstance(choice, NamedToolChoice) else choice
            )
        if options.max_tokens is not None:
            body["max_output_tokens"] = options.max_tokens
        for name in ("temperature", "top_p"):
            value = getattr(options, name)
            if value is not None:
                body[name] = value
        effort = options.reasoning_effort
        if effort is not None or reasoning:
            settings: dict[str, str] = {}
            if effort is not None:
                settings["effort"] = "none" if effort == "off" else effort
            if self.reasoning_summary is not None and effort != "off":
                settings["summary"] = self.reasoning_summary
            body["reasoning"] = settings
            if not self.store and self.encrypted_reasoning:
                body["include"] = [ENCRYPTED_REASONING]
        if options.response_format is not None:
            body["text"] = {"format": self.text_format(options.response_format)}
        body.update(extra)
        return body

    # ------------------------------------------------------------------ parts

    @staticmethod
    def text_format(fmt: JsonSchemaFormat | JsonObjectFormat) -> dict[str, Any]:
        """``text.format``: ``json_schema`` (name, schema, strict, description) or ``json_object``."""
        if isinstance(fmt, JsonObjectFormat):
            return {"type": "json_object"}
        out: dict[str, Any] = {"type": "json_schema", "name": fmt.name, "schema": fmt.schema, "strict": fmt.strict}
        if fmt.description is not None:
            out["description"] = fmt.description
        return out

    def file_part(self, block: FileBlock) -> dict[str, Any]:
        """The input part for a :class:`FileBlock` (mapping in the module docstring).

        Raises:
            LlmError: ``UNSUPPORTED`` naming the media type, the source kind or the size.
        """
        check_file(
            self.provider,
            block,
            media_types=MEDIA_TYPES,
            max_bytes=self.max_file_bytes,
            url_types=_URL_TYPES,
            detail=True,
        )
        if block.media_type in IMAGE_TYPES:
            url = block.url if block.url is not None else data_url(block)
            return {"type": "input_image", "image_url": url, "detail": block.detail or "auto"}
        audio = AUDIO_FORMATS.get(block.media_type)
        if audio is not None:
            return {"type": "input_audio", "input_audio": {"data": base64_data(block), "format": audio}}
        if block.url is not None:
            return {"type": "input_file", "file_url": block.url}
        return {"type": "input_file", "filename": block.filename or "document.pdf", "file_data": data_url(block)}

    def tool_output(self, block: ToolResultBlock) -> dict[str, Any]:
        """The ``function_call_output`` item of a tool result: ``output`` the text, or with
        ``files`` a list of an ``input_text`` part and ``input_image`` / ``input_file`` parts
        (:meth:`file_part`).

        Raises:
            LlmError: ``UNSUPPORTED`` for audio (``function_call_output`` takes no audio part),
                or as :meth:`file_part` does.
        """
        output: str | list[dict[str, Any]] = block.content
        if block.files:
            parts = [{"type": "input_text", "text": block.content}] if block.content else []
            for file in block.files:
                if file.media_type in AUDIO_FORMATS:
                    raise unsupported_file(self.provider, file, "a function_call_output takes no audio")
                parts.append(self.file_part(file))
            output = parts
        return {"type": "function_call_output", "call_id": block.tool_call_id, "output": output}

    # ------------------------------------------------------------------ items

    def input_items(self, options: GenerateOptions, model: str) -> list[dict[str, Any]]:
        """The ``input`` list (mapping in the module docstring).

        Raises:
            LlmError: ``BAD_REQUEST`` for a file outside a user message, a tool call outside an
                assistant message, or text in a ``tool`` message.
        """
        items: list[dict[str, Any]] = []
        for message in options.messages:
            if message.role == "assistant":
                items.extend(self.assistant_items(message, model))
                continue
            parts: list[dict[str, Any]] = []
            for block in message.content:
                if isinstance(block, ToolResultBlock):
                    items.append(self.tool_output(block))
                elif isinstance(block, TextBlock):
                    parts.append({"type": "input_text", "text": block.text})
                elif isinstance(block, FileBlock):
                    if message.role != "user":
                        raise self._bad(f"a {message.role} message cannot hold a file")
                    parts.append(self.file_part(block))
                elif isinstance(block, ToolCallBlock):
                    raise self._bad(f"a {message.role} message cannot hold a tool call")
                # a ReasoningBlock outside an assistant turn has no input form: dropped
            if parts:
                if message.role == "tool":
                    raise self._bad("a tool message holds text outside a tool result")
                content: str | list[dict[str, Any]] = (
                    parts[0]["text"] if len(parts) == 1 and parts[0]["type"] == "input_text" else parts
                )
                items.append({"role": message.role, "content": content})
        return items

    def assistant_items(self, message: Message, model: str) -> list[dict[str, Any]]:
        """The items of one assistant turn, in block order (consecutive text blocks form one
        message item; reasoning is replayed from ``replay_state`` or dropped).

        Raises:
            LlmError: ``BAD_REQUEST`` for a file or a tool result in the turn.
        """
        replay = replay_entries(message, self.provider, model) if message.replay_state is not None else {}
        items: list[dict[str, Any]] = []
        texts: list[dict[str, str]] = []
        for position, block in enumerate(message.content):
            if isinstance(block, TextBlock):
                if block.text:
                    texts.append({"type": "output_text", "text": block.text})
                continue
            if texts:
                items.append({"role": "assistant", "content": texts})
                texts = []
            if isinstance(block, ToolCallBlock):
                items.append(
                    {"type": "function_call", "call_id": block.id, "name": block.name, "arguments": block.arguments}
                )
            elif isinstance(block, ReasoningBlock):
                item = self._reasoning_item(block, replay.get(str(position)))
                if item is not None:
                    items.append(item)
            else:
                what = "file" if isinstance(block, FileBlock) else "tool result"
                raise self._bad(f"an assistant message cannot hold a {what}")
        if texts:
            items.append({"role": "assistant", "content": texts})
        return items

    def _reasoning_item(self, block: ReasoningBlock, entry: object) -> dict[str, Any] | None:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            return None  # unsigned or foreign reasoning: no input form
        encrypted = entry.get("encrypted_content")
        if not isinstance(encrypted, str) and not self.store:
            return None  # without the content the server answers "Item with id 'rs_…' not found"
        item: dict[str, Any] = {"type": "reasoning", "id": entry["id"]}
        if entry.get("text") is True:
            item["summary"] = []
            item["content"] = [{"type": "reasoning_text", "text": block.text}] if block.text else []
        else:
            item["summary"] = _summary(block.text, entry.get("summary"))
        if isinstance(encrypted, str):
            item["encrypted_content"] = encrypted
        return item

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _tool(spec: ToolSpec) -> dict[str, Any]:
        tool: dict[str, Any] = {"type": "function", "name": spec.name}
        if spec.description:
            tool["description"] = spec.description
        tool["parameters"] = spec.parameters
        tool["strict"] = spec.strict  # always sent: the API's default, true, would refuse ordinary schemas
        return tool

    def _bad(self, message: str) -> LlmError:
        return LlmError("BAD_REQUEST", message, provider=self.provider)
