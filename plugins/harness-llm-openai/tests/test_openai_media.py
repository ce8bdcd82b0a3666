"""Binary input and structured output on the Chat Completions wire (PROTOCOLS §10)."""

from __future__ import annotations

import base64
import json

import pytest
from openai_fixtures import chunk, sse
from openai_harness import adapter_for, options, run_checked

from harness_core.errors import LlmError
from harness_core.testing.server import Reply, ScriptedServer
from harness_core.types import (
    BlockEnd,
    FileBlock,
    GenerateOptions,
    JsonObjectFormat,
    JsonSchemaFormat,
    Message,
    ModelInfo,
    TextBlock,
    ToolResultBlock,
)
from harness_llm_openai.serialize import MAX_FILE_BYTES, RequestSerializer

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(200))
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj"
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt "
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def body(options: GenerateOptions) -> dict[str, object]:
    raw = RequestSerializer().encode(options, ModelInfo(model="m"))
    result: dict[str, object] = json.loads(raw)
    return result


def user_content(*blocks: object) -> object:
    sent = body(GenerateOptions(model="m", messages=[Message(role="user", content=list(blocks))]))  # type: ignore[arg-type]
    return sent["messages"][0]["content"]  # type: ignore[index]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_every_media_kind_becomes_its_content_part_in_order() -> None:
    content = user_content(
        TextBlock("compare these"),
        FileBlock("image/png", data=PNG, filename="a.png"),
        FileBlock("image/jpeg", url="https://example.com/b.jpg"),
        FileBlock("application/pdf", data=PDF, filename="report.pdf"),
        FileBlock("application/pdf", data=PDF),
        FileBlock("audio/wav", data=WAV),
        FileBlock("audio/mpeg", data=b"ID3"),
        TextBlock("thanks"),
    )
    assert content == [
        {"type": "text", "text": "compare these"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64(PNG)}},
        {"type": "image_url", "image_url": {"url": "https://example.com/b.jpg"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64," + b64(PDF), "filename": "report.pdf"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64," + b64(PDF)}},
        {"type": "input_audio", "input_audio": {"data": b64(WAV), "format": "wav"}},
        {"type": "input_audio", "input_audio": {"data": b64(b"ID3"), "format": "mp3"}},
        {"type": "text", "text": "thanks"},
    ]
    # a file alone is a one-part list, not a string
    assert user_content(FileBlock("image/gif", data=b"GIF89a")) == [
        {"type": "image_url", "image_url": {"url": "data:image/gif;base64," + b64(b"GIF89a")}}
    ]


def test_an_image_detail_is_sent_when_set() -> None:
    assert user_content(
        FileBlock("image/png", url="https://h/a.png", detail="low"),
        FileBlock("image/png", url="https://h/b.png", detail="auto"),
    ) == [
        {"type": "image_url", "image_url": {"url": "https://h/a.png", "detail": "low"}},
        {"type": "image_url", "image_url": {"url": "https://h/b.png", "detail": "auto"}},
    ]


@pytest.mark.parametrize(
    ("block", "named"),
    [
        (FileBlock("video/mp4", data=b"x"), "media type video/mp4 is not one of"),
        (FileBlock("text/plain", data=b"x"), "media type text/plain is not one of"),
        (FileBlock("image/tiff", data=b"x"), "media type image/tiff"),
        (FileBlock("application/pdf", url="https://h/a.pdf"), "a url source is not accepted for application/pdf"),
        (FileBlock("audio/wav", url="https://h/a.wav"), "a url source is not accepted for audio/wav"),
        (FileBlock("image/png", data=b"\0" * (MAX_FILE_BYTES + 1)), f"{MAX_FILE_BYTES + 1} bytes is over the limit"),
    ],
)
def test_what_the_wire_cannot_take_is_unsupported_naming_it(block: FileBlock, named: str) -> None:
    with pytest.raises(LlmError, match=named) as caught:
        user_content(block)
    assert caught.value.code == "UNSUPPORTED"
    assert caught.value.provider == "openai"
    assert block.media_type in caught.value.message


def test_size_limit_is_per_serializer() -> None:
    serializer = RequestSerializer(max_file_bytes=3)
    with pytest.raises(LlmError, match="4 bytes is over the limit of 3 bytes"):
        serializer.encode(
            GenerateOptions(messages=[Message.user("x", FileBlock("image/png", data=b"1234"))]), ModelInfo(model="m")
        )


@pytest.mark.parametrize("role", ["assistant", "system", "tool"])
def test_files_outside_user_messages_are_bad_requests(role: str) -> None:
    message = Message(role=role, content=[FileBlock("image/png", data=b"x")])  # type: ignore[arg-type]
    if role == "tool":
        message = Message(role="tool", content=[ToolResultBlock("c", "r"), FileBlock("image/png", data=b"x")])
    with pytest.raises(LlmError, match=f"{role} message cannot hold a file") as caught:
        body(GenerateOptions(messages=[message]))
    assert caught.value.code == "BAD_REQUEST"


def test_response_formats() -> None:
    strict = JsonSchemaFormat("person", SCHEMA, strict=True, description="who")
    assert body(GenerateOptions(response_format=strict))["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "person", "schema": SCHEMA, "strict": True, "description": "who"},
    }
    assert body(GenerateOptions(response_format=JsonSchemaFormat("p", {})))["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "p", "schema": {}, "strict": False},
    }
    assert body(GenerateOptions(response_format=JsonObjectFormat()))["response_format"] == {"type": "json_object"}
    assert "response_format" not in body(GenerateOptions())
    # provider_options still win, as for every other field
    custom = GenerateOptions(response_format=JsonObjectFormat(), provider_options={"openai": {"response_format": 1}})
    assert body(custom)["response_format"] == 1


@pytest.mark.anyio
async def test_image_and_schema_reach_the_server_and_the_json_streams_back() -> None:
    reply = sse(
        chunk({"role": "assistant", "content": '{"name":"Zoë",'}),
        chunk({"content": '"age":36}'}),
        chunk({}, finish="stop"),
    )
    photo = FileBlock("image/png", data=PNG, filename="photo.png")
    request = options(
        messages=[Message.user("who is this?", photo)],
        response_format=JsonSchemaFormat("person", SCHEMA, strict=True),
    )
    with ScriptedServer(Reply(reads=[reply])) as server:
        adapter = adapter_for(server)
        try:
            out = await run_checked(adapter, request)
        finally:
            await adapter.aclose()
        sent = server.requests[0].json()
    assert [c.block for c in out if isinstance(c, BlockEnd)] == [TextBlock('{"name":"Zoë","age":36}')]
    assert sent["messages"][0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + b64(PNG)},
    }
    assert sent["response_format"]["json_schema"]["name"] == "person"
