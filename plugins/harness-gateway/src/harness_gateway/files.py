"""Media in client requests (images, documents, audio) as :class:`~harness_core.types.FileBlock` s.

Sources the two dialects use:

* a ``data:`` URL (RFC 2397, https://www.rfc-editor.org/rfc/rfc2397): ``data:image/png;base64,…``,
  decoded to the block's bytes with the URL's media type;
* any other absolute URL: passed on as a URL source (the provider fetches it, the gateway never
  does); its media type is the one its path's extension implies;
* base64 data with a media type (Anthropic's ``source.type: base64``, OpenAI's ``input_audio``).

Every problem is a 400 naming the field.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
import re
from typing import Final
from urllib.parse import urlsplit

from harness_core import FileBlock
from harness_gateway.request import bad_request

__all__ = ["IMAGE_IGNORED", "file_block"]

IMAGE_IGNORED: Final = ("detail",)
"""Fields of an OpenAI image (Chat's ``image_url`` object, Responses' ``input_image`` part) that
are dropped: ``detail``, the resolution hint, has no slot in the vocabulary's file block and no
counterpart on the other wires (docs/gateway.md#no-field-is-dropped-in-silence)."""

_DATA_URL: Final = re.compile(r"data:(?P<type>[^;,]*)(?:;[^,]*)?;base64,(?P<data>.*)", re.DOTALL)


def file_block(
    where: str,
    *,
    url: str | None = None,
    data: str | None = None,
    media_type: str | None = None,
    filename: str | None = None,
) -> FileBlock:
    """The block for one media source (``url`` or base64 ``data``); raises a 400 naming ``where``."""
    raw: bytes | None = None
    if url is not None and url.startswith("data:"):
        match = _DATA_URL.fullmatch(url)
        if match is None:
            raise bad_request(where, "a data: URL must be base64 (data:<media type>;base64,<data>)")
        media_type, data, url = match.group("type"), match.group("data"), None
    if data is not None:
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise bad_request(where, "the data is not valid base64") from None
    else:  # a URL the provider fetches: its media type is the one its path's extension implies
        assert url is not None
        media_type = mimetypes.guess_type(urlsplit(url).path, strict=False)[0]
        if media_type is None:
            raise bad_request(where, f"cannot tell the media type of {url.split('?')[0]!r} without fetching it")
    try:
        return FileBlock(media_type or "", data=raw, url=url, filename=filename)
    except ValueError as exc:
        raise bad_request(where, str(exc)) from None
