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

While a request is parsed inside :func:`noting_places`, every block made here is noted with the
request field holding it (``messages[2].content[1]``): a route's refusal of the file names that
field and the route (:func:`located_refusal`), as the gateway's own 400s do.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import mimetypes
import re
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import Final
from urllib.parse import urlsplit

import msgspec

from harness_core import IMAGE_DETAILS, Failure, FileBlock, ImageDetail
from harness_core.kit import refusal_reason
from harness_gateway.request import Body, bad_request

__all__ = ["file_block", "image_detail", "located_refusal", "noting_places"]

_PLACES: ContextVar[list[tuple[str, FileBlock]] | None] = ContextVar("harness_gateway_file_places", default=None)


@contextlib.contextmanager
def noting_places() -> Iterator[list[tuple[str, FileBlock]]]:
    """Within the block, note each file block :func:`file_block` makes with the field holding it
    (``messages[2].content[1]``: the block or part, not its ``source.data``); the list yielded
    fills as the request is parsed (the relay's :attr:`~harness_gateway.request.ParsedRequest.files`)."""
    places: list[tuple[str, FileBlock]] = []
    token = _PLACES.set(places)
    try:
        yield places
    finally:
        _PLACES.reset(token)


def located_refusal(
    failure: Failure, places: Sequence[tuple[str, FileBlock]], route: str, model: str
) -> tuple[str, Failure] | None:
    """A route's refusal of one of the request's files, as the client is shown it, or ``None``
    when ``failure`` is none (another code, a file not among ``places``).

    The adapter names its plugin (``deepseek cannot take the file image/png (8 bytes): …``); the
    client is shown the field that held the file and the route it asked for, as the gateway's
    own refusals name them: ``messages[2].content[1]: route 'ds' (model 'ds/deepseek-chat')
    cannot take the file image/png (8 bytes): …``. Returns that field (the error's ``param``)
    and the failure with that message. The file is found by its description
    (:func:`harness_core.kit.refusal_reason`): of two files alike, the first is named.
    """
    if failure.code != "UNSUPPORTED":
        return None
    for where, block in places:
        why = refusal_reason(failure.message, failure.provider, block)
        if why is not None:
            message = f"{where}: route {route!r} (model {model!r}) cannot take the file {block.describe()}: {why}"
            return where, msgspec.structs.replace(failure, message=message)
    return None


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
            URL that is not base64, a URL whose scheme is not http, https or data or that names no
            host, a URL whose media type its path does not tell, or a ``detail`` on a file that
            is no image.
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
        if not parts.hostname:  # ``http:/x.png``, ``https:///x.png``: no host to fetch from
            raise bad_request(where, f"expected an absolute http, https or data: URL, got no host in {url[:80]!r}")
        media_type = mimetypes.guess_type(parts.path, strict=False)[0]
        if media_type is None:
            raise bad_request(where, f"cannot tell the media type of {url.split('?')[0]!r} without fetching it")
    if detail is not None and not (media_type or "").startswith("image/"):
        raise bad_request(where, f"a detail is an image's resolution hint, and this is {media_type or 'no image'}")
    try:
        block = FileBlock(media_type or "", data=raw, url=url, filename=filename, detail=detail)
    except ValueError as exc:
        raise bad_request(where, str(exc)) from None
    places = _PLACES.get()
    if places is not None:  # the block or part holding the source: ``where`` up to its last index
        places.append((where[: where.rfind("]") + 1] or where, block))
    return block


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
