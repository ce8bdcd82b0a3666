"""The embeddings wire of OpenAI and OpenAI-compatible servers: request body and reply decoding.

``POST {base_url}/embeddings`` (https://platform.openai.com/docs/api-reference/embeddings/create)
with ``{"model", "input": [texts], "encoding_format": "base64", "dimensions"?}``. The reply is
``{"data": [{"index", "embedding"}], "model", "usage": {"prompt_tokens"}}``; each ``embedding``
is base64 of little-endian float32 (decoded by :func:`~harness_core.embedding.float32_from_base64`
straight into the result's buffer) or, from a server that ignores ``encoding_format``, a JSON
list of floats. Vectors are put in the order of their ``index``. ``input_type`` has no OpenAI
counterpart and is not sent (docs/embeddings.md: ignored where the wire has no such notion).
"""

from __future__ import annotations

from array import array
from typing import Final, cast

import msgspec

from harness_core import Embeddings, EmbedOptions, LlmError, TokenUsage
from harness_core.kit import float32_from_base64

__all__ = ["EMBEDDINGS_PATH", "decode_embeddings", "encode_embed_request"]

EMBEDDINGS_PATH: Final = "/embeddings"
"""The request path, relative to ``base_url``."""


class _Request(msgspec.Struct, omit_defaults=True, kw_only=True):
    model: str
    input: list[str]
    encoding_format: str  # always "base64" (no default: omit_defaults would drop it)
    dimensions: int | None = None


class _Item(msgspec.Struct):
    embedding: str | list[float]
    index: int | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None


class _Reply(msgspec.Struct):
    data: list[_Item]
    model: str | None = None
    usage: _Usage | None = None


_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(_Reply)


def encode_embed_request(options: EmbedOptions, model: str) -> bytes:
    """The JSON body for ``options.inputs`` embedded with ``model`` (``dimensions`` when asked)."""
    return _ENCODER.encode(
        _Request(model=model, input=options.inputs, encoding_format="base64", dimensions=options.dimensions)
    )


def decode_embeddings(body: bytes, *, count: int, provider: str) -> Embeddings:
    """The vectors of an ``/embeddings`` reply for ``count`` inputs, ordered by ``index``.

    Returns:
        :class:`~harness_core.embedding.Embeddings` with the reply's ``model`` and
        ``usage.prompt_tokens`` as input tokens (``None`` when the server reports none).

    Raises:
        msgspec.ValidationError / msgspec.DecodeError: a body of another shape (the kit's
            :func:`~harness_core.kit.request_json` reports it as ``PROTOCOL`` naming the path).
        LlmError: ``PROTOCOL`` for a vector count other than ``count``, indexes that are not
            ``0 … count-1``, vectors of different lengths or an embedding that is not float32
            base64.
    """
    reply = _DECODER.decode(body)
    items = reply.data
    if len(items) != count:
        raise LlmError("PROTOCOL", f"the server returned {len(items)} embeddings for {count} inputs", provider=provider)
    if any(item.index is not None for item in items):
        ordered: list[_Item | None] = [None] * count
        for item in items:
            if item.index is None or not 0 <= item.index < count or ordered[item.index] is not None:
                raise LlmError(
                    "PROTOCOL", f"embedding indexes are not 0…{count - 1}: got index {item.index!r}", provider=provider
                )
            ordered[item.index] = item
        items = cast("list[_Item]", ordered)  # every slot filled: count distinct indexes in range
    data = array("f")
    dimensions = 0
    for position, item in enumerate(items):
        start = len(data)
        embedding = item.embedding
        if isinstance(embedding, str):
            try:
                data.extend(float32_from_base64(embedding))
            except LlmError as exc:
                raise LlmError("PROTOCOL", f"embedding {position}: {exc.message}", provider=provider) from None
        else:
            data.extend(embedding)
        size = len(data) - start
        if position == 0:
            dimensions = size
        elif size != dimensions:
            raise LlmError(
                "PROTOCOL",
                f"embedding {position} has {size} dimensions, embedding 0 has {dimensions}",
                provider=provider,
            )
    if dimensions == 0:
        raise LlmError("PROTOCOL", "the server returned empty embeddings", provider=provider)
    usage = reply.usage
    tokens = usage.prompt_tokens if usage is not None else None
    return Embeddings(
        data, dimensions, model=reply.model, usage=TokenUsage(tokens, None) if tokens is not None else None
    )
