"""Files (``FileBlock``) and structured output through any-llm: what the library takes from a
provider reaches it in the provider's own shape; anything else is ``UNSUPPORTED`` before any
request."""

from __future__ import annotations

import pytest
from anyllm_wire import ANTHROPIC_TEXT, MISTRAL_TEXT, OPENAI_TEXT, make_adapter, options, run

from harness_core.testing.server import Reply, ScriptedServer
from harness_core.types import FileBlock, JsonSchemaFormat, Message, TextBlock

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(16))
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"


def _ask(block: FileBlock) -> list[Message]:
    return [Message(role="user", content=[TextBlock("What is this?"), block])]


async def test_an_image_reaches_anthropic_as_an_image_block(server: ScriptedServer) -> None:
    server.add(Reply(reads=[ANTHROPIC_TEXT]))
    adapter = make_adapter("anthropic", server)
    try:
        _, error = await run(adapter, options(messages=_ask(FileBlock("image/png", data=PNG))))
    finally:
        await adapter.aclose()
    assert error is None
    content = server.requests[0].json()["messages"][0]["content"]
    assert {"type": "text", "text": "What is this?"} in content
    [image] = [part for part in content if part["type"] == "image"]
    assert image["source"]["media_type"] == "image/png"
    assert image["source"]["type"] == "base64"


async def test_a_pdf_reaches_openai_as_a_file_part(server: ScriptedServer) -> None:
    server.add(Reply(reads=[OPENAI_TEXT]))
    adapter = make_adapter("openai", server)
    try:
        await run(adapter, options(messages=_ask(FileBlock("application/pdf", data=PDF, filename="a.pdf"))))
    finally:
        await adapter.aclose()
    [_, part] = server.requests[0].json()["messages"][0]["content"]
    assert part["type"] == "file"
    assert part["file"]["filename"] == "a.pdf"


@pytest.mark.parametrize(
    ("provider", "block"),
    [
        ("mistral", FileBlock("image/png", data=PNG)),  # any-llm takes no images from Mistral
        ("mistral", FileBlock("application/pdf", data=PDF)),
        ("openai", FileBlock("audio/wav", data=b"RIFF....WAVE")),  # input_audio: not verified per provider
        ("anthropic", FileBlock("image/png", data=PNG, detail="low")),  # its conversion of detail: not verified
    ],
)
async def test_files_the_library_does_not_take_are_unsupported(
    server: ScriptedServer, provider: str, block: FileBlock
) -> None:
    adapter = make_adapter(provider, server)
    try:
        _, error = await run(adapter, options(messages=_ask(block)))
    finally:
        await adapter.aclose()
    assert error is not None
    assert error.code == "UNSUPPORTED"
    assert block.media_type in error.message
    assert provider in error.message
    assert not server.requests


async def test_structured_output_reaches_the_provider(server: ScriptedServer) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    server.add(Reply(reads=[MISTRAL_TEXT]))
    adapter = make_adapter("mistral", server)
    try:
        _, error = await run(adapter, options(response_format=JsonSchemaFormat("place", schema)))
    finally:
        await adapter.aclose()
    assert error is None
    sent = server.requests[0].json()["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["schema"] == schema
