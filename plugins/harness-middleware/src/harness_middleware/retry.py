"""``retry``: try a stream again on a retryable failure, but only while nothing has been yielded.

An attempt's chunks are held back until the attempt is decided: the first content chunk (a delta,
a non-empty ``block-end``, a non-error ``finish`` or a chunk kind this module does not know)
commits to the attempt and everything held is passed on; a retryable failure (a ``finish{error}``
or a raised :class:`~harness_core.errors.LlmError` with a retryable code) before that closes the
attempt's stream, waits and starts a new attempt. After content has been yielded nothing is ever
retried: the caller would see text twice.

Waits: the provider's ``retry_after`` (seconds) when it sent one, otherwise exponential backoff
with full jitter (``tenacity.wait_random_exponential``, the "Full Jitter" algorithm of
https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/). Giving up passes on
the last attempt's failure unchanged. ``options.abort`` interrupts a wait: the stream then ends
with ``finish{aborted}``.

Embedding calls (``llm_embed``, docs/embeddings.md) are retried by the same policy: a raised
:class:`~harness_core.errors.LlmError` whose code is in ``codes`` starts a new attempt after the
same waits (``retry_after`` or the backoff), within the same ``max_attempts`` and
``max_elapsed``; giving up raises the last attempt's error unchanged. An embedding call yields
nothing before it returns, so every attempt may be retried. Cancelling the caller's task
cancels the wait.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Literal, cast

import anyio
import msgspec
import tenacity

from harness_core.middleware import (
    ABORTED,
    AbortSignal,
    CallNext,
    EmbedCallNext,
    Embeddings,
    EmbedOptions,
    Failure,
    Finish,
    GenerateOptions,
    LlmError,
    StreamChunk,
    hookimpl,
    race,
)
from harness_middleware._stream import aclose, error_finish, is_content

__all__ = ["RetryPlugin"]

logger = logging.getLogger(__name__)

RetryCode = Literal["RATE_LIMITED", "OVERLOADED", "SERVER", "TIMEOUT", "NETWORK"]
Sleep = Callable[[float], Awaitable[None]]


class _RetryableFailure(Exception):
    """An attempt failed retryably before committing: what it held and how it ended."""

    def __init__(self, held: list[StreamChunk], finish: Finish | None, error: LlmError | None) -> None:
        super().__init__("retryable failure")
        self.held = held
        self.finish = finish
        self.error = error

    @property
    def retry_after(self) -> float | None:
        if self.error is not None:
            return self.error.retry_after
        failure = self.finish.reason.failure if self.finish is not None else None
        return failure.retry_after if failure is not None else None

    @property
    def code(self) -> str:
        if self.error is not None:
            return self.error.code
        failure = self.finish.reason.failure if self.finish is not None else None
        return failure.code if failure is not None else "?"


class _WaitAborted(Exception):
    """``options.abort`` fired while waiting between attempts."""

    def __init__(self, reason: str | None) -> None:
        super().__init__(reason or "aborted by the caller")
        self.reason = reason or "aborted by the caller"


class _Wait(tenacity.wait.wait_base):
    """The provider's ``retry_after`` when given (and honoured), else the backoff strategy."""

    def __init__(self, backoff: tenacity.wait.wait_base, honour_retry_after: bool) -> None:
        self.backoff = backoff
        self.honour_retry_after = honour_retry_after

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        if self.honour_retry_after and isinstance(exc, _RetryableFailure) and exc.retry_after is not None:
            return max(0.0, exc.retry_after)
        return float(self.backoff(retry_state))


class RetryPlugin:
    """Middleware that retries retryable failures before anything was yielded (see module doc).

    Args:
        config: the validated :class:`RetryPlugin.Config`.
        sleep: ``async sleep(seconds)`` used between attempts; defaults to :func:`anyio.sleep`.
            Tests inject a recording sleep to observe the waits without timing anything.
    """

    class Config(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
        """``retry:`` in plugins.yaml. Times are seconds.

        Fields:
            max_attempts: attempts in all, the first included (1 = never retry).
            max_elapsed: no new attempt starts once the time since the first one plus the next
                wait reaches this; ``null`` = no limit besides ``max_attempts``.
            initial_delay: the first backoff window; each retry doubles it, up to ``max_delay``.
            max_delay: the largest backoff window.
            jitter: full jitter (a random wait inside the window) instead of the window itself.
            honour_retry_after: wait what the provider asked for (``Retry-After``) when it did.
            codes: the error codes to retry, a subset of the retryable codes.
        """

        max_attempts: Annotated[int, msgspec.Meta(ge=1)] = 3
        max_elapsed: Annotated[float, msgspec.Meta(gt=0)] | None = 60.0
        initial_delay: Annotated[float, msgspec.Meta(ge=0)] = 0.5
        max_delay: Annotated[float, msgspec.Meta(ge=0)] = 30.0
        jitter: bool = True
        honour_retry_after: bool = True
        codes: list[RetryCode] = msgspec.field(
            default_factory=lambda: ["RATE_LIMITED", "OVERLOADED", "SERVER", "TIMEOUT", "NETWORK"]
        )

    def __init__(self, config: Config | None = None, *, sleep: Sleep | None = None) -> None:
        self.config = config if config is not None else self.Config()
        self._sleep: Sleep = sleep if sleep is not None else anyio.sleep
        self._codes = frozenset(self.config.codes)

    # ------------------------------------------------------------------ tenacity wiring

    def _retrying(self, abort: AbortSignal | None) -> tenacity.AsyncRetrying:
        cfg = self.config
        backoff: tenacity.wait.wait_base
        if cfg.jitter:
            backoff = tenacity.wait_random_exponential(multiplier=cfg.initial_delay, max=cfg.max_delay)
        else:
            backoff = tenacity.wait_exponential(multiplier=cfg.initial_delay, max=cfg.max_delay)
        stop: tenacity.stop.stop_base = tenacity.stop_after_attempt(cfg.max_attempts)
        if cfg.max_elapsed is not None:
            stop = stop | tenacity.stop_before_delay(cfg.max_elapsed)

        async def sleep(seconds: float) -> None:
            if await race(abort, lambda: self._sleep(seconds)) is ABORTED:
                assert abort is not None  # race only reports ABORTED for a signal
                raise _WaitAborted(abort.reason)

        return tenacity.AsyncRetrying(
            stop=stop,
            wait=_Wait(backoff, cfg.honour_retry_after),
            retry=tenacity.retry_if_exception_type(_RetryableFailure),
            sleep=sleep,
            before_sleep=_log_retry,
            reraise=True,
        )

    # ------------------------------------------------------------------ one attempt

    def _retryable_finish(self, chunk: Finish) -> bool:
        failure = chunk.reason.failure
        return chunk.reason.kind == "error" and failure is not None and failure.code in self._codes

    async def _attempt(
        self, options: GenerateOptions, call_next: CallNext
    ) -> tuple[AsyncIterator[StreamChunk], list[StreamChunk]]:
        """Run one attempt until it is decided; return its open stream and the chunks held.

        Raises :class:`_RetryableFailure` (the attempt's stream closed) when it failed retryably.
        """
        stream = call_next(options)
        held: list[StreamChunk] = []
        committed = False
        try:
            async for chunk in stream:
                if isinstance(chunk, Finish) and self._retryable_finish(chunk):
                    raise _RetryableFailure(held, chunk, None)
                held.append(chunk)
                if is_content(chunk):
                    break
            committed = True
            return stream, held
        except LlmError as exc:
            if exc.code in self._codes:
                raise _RetryableFailure(held, None, exc) from exc
            raise
        finally:
            if not committed:
                await aclose(stream)

    # ------------------------------------------------------------------ the hook

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        """Retry ``call_next(options)`` on retryable failures until it commits (see module doc)."""
        stream: AsyncIterator[StreamChunk] | None = None
        held: list[StreamChunk] = []
        last_error: LlmError | None = None
        try:
            try:
                async for attempt in self._retrying(options.abort):
                    with attempt:
                        stream, held = await self._attempt(options, call_next)
            except _RetryableFailure as gave_up:
                last_error = gave_up.error
                if gave_up.finish is not None:
                    held = [*gave_up.held, gave_up.finish]
            except _WaitAborted as aborted:
                held = [error_finish(Failure(code="ABORTED", message=aborted.reason))]
            if last_error is not None:
                raise last_error  # giving up: the last attempt's own error, not tenacity's wrapper
            for chunk in held:
                yield chunk
            if stream is not None:
                async for chunk in stream:
                    yield chunk
        finally:
            if stream is not None:
                await aclose(stream)

    @hookimpl
    async def llm_embed(self, options: EmbedOptions, call_next: EmbedCallNext) -> Embeddings:
        """Retry ``call_next(options)`` while it raises an :class:`LlmError` with a code in
        ``codes``, waiting as for streams (see module doc); raises the last attempt's error."""

        async def attempt() -> Embeddings:
            try:
                return await call_next(options)
            except LlmError as exc:
                if exc.code in self._codes:
                    raise _RetryableFailure([], None, exc) from exc
                raise

        try:
            return await self._retrying(None)(attempt)
        except _RetryableFailure as gave_up:
            # the last attempt's own error (set above), not the wrapper
            raise cast(LlmError, gave_up.error) from None


def _log_retry(retry_state: tenacity.RetryCallState) -> None:
    outcome = retry_state.outcome
    exc = outcome.exception() if outcome is not None else None
    code = exc.code if isinstance(exc, _RetryableFailure) else "?"
    logger.warning(
        "retrying after %s (attempt %d failed), waiting %.3fs",
        code,
        retry_state.attempt_number,
        retry_state.upcoming_sleep,
    )
