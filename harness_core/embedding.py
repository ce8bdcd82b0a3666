"""Embeddings, the host's second capability: request, result, adapter and chain (docs/embeddings.md).

An :class:`EmbeddingAdapter` turns a list of inputs into vectors for one provider's wire; plugins
register it for routes through the ``register_embedder`` hook (one adapter object may serve a
route's streams and its embeddings). Middleware wraps every call through the ``llm_embed`` hook
(a coroutine ``(options, call_next) -> Embeddings``, the second waterfall next to ``llm_stream``),
ordered as ``llm_stream`` is (:func:`~harness_core.chain.order_middleware`).

The innermost layer is the :class:`EmbedBoundary`: it looks the route up (``NO_ADAPTER`` for an
unknown route, ``UNSUPPORTED`` naming a route that streams but does not embed), splits the inputs
into batches of the adapter's :attr:`EmbeddingAdapter.max_batch`, joins the results and turns
adapter faults into :class:`~harness_core.errors.LlmError` with the secrets masked.

Vectors travel as one contiguous float32 buffer (:class:`array.array` ``'f'``), never as a list
of boxed Python floats: adapters decode base64 straight into it.
"""

from __future__ import annotations

import abc
import logging
from array import array
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Final, Literal

import msgspec

from harness_core.callchain import CallChain
from harness_core.errors import LlmError
from harness_core.types import ModelInfo, TokenUsage, _deprecated_provider, _RouteKeyword

__all__ = [
    "EmbedBoundary",
    "EmbedCallNext",
    "EmbedChain",
    "EmbedOptions",
    "EmbeddingAdapter",
    "Embeddings",
    "InputType",
    "float32_from_base64",
]

logger = logging.getLogger("harness")

InputType = Literal["query", "document"]
"""What an input is for, where a wire distinguishes it (Gemini's task types, Cohere's input types)."""

DEFAULT_MAX_BATCH: Final = 2048
"""Inputs per provider request when an adapter names no limit (OpenAI's documented maximum)."""


class EmbedOptions(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, metaclass=_RouteKeyword):
    """One embedding request (docs/embeddings.md).

    ``inputs`` are the texts to embed, in order (one vector each); ``route`` the route (a
    plugins.yaml entry; ``provider=`` / ``.provider`` are its deprecated old names) and
    ``model`` the model (``None``: the route's default, then the adapter's); ``dimensions`` asks a
    model that can shorten its vectors for that many (OpenAI ``dimensions``, Gemini
    ``outputDimensionality``); ``input_type`` says whether the inputs are queries or documents
    where the wire has such a notion (ignored elsewhere).
    """

    inputs: list[str]
    route: str | None = None
    model: str | None = None
    dimensions: int | None = None
    input_type: InputType | None = None

    @property
    def provider(self) -> str | None:
        """Deprecated: the old name of :attr:`route`. Reading it warns (``DeprecationWarning``)."""
        return _deprecated_provider(self)


class Embeddings:
    """The vectors of one request: ``len(inputs)`` rows of ``dimensions`` float32 each.

    ``data`` is one flat ``array('f')`` (row-major); ``result[i]`` is row ``i`` as a float32
    :class:`memoryview` (no copy), :meth:`tolist` the rows as lists of floats (for JSON output).
    ``model`` is the model that served, ``usage`` the reported input tokens (``None`` when the
    provider reported none), ``route``/``source`` the route and its owning plugin key (set by
    the boundary).

    Raises:
        ValueError: ``data`` does not hold a whole number of rows of ``dimensions``.
    """

    __slots__ = ("data", "dimensions", "model", "route", "source", "usage")

    def __init__(
        self,
        data: array[float],
        dimensions: int,
        *,
        model: str | None = None,
        usage: TokenUsage | None = None,
        route: str | None = None,
        source: str | None = None,
    ) -> None:
        if data.typecode != "f":
            raise ValueError(f"embedding data must be a float32 array('f'), got typecode {data.typecode!r}")
        if dimensions < 0 or (dimensions == 0 and len(data)) or (dimensions and len(data) % dimensions):
            raise ValueError(f"{len(data)} floats are not a whole number of vectors of {dimensions} dimensions")
        self.data = data
        self.dimensions = dimensions
        self.model = model
        self.usage = usage
        self.route = route
        self.source = source

    @classmethod
    def from_rows(
        cls, rows: Sequence[Sequence[float]], *, model: str | None = None, usage: TokenUsage | None = None
    ) -> Embeddings:
        """Build from rows of floats (a JSON ``embedding`` list each); every row has the same length.

        Raises:
            LlmError: ``PROTOCOL`` when rows differ in length.
        """
        dimensions = len(rows[0]) if rows else 0
        data = array("f")
        for i, row in enumerate(rows):
            if len(row) != dimensions:
                raise LlmError("PROTOCOL", f"vector {i} has {len(row)} dimensions, vector 0 has {dimensions}")
            data.extend(row)
        return cls(data, dimensions, model=model, usage=usage)

    def __len__(self) -> int:
        return len(self.data) // self.dimensions if self.dimensions else 0

    def __getitem__(self, index: int) -> memoryview:
        if not -len(self) <= index < len(self):
            raise IndexError(f"vector {index} out of range ({len(self)} vectors)")
        index %= len(self)
        view = memoryview(self.data)
        return view[index * self.dimensions : (index + 1) * self.dimensions]

    def __iter__(self) -> Iterator[memoryview]:
        return (self[i] for i in range(len(self)))

    def tolist(self) -> list[list[float]]:
        """Every vector as a list of Python floats (JSON output; not for the hot path)."""
        return [list(self.data[i : i + self.dimensions]) for i in range(0, len(self.data), self.dimensions or 1)]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Embeddings):
            return NotImplemented
        return (self.data, self.dimensions, self.model, self.usage) == (
            other.data,
            other.dimensions,
            other.model,
            other.usage,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable buffer: not hashable

    def __repr__(self) -> str:
        return f"Embeddings({len(self)} vectors x {self.dimensions}, model={self.model!r}, usage={self.usage!r})"

    @classmethod
    def join(cls, parts: Sequence[Embeddings]) -> Embeddings:
        """Concatenate the results of consecutive batches (usage summed; ``None`` if any is ``None``).

        Raises:
            LlmError: ``PROTOCOL`` when the batches' dimensions differ.
        """
        if len(parts) == 1:
            return parts[0]
        data = array("f")
        dims = {part.dimensions for part in parts if len(part)}
        if len(dims) > 1:
            raise LlmError("PROTOCOL", f"batches returned vectors of different dimensions: {sorted(dims)}")
        for part in parts:
            data.extend(part.data)
        tokens = [part.usage.input_tokens if part.usage is not None else None for part in parts]
        usage = None if None in tokens else TokenUsage(sum(t for t in tokens if t is not None), None)
        return cls(data, dims.pop() if dims else 0, model=parts[0].model, usage=usage)


def float32_from_base64(text: str | bytes) -> array[float]:
    """Decode an ``encoding_format: base64`` embedding (little-endian float32 bytes, OpenAI's
    format) straight into an ``array('f')``, with no detour through JSON floats.

    Raises:
        LlmError: ``PROTOCOL`` when the text is not base64 or not a whole number of floats.
    """
    import base64
    import binascii
    import sys

    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise LlmError("PROTOCOL", f"an embedding is not valid base64: {exc}") from None
    if len(raw) % 4:
        raise LlmError("PROTOCOL", f"a base64 embedding holds {len(raw)} bytes, not a whole number of float32")
    data = array("f")
    data.frombytes(raw)
    if sys.byteorder == "big":  # pragma: no cover - the wire is little-endian; CI hosts are too
        data.byteswap()
    return data


class EmbeddingAdapter(abc.ABC):
    """Base class of an embedding adapter (docs/embeddings.md).

    Subclasses implement :meth:`embed` for at most :attr:`max_batch` inputs (the boundary splits
    bigger requests). Faults raise :class:`~harness_core.errors.LlmError` with the stable codes;
    the result holds exactly one vector per input, in order. Optional: :meth:`list_embedding_models`,
    :meth:`aclose` (one object serving both capabilities is closed once).
    """

    max_batch: int = DEFAULT_MAX_BATCH
    """Most inputs one provider request may carry."""

    @abc.abstractmethod
    async def embed(self, options: EmbedOptions) -> Embeddings:
        """Embed ``options.inputs`` (at most :attr:`max_batch`) and return one vector per input."""

    async def list_embedding_models(self) -> list[ModelInfo]:
        """The embedding models of this adapter (``harness models`` marks them). Default: none."""
        return []

    async def aclose(self) -> None:  # noqa: B027 - optional hook with a no-op default
        """Release clients and connections; called once when the runtime closes."""


EmbedCallNext = Callable[[EmbedOptions], Awaitable[Embeddings]]
"""The rest of the embedding chain below a middleware: ``await call_next(options)``."""

EmbedFunction = Callable[[EmbedOptions, EmbedCallNext], Awaitable[Embeddings]]
"""An ``llm_embed`` impl: ``(options, call_next)`` → coroutine of :class:`Embeddings`."""


class EmbedBoundary:
    """The innermost embedding layer: route lookup, batching, fault classification, secret masking.

    ``lookup(route)`` returns ``(adapter, owner key)`` or ``None``; ``unknown(route)`` builds the
    error for a route nothing embeds (``UNSUPPORTED`` when the route streams, else ``NO_ADAPTER``);
    ``scrub`` masks secrets in an error.
    """

    __slots__ = ("_lookup", "_scrub", "_unknown")

    def __init__(
        self,
        lookup: Callable[[str], tuple[EmbeddingAdapter, str] | None],
        unknown: Callable[[str | None], LlmError],
        scrub: Callable[[LlmError], LlmError],
    ) -> None:
        self._lookup = lookup
        self._unknown = unknown
        self._scrub = scrub

    async def __call__(self, options: EmbedOptions) -> Embeddings:
        """Embed through the route's adapter, batch by batch; raise a classified, scrubbed ``LlmError``."""
        route = options.route
        found = self._lookup(route) if route is not None else None
        if route is None or found is None:
            raise self._unknown(route)
        adapter, owner = found
        size = max(1, adapter.max_batch)
        parts: list[Embeddings] = []
        try:
            for start in range(0, len(options.inputs), size):
                batch = msgspec.structs.replace(options, inputs=options.inputs[start : start + size])
                part = await adapter.embed(batch)
                if len(part) != len(batch.inputs):
                    raise LlmError(
                        "PROTOCOL",
                        f"the embedder of route {route!r} returned {len(part)} vectors for {len(batch.inputs)} inputs",
                    )
                parts.append(part)
            result = Embeddings.join(parts) if parts else Embeddings(array("f"), 0, model=options.model)
        except LlmError as exc:
            raise self._scrub(exc) from exc
        except Exception as exc:
            logger.error("the embedder of route %r raised an unexpected exception", route, exc_info=exc)
            error = LlmError("INTERNAL", f"unexpected {type(exc).__name__} in the embedder of route {route!r}: {exc}")
            raise self._scrub(error) from exc
        result.route = route
        result.source = owner
        if result.model is None:
            result.model = options.model
        return result


class EmbedChain(CallChain[EmbedOptions, Embeddings]):
    """The ordered ``llm_embed`` middleware over the :class:`EmbedBoundary` (outermost first;
    :class:`~harness_core.callchain.CallChain`)."""

    __slots__ = ()
