"""Media in client requests (images, documents, audio) as :class:`~harness_core.types.FileBlock` s.

Sources the two dialects use:

* a ``data:`` URL (RFC 2397, https://www.rfc-editor.org/rfc/rfc2397): ``data:image/png;base64,…``,
  decoded to the block's bytes with the URL's media type;
* an ``http`` or ``https`` URL: passed on as a URL source (the provider fetches it, the gateway
  never does); its media type is the one its path's extension implies. A URL of another scheme
  (``ftp:``, ``file:`` …) is a 400: the APIs the dialects speak take only these, and a route
  must not be asked to fetch a local path;
* base64 data with a media type (Anthropic's ``source.type: base64``, OpenAI's ``input_audio``).

Data that decodes to no bytes at all (``""``, a ``data:`` URL with nothing after ``base64,``) is
a 400: no provider takes an empty image or document, and it must not cost an upstream request.
Every problem is a 400 naming the field.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
import re
from typing import Final
from urllib.parse import urlsplit

from harness_core import IMAGE_DETAILS, FileBlock, ImageDetail
from harness_gateway.request import Body, bad_request

__all__ = ["file_block", "image_detail"]

_DATA_URL: Final = re.compile(r"data:(?P<type>[^;,]*)(?:;[^,]*)?;base64,(?P<data>.*)", re.DOTALL)
_URL_SCHEMES: Final = ("http", "https")
"""The schemes of a URL the gateway passes on for the provider to fetch (besides ``data:``)."""


def file_block(
    where: str,
    *,
    url: str | None = None,
    data: str | None = None,
    media_type: str | None = None,
    filename: str | None = None,
    detail: ImageDetail | None = None,
) -> FileBlock:
    """The block for one media source (``url`` or base64 ``data``; ``detail``: an image's
    resolution hint, :func:`image_detail`).

    Raises:
        GatewayError: 400 naming ``where`` for data that is not base64 or is empty, a ``data:``
            URL that is not base64, a URL whose scheme is not http, https or data, a URL whose
            media type its path does not tell, or a ``detail`` on a file that is no image.
    """
    raw: bytes | None = None
    if url is not None and url[:5].lower() == "data:":  # a scheme is case-insensitive (RFC 3986 §3.1)
        match = _DATA_URL.fullmatch("data:" + url[5:])
        if match is None:
            raise bad_request(where, "a data: URL must be base64 (data:<media type>;base64,<data>)")
        media_type, data, url = match.group("type"), match.group("data"), None
    if data is not None:
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise bad_request(where, "the data is not valid base64") from None
        if not raw:
            raise bad_request(where, "the data is empty (0 bytes): send the file's bytes")
    else:  # a URL the provider fetches: its media type is the one its path's extension implies
        assert url is not None
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in _URL_SCHEMES:
            got = f"the scheme {scheme[:20]!r}" if scheme else "no scheme"
            raise bad_request(where, f"expected an absolute http, https or data: URL, got {got}")
        media_type = mimetypes.guess_type(parts.path, strict=False)[0]
        if media_type is None:
            raise bad_request(where, f"cannot tell the media type of {url.split('?')[0]!r} without fetching it")
    if detail is not None and not (media_type or "").startswith("image/"):
        raise bad_request(where, f"a detail is an image's resolution hint, and this is {media_type or 'no image'}")
    try:
        return FileBlock(media_type or "", data=raw, url=url, filename=filename, detail=detail)
    except ValueError as exc:
        raise bad_request(where, str(exc)) from None


def image_detail(image: Body) -> ImageDetail | None:
    """An OpenAI image's ``detail`` (Chat's ``image_url`` object, a Responses ``input_image``
    part): ``auto``, ``low`` or ``high`` (https://platform.openai.com/docs/guides/images-vision),
    carried to the route (:attr:`~harness_core.FileBlock.detail`: a wire without the hint refuses
    ``low`` / ``high`` by name); ``None`` when absent or ``null``. Another value is a 400 naming it."""
    detail = image.get("detail", str)
    if detail is None:
        return None
    for known in IMAGE_DETAILS:
        if detail == known:
            return known
    raise bad_request(image.path("detail"), f"expected one of {', '.join(IMAGE_DETAILS)}, got {detail[:40]!r}")
