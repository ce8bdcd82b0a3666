"""OpenAI Embeddings (``POST /v1/embeddings``) ⇄ the harness embedding vocabulary.

Wire format: https://platform.openai.com/docs/api-reference/embeddings/create (the request body
and the ``list`` of ``embedding`` objects it answers with).

Request: ``model`` (``route/model`` or an alias, resolved as for chat), ``input`` (one string or
a list of strings, one vector each, in order), ``dimensions`` (an integer from 1 to 65,536) and
``encoding_format`` (``float``, the API's default, or ``base64``, which the official ``openai``
SDKs ask for unless told otherwise) map to :class:`~harness_core.embedding.EmbedOptions`.
``user`` changes no output and is dropped (:data:`IGNORED`). Token-id inputs (a list of integers,
or a list of such lists) are a 400 naming the field: routes embed text, and the gateway cannot
know the tokenizer a route's model would need to read them back. An empty list, an empty string
and any other field are a 400 naming it (the field rule,
:func:`harness_gateway.request.pass_through`: the embedding vocabulary has no provider options,
so no field is passed on unchanged).

Response: ``{"object": "list", "data": [{"object": "embedding", "index": i, "embedding": ...}],
"model": <the client's model>, "usage": {"prompt_tokens": n, "total_tokens": n}}``. A ``float``
embedding is a JSON array of the float32 values; a ``base64`` one the base64 text of the
vector's little-endian float32 bytes, encoded straight from the result's buffer (what the SDKs
decode with ``numpy.frombuffer(..., dtype="float32")``). ``usage`` counts the input tokens the
route reported (0 when it reported none).

Errors: OpenAI's error object (:data:`EMBEDDINGS`); a route's refusal of ``dimensions`` names it
as ``param``.
"""

from __future__ import annotations

import base64
import sys
from types import MappingProxyType
from typing import Any, Final, Literal

import msgspec

from harness_core import Embeddings, EmbedOptions
from harness_gateway.dialect import Dialect
from harness_gateway.request import Body, Target, bad_request, kind_of, pass_through

__all__ = [
    "EMBEDDINGS",
    "ENCODINGS",
    "IGNORED",
    "MAPPED",
    "PATH",
    "EmbeddingRequest",
    "EmbeddingsErrors",
    "embeddings_body",
    "parse_embeddings_request",
]

PATH: Final = "/v1/embeddings"
"""The endpoint."""

MAPPED: Final = ("model", "input", "dimensions", "encoding_format")

MAX_DIMENSIONS: Final = 65_536
"""The largest ``dimensions`` accepted (models answer a few thousand at most); beyond, a 400
naming the field instead of a number no adapter can send."""
"""The request fields read into :class:`~harness_core.embedding.EmbedOptions` (or the response's shape)."""

IGNORED: Final = ("user",)
"""Fields that change no output (an end-user id), dropped."""

ENCODINGS: Final = ("float", "base64")
"""The values of ``encoding_format``."""

_encode = msgspec.json.Encoder().encode


class EmbeddingRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A ``/v1/embeddings`` body read into the vocabulary.

    ``model`` is the model as the client wrote it (``route/model`` or an alias: echoed in the
    response); ``options`` has ``provider`` and ``model`` unset (the gateway resolves them);
    ``encoding_format`` is how the response carries the vectors.
    """

    model: str
    options: EmbedOptions
    encoding_format: Literal["float", "base64"] = "float"


def parse_embeddings_request(raw: Any, *, target: Target | None = None) -> EmbeddingRequest:
    """Read an Embeddings body (module docstring) into an :class:`EmbeddingRequest`.

    ``target`` is the route (named in a refused field's message).

    Raises:
        GatewayError: 400 naming the field at fault (``input``, ``input[2]``, ``dimensions``,
            ``encoding_format``, or a field the endpoint does not take).
    """
    body = Body(raw)
    model = body.get("model", str, required=True)
    inputs = _inputs(body.value.get("input"))
    dimensions = body.get("dimensions", int)
    if dimensions is not None and not 1 <= dimensions <= MAX_DIMENSIONS:
        raise bad_request("dimensions", f"must be between 1 and {MAX_DIMENSIONS}, got {dimensions}")
    encoding = body.get("encoding_format", str, "float")
    if encoding not in ENCODINGS:
        raise bad_request("encoding_format", f"expected float or base64, got {encoding!r}")
    pass_through(body, MAPPED, IGNORED, wire=None, target=target)
    options = EmbedOptions(inputs=inputs, dimensions=dimensions)
    return EmbeddingRequest(model=model, options=options, encoding_format=encoding)


_TOKEN_IDS: Final = (
    "token-id inputs are not supported: routes embed text, and the gateway cannot know the tokenizer "
    "of the route's model; send the text"
)


def _inputs(value: Any) -> list[str]:
    """The texts of ``input`` (a string or a list of strings, none empty)."""
    if value is None:
        raise bad_request("input", "this field is required")
    if isinstance(value, str):
        if not value:
            raise bad_request("input", "must not be an empty string")
        return [value]
    if not isinstance(value, list):
        raise bad_request("input", f"expected a string or a list of strings, got {kind_of(value)}")
    if not value:
        raise bad_request("input", "must hold at least one input")
    inputs: list[str] = []
    for i, item in enumerate(value):
        where = f"input[{i}]"
        if isinstance(item, str):
            if not item:
                raise bad_request(where, "must not be an empty string")
            inputs.append(item)
        elif isinstance(item, int) and not isinstance(item, bool):
            raise bad_request("input", _TOKEN_IDS)  # the whole list is one input of token ids
        elif isinstance(item, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in item):
            raise bad_request(where, _TOKEN_IDS)
        else:
            raise bad_request(where, f"expected a string, got {kind_of(item)}")
    return inputs


def embeddings_body(request: EmbeddingRequest, result: Embeddings) -> bytes:
    """The JSON response body (module docstring) of ``result`` for ``request``, encoded.

    ``base64`` vectors are encoded from the float32 buffer row by row (no JSON floats); ``float``
    vectors are the buffer's values as JSON numbers.
    """
    base64_format = request.encoding_format == "base64"
    data: list[dict[str, Any]] = []
    for index, row in enumerate(result):
        vector: Any = _base64(row) if base64_format else row.tolist()
        data.append({"object": "embedding", "index": index, "embedding": vector})
    tokens = (result.usage.input_tokens if result.usage is not None else None) or 0
    body = {
        "object": "list",
        "data": data,
        "model": request.model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
    return _encode(body)


def _base64(row: memoryview) -> str:
    """The base64 text of one float32 row, little-endian (OpenAI's ``encoding_format: base64``)."""
    raw = row.tobytes()
    if sys.byteorder == "big":  # pragma: no cover - the wire is little-endian; CI hosts are too
        from array import array

        swapped = array("f", raw)
        swapped.byteswap()
        raw = swapped.tobytes()
    return base64.b64encode(raw).decode("ascii")


class EmbeddingsErrors(Dialect):
    """How ``/v1/embeddings`` answers a failure: OpenAI's error object (the default shape), with a
    route's refusal of an embedding option (:attr:`harness_core.LlmError.field`: ``dimensions``)
    naming its request field as ``param``. Errors only: the endpoint is served by
    :class:`~harness_gateway.embedding.Embedding`, not the relay, so no request is parsed here."""

    name = "openai"
    path = PATH
    option_fields = MappingProxyType({"dimensions": "dimensions"})


EMBEDDINGS: Final = EmbeddingsErrors()
"""The error shape of ``/v1/embeddings``."""
