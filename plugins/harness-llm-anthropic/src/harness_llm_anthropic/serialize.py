"""The request serializer: :class:`GenerateOptions` → a Messages API request body (JSON bytes).

Wire format: https://docs.anthropic.com/en/api/messages (tool use:
https://docs.anthropic.com/en/docs/build-with-claude/tool-use, extended thinking:
https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking). Everything here runs
before any I/O, so every :class:`LlmError` it raises means no request was sent.

Mapping:

- ``system`` (string): ``options.system`` and the text of every ``system`` message, joined with
  a blank line.
- ``user`` and ``tool`` messages in a row form one ``user`` turn, its ``tool_result`` blocks
  first (the API wants them before any text), then the text. A tool result with ``files``
  sends ``content`` as a list: its text block, then each file as below (images, PDFs, text
  documents; https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use).
- ``assistant`` messages: text; ``tool_use`` with ``input`` = the call's raw ``arguments`` JSON
  (validated as an object, sent byte-exact; empty → ``{}``; invalid → ``BAD_REQUEST``);
  reasoning blocks only where they carry their signature: the block's own
  :class:`~harness_core.types.ReasoningSignature` (→ ``thinking`` with ``signature``, or
  ``redacted_thinking`` with ``data`` when redacted; the runtime has already dropped one made by
  another provider or model, :func:`harness_core.boundary.strip_replay`), else the message's
  legacy ``replay_state`` written by this adapter for the same model (:func:`replay_blocks`);
  a block with neither is dropped: the API rejects unsigned thinking.
- ``tools`` → ``input_schema``; ``tool_choice`` ``auto``/``required``/``none``/named →
  ``auto``/``any``/``none``/``tool``; ``stop`` → ``stop_sequences``; ``temperature``, ``top_p``.
- ``reasoning_effort`` → ``thinking: {type: enabled, budget_tokens}`` from the configured
  budgets; ``off`` sends no thinking; an unlisted id raises ``UNSUPPORTED``. ``max_tokens``
  (required by the API) defaults to ``max_tokens_default``, raised above the budget when
  defaulted; an explicit ``max_tokens`` not above the budget raises ``BAD_REQUEST``.
- files (``FileBlock``, user messages only; https://docs.anthropic.com/en/docs/build-with-claude/vision,
  https://docs.anthropic.com/en/docs/build-with-claude/pdf-support,
  https://docs.anthropic.com/en/docs/build-with-claude/citations): ``image/jpeg|png|gif|webp`` →
  ``image`` with a ``base64`` or ``url`` source (5 MB per image); ``application/pdf`` →
  ``document`` with a ``base64`` or ``url`` source (32 MB); ``text/*`` → ``document`` with a
  ``text`` source (``media_type: text/plain``, UTF-8 bytes only, 32 MB); the filename becomes the
  document's ``title``. Audio, other types, a URL for text, non-UTF-8 text, a larger size or an
  image ``detail`` of ``low`` / ``high`` (the API has no resolution hint) raise ``UNSUPPORTED``
  naming it; URLs are fetched by Anthropic, never here.
- ``response_format`` (https://docs.anthropic.com/en/docs/build-with-claude/structured-outputs):
  ``JsonSchemaFormat`` → ``output_config: {format: {type: json_schema, schema}}`` (always
  constrained decoding, so ``strict`` needs nothing more; the name has no slot); plain JSON mode
  (``JsonObjectFormat``), or a model configured with ``structured_outputs: false`` (models
  before Claude 4.5), raises ``UNSUPPORTED``.
- prompt caching (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching): a
  ``cache`` mark on a text, file, tool-use or tool-result block, a tool, or ``system_cache`` →
  ``cache_control: {type: ephemeral}`` on that block (``ttl`` 300 → ``"5m"``, 3600 → ``"1h"``;
  another TTL raises ``UNSUPPORTED``). With any mark on the system prompt, ``system`` is sent as
  text blocks (``options.system`` first, then each system message's text blocks) so a mark keeps
  its place; without, it stays one string.
- ``seed`` raises ``UNSUPPORTED`` (the API has no seed). ``provider_options["anthropic"]`` is
  merged into the body as given (``stream`` stays true).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from harness_core import (
    CacheMark,
    FileBlock,
    GenerateOptions,
    JsonObjectFormat,
    JsonSchemaFormat,
    LlmError,
    Message,
    NamedToolChoice,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSpec,
)
from harness_core.kit import base64_data, check_cache_ttls, check_file, unsupported_file
from harness_llm_anthropic.errors import PROVIDER
from harness_llm_anthropic.translate import REPLAY_VERSION

__all__ = [
    "CACHE_TTLS",
    "IMAGE_TYPES",
    "MAX_DOCUMENT_BYTES",
    "MAX_IMAGE_BYTES",
    "build_body",
    "cache_control",
    "file_block",
    "replay_blocks",
]

CACHE_TTLS: Final = {300: "5m", 3600: "1h"}
"""Prompt-cache lifetimes (seconds) the API takes → its ``ttl`` strings."""

IMAGE_TYPES: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""Image media types the ``image`` block takes, inline or as a URL."""
MAX_IMAGE_BYTES: Final = 5 * 1024 * 1024
"""The API's limit per image (5 MB)."""
MAX_DOCUMENT_BYTES: Final = 32 * 1024 * 1024
"""The API's request size limit (32 MB), the bound for one PDF or text document."""
_PDF: Final = ("application/pdf",)

_ARGS_DECODER: Final = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ENCODER: Final = msgspec.json.Encoder()
_EMPTY_OBJECT: Final = msgspec.Raw(b"{}")
_TOOL_CHOICE: Final[dict[str, dict[str, str]]] = {
    "auto": {"type": "auto"},
    "required": {"type": "any"},
    "none": {"type": "none"},
}


def cache_control(mark: CacheMark | None) -> dict[str, str] | None:
    """Anthropic's ``cache_control`` for ``mark`` (``None`` without one); the TTL was checked by
    :func:`~harness_core.types.check_cache_ttls` before."""
    if mark is None:
        return None
    if mark.ttl is None:
        return {"type": "ephemeral"}
    return {"type": "ephemeral", "ttl": CACHE_TTLS[mark.ttl]}


def _tool(tool: ToolSpec) -> dict[str, Any]:
    """A tool definition: ``{name, description?, input_schema, strict?}``; ``strict: true`` (strict
    tool use: https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/strict-tool-use) for a
    :attr:`~harness_core.ToolSpec.strict` tool."""
    out: dict[str, Any] = {"name": tool.name}
    if tool.description:
        out["description"] = tool.description
    out["input_schema"] = tool.parameters
    if tool.strict:
        out["strict"] = True
    return out


def _marked(block: dict[str, Any], mark: CacheMark | None) -> dict[str, Any]:
    control = cache_control(mark)
    if control is not None:
        block["cache_control"] = control
    return block


def _bad_request(message: str) -> LlmError:
    return LlmError("BAD_REQUEST", message, provider=PROVIDER)


def replay_blocks(message: Message, model: str) -> Mapping[str, Any]:
    """The per-block replay entries of an assistant ``message`` usable for a request to ``model``:
    the legacy place of thinking signatures, read for a block without its own
    :class:`~harness_core.types.ReasoningSignature` (conversations stored before it, the
    gateway's Responses dialect that carries only ``finish.replay_state``).

    Only state this adapter wrote (``provider == "anthropic"``, ``v == 1``) for the same model
    counts: thinking signatures are bound to the model that produced them. Anything else yields
    an empty mapping (its reasoning blocks are then dropped).
    """
    state = message.replay_state
    if (
        not isinstance(state, dict)
        or state.get("provider") != PROVIDER
        or state.get("v") != REPLAY_VERSION
        or state.get("model") != model
    ):
        return {}
    blocks = state.get("blocks")
    return blocks if isinstance(blocks, dict) else {}


def _tool_input(call: ToolCallBlock) -> msgspec.Raw:
    text = call.arguments
    if not text.strip():
        return _EMPTY_OBJECT
    try:
        _ARGS_DECODER.decode(text)
    except msgspec.DecodeError as exc:
        raise _bad_request(
            f"tool call {call.id!r} ({call.name}) has arguments that are not a JSON object: {exc}"
        ) from exc
    return msgspec.Raw(text.encode())


def _assistant(message: Message, model: str) -> list[dict[str, Any]]:
    replay = replay_blocks(message, model) if message.replay_state is not None else {}
    content: list[dict[str, Any]] = []
    for position, block in enumerate(message.content):
        if isinstance(block, TextBlock):
            if block.text:
                content.append(_marked({"type": "text", "text": block.text}, block.cache))
        elif isinstance(block, ToolCallBlock):
            call = {"type": "tool_use", "id": block.id, "name": block.name, "input": _tool_input(block)}
            content.append(_marked(call, block.cache))
        elif isinstance(block, ReasoningBlock):
            typed = block.signature
            if typed is not None:
                if typed.redacted:
                    content.append({"type": "redacted_thinking", "data": typed.value})
                else:
                    content.append({"type": "thinking", "thinking": block.text, "signature": typed.value})
                continue
            entry = replay.get(str(position))
            if not isinstance(entry, dict):
                continue  # unsigned or foreign reasoning: the API would reject it
            signature = entry.get("signature")
            redacted = entry.get("redacted")
            if isinstance(signature, str):
                content.append({"type": "thinking", "thinking": block.text, "signature": signature})
            elif isinstance(redacted, str):
                content.append({"type": "redacted_thinking", "data": redacted})
        else:
            kind = str(block.__struct_config__.tag).replace("-", " ")
            raise _bad_request(f"an assistant message cannot hold a {kind}")
    return content


def file_block(block: FileBlock) -> dict[str, Any]:
    """The ``image`` or ``document`` content block for ``block`` (mapping in the module docstring).

    Raises:
        LlmError: ``UNSUPPORTED`` naming the media type, the source kind, the size or text that
            is not UTF-8.
    """
    media_type = block.media_type
    if media_type in IMAGE_TYPES:
        check_file(PROVIDER, block, media_types=IMAGE_TYPES, max_bytes=MAX_IMAGE_BYTES, url_types=IMAGE_TYPES)
        return {"type": "image", "source": _source(block)}
    if media_type.startswith("text/"):
        check_file(PROVIDER, block, media_types=(media_type,), max_bytes=MAX_DOCUMENT_BYTES)
        assert block.data is not None
        try:
            text = block.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            why = f"a text document must be UTF-8 ({exc.reason} at byte {exc.start})"
            raise unsupported_file(PROVIDER, block, why) from None
        source: dict[str, Any] = {"type": "text", "media_type": "text/plain", "data": text}
    elif media_type == _PDF[0]:
        check_file(PROVIDER, block, media_types=_PDF, max_bytes=MAX_DOCUMENT_BYTES, url_types=_PDF)
        source = _source(block)
    else:
        raise unsupported_file(
            PROVIDER,
            block,
            f"media type {media_type} is not an image ({', '.join(sorted(IMAGE_TYPES))}), a PDF or text/*",
        )
    document: dict[str, Any] = {"type": "document", "source": source}
    if block.filename:
        document["title"] = block.filename
    return document


def _source(block: FileBlock) -> dict[str, str]:
    if block.url is not None:
        return {"type": "url", "url": block.url}
    return {"type": "base64", "media_type": block.media_type, "data": base64_data(block)}


def _tool_result(block: ToolResultBlock) -> dict[str, Any]:
    """A ``tool_result`` block: ``content`` the text, or with ``files`` a list of a text block
    and image / document blocks (:func:`file_block`; the Messages API takes text, image and
    document blocks in a tool result). Raises ``UNSUPPORTED`` as :func:`file_block` does."""
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_call_id}
    if block.files:
        text = [{"type": "text", "text": block.content}] if block.content else []
        result["content"] = text + [file_block(f) for f in block.files]
    elif block.content:
        result["content"] = block.content
    if block.is_error:
        result["is_error"] = True
    return _marked(result, block.cache)


def _messages(options: GenerateOptions, model: str) -> tuple[list[dict[str, Any]], list[TextBlock]]:
    """The ``messages`` array and the system text blocks found among the messages."""
    turns: list[dict[str, Any]] = []
    system: list[TextBlock] = []
    results: list[dict[str, Any]] = []  # tool_result blocks of the user turn being built
    rest: list[dict[str, Any]] = []  # its other blocks

    def flush_user() -> None:
        if results or rest:
            turns.append({"role": "user", "content": results + rest})
            results.clear()
            rest.clear()

    for message in options.messages:
        role = message.role
        if role == "assistant":
            content = _assistant(message, model)
            if content:  # an assistant message left empty is skipped (the API rejects empty content)
                flush_user()
                turns.append({"role": "assistant", "content": content})
            continue
        if role == "system":
            if message.files:
                raise _bad_request("a system message cannot hold a file")
            system += [b for b in message.content if isinstance(b, TextBlock) and b.text]
            continue
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                results.append(_tool_result(block))
            elif isinstance(block, TextBlock):
                if block.text:
                    rest.append(_marked({"type": "text", "text": block.text}, block.cache))
            elif isinstance(block, FileBlock) and role == "user":
                rest.append(_marked(file_block(block), block.cache))
            else:
                raise _bad_request(f"a {role} message cannot hold a {block.__struct_config__.tag} block")
    flush_user()
    return turns, system


def _thinking(
    options: GenerateOptions, model: str, budgets: Mapping[str, int], default_effort: str | None
) -> int | None:
    """The thinking budget for this request, or ``None`` for no thinking."""
    effort = options.reasoning_effort if options.reasoning_effort is not None else default_effort
    if effort is None or effort == "off":
        return None
    budget = budgets.get(effort)
    if budget is None:
        known = ", ".join(["off", *budgets])
        raise LlmError(
            "UNSUPPORTED",
            f"reasoning_effort {effort!r} is not supported for {model!r} (known: {known})",
            provider=PROVIDER,
            field="reasoning_effort",
        )
    return budget


def _output_format(fmt: JsonSchemaFormat | JsonObjectFormat, model: str, native: bool) -> dict[str, Any]:
    if not isinstance(fmt, JsonSchemaFormat):
        raise LlmError(
            "UNSUPPORTED",
            "response_format JSON mode (JsonObjectFormat) is not supported by the Anthropic Messages API;"
            " give a JsonSchemaFormat",
            provider=PROVIDER,
            field="response_format",
        )
    if not native:
        raise LlmError(
            "UNSUPPORTED",
            f"response_format with a JSON schema ({fmt.name!r}) is not supported for {model!r}: the model is"
            " configured with structured_outputs: false",
            provider=PROVIDER,
            field="response_format",
        )
    return {"type": "json_schema", "schema": fmt.schema}


def build_body(
    options: GenerateOptions,
    *,
    max_tokens_default: int,
    budgets: Mapping[str, int],
    default_effort: str | None = None,
    structured_outputs: bool = True,
) -> bytes:
    """Serialize ``options`` into the JSON body of ``POST /v1/messages`` with ``stream: true``.

    Args:
        options: the request; ``options.model`` must be set.
        max_tokens_default: ``max_tokens`` when the request names none.
        budgets: effort id → thinking budget tokens for this model.
        default_effort: effort used when ``options.reasoning_effort`` is ``None``.
        structured_outputs: whether the model has native structured outputs (``output_config``).

    Raises:
        LlmError: ``UNSUPPORTED`` (``seed``, an unknown ``reasoning_effort``, a file the API cannot
            take, JSON mode, a schema for a model without structured outputs), ``BAD_REQUEST``
            (no model, tool-call arguments that are not a JSON object, a block in the wrong kind
            of message, ``max_tokens`` not above the thinking budget).
    """
    if options.seed is not None:
        raise LlmError("UNSUPPORTED", "seed is not supported by the Anthropic Messages API", provider=PROVIDER)
    model = options.model
    if not model:
        raise _bad_request("no model given: set options.model or a default model for the route")
    check_cache_ttls(PROVIDER, options, CACHE_TTLS)
    messages, system_blocks = _messages(options, model)
    budget = _thinking(options, model, budgets, default_effort)
    max_tokens = options.max_tokens
    if budget is not None:
        if max_tokens is None:
            max_tokens = max_tokens_default if max_tokens_default > budget else budget + max_tokens_default
        elif max_tokens <= budget:
            raise _bad_request(
                f"max_tokens ({max_tokens}) must exceed the thinking budget ({budget} tokens for "
                f"reasoning_effort {options.reasoning_effort!r})"
            )
    elif max_tokens is None:
        max_tokens = max_tokens_default
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": messages}
    if options.system:
        system_blocks.insert(0, TextBlock(options.system, cache=options.system_cache))
    if any(block.cache is not None for block in system_blocks):
        body["system"] = [_marked({"type": "text", "text": block.text}, block.cache) for block in system_blocks]
    elif system_blocks:
        body["system"] = "\n\n".join(block.text for block in system_blocks)
    if options.tools:
        body["tools"] = [_marked(_tool(tool), tool.cache) for tool in options.tools]
    choice = options.tool_choice
    if isinstance(choice, NamedToolChoice):
        body["tool_choice"] = {"type": "tool", "name": choice.name}
    elif choice is not None:
        body["tool_choice"] = _TOOL_CHOICE[choice]
    if options.stop:
        body["stop_sequences"] = options.stop
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if options.top_p is not None:
        body["top_p"] = options.top_p
    if budget is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    fmt = options.response_format
    if fmt is not None:
        body["output_config"] = {"format": _output_format(fmt, model, structured_outputs)}
    extra = options.provider_options.get(PROVIDER)
    if extra:
        body.update(extra)
    body["stream"] = True
    return _ENCODER.encode(body)
