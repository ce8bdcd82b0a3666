"""harness-trace: a middleware that wraps every stream and writes one JSON line per chunk.

Entry point ``trace``. Each line (JSON Lines, https://jsonlines.org) is::

    {"stream": "3f2a…", "route": "mock", "model": "echo", "t_ms": 12.5, "chunk": {"type": "text-delta", …}}

``stream`` tells concurrent streams apart, ``t_ms`` is the time since the stream started in
milliseconds, ``chunk`` the chunk as JSON with its content (``text``, ``arguments_delta``,
``arguments``) replaced by its length unless ``include_content: true``. When the request carries
files (``FileBlock``), every line also has ``"files": [{"media_type", "size", "digest"} | {"media_type",
"url"}, …]``: the SHA-256 digest and size, computed once per stream, never the bytes (also with
``include_content``), and URLs without their query (signed URLs carry credentials there).

The trace is written as it goes: each stream holds at most ``flush_every`` encoded lines and
appends them to ``path`` (from a worker thread, so the event loop never blocks on the file) when
that many have accumulated and when the stream ends (also on error, ``break`` or cancellation).
Secrets never reach the file: the harness hands its secret masker over when it starts (the
``use_redactor`` hook), and every string of a line (route, model, file URLs, failure messages,
tool-call ids and names, and the content with ``include_content``) is masked before the line is
encoded. A text or reasoning delta without ``include_content`` holds no string but its type.

Every embedding call (``llm_embed``, docs/embeddings.md) is one line written when the call
returns or fails::

    {"stream": "9c1e…", "route": "mock", "model": "hash", "t_ms": 3.1,
     "embed": {"inputs": [11, 4], "dimensions": 8, "vectors": 2, "model": "hash", "usage": {"input_tokens": 3}}}

``inputs`` holds each input's length (the texts themselves with ``include_content``, masked);
``dimensions`` the requested dimensions (``null``: the model's), ``vectors``/``model``/``usage``
what came back (the vectors themselves are never written); a failed call has
``"error": {"code": "SERVER", "message": "…"}`` instead (``code`` the exception's class name for
an error that is no ``LlmError``, ``"cancelled"`` when the call was cancelled).

Memory stays bounded however long the stream, and a process that is killed keeps every line but
at most the last ``flush_every - 1`` of each open stream (``flush_every: 1`` writes each chunk's
line before the chunk is passed on). A ``path`` that cannot be written is refused when the config is
validated; a write that fails later is logged once (:class:`harness_core.WriteFailureLog`), never
raised into the stream.

Config::

    trace:
      path: harness-trace.jsonl   # relative to the current directory; parent folders are created
      include_content: false      # true writes prompts and replies into the file
      flush_every: 256            # lines held per stream before they are appended (1 = every chunk)
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, Final

import anyio
import msgspec

from harness_core.middleware import (
    CallNext,
    EmbedCallNext,
    Embeddings,
    EmbedOptions,
    FileBlock,
    GenerateOptions,
    LlmError,
    ReasoningDelta,
    SecretMasking,
    StreamChunk,
    TextDelta,
    WriteFailureLog,
    check_output_file,
    hookimpl,
    private_file,
    write_in_thread,
)

__all__ = ["TraceConfig", "TracePlugin"]

__version__ = "0.1.0"
"""The distribution's version (the single source: ``pyproject.toml`` reads it)."""

logger = logging.getLogger(__name__)

_CONTENT: Final = frozenset({"text", "arguments_delta", "arguments"})
_WRITE_TIMEOUT: Final = 5.0  # seconds the stream's end waits for its lines to be written


class TraceConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Where to write, and whether to keep the text itself."""

    path: str = "harness-trace.jsonl"
    include_content: bool = False
    flush_every: Annotated[int, msgspec.Meta(ge=1)] = 256  # each append is a worker-thread round trip

    def __post_init__(self) -> None:
        """Check that ``path`` can be written, so ``config check`` reports it (``ValueError``)."""
        check_output_file(Path(self.path).expanduser(), "trace path", example="harness-trace.jsonl")


class TracePlugin(SecretMasking):
    """The ``trace`` middleware (see the module docstring)."""

    Config = TraceConfig

    def __init__(self, config: TraceConfig) -> None:
        self.config = config
        self._lock = threading.Lock()  # one writer at a time: lines of two streams never interleave
        self._failures = WriteFailureLog(logger, f"trace: appending to {config.path}")

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        """Pass every chunk through unchanged, recording it; append the records every
        ``flush_every`` chunks and at the end."""
        started = time.perf_counter()
        head: dict[str, Any] = {"stream": uuid.uuid4().hex[:12], "route": options.route, "model": options.model}
        files = [_file_record(block) for message in options.messages for block in message.files]
        if files:
            head["files"] = files
        head = self.mask_data(head)
        lines: list[bytes] = []
        flush_every = self.config.flush_every
        content = self.config.include_content
        try:
            async for chunk in call_next(options):
                data: Any = msgspec.to_builtins(chunk)
                if not content:
                    data = _lengths(data)
                if content or (type(chunk) is not TextDelta and type(chunk) is not ReasoningDelta):
                    data = self.mask_data(data)  # a delta without its text holds no string but its type
                record = {**head, "t_ms": round((time.perf_counter() - started) * 1000, 3), "chunk": data}
                lines.append(msgspec.json.encode(record) + b"\n")
                if len(lines) >= flush_every:
                    await self._flush(lines)
                    lines = []
                yield chunk
        finally:
            await self._flush(lines)

    @hookimpl
    async def llm_embed(self, options: EmbedOptions, call_next: EmbedCallNext) -> Embeddings:
        """Return ``await call_next(options)`` unchanged and append one line for the call (see
        the module docstring), also when it fails or is cancelled."""
        started = time.perf_counter()
        inputs: list[str] | list[int] = (
            list(options.inputs) if self.config.include_content else [len(text) for text in options.inputs]
        )
        call: dict[str, Any] = {"inputs": inputs, "dimensions": options.dimensions}
        try:
            result = await call_next(options)
        except BaseException as exc:
            if isinstance(exc, LlmError):
                call["error"] = {"code": exc.code, "message": exc.message}
            elif isinstance(exc, anyio.get_cancelled_exc_class()):
                call["error"] = {"code": "cancelled"}
            else:
                call["error"] = {"code": type(exc).__qualname__, "message": str(exc)}
            raise
        else:
            usage = msgspec.to_builtins(result.usage) if result.usage is not None else None
            call.update(vectors=len(result), model=result.model, usage=usage)
            return result
        finally:
            record = {
                "stream": uuid.uuid4().hex[:12],
                "route": options.route,
                "model": options.model,
                "t_ms": round((time.perf_counter() - started) * 1000, 3),
                "embed": call,
            }
            await self._flush([msgspec.json.encode(self.mask_data(record)) + b"\n"])

    async def _flush(self, lines: list[bytes]) -> None:
        """Append ``lines`` from a worker thread, shielded from cancellation and bounded by
        ``_WRITE_TIMEOUT`` seconds (a write that outlasts it is abandoned with its lines). A write
        that fails (:class:`OSError`: the folder was removed, the disk is full) is logged once,
        never raised into the caller's stream."""
        if lines:
            append = functools.partial(self._append, lines)
            await write_in_thread(append, bound=_WRITE_TIMEOUT, failures=self._failures)

    def _append(self, lines: list[bytes]) -> None:
        path = private_file(Path(self.config.path).expanduser())  # prompts and replies: the user's only
        with self._lock, path.open("ab") as file:
            file.write(b"".join(lines))


def _file_record(block: FileBlock) -> dict[str, Any]:
    """What the trace keeps of a file: media type and digest + size, or its URL."""
    if block.url is not None:
        return {"media_type": block.media_type, "url": block.display_url}
    return {"media_type": block.media_type, "size": block.size, "digest": block.digest}


def _lengths(data: Any) -> Any:
    """``data`` with every content string replaced by its length (recursively)."""
    if isinstance(data, dict):
        return {k: len(v) if k in _CONTENT and isinstance(v, str) else _lengths(v) for k, v in data.items()}
    return data
