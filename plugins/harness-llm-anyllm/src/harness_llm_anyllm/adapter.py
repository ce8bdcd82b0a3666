"""``AnyLLMAdapter``: any provider of the any-llm library behind harness's stream protocol.

The adapter is cheap to build: any-llm and the provider's SDK are imported, and the provider
client created, on the first request (``AnyLLM.create(provider, api_key=…, api_base=…,
unified_exceptions=True)``; https://mozilla-ai.github.io/any-llm/). Each request calls
``acompletion(model, messages, stream=True, …)`` (arguments from
:class:`~harness_llm_anyllm.serialize.RequestBuilder`) and feeds the chunks through
:class:`~harness_llm_anyllm.translate.LibraryChunkTranslator`.

Error paths (like every adapter): exceptions of the library, its SDK or the transport **raise**
:class:`~harness_core.errors.LlmError` (classified by :mod:`harness_llm_anyllm.errors`, the key
masked), except an error the provider reports inside a stream that already delivered a chunk (Anthropic's
``event: error``, OpenAI's ``data: {"error": …}``: any code but NETWORK, TIMEOUT, PROTOCOL and
INTERNAL), which ends it with ``finish{error}`` after the open blocks and usage; a stream that
ends without a finish reason raises ``NETWORK``. ``options.abort`` cancels
the pending read, closes the library's stream and ends with ``finish{aborted}``; ``break`` and
task cancellation close it too (shielded, bounded).
"""

from __future__ import annotations

import gc
import inspect
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

import msgspec

from harness_core import (
    AbortSignal,
    EmbeddingAdapter,
    Embeddings,
    EmbedOptions,
    GenerateOptions,
    LlmAdapter,
    LlmError,
    ModelInfo,
    StreamChunk,
    TokenUsage,
)
from harness_core.http import DEFAULT_CLOSE_TIMEOUT
from harness_core.kit import ABORTED, DEFAULT_ABORT_REASON, aclose_all, race
from harness_llm_anyllm.config import AnyLLMConfig
from harness_llm_anyllm.errors import error_from_library
from harness_llm_anyllm.providers import PROVIDERS, gen_ai_provider
from harness_llm_anyllm.serialize import ANYLLM_EFFORTS, RequestBuilder
from harness_llm_anyllm.translate import LibraryChunkTranslator

__all__ = ["KEYLESS_PLACEHOLDER", "AnyLLMAdapter"]

KEYLESS_PLACEHOLDER: Final = "no-key"
"""Sent as the key to a configured ``base_url`` when no ``api_key`` is configured, so the library
never reads the provider's key variable for a host that is not the provider's own."""

_END: Final = object()

_RAISED_WHILE_READING: Final = frozenset({"NETWORK", "TIMEOUT", "PROTOCOL", "INTERNAL"})
"""Codes of a fault while reading that raise (transport, protocol, bug); any other code is an
error the provider reported inside the stream, which ends it with ``finish{error}``."""


def _reads_async(item: object) -> bool:
    """Whether ``item`` is an async generator or another async iterator (``__anext__``)."""
    return inspect.isasyncgen(item) or hasattr(type(item), "__anext__")


def _library_generators(stream: object) -> list[Any]:
    """Every async generator of the library's stream, outermost first: from each async iterator
    the attributes that are async iterators (any-llm's wrappers, the OpenAI SDK's
    ``AsyncStream._iterator``, Mistral's ``EventStreamAsync.generator``) and, under each
    suspended generator, the async iterators its frame holds (its locals and its value stack,
    where ``async for`` keeps the iterator it reads: ``gc.get_referents``).

    The SDKs abandon their chains of generators (the OpenAI SDK's: ``AsyncStream.__stream__`` keeps
    ``_iter_events`` in a local and returns at ``[DONE]`` without closing it), and below them the
    SSE decoder, httpx's ``aiter_bytes`` and ``BoundAsyncStream.__aiter__`` and the transport's
    generators each read the next through ``async for``, which closes nothing. Left alone, the
    chain is finalised by the garbage collector: by asyncio's finalizer in stray tasks, one level
    per loop round, or, once it sits in a reference cycle, at whatever point of whichever thread
    the next collection happens (in a later event loop, where the finalisation fails). So the
    adapter collects the chain at the first item (every level exists then, and none is dropped
    yet), holds it, and closes every level itself when the stream ends, outermost first (closing
    a generator twice does nothing).
    """
    found: list[Any] = []
    queue: list[object] = [stream]
    seen: set[int] = set()
    while queue:
        current = queue.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if inspect.isasyncgen(current):
            found.append(current)
            held = gc.get_referents(current) if current.ag_frame is not None else []  # suspended
        else:
            held = list(getattr(current, "__dict__", {}).values())
        queue.extend(item for item in held if _reads_async(item))
    return found


def _reason(abort: AbortSignal | None) -> str:
    return (abort.reason if abort is not None else None) or DEFAULT_ABORT_REASON


class AnyLLMAdapter(LlmAdapter, EmbeddingAdapter):
    """Adapter for one any-llm provider; it embeds (:meth:`embed`) where any-llm embeds with the
    provider (the plugin registers it as an embedder only then).

    Args:
        config: the plugin's validated :class:`~harness_llm_anyllm.plugin.AnyLLMConfig`.
        provider: the plugin name, used for ``provider_options`` and on errors.
    """

    def __init__(self, config: AnyLLMConfig, *, provider: str = "anyllm") -> None:
        self.config = config
        self.provider = provider
        self.facts = PROVIDERS[config.provider]
        self.builder = RequestBuilder(
            provider=provider,
            library_provider=config.provider,
            include_usage=config.include_usage,
            signed_reasoning=self.facts.signed_reasoning,
            images=self.facts.images,
            pdf=self.facts.pdf,
            options=config.options,
        )
        self._key = self._resolve_key()
        self._library: Any = None
        self.max_batch = config.embed_batch

    def gen_ai_provider(self, plugin: str) -> str | None:
        """The GenAI provider telemetry names (``gen_ai.provider.name``): the config's
        ``gen_ai_provider``, else the any-llm provider's well-known value, else its any-llm name
        (:func:`~harness_llm_anyllm.providers.gen_ai_provider`)."""
        return self.config.gen_ai_provider or gen_ai_provider(self.config.provider)

    def _resolve_key(self) -> str | None:
        """The key to hand the library: the configured one; else the provider's variable while
        ``base_url`` is unset (read here, so it can be masked); else the keyless placeholder."""
        if self.config.api_key is not None:
            return self.config.api_key.get_secret_value()
        if self.config.base_url is not None:
            return KEYLESS_PLACEHOLDER
        variable = self.facts.env_var
        return (os.environ.get(variable) or None) if variable is not None else None

    def _error(self, exc: BaseException, *, reading: bool = False) -> LlmError:
        secret = self._key if self._key != KEYLESS_PLACEHOLDER else None
        return error_from_library(
            exc, provider=self.provider, library_provider=self.config.provider, secret=secret, reading=reading
        )

    def library(self) -> Any:
        """The any-llm provider instance, created on first use.

        Raises:
            LlmError: ``CONFIG`` when the provider's SDK extra is missing or no key was found;
                otherwise the mapped error of the library.
        """
        if self._library is None:
            try:
                from any_llm import AnyLLM

                kwargs = dict(self.config.client_options)
                retries = self.config.max_retries
                if (
                    retries is None
                    and AnyLLM.get_provider_class(self.config.provider).MAX_RETRIES_SUPPORT != "unsupported"
                ):
                    retries = 0  # harness's retry middleware decides about retries
                if retries is not None:
                    kwargs["max_retries"] = retries
                self._library = AnyLLM.create(
                    self.config.provider,
                    api_key=self._key,
                    api_base=self.config.base_url,
                    unified_exceptions=True,
                    **kwargs,
                )
            except Exception as exc:
                raise self._error(exc) from None
        return self._library

    # ------------------------------------------------------------------ LlmAdapter

    def resolve_model(self, model: str) -> ModelInfo:
        """Model facts from the ``models`` config; an unlisted model accepts any-llm's effort ids."""
        known = self.config.models.get(model)
        if known is None:
            return ModelInfo(model=model, reasoning_efforts=list(ANYLLM_EFFORTS) if self.facts.reasoning else None)
        return ModelInfo(model=model, **msgspec.structs.asdict(known))

    async def list_models(self) -> list[ModelInfo]:
        """The provider's models (any-llm's ``alist_models``), each resolved by :meth:`resolve_model`.

        Raises:
            LlmError: ``UNSUPPORTED`` when the provider cannot list models; the mapped error of
                the library otherwise.
        """
        library = self.library()
        try:
            models = await library.alist_models()
        except Exception as exc:
            raise self._error(exc) from None
        return [self.resolve_model(str(model.id)) for model in models]

    async def embed(self, options: EmbedOptions) -> Embeddings:
        """any-llm's ``aembedding(model, inputs, dimensions=…)``
        (https://mozilla-ai.github.io/any-llm/api/embedding/) for at most :attr:`max_batch`
        inputs; the reply is OpenAI's ``CreateEmbeddingResponse``, ordered by ``index`` into one
        float32 buffer with ``usage.prompt_tokens``. ``input_type`` is not passed (any-llm has no
        common field for it).

        Raises:
            LlmError: ``UNSUPPORTED`` when any-llm cannot embed with the provider, ``BAD_REQUEST``
                without a model (none in the request, no ``embedding_model``) or with
                ``dimensions`` below 1 (before any I/O); the mapped library error (key masked);
                ``PROTOCOL`` for a reply whose indexes or lengths do not match the inputs.
        """
        if not self.facts.embeddings:
            raise LlmError("UNSUPPORTED", f"any-llm cannot embed with {self.config.provider!r}", provider=self.provider)
        model = options.model or self.config.embedding_model
        if not model:
            raise LlmError(
                "BAD_REQUEST",
                "an embedding model is required (the request's or embedding_model)",
                provider=self.provider,
            )
        if options.dimensions is not None and options.dimensions < 1:
            raise LlmError(
                "BAD_REQUEST", f"dimensions must be at least 1, got {options.dimensions}", provider=self.provider
            )
        library = self.library()
        arguments: dict[str, Any] = {} if options.dimensions is None else {"dimensions": options.dimensions}
        reply = await self._call(
            None, lambda: library.aembedding(model, list(options.inputs), **arguments), reading=False
        )
        return self._embeddings(reply, len(options.inputs), model)

    async def list_embedding_models(self) -> list[ModelInfo]:
        """The configured ``embedding_model`` where any-llm embeds with the provider (any-llm
        lists models without saying which embed), else none."""
        model = self.config.embedding_model
        return [ModelInfo(model=model)] if model is not None and self.facts.embeddings else []

    def _embeddings(self, reply: Any, count: int, model: str) -> Embeddings:
        """One float32 buffer from a ``CreateEmbeddingResponse`` (rows put in ``index`` order)."""
        items = sorted(reply.data, key=lambda item: item.index)
        if [item.index for item in items] != list(range(count)):
            raise LlmError(
                "PROTOCOL",
                f"the provider returned embeddings {[item.index for item in items]} for {count} inputs",
                provider=self.provider,
            )
        rows = [item.embedding for item in items]
        usage = getattr(reply, "usage", None)
        tokens = getattr(usage, "prompt_tokens", None)
        result = Embeddings.from_rows(rows, model=str(reply.model or model))
        result.usage = TokenUsage(tokens, None) if isinstance(tokens, int) else None
        return result

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """Stream one completion (see the module docs for error paths).

        Raises:
            LlmError: ``BAD_REQUEST`` without a model; ``UNSUPPORTED`` for options the provider or
                the library cannot honour (before any I/O where known); the mapped library error.
        """
        if not options.model:
            raise LlmError("BAD_REQUEST", "options.model is required", provider=self.provider)
        request = self.builder.request(options, self.resolve_model(options.model))
        translator = LibraryChunkTranslator(
            provider=self.provider, model=options.model, signed_reasoning=self.facts.signed_reasoning
        )
        abort = options.abort
        if abort is not None and abort.fired:
            for chunk in translator.abort(_reason(abort)):
                yield chunk
            return
        library = self.library()
        arguments = dict(request.arguments)
        if self.config.timeout is not None:
            arguments["timeout"] = self.config.timeout
        chunks: Any = None
        chain: list[Any] = []  # the library's generators, held from the first read on (see below)

        def start() -> Awaitable[Any]:
            opening: Awaitable[Any] = library.acompletion(request.model, request.messages, **arguments)
            return opening

        try:
            opened = await self._call(abort, start, reading=False)
            if opened is ABORTED:
                final = translator.abort(_reason(abort))
            else:
                chunks = opened
                final = None
            received = False  # some providers' SDKs send the request on the first read
            while final is None:
                try:
                    item = await self._call(abort, lambda: anext(chunks, _END), reading=True)
                except LlmError as exc:
                    if not received or exc.code in _RAISED_WHILE_READING:
                        raise
                    final = translator.fail(exc)  # the provider reported it inside the stream
                    break
                if not received:
                    # the whole chain exists once the first item came through it; held from here
                    # on, no level is left to the garbage collector when the SDK drops it
                    chain = _library_generators(chunks)
                received = True
                if item is ABORTED:
                    final = translator.abort(
                        abort.reason if abort is not None and abort.reason else DEFAULT_ABORT_REASON
                    )
                elif item is _END:
                    final = translator.end_of_input()
                else:
                    for chunk in translator.feed_library(item):
                        yield chunk
            for chunk in final:
                yield chunk
        finally:
            if chunks is not None:
                closing = [chunks, *chain, *_library_generators(chunks)]
                await aclose_all(closing, DEFAULT_CLOSE_TIMEOUT, "any-llm stream")

    async def _call(self, abort: AbortSignal | None, operation: Callable[[], Awaitable[Any]], *, reading: bool) -> Any:
        """Await one library call, abortable; its exceptions become mapped ``LlmError``s."""
        try:
            return await race(abort, operation)
        except Exception as exc:
            raise self._error(exc, reading=reading) from None

    async def aclose(self) -> None:
        """Close the provider's client (its HTTP connection pool), when one was created."""
        client = getattr(self._library, "client", None)
        self._library = None
        if client is None:
            return
        close = getattr(client, "close", None)
        if close is None:
            close = getattr(client, "__aexit__", None)
            result = None if close is None else close(None, None, None)
        else:
            result = close()
        if inspect.isawaitable(result):
            await result
