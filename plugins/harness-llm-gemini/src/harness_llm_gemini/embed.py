"""The Gemini embeddings wire: ``batchEmbedContents`` request body and reply decoding.

``POST {base_url}/{model}:batchEmbedContents``
(https://ai.google.dev/api/embeddings#method:-models.batchembedcontents) with
``{"requests": [{"model", "content": {"parts": [{"text"}]}, "taskType"?, "outputDimensionality"?}]}``
(at most 100 requests); the reply is ``{"embeddings": [{"values": [floats]}]}`` in request order
and reports no token usage. ``input_type`` maps to ``taskType`` (``query`` →
``RETRIEVAL_QUERY``, ``document`` → ``RETRIEVAL_DOCUMENT``), ``dimensions`` to
``outputDimensionality``.
"""

from __future__ import annotations

from array import array
from typing import Any, Final

import msgspec

from harness_core import Embeddings, EmbedOptions, LlmError

__all__ = ["DEFAULT_EMBEDDING_MODEL", "MAX_EMBED_BATCH", "TASK_TYPES", "decode_embeddings", "encode_embed_request"]

DEFAULT_EMBEDDING_MODEL: Final = "gemini-embedding-001"
"""The ``embedding_model`` default (https://ai.google.dev/gemini-api/docs/embeddings)."""

MAX_EMBED_BATCH: Final = 100
"""Most requests one ``batchEmbedContents`` call takes."""

TASK_TYPES: Final = {"query": "RETRIEVAL_QUERY", "document": "RETRIEVAL_DOCUMENT"}
"""``EmbedOptions.input_type`` → Gemini ``taskType`` (https://ai.google.dev/api/embeddings#tasktype)."""


class _Values(msgspec.Struct):
    values: list[float]


class _Reply(msgspec.Struct):
    embeddings: list[_Values]


_DECODER: Final = msgspec.json.Decoder(_Reply)


def encode_embed_request(options: EmbedOptions, model_name: str) -> bytes:
    """The ``batchEmbedContents`` body: one request per input for ``model_name`` (``models/<id>``)."""
    extra: dict[str, Any] = {}
    if options.input_type is not None:
        extra["taskType"] = TASK_TYPES[options.input_type]
    if options.dimensions is not None:
        extra["outputDimensionality"] = options.dimensions
    requests = [{"model": model_name, "content": {"parts": [{"text": text}]}, **extra} for text in options.inputs]
    return msgspec.json.encode({"requests": requests})


def decode_embeddings(body: bytes, *, count: int, provider: str) -> Embeddings:
    """The vectors of a ``batchEmbedContents`` reply for ``count`` inputs (``usage`` ``None``).

    Raises:
        msgspec.ValidationError / msgspec.DecodeError: a body of another shape (``PROTOCOL``
            through the kit's :func:`~harness_core.kit.request_json`).
        LlmError: ``PROTOCOL`` for a vector count other than ``count`` or vectors of different
            or zero length.
    """
    embeddings = _DECODER.decode(body).embeddings
    if len(embeddings) != count:
        raise LlmError(
            "PROTOCOL", f"Gemini returned {len(embeddings)} embeddings for {count} inputs", provider=provider
        )
    dimensions = len(embeddings[0].values) if embeddings else 0
    data = array("f")
    for position, embedding in enumerate(embeddings):
        if len(embedding.values) != dimensions or not dimensions:
            raise LlmError(
                "PROTOCOL",
                f"embedding {position} has {len(embedding.values)} dimensions, embedding 0 has {dimensions}",
                provider=provider,
            )
        data.extend(embedding.values)
    return Embeddings(data, dimensions)
