"""The API dialects the gateway speaks: one :class:`Dialect` object per client wire format.

A dialect is request parsing plus event encoding: it reads a client's JSON body into a
:class:`~harness_gateway.request.ParsedRequest` (the harness :class:`~harness_core.GenerateOptions`
and the dialect's own extras), makes the stream encoder that turns harness chunks into the
dialect's Server-Sent Events, builds the non-streaming response object, and shapes every error
(body and HTTP status). The relay (:class:`harness_gateway.relay.Relay`) is written once and serves
every dialect; it never asks which one it is serving.

Implementations: :data:`harness_gateway.openai_chat.OPENAI_CHAT` (``POST /v1/chat/completions``),
:data:`harness_gateway.anthropic_messages.ANTHROPIC_MESSAGES` (``POST /v1/messages``) and
:data:`harness_gateway.openai_responses.OPENAI_RESPONSES` (``POST /v1/responses``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Protocol

from starlette.responses import JSONResponse

from harness_core import Finish, Message, StreamChunk, TokenUsage
from harness_gateway.errors import GatewayError
from harness_gateway.keys import KeyRecord
from harness_gateway.request import ParsedRequest, Target
from harness_gateway.store import SqlStore

_PASSED: Final = "provider_options."
"""How a route's refusal of a provider option names it (``LlmError.field``: ``provider_options.logprobs``)."""
_OPTIONS_REFUSAL: Final = re.compile(r"^provider_options\[[^\]]*\] not supported: ")
"""The start of an adapter's refusal of provider options, in the route's words (cut for the client)."""

__all__ = ["Dialect", "Ending", "StreamEncoder"]


class StreamEncoder(Protocol):
    """Turns one generation's harness chunks into a dialect's SSE bytes (one encoder per stream)."""

    def start(self) -> bytes:
        """The events sent before the first chunk's (sent once the stream produced anything)."""
        ...  # pragma: no cover - a protocol method

    def feed(self, chunk: StreamChunk) -> bytes:
        """The bytes for ``chunk`` (``b""`` when it adds nothing on this wire); a ``Finish``
        yields the closing events (or the in-stream error when it failed)."""
        ...  # pragma: no cover - a protocol method

    def error(self, error: GatewayError) -> bytes:
        """The in-stream error event(s) ending a stream that has already started."""
        ...  # pragma: no cover - a protocol method


@dataclass(frozen=True, kw_only=True)
class Ending:
    """How a generation that did not fail ended, as :meth:`Dialect.conclude` sees it.

    ``route`` / ``model`` served it (a ``fallback`` target or ``balance`` member when one did),
    ``source`` is the plugins.yaml key owning that route (the instance its replay state belongs
    to); ``retention`` is the gateway config's ``responses.retention`` in seconds; ``redact``
    masks the configuration's secrets in a text (the runtime's redactor: what a dialect stores
    must never hold one).
    """

    store: SqlStore
    retention: float
    parsed: ParsedRequest
    route: str
    model: str
    source: str | None
    finish: Finish
    redact: Callable[[str], str]


class Dialect:
    """One client wire format, as the relay uses it.

    Subclasses set :attr:`name`, :attr:`path` and :attr:`id_prefix` and implement :meth:`parse`,
    :meth:`encoder` and :meth:`response`; the error shape defaults to OpenAI's error object.
    """

    name: str = "openai"
    """The dialect's label: ``dialect`` in metrics, observers and the console's records."""
    path: str = ""
    """The endpoint (``/v1/chat/completions``); an unknown path at or under it gets this dialect's error shape."""
    id_prefix: str = ""
    """Prepended to the request id to make the public id of a response (``chatcmpl-``, ``msg_``)."""
    messages_field: str = "messages"
    """The request field holding the conversation (``input`` on Responses): an empty one is a 400 naming it."""
    option_fields: Mapping[str, str] = MappingProxyType({})
    """A vocabulary field (:class:`~harness_core.GenerateOptions`) -> this dialect's request field
    carrying it (``reasoning_effort`` -> ``reasoning.effort`` on Responses): the ``param`` of a
    route's failure that names the field (:attr:`harness_core.LlmError.field`)."""
    option_values: Mapping[str, Mapping[str, str]] = MappingProxyType({})
    """A vocabulary field of :attr:`option_fields` -> its values this dialect spells otherwise ->
    this dialect's word (OpenAI's reasoning effort ``"none"`` is the vocabulary's ``"off"``): a
    route's failure naming the field quotes the client's word (``'none'``), not the vocabulary's."""

    def parse(self, raw: Any, owner: str | None, upstream_model: str, *, target: Target | None = None) -> ParsedRequest:
        """Read a decoded JSON body into a :class:`ParsedRequest`.

        ``owner`` is the plugins.yaml key serving the resolved model and ``upstream_model`` the
        provider's model id (what a dialect needs to hand replay state to the right adapter);
        ``target`` the route's wire, for the fields the vocabulary lacks
        (:func:`~harness_gateway.request.pass_through`: passed on to a route of the same wire,
        else a 400 naming them).

        Raises:
            GatewayError: 400 naming the field at fault.
        """
        raise NotImplementedError  # pragma: no cover - every dialect implements it

    def encoder(self, public_id: str, model: str, parsed: ParsedRequest) -> StreamEncoder:
        """The stream encoder of one streaming request (``model`` as the client wrote it)."""
        raise NotImplementedError  # pragma: no cover - every dialect implements it

    def response(
        self, public_id: str, parsed: ParsedRequest, message: Message, usage: TokenUsage | None, finish: Finish
    ) -> dict[str, Any]:
        """The non-streaming response body of a generation that did not fail (``parsed.model`` as the client wrote it).

        Raises:
            GatewayError: when the reply cannot be expressed in this dialect (a 502).
        """
        raise NotImplementedError  # pragma: no cover - every dialect implements it

    async def resolve(self, store: SqlStore, who: KeyRecord | bool | None, parsed: ParsedRequest) -> ParsedRequest:
        """``parsed`` completed with what the state store holds for it, before admission (the
        Responses dialect's ``previous_response_id``); ``who`` is the authenticated caller
        (a key record, ``True`` for the master key, ``None`` when anonymous). Default: ``parsed``.

        Raises:
            GatewayError: when the request names state it may not have (a 404), or 503 while the
                store is away.
        """
        return parsed

    async def conclude(self, ending: Ending, result: dict[str, Any] | StreamEncoder) -> None:
        """Called once per generation that reached its finish, before the client receives the
        end of the answer: ``result`` is the non-streaming response body (which this may change)
        or the stream's encoder, fed everything but the finish. Default: nothing."""

    def owns(self, path: str) -> bool:
        """Whether an unknown ``path`` (404 / 405) is answered in this dialect: its endpoint or below."""
        return path == self.path or path.startswith(self.path + "/")

    def error_body(self, error: GatewayError) -> dict[str, Any]:
        """The JSON error body of ``error`` (default: OpenAI's error object, :meth:`GatewayError.openai_body`)."""
        return error.openai_body()

    def error_status(self, error: GatewayError) -> int:
        """The HTTP status of ``error`` in this dialect (default: its own)."""
        return error.status

    def error_response(self, error: GatewayError) -> JSONResponse:
        """The JSON error response of ``error``: body, status and the retry headers. A route's
        failure that names a vocabulary field (``error.field``) names this dialect's spelling of
        it as ``param`` (:attr:`option_fields`), and in its message (``reasoning_effort 'max' is
        not one of …`` is ``reasoning.effort 'max' …`` on Responses), where a value quoted
        (``'off'``) is this dialect's word for it too (:attr:`option_values`: ``'none'``). A
        refused provider option (``field`` ``provider_options.logprobs``) is a field the client
        sent as it is (passed through to a route of its wire): ``param`` is that field and the
        message names it in the client's words (``logprobs: not supported by this route: …``),
        not as the route's ``provider_options['openai']``."""
        if error.param is None and error.field is not None and error.field.startswith(_PASSED):
            error.param = error.field.removeprefix(_PASSED)
            error.message = f"{error.param}: not supported by this route: {_OPTIONS_REFUSAL.sub('', error.message, 1)}"
            error.field = None  # (named: not renamed again)
        if error.param is None and error.field is not None:
            spelling = error.param = self.option_fields.get(error.field)
            if spelling is not None:
                error.message = error.message.replace(f"{error.field} ", f"{spelling} ", 1)
                for word, written in self.option_values.get(error.field, {}).items():
                    error.message = error.message.replace(repr(word), repr(written))
        return JSONResponse(self.error_body(error), status_code=self.error_status(error), headers=error.headers())
