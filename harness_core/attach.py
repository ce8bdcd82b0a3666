"""Files and URLs as :class:`~harness_core.types.FileBlock` s: ``load_attachment("photo.jpg")``.

What the CLI's ``-a/--attach``, ``--at/--attach-type`` (:func:`load_attachments`) and chat
``/attach`` use, public for Python callers.

A local file is read whole; its media type is detected from its content by magic numbers
(:mod:`puremagic`, https://github.com/cdgriffith/puremagic), then from its file name extension,
then as ``text/plain`` when it is UTF-8 text. A URL (``scheme://…``) becomes a URL source and
is never downloaded: its media type comes from the extension of its path, or must be given.
Detected names are normalised to the IANA spelling (``audio/wave`` → ``audio/wav``,
``image/jpg`` → ``image/jpeg``).
"""

from __future__ import annotations

import mimetypes
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, Final
from urllib.parse import urlsplit

from harness_core.types import MEDIA_TYPE, FileBlock

__all__ = [
    "MAX_FILE_BYTES",
    "STDIN",
    "AttachError",
    "detect_media_type",
    "load_attachment",
    "load_attachments",
    "parse_media_type",
]

STDIN: Final = "-"
"""The spec that attaches what is piped on standard input (``cat photo.jpg | harness run -a - "what is it?"``,
as ``llm`` does)."""

_URL: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_ALIASES: Final = {
    "audio/wave": "audio/wav",
    "audio/x-wav": "audio/wav",
    "audio/vnd.wave": "audio/wav",
    "audio/mp3": "audio/mpeg",
    "audio/x-mp3": "audio/mpeg",
    "audio/x-mpeg": "audio/mpeg",
    "image/jpg": "image/jpeg",
    "image/pjpeg": "image/jpeg",
    "image/x-png": "image/png",
    "application/x-pdf": "application/pdf",
}
_TEXT_SAMPLE: Final = 64 * 1024
MAX_FILE_BYTES: Final = 100 * 1024 * 1024
"""The largest file :func:`load_attachment` reads (100 MB): above every wire's inline limit, so
a larger one is refused before it fills memory."""


class AttachError(ValueError):
    """An attachment that cannot be used; the message names it (path or URL) and why."""


def _normalise(media_type: str) -> str:
    base = media_type.split(";", 1)[0].strip().lower()
    return _ALIASES.get(base, base)


def _is_text(data: bytes) -> bool:
    sample = data[:_TEXT_SAMPLE]
    if b"\x00" in sample:
        return False
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(sample) - 3  # only a character cut by the sample's end
    return True


def detect_media_type(data: bytes, name: str = "") -> str | None:
    """The media type of ``data`` (file name ``name`` as a hint), or ``None`` when unknown.

    Order: magic numbers (puremagic; the most confident match that has a media type), the
    extension of ``name`` (:mod:`mimetypes`), UTF-8 text → ``text/plain``.
    """
    import puremagic

    guess = ""
    if data:
        try:
            matches = puremagic.magic_string(data, filename=name or None)  # best match first
        except puremagic.PureError:
            matches = []
        guess = next((match.mime_type for match in matches if match.mime_type), "")
    if not guess and name:
        guess = mimetypes.guess_type(name, strict=False)[0] or ""
    if not guess and _is_text(data):
        guess = "text/plain"
    return _normalise(guess) if guess else None


def parse_media_type(text: str) -> str:
    """``text`` as a media type (``type/subtype``, RFC 6838 names,
    https://www.rfc-editor.org/rfc/rfc6838#section-4.2): case-insensitive, returned in lower case
    with parameters dropped and known aliases normalised (``IMAGE/JPG`` → ``image/jpeg``).

    Raises:
        AttachError: ``text`` is no media type, naming it.
    """
    kind = _normalise(text)
    if not MEDIA_TYPE.fullmatch(kind):
        raise AttachError(f"{text!r} is not a media type (type/subtype, e.g. image/png or application/pdf)")
    return kind


def load_attachment(spec: str, media_type: str | None = None, *, stdin: BinaryIO | None = None) -> FileBlock:
    """A :class:`FileBlock` for ``spec``: a local path (read whole), a URL (kept as a URL), or
    :data:`STDIN` (``-``: the bytes of ``stdin``, read whole).

    Args:
        spec: ``PATH``, ``scheme://…`` or ``-``.
        media_type: force this media type (:func:`parse_media_type`) instead of detecting it.
        stdin: the binary stream ``-`` reads; ``None`` refuses ``-``.

    Raises:
        AttachError: an empty spec, ``-`` without ``stdin``, a file that cannot be read or is over
            :data:`MAX_FILE_BYTES`, or a media type that is unknown or malformed.
    """
    if media_type is not None:
        media_type = parse_media_type(media_type)
    if not spec:
        raise AttachError("an empty path: give a file, a URL, or - for standard input")
    if spec == STDIN:
        if stdin is None:
            raise AttachError("- (standard input) cannot be attached here")
        return _loaded(spec, stdin.read(MAX_FILE_BYTES + 1), media_type, None)
    if _URL.match(spec):
        kind = media_type or mimetypes.guess_type(urlsplit(spec).path, strict=False)[0]
        if not kind:
            raise AttachError(
                f"{spec}: cannot tell the media type of a URL without downloading it;"
                " give it with --attach-type URL TYPE"
            )
        return _block(spec, _normalise(kind), url=spec)
    path = Path(spec).expanduser()
    try:
        with path.open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise AttachError(f"{spec}: cannot read: {exc.strerror or exc}") from None
    return _loaded(spec, data, media_type, path.name)


def _loaded(spec: str, data: bytes, media_type: str | None, filename: str | None) -> FileBlock:
    """The block of ``data`` read for ``spec`` (its type detected unless given)."""
    if len(data) > MAX_FILE_BYTES:
        raise AttachError(f"{spec}: larger than {MAX_FILE_BYTES} bytes, more than any provider takes inline")
    kind = media_type or detect_media_type(data, filename or "")
    if kind is None:
        raise AttachError(f"{spec}: unknown media type; give it with --attach-type PATH TYPE")
    return _block(spec, _normalise(kind), data=data, filename=filename)


def load_attachments(
    specs: Sequence[str], typed: Sequence[tuple[str, str]] = (), *, stdin: BinaryIO | None = None
) -> list[FileBlock]:
    """The attachments of one prompt, as ``llm``'s ``-a`` and ``--at/--attachment-type`` give
    them (https://llm.datasette.io/en/stable/usage.html#attachments): ``specs`` detect their media
    type, ``typed`` ``(PATH or URL, TYPE)`` pairs force one.

    A typed spec naming the same file as one of ``specs`` (the same text, or a path resolving to
    the same file) sets that attachment's type, at its place: ``-a scan.bin --at scan.bin
    image/png`` is one attachment, an image. The other typed specs are attachments of their own,
    after ``specs``. Order is kept; a file given twice in ``specs`` is attached twice. ``-``
    (:data:`STDIN`) reads ``stdin``, once. Every type is checked before any file is read.

    Raises:
        AttachError: as :func:`load_attachment`, a type that is no media type (naming it), one
            file given two different types, or ``-`` given twice.
    """
    forced: dict[str, tuple[str, str]] = {}
    if list(specs).count(STDIN) > 1:
        raise AttachError("- (standard input) can be attached once")
    for spec, given in typed:
        try:
            media_type = parse_media_type(given)
        except AttachError as exc:
            raise AttachError(f"{spec} {given}: {exc}") from None
        key = _identity(spec)
        if key in forced and forced[key][1] != media_type:
            raise AttachError(f"{spec}: given two media types ({forced[key][1]} and {media_type}); give one")
        forced.setdefault(key, (spec, media_type))
    blocks = []
    for spec in specs:
        found = forced.get(_identity(spec))
        blocks.append(load_attachment(spec, found[1] if found is not None else None, stdin=stdin))
    detected = {_identity(spec) for spec in specs}
    blocks += [load_attachment(spec, kind, stdin=stdin) for key, (spec, kind) in forced.items() if key not in detected]
    return blocks


def _identity(spec: str) -> str:
    """What two specs naming one attachment share: a URL or ``-`` as written, a path resolved."""
    return spec if _URL.match(spec) or spec in ("", STDIN) else os.path.realpath(Path(spec).expanduser())


def _block(
    spec: str, media_type: str, *, data: bytes | None = None, url: str | None = None, filename: str | None = None
) -> FileBlock:
    try:
        return FileBlock(media_type, data=data, url=url, filename=filename)
    except ValueError as exc:
        raise AttachError(f"{spec}: {exc}") from None
