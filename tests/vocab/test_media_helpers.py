"""harness_core.media: the helpers adapters use to check and encode files."""

from __future__ import annotations

import pytest

from harness_core.errors import LlmError
from harness_core.media import base64_data, check_file, data_url, unsupported_file
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
