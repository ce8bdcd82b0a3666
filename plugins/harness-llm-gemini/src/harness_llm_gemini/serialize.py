"""The request serializer: :class:`GenerateOptions` → a ``generateContent`` request body (JSON bytes).

Wire format: https://ai.google.dev/api/generate-content#request-body (function calling:
https://ai.google.dev/gemini-api/docs/function-calling, thinking:
https://ai.google.dev/gemini-api/docs/thinking, thought signatures:
https://ai.google.dev/gemini-api/docs/thought-signatures). Everything here runs before any I/O,
so every :class:`LlmError` it raises means no request was sent.

Mapping:

- ``systemInstruction``: ``options.system`` and the text of every ``system`` message, joined
  with a blank line.
- ``contents``: ``user`` messages → role ``user`` text parts and files (below); ``tool`` messages → role ``user``
  ``functionResponse {name, response: {"output": …} | {"error": …}, id?}`` parts, the name looked
  up from the call with that id earlier in the history (an unknown id raises ``BAD_REQUEST``);
  a tool result's ``files`` go in the response's ``parts`` as files below (multimodal function
  responses, Gemini 3: ``image/png|jpeg|webp``, ``application/pdf``, ``text/plain``; another
  media type raises ``UNSUPPORTED`` naming it);
  ``assistant`` messages → role ``model``: text parts, ``functionCall {name, args, id?}`` with
  ``args`` the call's ``arguments`` decoded (a JSON object; empty → ``{}``; anything else raises
  ``BAD_REQUEST``). Consecutive turns of one role are merged into one content.
- Replay (https://ai.google.dev/gemini-api/docs/thought-signatures): for an assistant message
  whose ``replay_state`` this adapter wrote for the same model, every ``thoughtSignature`` goes
  back on the part of its block, byte-exact; reasoning blocks that carried one go back as
  ``{"text", "thought": true, "thoughtSignature"}`` (unsigned reasoning is dropped); standalone
  parts (signature-only empty text parts, server-side tool parts) go back unchanged at their
  place; call ids are sent only when the provider issued them. Replay state of another model is
  ignored; Gemini 3 then needs ``unsigned_call_signature`` on the model turns whose calls carry
  none (the validator-skipping placeholder of
  https://ai.google.dev/gemini-api/docs/thought-signatures, "FAQ").
- ``tools`` → one ``functionDeclarations`` tool (``parametersJsonSchema`` = the JSON schema; a
  strict tool raises ``UNSUPPORTED`` naming it: function declarations have no strict mode);
  ``tool_choice`` ``auto`` / ``none`` / ``required`` / named → ``functionCallingConfig.mode``
  ``AUTO`` / ``NONE`` / ``ANY`` / ``ANY`` + ``allowedFunctionNames``.
- Files (:class:`~harness_core.types.FileBlock`, https://ai.google.dev/gemini-api/docs/file-input-methods):
  ``data`` → ``inlineData {mimeType, data: base64}``, ``url`` → ``fileData {mimeType, fileUri}``
  (Files API URIs, ``gs://`` on Vertex, public ``https`` URLs: Google fetches them, harness
  never does). Images (PNG, JPEG, WebP, HEIC/HEIF), PDF and ``text/*`` documents, audio and
  video; another media type, a URL scheme other than ``https``/``http``/``gs``, inline data
  over ``max_inline_bytes``, or an image ``detail`` of ``low`` / ``high`` (per-part media
  resolution is in Gemini 3's ``v1alpha`` only) raise ``UNSUPPORTED`` naming it.
- ``generationConfig``: ``maxOutputTokens``, ``temperature``, ``topP``, ``seed``,
  ``stopSequences``; ``reasoning_effort`` → ``thinkingConfig`` (``thinkingBudget`` tokens for an
  int effort value, ``thinkingLevel`` for a string) with ``includeThoughts``;
  ``response_format`` (https://ai.google.dev/gemini-api/docs/structured-output): a JSON schema →
  ``responseMimeType: application/json`` + ``responseJsonSchema`` (decoding is constrained to
  the schema, so ``strict`` is honoured either way); JSON mode → ``responseMimeType`` alone.
- ``provider_options["gemini"]`` is merged into the body as given (``generationConfig`` merged key
  by key).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from harness_core import (
    FileBlock,
    GenerateOptions,
    JsonSchemaFormat,
    LlmError,
    Message,
    NamedToolChoice,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from harness_core.kit import base64_data, check_cache_ttls, check_detail, unsupported_file
from harness_llm_gemini.errors import PROVIDER
from harness_llm_gemini.translate import REPLAY_VERSION

__all__ = ["DEFAULT_MAX_INLINE_BYTES", "MEDIA_TYPES", "URL_SCHEMES", "build_body", "replay_of"]

_ARGS_DECODER: Final = msgspec.json.Decoder(dict[str, Any])
_ENCODER: Final = msgspec.json.Encoder()
_MODES: Final[dict[str, str]] = {"auto": "AUTO", "none": "NONE", "required": "ANY"}

MEDIA_TYPES: Final = frozenset(
    {
        "image/png", "image/jpeg", "image/webp", "image/heic", "image/heif",
        "application/pdf",
        "audio/wav", "audio/mp3", "audio/mpeg", "audio/aiff", "audio/aac", "audio/ogg", "audio/flac",
        "video/mp4", "video/mpeg", "video/mov", "video/quicktime", "video/avi", "video/x-flv", "video/mpg",
        "video/webm", "video/wmv", "video/3gpp",
    }
)  # fmt: skip
"""Media types Gemini takes as files besides ``text/*`` (https://ai.google.dev/gemini-api/docs/image-understanding,
…/document-processing, …/audio, …/video-understanding)."""

URL_SCHEMES: Final = ("https://", "http://", "gs://")
"""File URLs Gemini fetches itself (Files API and public URLs; ``gs://`` on Vertex AI)."""

DEFAULT_MAX_INLINE_BYTES: Final = 20 * 1024 * 1024
"""Gemini's limit on inline data in one request (20 MB); larger files go through the Files API."""


def _bad_request(message: str) -> LlmError:
    return LlmError("BAD_REQUEST", message, provider=PROVIDER)


def replay_of(message: Message, model: str) -> tuple[Mapping[str, Any], list[dict[str, Any]]]:
    """The per-block entries and standalone parts of an assistant ``message``'s replay state,
    usable for a request to ``model``: ``({"<index>": {...}}, [{"after": i, "part": {...}}])``.

    Only state this adapter wrote (``provider == "gemini"``, ``v == 1``) for the same model counts;
    anything else gives empty results.
    """
    state = message.replay_state
    if (
        not isinstance(state, dict)
        or state.get("provider") != PROVIDER
        or state.get("v") != REPLAY_VERSION
        or state.get("model") != model
    ):
        return {}, []
    blocks = state.get("blocks")
    parts = state.get("parts")
    return (
        blocks if isinstance(blocks, dict) else {},
        [p for p in parts if isinstance(p, dict) and isinstance(p.get("part"), dict)]
        if isinstance(parts, list)
        else [],
    )


def _args(call: ToolCallBlock) -> dict[str, Any]:
    if not call.arguments.strip():
        return {}
    try:
        return _ARGS_DECODER.decode(call.arguments)
    except msgspec.DecodeError as exc:
        raise _bad_request(
            f"tool call {call.id!r} ({call.name}) has arguments that are not a JSON object: {exc}"
        ) from exc


def _signed(part: dict[str, Any], entry: object) -> dict[str, Any]:
    if isinstance(entry, dict) and isinstance(entry.get("signature"), str):
        part["thoughtSignature"] = entry["signature"]
    return part


def _model_parts(message: Message, model: str, native_ids: dict[str, bool]) -> list[dict[str, Any]]:
    blocks, standalone = replay_of(message, model)
    placed: dict[int, list[dict[str, Any]]] = {}
    for item in standalone:
        after = item.get("after")
        placed.setdefault(after if isinstance(after, int) else -1, []).append(item["part"])
    parts: list[dict[str, Any]] = list(placed.pop(-1, []))
    for position, block in enumerate(message.content):
        entry = blocks.get(str(position))
        if isinstance(block, TextBlock):
            if block.text or entry:
                parts.append(_signed({"text": block.text}, entry))
        elif isinstance(block, ToolCallBlock):
            call: dict[str, Any] = {"name": block.name, "args": _args(block)}
            native = isinstance(entry, dict) and entry.get("native_id") is True
            if native:
                call["id"] = block.id
            native_ids[block.id] = native
            parts.append(_signed({"functionCall": call}, entry))
        elif isinstance(block, ReasoningBlock):
            if isinstance(entry, dict) and isinstance(entry.get("signature"), str):
                parts.append(_signed({"text": block.text, "thought": True}, entry))
        else:
            raise _bad_request(f"an assistant message cannot hold a {block.__struct_config__.tag} block")
        parts.extend(placed.pop(position, []))
    for rest in placed.values():  # entries placed after blocks the message no longer has
        parts.extend(rest)
    return parts


def _sign_foreign_calls(contents: list[dict[str, Any]], placeholder: str) -> None:
    """Give the first function call of every model turn that has no signature at all the
    ``placeholder`` signature (Gemini 3 rejects such a turn: history from another model)."""
    for content in contents:
        if content["role"] != "model":
            continue
        calls = [part for part in content["parts"] if "functionCall" in part]
        if calls and not any("thoughtSignature" in part for part in calls):
            calls[0]["thoughtSignature"] = placeholder


def _file(block: FileBlock, max_inline_bytes: int) -> dict[str, Any]:
    media_type = block.media_type
    if media_type not in MEDIA_TYPES and not media_type.startswith("text/"):
        raise unsupported_file(PROVIDER, block, f"Gemini does not take {media_type}")
    check_detail(PROVIDER, block)  # (per-part media resolution is v1alpha only, Gemini 3 only)
    url = block.url
    if url is not None:
        if not url.lower().startswith(URL_SCHEMES):
            raise unsupported_file(PROVIDER, block, "only https, http and gs URLs are fetched by Gemini")
        return {"fileData": {"mimeType": media_type, "fileUri": url}}
    size = block.size or 0
    if size > max_inline_bytes:
        raise unsupported_file(
            PROVIDER,
            block,
            f"{size} bytes is over the inline limit of {max_inline_bytes} bytes (upload it with the Files API "
            "and attach its URI as a url)",
        )
    return {"inlineData": {"mimeType": media_type, "data": base64_data(block)}}


FUNCTION_RESPONSE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/webp", "application/pdf", "text/plain"})
"""The media types a ``functionResponse`` takes in its ``parts`` (multimodal function responses,
https://ai.google.dev/gemini-api/docs/function-calling#multimodal; Gemini 3 models)."""


def _function_response(
    block: ToolResultBlock, names: Mapping[str, str], native_ids: Mapping[str, bool], max_inline_bytes: int
) -> dict[str, Any]:
    name = names.get(block.tool_call_id)
    if name is None:
        raise _bad_request(
            f"tool result for call {block.tool_call_id!r}, which no earlier assistant message made "
            "(Gemini needs the function name)"
        )
    response: dict[str, Any] = {"name": name, "response": {"error" if block.is_error else "output": block.content}}
    if native_ids.get(block.tool_call_id):
        response["id"] = block.tool_call_id
    if block.files:
        for file in block.files:
            if file.media_type not in FUNCTION_RESPONSE_TYPES:
                why = f"a functionResponse takes only {', '.join(sorted(FUNCTION_RESPONSE_TYPES))}"
                raise unsupported_file(PROVIDER, file, why)
        response["parts"] = [_file(file, max_inline_bytes) for file in block.files]
    return {"functionResponse": response}


def _contents(options: GenerateOptions, model: str, max_inline_bytes: int) -> tuple[list[dict[str, Any]], list[str]]:
    """The ``contents`` array and the system texts found among the messages."""
    contents: list[dict[str, Any]] = []
    system: list[str] = []
    names: dict[str, str] = {}
    native_ids: dict[str, bool] = {}

    def add(role: str, parts: list[dict[str, Any]]) -> None:
        if not parts:
            return
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})

    for message in options.messages:
        role = message.role
        if role == "system":
            if message.text:
                system.append(message.text)
            continue
        if role == "assistant":
            for call in message.tool_calls:
                names[call.id] = call.name
            add("model", _model_parts(message, model, native_ids))
            continue
        parts: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                parts.append(_function_response(block, names, native_ids, max_inline_bytes))
            elif isinstance(block, TextBlock):
                if block.text:
                    parts.append({"text": block.text})
            elif isinstance(block, FileBlock) and role == "user":
                parts.append(_file(block, max_inline_bytes))
            else:
                raise _bad_request(f"a {role} message cannot hold a {block.__struct_config__.tag} block")
        add("user", parts)
    return contents, system


def _thinking(
    options: GenerateOptions,
    model: str,
    efforts: Mapping[str, int | str],
    default_effort: str | None,
    include_thoughts: bool,
) -> dict[str, Any] | None:
    effort = options.reasoning_effort if options.reasoning_effort is not None else default_effort
    if effort is None:
        return None
    value = efforts.get(effort)
    if value is None:
        known = ", ".join(efforts) or "none"
        raise LlmError(
            "UNSUPPORTED",
            f"reasoning_effort {effort!r} is not supported for {model!r} (known: {known})",
            provider=PROVIDER,
            field="reasoning_effort",
        )
    if isinstance(value, str):
        return {"thinkingLevel": value, "includeThoughts": include_thoughts}
    return {"thinkingBudget": value, "includeThoughts": include_thoughts and value != 0}


def build_body(
    options: GenerateOptions,
    *,
    efforts: Mapping[str, int | str],
    default_effort: str | None = None,
    include_thoughts: bool = True,
    max_inline_bytes: int = DEFAULT_MAX_INLINE_BYTES,
    unsigned_call_signature: str | None = None,
) -> bytes:
    """Serialize ``options`` into the JSON body of ``models/{model}:streamGenerateContent``.

    Args:
        options: the request; ``options.model`` must be set.
        efforts: effort id → ``thinkingBudget`` (int, tokens; ``0`` = off, ``-1`` = dynamic) or
            ``thinkingLevel`` (str) for this model.
        default_effort: effort used when ``options.reasoning_effort`` is ``None`` (``None``: send
            no ``thinkingConfig``, the model's default applies).
        include_thoughts: ask for thought summaries (streamed as reasoning blocks).
        max_inline_bytes: the largest file sent inline (``inlineData``), in bytes.
        unsigned_call_signature: put on the first function call of a model turn whose calls
            carry no signature (``None``: leave them unsigned).

    Raises:
        LlmError: ``UNSUPPORTED`` (an effort the model does not list; a file of a media type,
            URL scheme or size Gemini does not take; a strict tool), ``BAD_REQUEST`` (no model,
            tool-call arguments that are not a JSON object, a tool result for an unknown call, a
            block in the wrong kind of message).
    """
    model = options.model
    if not model:
        raise _bad_request("no model given: set options.model or a default model for the route")
    check_cache_ttls(PROVIDER, options)  # Gemini caches implicitly: a mark changes nothing, a TTL is refused
    contents, system_texts = _contents(options, model, max_inline_bytes)
    if unsigned_call_signature is not None:
        _sign_foreign_calls(contents, unsigned_call_signature)
    body: dict[str, Any] = {"contents": contents}
    if options.system:
        system_texts.insert(0, options.system)
    if system_texts:
        body["systemInstruction"] = {"parts": [{"text": "\n\n".join(system_texts)}]}
    if options.tools:
        declarations = []
        for tool in options.tools:
            if tool.strict:  # functionDeclarations have no strict mode: never dropped in silence
                raise LlmError(
                    "UNSUPPORTED",
                    f"tool {tool.name!r} is strict: Gemini's function calling cannot enforce a tool's schema "
                    "on the call's arguments (send it without strict)",
                    provider=PROVIDER,
                )
            declaration: dict[str, Any] = {"name": tool.name}
            if tool.description:
                declaration["description"] = tool.description
            declaration["parametersJsonSchema"] = tool.parameters
            declarations.append(declaration)
        body["tools"] = [{"functionDeclarations": declarations}]
    choice = options.tool_choice
    if isinstance(choice, NamedToolChoice):
        body["toolConfig"] = {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [choice.name]}}
    elif choice is not None:
        body["toolConfig"] = {"functionCallingConfig": {"mode": _MODES[choice]}}
    config: dict[str, Any] = {}
    if options.max_tokens is not None:
        config["maxOutputTokens"] = options.max_tokens
    if options.temperature is not None:
        config["temperature"] = options.temperature
    if options.top_p is not None:
        config["topP"] = options.top_p
    if options.seed is not None:
        config["seed"] = options.seed
    if options.stop:
        config["stopSequences"] = options.stop
    thinking = _thinking(options, model, efforts, default_effort, include_thoughts)
    if thinking is not None:
        config["thinkingConfig"] = thinking
    response_format = options.response_format
    if response_format is not None:
        config["responseMimeType"] = "application/json"
        if isinstance(response_format, JsonSchemaFormat):
            config["responseJsonSchema"] = response_format.schema
    extra = dict(options.provider_options.get(PROVIDER) or {})
    if isinstance(extra.get("generationConfig"), dict):
        config.update(extra.pop("generationConfig"))
    if config:
        body["generationConfig"] = config
    body.update(extra)
    return _ENCODER.encode(body)
