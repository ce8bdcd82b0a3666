"""FileBlock (user-supplied media) and GenerateOptions.response_format: shapes and round trips."""

from __future__ import annotations

import base64
import hashlib

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness_core import (
    FileBlock,
    GenerateOptions,
    InvalidOutputError,
    JsonObjectFormat,
    JsonSchemaFormat,
    LlmError,
    Message,
    TextBlock,
    canonical_json,
)

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


def test_a_file_block_round_trips_exactly_with_base64_bytes() -> None:
    message = Message.user(
        "describe",
        FileBlock("image/png", data=PNG, filename="photo.png"),
        FileBlock("application/pdf", url="https://example.com/a.pdf"),
    )
    encoded = msgspec.json.encode(message)
    wire = msgspec.json.decode(encoded)
    assert wire["content"][1] == {
        "type": "file",
        "media_type": "image/png",
        "data": base64.b64encode(PNG).decode(),
        "filename": "photo.png",
    }
    assert wire["content"][2] == {"type": "file", "media_type": "application/pdf", "url": "https://example.com/a.pdf"}
    assert msgspec.json.decode(encoded, type=Message) == message
    assert message.files == message.content[1:]
    assert message.text == "describe"


def test_repr_and_describe_never_show_the_bytes() -> None:
    block = FileBlock("image/png", data=b"SECRET-BYTES" * 10, filename="a.png")
    digest = "sha256:" + hashlib.sha256(b"SECRET-BYTES" * 10).hexdigest()
    assert block.size == 120
    assert block.digest == digest
    assert block.source_kind == "data"
    for text in (repr(block), block.describe(), repr(Message.user("x", block)), str(block.__rich_repr__())):
        assert "SECRET" not in text
    assert repr(block) == f"FileBlock(media_type='image/png', size=120, digest={digest!r}, filename='a.png')"
    assert block.describe() == "image/png 'a.png' (120 bytes)"
    by_url = FileBlock("image/jpeg", url="https://h/p.jpg")
    assert (by_url.size, by_url.digest, by_url.source_kind) == (None, None, "url")
    assert repr(by_url) == "FileBlock(media_type='image/jpeg', url='https://h/p.jpg')"
    assert by_url.describe() == "image/jpeg (url https://h/p.jpg)"
    assert by_url.__rich_repr__() == [("media_type", "image/jpeg"), ("url", "https://h/p.jpg"), ("filename", None)]


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"media_type": "Image/PNG", "data": b"x"}, ValueError, "lower-case IANA media type"),
        ({"media_type": "png", "data": b"x"}, ValueError, "lower-case IANA media type"),
        ({"media_type": "text/plain; charset=utf-8", "data": b"x"}, ValueError, "lower-case IANA media type"),
        ({"media_type": 5, "data": b"x"}, ValueError, "lower-case IANA media type"),
        ({"media_type": "image/png"}, ValueError, "exactly one source"),
        ({"media_type": "image/png", "data": b"x", "url": "https://h/x"}, ValueError, "exactly one source"),
        ({"media_type": "image/png", "data": "aGk="}, TypeError, "data must be bytes, got str"),
        ({"media_type": "image/png", "url": "photo.png"}, ValueError, "absolute URL, got 'photo.png'"),
        ({"media_type": "image/png", "url": 7}, ValueError, "absolute URL, got 7"),
        ({"media_type": "image/png", "url": "DATA:image/png;base64,AA=="}, ValueError, "not be a data: URL"),
        ({"media_type": "image/png", "data": b"x", "filename": 3}, TypeError, "filename must be a str or None"),
        (
            {"media_type": "image/png", "data": b"x", "detail": "max"},
            ValueError,
            "detail must be one of auto, low, high",
        ),
        (
            {"media_type": "application/pdf", "data": b"x", "detail": "low"},
            ValueError,
            "application/pdf is not an image",
        ),
    ],
)
def test_a_malformed_file_block_is_rejected_naming_the_field(
    fields: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        FileBlock(**fields)  # type: ignore[arg-type]


def test_decoding_checks_a_file_block_too() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"exactly one source.*\$\.content\[0\]"):
        msgspec.json.decode(b'{"role":"user","content":[{"type":"file","media_type":"image/png"}]}', type=Message)


def test_an_image_detail_round_trips_and_shows_in_the_repr() -> None:
    block = FileBlock("image/png", url="https://h/p.png", detail="low")
    encoded = msgspec.json.encode(block)
    assert encoded == b'{"type":"file","media_type":"image/png","url":"https://h/p.png","detail":"low"}'
    assert msgspec.json.decode(encoded, type=FileBlock) == block
    assert repr(block) == "FileBlock(media_type='image/png', url='https://h/p.png', detail='low')"
    assert ("detail", "low") in block.__rich_repr__()
    assert b"detail" not in msgspec.json.encode(FileBlock("image/png", url="https://h/p.png"))  # omitted when unset
    with pytest.raises(msgspec.ValidationError, match=r"\$\.detail"):
        msgspec.json.decode(encoded.replace(b'"low"', b'"max"'), type=FileBlock)


def test_gs_and_provider_file_uris_are_urls() -> None:
    assert FileBlock("video/mp4", url="gs://bucket/clip.mp4").url == "gs://bucket/clip.mp4"


def test_response_format_round_trips_and_is_checked() -> None:
    schema = {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]}
    options = GenerateOptions(response_format=JsonSchemaFormat("person", schema, strict=True, description="a person"))
    encoded = msgspec.json.encode(options)
    assert msgspec.json.decode(encoded)["response_format"] == {
        "type": "json-schema",
        "name": "person",
        "schema": schema,
        "strict": True,
        "description": "a person",
    }
    assert msgspec.json.decode(encoded, type=GenerateOptions) == options
    plain = GenerateOptions(response_format=JsonObjectFormat())
    assert msgspec.json.decode(msgspec.json.encode(plain))["response_format"] == {"type": "json-object"}
    assert msgspec.json.decode(msgspec.json.encode(plain), type=GenerateOptions) == plain
    assert JsonSchemaFormat("p", {}).strict is False


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: JsonSchemaFormat("has space", {}), ValueError, "name must be 1-64 characters"),
        (lambda: JsonSchemaFormat("x" * 65, {}), ValueError, "name must be 1-64 characters"),
        (lambda: JsonSchemaFormat("", {}), ValueError, "name must be 1-64 characters"),
        (lambda: JsonSchemaFormat("p", "{}"), TypeError, "schema must be a dict"),  # type: ignore[arg-type]
        (lambda: JsonSchemaFormat("p", {}, strict=1), TypeError, "strict must be a bool"),  # type: ignore[arg-type]
        (lambda: JsonSchemaFormat("p", {}, description=1), TypeError, "description must be a str"),  # type: ignore[arg-type]
        (
            lambda: GenerateOptions(response_format={"type": "json-object"}),  # type: ignore[arg-type]
            TypeError,
            "response_format must be a JsonSchemaFormat, a JsonObjectFormat or None, got dict",
        ),
    ],
)
def test_bad_response_formats_are_rejected(make: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        make()  # type: ignore[operator]


def test_canonical_json_keys_files_by_digest_not_bytes() -> None:
    big = b"\x00\x01" * 500_000
    options = GenerateOptions(messages=[Message.user("look", FileBlock("image/png", data=big, filename="a.png"))])
    key = canonical_json(options)
    assert len(key) < 400
    assert msgspec.json.decode(key)["messages"][0]["content"][1] == {
        "type": "file",
        "media_type": "image/png",
        "filename": "a.png",
        "size": 1_000_000,
        "digest": "sha256:" + hashlib.sha256(big).hexdigest(),
    }
    other = GenerateOptions(messages=[Message.user("look", FileBlock("image/png", data=big[:-1] + b"\x02"))])
    assert canonical_json(other) != key
    # a URL source and text blocks are kept as they are
    by_url = GenerateOptions(
        messages=[Message(role="user", content=[FileBlock("image/png", url="https://h/x.png"), TextBlock("t")])]
    )
    assert msgspec.json.decode(canonical_json(by_url))["messages"][0]["content"] == [
        {"type": "file", "media_type": "image/png", "url": "https://h/x.png"},
        {"type": "text", "text": "t"},
    ]


def test_invalid_output_error_keeps_the_text_and_path() -> None:
    error = InvalidOutputError("$.age: expected int, got str", text='{"age": "x"}', path="$.age", provider="mock")
    assert isinstance(error, LlmError)
    assert (error.code, error.text, error.path, error.provider, error.retryable) == (
        "INVALID_OUTPUT",
        '{"age": "x"}',
        "$.age",
        "mock",
        False,
    )
    assert str(error) == "INVALID_OUTPUT: $.age: expected int, got str"


def test_urls_are_shown_without_credentials() -> None:
    signed = FileBlock("image/png", url="https://user:pw@bucket.example.com/a.png?X-Amz-Signature=SECRET#frag")
    assert signed.display_url == "https://bucket.example.com/a.png?…"
    for text in (repr(signed), signed.describe(), str(signed.__rich_repr__())):
        assert "SECRET" not in text
        assert "pw" not in text
    assert "SECRET" in (signed.url or "")  # the provider still gets the whole URL
    assert FileBlock("image/png", url="gs://b/a.png").display_url == "gs://b/a.png"
    assert FileBlock("image/png", data=b"").display_url is None


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=2048), filename=st.none() | st.text(max_size=20))
def test_any_bytes_round_trip_exactly_through_json(data: bytes, filename: str | None) -> None:
    message = Message.user("x", FileBlock("application/octet-stream", data=data, filename=filename))
    assert msgspec.json.decode(msgspec.json.encode(message), type=Message) == message
