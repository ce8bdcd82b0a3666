"""harness_core.media: the helpers adapters use to check and encode files."""

from __future__ import annotations

import pytest

from harness_core.errors import LlmError
from harness_core.media import base64_data, check_detail, check_file, data_url, refusal_reason, unsupported_file
from harness_core.types import FileBlock


def test_encodings() -> None:
    block = FileBlock("image/png", data=b"\x00\xffhi")
    assert base64_data(block) == "AP9oaQ=="
    assert data_url(block) == "data:image/png;base64,AP9oaQ=="
    with pytest.raises(ValueError, match=r"image/png \(url https://h/x\) has no inline data"):
        base64_data(FileBlock("image/png", url="https://h/x"))


def test_check_file_names_type_source_and_size() -> None:
    ok = {"media_types": {"image/png", "application/pdf"}, "max_bytes": 4, "url_types": {"image/png"}}
    check_file("p", FileBlock("image/png", data=b"1234"), **ok)  # type: ignore[arg-type]
    check_file("p", FileBlock("image/png", url="https://h/x.png"), **ok)  # type: ignore[arg-type]
    cases = [
        (FileBlock("video/mp4", data=b"1"), "media type video/mp4 is not one of ['application/pdf', 'image/png']"),
        (
            FileBlock("application/pdf", url="https://h/a.pdf"),
            "a url source is not accepted for application/pdf; attach the bytes",
        ),
        (FileBlock("image/png", data=b"12345", filename="a.png"), "5 bytes is over the limit of 4 bytes"),
    ]
    for block, why in cases:
        with pytest.raises(LlmError) as caught:
            check_file("p", block, **ok)  # type: ignore[arg-type]
        assert caught.value.code == "UNSUPPORTED"
        assert caught.value.provider == "p"
        assert caught.value.message == f"p cannot take the file {block.describe()}: {why}"
    assert unsupported_file("q", FileBlock("a/b", data=b""), "no").message == "q cannot take the file a/b (0 bytes): no"


def test_refusal_reason_reads_back_the_refusal_of_one_file() -> None:
    shot, other = FileBlock("image/png", data=b"1234", filename="a.png"), FileBlock("image/png", data=b"12")
    refused = unsupported_file("p", shot, "why: it is so").message
    assert refusal_reason(refused, "p", shot) == "why: it is so"
    assert refusal_reason(refused, "p", other) is None  # another file
    assert refusal_reason(refused, "q", shot) is None  # another provider
    assert refusal_reason(refused, None, shot) is None
    assert refusal_reason("p cannot take this field", "p", shot) is None


def test_a_wire_without_the_hint_refuses_an_image_detail_but_auto() -> None:
    ok = {"media_types": {"image/png"}, "max_bytes": 4, "url_types": {"image/png"}}
    for detail in (None, "auto"):
        check_file("p", FileBlock("image/png", url="https://h/x.png", detail=detail), **ok)  # type: ignore[arg-type]
    low = FileBlock("image/png", url="https://h/x.png", detail="low")
    check_file("p", low, detail=True, **ok)  # type: ignore[arg-type]  # the wire takes it
    with pytest.raises(LlmError) as caught:
        check_file("p", low, **ok)  # type: ignore[arg-type]
    assert caught.value.code == "UNSUPPORTED"
    assert caught.value.message == (
        "p cannot take the file image/png (url https://h/x.png): detail 'low' (an image resolution hint)"
        " has no counterpart on its wire; use 'auto'"
    )
    with pytest.raises(LlmError, match=r"detail 'low' \(an image resolution hint\) has no counterpart on Q; use"):
        check_detail("p", low, wire="Q")
