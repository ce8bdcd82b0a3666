"""The CLI's attachment loading (media type detection) and --schema parsing, in process."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from harness_core import attach
from harness_core.attach import AttachError, detect_media_type, load_attachment, load_attachments
from harness_core.cli._schema import SchemaError, concise_schema, parse_schema
from harness_core.types import FileBlock, JsonSchemaFormat

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n"
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00"
MP3 = b"ID3\x03\x00\x00\x00\x00\x00\x00" + b"\x00" * 20


@pytest.mark.parametrize(
    ("data", "name", "expected"),
    [
        (PNG, "scan.bin", "image/png"),  # content wins over a misleading name
        (JPEG, "", "image/jpeg"),
        (PDF, "doc", "application/pdf"),
        (WAV, "x", "audio/wav"),  # puremagic's audio/wave, normalised
        (MP3, "x", "audio/mpeg"),
        (b"a,b\nCaf\xc3\xa9,\xe2\x98\x95\n", "table.csv", "text/csv"),  # no magic: the extension
        (b"plain words, \xc3\xa9t\xc3\xa9", "README", "text/plain"),  # no magic, no extension: UTF-8 text
        (b"\xc3\xa9" * 40_000, "", "text/plain"),  # the sample may end inside a character
        (b"\x00\x01\x02\x03binary", "", None),
        (b"\xc3 not utf-8 \xfa", "", None),
        (b"", "", "text/plain"),
    ],
)
def test_detect_media_type(data: bytes, name: str, expected: str | None) -> None:
    assert detect_media_type(data, name) == expected


def test_a_local_file_is_read_whole_with_its_name(tmp_path: Path) -> None:
    photo = tmp_path / "photo.jpg"
    photo.write_bytes(PNG)  # a PNG with a .jpg name: the content decides
    assert load_attachment(str(photo)) == FileBlock("image/png", data=PNG, filename="photo.jpg")
    assert load_attachment(str(photo), "image/jpg") == FileBlock("image/jpeg", data=PNG, filename="photo.jpg")
    blob = tmp_path / "blob"
    blob.write_bytes(b"\x00\x01\x02")
    with pytest.raises(AttachError, match="blob: unknown media type; give it with --attach-type PATH TYPE"):
        load_attachment(str(blob))
    assert load_attachment(str(blob), "application/octet-stream").media_type == "application/octet-stream"
    with pytest.raises(AttachError, match=r"missing\.png: cannot read: No such file or directory"):
        load_attachment(str(tmp_path / "missing.png"))
    with pytest.raises(AttachError, match=r"'not a type' is not a media type"):
        load_attachment(str(blob), "not a type")


def test_a_url_is_kept_as_a_url_never_downloaded() -> None:
    assert load_attachment("https://example.com/cat.JPG?size=2") == FileBlock(
        "image/jpeg", url="https://example.com/cat.JPG?size=2"
    )
    assert load_attachment("gs://bucket/a.pdf") == FileBlock("application/pdf", url="gs://bucket/a.pdf")
    assert load_attachment("https://example.com/photo", "image/webp").media_type == "image/webp"
    with pytest.raises(AttachError, match="cannot tell the media type of a URL without downloading it"):
        load_attachment("https://example.com/photo")


def test_a_typed_spec_sets_the_type_of_the_same_attached_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scan.bin").write_bytes(b"\x00\x01\x02")
    (tmp_path / "photo.png").write_bytes(PNG)
    (tmp_path / "notes.dat").write_bytes(b"\x00\x09")
    blocks = load_attachments(
        ["photo.png", "scan.bin", "https://example.com/a.jpg"],
        [("./scan.bin", "image/png"), ("notes.dat", "application/pdf"), ("https://example.com/a.jpg", "image/webp")],
    )
    assert [(b.filename or b.url, b.media_type) for b in blocks] == [
        ("photo.png", "image/png"),
        ("scan.bin", "image/png"),  # -a scan.bin --at ./scan.bin image/png: one attachment, typed, in its place
        ("https://example.com/a.jpg", "image/webp"),
        ("notes.dat", "application/pdf"),  # --at alone attaches, as in llm
    ]
    twice = load_attachments(["photo.png", "photo.png"], [("photo.png", "image/png"), ("photo.png", "image/png")])
    assert len(twice) == 2  # given twice with -a: attached twice; the same type twice is no conflict
    with pytest.raises(AttachError, match=r"scan.bin: given two media types \(image/png and image/gif\); give one"):
        load_attachments(["scan.bin"], [("scan.bin", "image/png"), ("scan.bin", "image/gif")])


def test_media_types_are_case_insensitive_and_checked(tmp_path: Path) -> None:
    assert attach.parse_media_type("IMAGE/PNG") == "image/png"
    assert attach.parse_media_type("Image/JPG; q=1") == "image/jpeg"
    for bad in ("describe", "image/", "/png", "image png", ""):
        with pytest.raises(AttachError, match="is not a media type"):
            attach.parse_media_type(bad)
    scan = tmp_path / "scan.bin"
    scan.write_bytes(PNG)
    assert load_attachment(str(scan), "Image/PNG").media_type == "image/png"
    with pytest.raises(AttachError, match=r"scan\.bin describe: 'describe' is not a media type"):
        load_attachments([], [(str(scan), "describe")])


def test_a_block_the_vocabulary_refuses_is_an_attach_error() -> None:
    with pytest.raises(AttachError, match=r"data://x\.png: FileBlock\.url must not be a data: URL"):
        load_attachment("data://x.png", "image/png")


def test_stdin_and_empty_specs(tmp_path: Path) -> None:
    [block] = load_attachments(["-"], stdin=io.BytesIO(PNG))
    assert (block.media_type, block.data, block.filename) == ("image/png", PNG, None)
    [typed] = load_attachments(["-"], [("-", "TEXT/PLAIN")], stdin=io.BytesIO(b"words"))
    assert typed.media_type == "text/plain"
    with pytest.raises(AttachError, match="can be attached once"):
        load_attachments(["-", "-"], stdin=io.BytesIO(PNG))
    with pytest.raises(AttachError, match="cannot be attached here"):
        load_attachment("-")
    with pytest.raises(AttachError, match="an empty path"):
        load_attachments([""])
    with pytest.raises(AttachError, match=r"-: unknown media type; give it with --attach-type PATH TYPE"):
        load_attachment("-", stdin=io.BytesIO(b"\x00\x01binary"))


def test_concise_schemas() -> None:
    assert concise_schema("name, age int, bio: a short bio, score float,ok bool") == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"},
            "bio": {"type": "string", "description": "a short bio"},
            "score": {"type": "number"},
            "ok": {"type": "boolean"},
        },
        "required": ["name", "age", "bio", "score", "ok"],
        "additionalProperties": False,
    }
    # newlines separate fields when there are any, so descriptions may hold commas
    multi = concise_schema("name: first, last\n\nage integer: in years\n")
    assert multi["properties"] == {
        "name": {"type": "string", "description": "first, last"},
        "age": {"type": "integer", "description": "in years"},
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "no fields given"),
        (" , ", "no fields given"),
        ("name, : what", r"field 2 \(': what'\) has no name"),
        ("name str extra", "must be NAME \\[TYPE\\]\\[: DESCRIPTION\\]"),
        ("1name", "must be NAME"),
        ("age integr", "field 'age' has unknown type 'integr'; use one of str, int, float, bool"),
        ("a, a int", "field 'a' is given twice"),
    ],
)
def test_bad_concise_schemas(spec: str, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        concise_schema(spec)


def test_parse_schema_from_json_file_or_concise(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    assert parse_schema(json.dumps(schema)) == JsonSchemaFormat("output", schema)
    path = tmp_path / "my person.schema.json"
    path.write_text(json.dumps(schema), encoding="utf-8")
    assert parse_schema(str(path), strict=True) == JsonSchemaFormat("my_person_schema", schema, strict=True)
    assert parse_schema("x int").schema["properties"] == {"x": {"type": "integer"}}
    with pytest.raises(SchemaError, match=r"^not valid JSON: Expecting .* \(line 1, column 2\)"):
        parse_schema("{nope")
    path.write_text("[1]", encoding="utf-8")
    with pytest.raises(SchemaError, match=r"schema\.json: a JSON schema must be an object, got list"):
        parse_schema(str(path))
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(SchemaError, match="cannot read"):
        parse_schema(str(path))


def test_a_file_over_the_limit_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attach, "MAX_FILE_BYTES", 8)
    big = tmp_path / "big.png"
    big.write_bytes(PNG)
    with pytest.raises(AttachError, match=r"big\.png: larger than 8 bytes, more than any provider takes inline"):
        load_attachment(str(big))
    big.write_bytes(PNG[:8])
    assert load_attachment(str(big)).size == 8
