"""Binary input and native structured output on the Messages API (PROTOCOLS §10)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from anthropic_wire_fixtures import MODEL, make_config, text_body

from harness_core.errors import LlmError
from harness_core.testing.server import Reply, ScriptedServer
from harness_core.types import (
    BlockEnd,
    FileBlock,
    GenerateOptions,
    JsonObjectFormat,
    JsonSchemaFormat,
    Message,
    TextBlock,
    ToolResultBlock,
)
from harness_llm_anthropic.adapter import AnthropicAdapter
from harness_llm_anthropic.config import DEFAULT_THINKING_BUDGETS, AnthropicConfig, ModelConfig
from harness_llm_anthropic.serialize import MAX_DOCUMENT_BYTES, MAX_IMAGE_BYTES, build_body

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(100))
PDF = b"%PDF-1.7\n\xe2\xe3"
SCHEMA = {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]}


def body(options: GenerateOptions, **kwargs: Any) -> dict[str, Any]:
    raw = build_body(options, max_tokens_default=100, budgets=DEFAULT_THINKING_BUDGETS, **kwargs)
    result: dict[str, Any] = json.loads(raw)
    return result


def sent_content(*blocks: Any) -> Any:
    return body(GenerateOptions(model=MODEL, messages=[Message(role="user", content=list(blocks))]))["messages"][0][
        "content"
    ]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_images_pdfs_and_text_documents() -> None:
    content = sent_content(
        TextBlock("read these"),
        FileBlock("image/png", data=PNG, filename="a.png"),
        FileBlock("image/webp", url="https://example.com/b.webp"),
        FileBlock("application/pdf", data=PDF, filename="report.pdf"),
        FileBlock("application/pdf", url="https://example.com/c.pdf"),
        FileBlock("text/markdown", data="# Café ☕\n".encode(), filename="notes.md"),
    )
    assert content == [
        {"type": "text", "text": "read these"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/b.webp"}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": b64(PDF)},
            "title": "report.pdf",
        },
        {"type": "document", "source": {"type": "url", "url": "https://example.com/c.pdf"}},
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "# Café ☕\n"},
            "title": "notes.md",
        },
    ]


def test_files_follow_tool_results_in_the_user_turn() -> None:
    messages = [
        Message(role="tool", content=[ToolResultBlock("t1", "ok")]),
        Message.user("and", FileBlock("image/gif", data=b"GIF89a")),
    ]
    content = body(GenerateOptions(model=MODEL, messages=messages))["messages"][0]["content"]
    assert [part["type"] for part in content] == ["tool_result", "text", "image"]


@pytest.mark.parametrize(
    ("block", "why"),
    [
        (
            FileBlock("audio/wav", data=b"RIFF"),
            "media type audio/wav is not an image (image/gif, image/jpeg, image/png, image/webp), a PDF or text/*",
        ),
        (FileBlock("image/tiff", data=b"II*"), "media type image/tiff is not an image"),
        (
            FileBlock("text/plain", url="https://h/a.txt"),
            "a url source is not accepted for text/plain; attach the bytes",
        ),
        (
            FileBlock("text/plain", data=b"caf\xe9"),
            "a text document must be UTF-8 (unexpected end of data at byte 3)",
        ),
        (
            FileBlock("image/png", data=b"\0" * (MAX_IMAGE_BYTES + 1)),
            f"{MAX_IMAGE_BYTES + 1} bytes is over the limit of {MAX_IMAGE_BYTES} bytes",
        ),
        (
            FileBlock("application/pdf", data=b"\0" * (MAX_DOCUMENT_BYTES + 1)),
            f"{MAX_DOCUMENT_BYTES + 1} bytes is over the limit",
        ),
        (FileBlock("image/png", url="https://h/a.png", detail="high"), "detail 'high' (an image resolution hint)"),
    ],
)
def test_what_the_api_cannot_take_is_unsupported_naming_it(block: FileBlock, why: str) -> None:
    with pytest.raises(LlmError) as caught:
        sent_content(block)
    assert caught.value.code == "UNSUPPORTED"
    assert caught.value.provider == "anthropic"
    assert caught.value.message.startswith(f"anthropic cannot take the file {block.describe()}: ")
    assert why in caught.value.message


@pytest.mark.parametrize("role", ["assistant", "tool", "system"])
def test_files_outside_user_messages_are_bad_requests(role: str) -> None:
    message = Message(role=role, content=[FileBlock("image/png", data=b"x")])  # type: ignore[arg-type]
    with pytest.raises(LlmError, match=f"{role} message cannot hold a file") as caught:
        body(GenerateOptions(model=MODEL, messages=[message]))
    assert caught.value.code == "BAD_REQUEST"


def test_structured_output_is_output_config_format() -> None:
    for strict in (True, False):
        options = GenerateOptions(model=MODEL, response_format=JsonSchemaFormat("person", SCHEMA, strict=strict))
        assert body(options)["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}
    assert "output_config" not in body(GenerateOptions(model=MODEL))


def test_json_mode_and_models_without_structured_outputs_are_unsupported() -> None:
    with pytest.raises(LlmError, match=r"JSON mode \(JsonObjectFormat\) is not supported") as mode:
        body(GenerateOptions(model=MODEL, response_format=JsonObjectFormat()))
    schema = GenerateOptions(model="claude-3-5-haiku", response_format=JsonSchemaFormat("person", SCHEMA))
    with pytest.raises(LlmError, match=r"not supported for 'claude-3-5-haiku'.*structured_outputs: false") as old:
        body(schema, structured_outputs=False)
    assert (mode.value.code, old.value.code) == ("UNSUPPORTED", "UNSUPPORTED")
    assert (mode.value.field, old.value.field) == ("response_format", "response_format")


def test_structured_outputs_per_model_config() -> None:
    config = AnthropicConfig(models={"claude-3-5-haiku": ModelConfig(structured_outputs=False)})
    assert config.structured_outputs_for("claude-3-5-haiku") is False
    assert config.structured_outputs_for(MODEL) is True


@pytest.mark.anyio
async def test_a_pdf_and_a_schema_reach_the_server(server: ScriptedServer, adapter: AnthropicAdapter) -> None:
    server.add(Reply(reads=[text_body('{"age":', " 36}")]))
    options = GenerateOptions(
        model=MODEL,
        messages=[Message.user("how old?", FileBlock("application/pdf", data=PDF, filename="cv.pdf"))],
        response_format=JsonSchemaFormat("person", SCHEMA, strict=True),
    )
    chunks = [chunk async for chunk in adapter.stream(options)]
    assert [c.block for c in chunks if isinstance(c, BlockEnd)] == [TextBlock('{"age": 36}')]
    sent = server.requests[0].json()
    assert sent["messages"][0]["content"][1] == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": b64(PDF)},
        "title": "cv.pdf",
    }
    assert sent["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}


@pytest.mark.anyio
async def test_a_model_configured_without_structured_outputs_sends_nothing(server: ScriptedServer) -> None:
    config = make_config(server)
    config.models = {MODEL: ModelConfig(structured_outputs=False)}
    adapter = AnthropicAdapter(config)
    try:
        with pytest.raises(LlmError, match="structured_outputs: false"):
            async for _ in adapter.stream(GenerateOptions(model=MODEL, response_format=JsonSchemaFormat("p", SCHEMA))):
                pass
    finally:
        await adapter.aclose()
    assert server.requests == []
