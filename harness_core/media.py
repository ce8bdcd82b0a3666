"""Helpers adapters share to put a :class:`~harness_core.types.FileBlock` on their wire.

Every adapter decides what its wire takes (media types, URL or inline sources, sizes) and raises
``LlmError("UNSUPPORTED")`` naming what it cannot take, through :func:`check_file`; the messages
name the file by :meth:`FileBlock.describe` (media type, filename, size or URL), never its bytes.
Nothing here downloads a URL.
"""

from __future__ import annotations

import base64
from collections.abc import Collection

from harness_core.errors import LlmError
from harness_core.types import FileBlock

__all__ = ["base64_data", "check_detail", "check_file", "data_url", "refusal_reason", "unsupported_file"]


def base64_data(block: FileBlock) -> str:
    """The block's ``data`` as standard base64 text (RFC 4648 §4, with padding).

    Raises ``ValueError`` for a URL source (check :attr:`FileBlock.source_kind` first).
    """
    if block.data is None:
        raise ValueError(f"{block.describe()} has no inline data")
    return base64.b64encode(block.data).decode("ascii")


def data_url(block: FileBlock) -> str:
    """``data:<media type>;base64,<data>`` (RFC 2397) for a block with ``data``."""
    return f"data:{block.media_type};base64,{base64_data(block)}"


def unsupported_file(provider: str, block: FileBlock, why: str) -> LlmError:
    """``LlmError("UNSUPPORTED")`` for a file ``provider`` cannot take, naming the file and why."""
    return LlmError("UNSUPPORTED", f"{provider} cannot take the file {block.describe()}: {why}", provider=provider)


def refusal_reason(message: str, provider: str | None, block: FileBlock) -> str | None:
    """The reason (``why``) of :func:`unsupported_file`'s refusal of ``block`` by ``provider``,
    when ``message`` (an ``UNSUPPORTED`` failure's) is that refusal; else ``None``.

    For a caller that knows more about the file than the adapter does (the gateway names the
    request field that held it, and the route asked for): the format of the message is this
    module's, so it is read here, never by matching text elsewhere. A block is matched by its
    :meth:`~FileBlock.describe`, so two files of one description are not told apart.
    """
    lead = f"{provider} cannot take the file {block.describe()}: "
    return message[len(lead) :] if provider is not None and message.startswith(lead) else None


def check_file(
    provider: str,
    block: FileBlock,
    *,
    media_types: Collection[str],
    max_bytes: int,
    url_types: Collection[str] = (),
    detail: bool = False,
) -> None:
    """Check that a wire takes ``block``; raise ``UNSUPPORTED`` naming what it cannot take.

    Args:
        provider: the plugin name, for the message and ``LlmError.provider``.
        block: the file.
        media_types: the media types the wire takes inline (``data``).
        max_bytes: the largest ``data`` the wire takes, in bytes.
        url_types: the media types the wire also takes as a ``url`` source.
        detail: whether the wire takes an image's resolution hint (:attr:`FileBlock.detail`);
            if not, :func:`check_detail` refuses one.

    Raises:
        LlmError: ``UNSUPPORTED`` naming the media type (not in ``media_types``), the source kind
            (a URL for a type outside ``url_types``), the size (over ``max_bytes``) or the
            ``detail`` (:func:`check_detail`).
    """
    media_type = block.media_type
    if media_type not in media_types:
        raise unsupported_file(provider, block, f"media type {media_type} is not one of {sorted(media_types)}")
    if block.url is not None and media_type not in url_types:
        raise unsupported_file(provider, block, f"a url source is not accepted for {media_type}; attach the bytes")
    size = block.size
    if size is not None and size > max_bytes:
        raise unsupported_file(provider, block, f"{size} bytes is over the limit of {max_bytes} bytes")
    if not detail:
        check_detail(provider, block)


def check_detail(provider: str, block: FileBlock, *, wire: str = "its wire") -> None:
    """For a wire without an image resolution hint: raise ``UNSUPPORTED`` naming ``block``'s
    :attr:`~FileBlock.detail` when it asks for one (``low`` or ``high``) and ``wire`` (what the
    message says has no counterpart); ``None`` and ``auto`` (the provider chooses) pass.
    :func:`check_file` calls it unless its wire takes the hint."""
    if block.detail not in (None, "auto"):
        why = f"detail {block.detail!r} (an image resolution hint) has no counterpart on {wire}; use 'auto'"
        raise unsupported_file(provider, block, why)
