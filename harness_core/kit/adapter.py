"""The HTTP adapter base: :class:`HttpAdapter` — a provider is its wire stages and a few hooks.

A subclass gives the request (:meth:`~HttpAdapter.encode_request`, :attr:`~HttpAdapter.stream_path`,
:meth:`~HttpAdapter.auth_headers`), the translator (:meth:`~HttpAdapter.make_translator`), the
error classifier (:meth:`~HttpAdapter.classify_error`) and the model facts
(:meth:`~HttpAdapter.resolve_model`, :meth:`~HttpAdapter.decode_models`). The base owns the HTTP
client, the stream loop (:func:`harness_core.kit.stream_sse`) and ``list_models``
(:func:`harness_core.kit.request_json`). A walk-through is in ``docs/writing-an-adapter.md``.
"""

from __future__ import annotations

import abc
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, ClassVar, Final, Generic, TypeVar

from harness_core.adapter import LlmAdapter
from harness_core.errors import LlmError
from harness_core.http.headers import check_headers
from harness_core.kit.config import HttpProviderConfig, client_options
from harness_core.kit.request import request_json
from harness_core.kit.stream import DEFAULT_DRAIN_TIMEOUT, stream_sse
from harness_core.types import GenerateOptions, ModelInfo, StreamChunk

if TYPE_CHECKING:  # pragma: no cover - typing only
    import httpx

    from harness_core.http import ErrorDetails
    from harness_core.kit.translator import StreamTranslator

__all__ = ["HttpAdapter"]

ConfigT = TypeVar("ConfigT", bound=HttpProviderConfig)

_JSON: Final = {"content-type": "application/json"}
_MAX_URLS: Final = 256
"""Request URLs an adapter keeps parsed (one per path; a path names the model on Gemini)."""


class HttpAdapter(LlmAdapter, Generic[ConfigT]):
    """Base of an adapter that streams server-sent events over HTTP.

    Raises ``LlmError("CONFIG")`` on construction for a header value (a key) that cannot be sent
    (:func:`harness_core.http.check_headers`), naming the header, never the value.

    Args:
        config: the plugin's validated config (an :class:`HttpProviderConfig` subclass).
        provider: the plugin name stamped on errors (default: the class's :attr:`provider_name`).
        transport: an ``httpx.AsyncBaseTransport`` for the client (proxies, tests; default the
            network).

    Class attributes:
        provider_name: the default ``provider``.
        gen_ai_provider_name: the GenAI provider of the vendor (``gen_ai.provider.name``:
            ``anthropic``, ``deepseek`` …; ``None``: the plugin's name), unless the config's
            ``gen_ai_provider`` says another (:meth:`gen_ai_provider`).
        stream_path: the streaming request's path, relative to ``config.base_url``.
        models_path: the model list's path (``None``: ``list_models`` raises ``UNSUPPORTED``).
        drain_timeout: seconds to read the rest of a body after the terminal event.

    One ``httpx.AsyncClient`` per adapter, created on first use and closed by :meth:`aclose`;
    httpx (and aiohttp for ``transport: aiohttp``) is imported then, not when the adapter is
    built, so a configured provider the run never uses costs no HTTP import.
    """

    provider_name: ClassVar[str] = "http"
    gen_ai_provider_name: ClassVar[str | None] = None
    stream_path: ClassVar[str] = "/"
    models_path: ClassVar[str | None] = None
    drain_timeout: ClassVar[float] = DEFAULT_DRAIN_TIMEOUT

    def __init__(
        self, config: ConfigT, *, provider: str | None = None, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.config = config
        self.provider = provider or self.provider_name
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._urls: dict[str, httpx.URL] = {}
        self._headers = {**self.default_headers(), **self.auth_headers(), **config.headers}
        check_headers(self._headers, provider=self.provider)  # a key that cannot be sent is CONFIG, now

    # ------------------------------------------------------------------ the subclass's stages

    @abc.abstractmethod
    def encode_request(self, options: GenerateOptions, info: ModelInfo) -> bytes:
        """The JSON request body for ``options`` (``info`` = :meth:`resolve_model` of its model).

        Raises:
            LlmError: ``UNSUPPORTED`` / ``BAD_REQUEST`` for options the wire cannot carry
                (raised before any I/O).
        """

    @abc.abstractmethod
    def make_translator(self, options: GenerateOptions, request_id: str | None) -> StreamTranslator:
        """A fresh translator for one response (``request_id`` from the response headers)."""

    def request_path(self, options: GenerateOptions) -> str:
        """The streaming request's path for ``options``, relative to ``config.base_url``;
        default :attr:`stream_path`. Override when the path depends on the request (Gemini
        names the model in it: ``/models/{model}:streamGenerateContent?alt=sse``)."""
        return self.stream_path

    def auth_headers(self) -> dict[str, str]:
        """Headers carrying ``config.api_key``; default ``Authorization: Bearer <key>``, none
        without a key."""
        key = self.config.api_key
        return {} if key is None else {"authorization": "Bearer " + key.get_secret_value()}

    def default_headers(self) -> dict[str, str]:
        """Headers of every request before ``config.headers`` (default: accept SSE)."""
        return {"accept": "text/event-stream"}

    def classify_error(self, status: int | None, body: dict[str, Any] | None) -> ErrorDetails | None:
        """Refine an HTTP or in-band error (see :data:`harness_core.http.ErrorClassifier`);
        default ``None`` keeps the generic mapping."""
        return None

    def decode_models(self, body: bytes) -> list[str]:
        """Model ids from the :attr:`models_path` body; default the OpenAI shape
        ``{"data": [{"id": …}, …]}``. Raises ``ValueError`` / ``KeyError`` / ``TypeError`` for
        another shape (reported as ``PROTOCOL``)."""
        data: Any = json.loads(body)["data"]
        return [str(item["id"]) for item in data]

    # ------------------------------------------------------------------ LlmAdapter

    def gen_ai_provider(self, plugin: str) -> str | None:
        """The GenAI provider telemetry names (:meth:`LlmAdapter.gen_ai_provider`): the config's
        ``gen_ai_provider``, else :attr:`gen_ai_provider_name`, else ``plugin``."""
        return self.config.gen_ai_provider or self.gen_ai_provider_name or plugin

    @property
    def client(self) -> httpx.AsyncClient:
        """The adapter's HTTP client (created on first use)."""
        client = self._client
        if client is None:
            from harness_core.http.client import make_client  # httpx: imported on first use

            client = self._client = make_client(
                headers=self._headers, provider=self.provider, transport=self._transport, **client_options(self.config)
            )
        return client

    def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """Stream one generation (an async generator; nothing is sent before the first
        ``__anext__``).

        Raises:
            LlmError: ``BAD_REQUEST`` without ``options.model``; :meth:`encode_request`'s
                errors; everything :func:`harness_core.kit.stream_sse` raises.
        """
        return stream_sse(
            self.client,
            lambda: self._build_request(options),
            lambda request_id: self.make_translator(options, request_id),
            abort=options.abort,
            provider=self.provider,
            classifier=self.classify_error,
            drain_timeout=self.drain_timeout,
        )

    def _build_request(self, options: GenerateOptions) -> httpx.Request:
        if not options.model:
            raise LlmError("BAD_REQUEST", "options.model is required", provider=self.provider)
        body = self.encode_request(options, self.resolve_model(options.model))
        return self.client.build_request("POST", self._url(self.request_path(options)), content=body, headers=_JSON)

    def _url(self, path: str) -> httpx.URL:
        """The absolute URL of ``path`` (joined onto the client's base URL, with its query),
        parsed once per path: httpx parses a relative path and joins it on every request
        (~35 µs, a tenth of the time to the first chunk on aiohttp)."""
        urls = self._urls
        url = urls.get(path)
        if url is None:
            if len(urls) >= _MAX_URLS:  # a path per model (Gemini): bounded, not a leak
                urls.clear()
            url = urls[path] = self.client.build_request("POST", path).url
        return url

    async def list_models(self) -> list[ModelInfo]:
        """``GET`` :attr:`models_path`, each id described by :meth:`resolve_model`.

        Raises:
            LlmError: ``UNSUPPORTED`` without a :attr:`models_path`; as
                :func:`harness_core.kit.request_json` otherwise.
        """
        if self.models_path is None:
            return await super().list_models()
        ids = await request_json(
            self.client, self.models_path, self.decode_models, provider=self.provider, classifier=self.classify_error
        )
        return [self.resolve_model(model) for model in ids]

    async def aclose(self) -> None:
        """Close the HTTP client and its connections (idempotent)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
