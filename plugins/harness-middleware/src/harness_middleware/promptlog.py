"""``prompt-log``: every request and response in SQLite, like ``llm logs`` (``harness logs``).

One row per stream, written when it ends however it ends: the request (system prompt, messages,
tools and sampling options as JSON), the response (the assembled assistant message: text,
reasoning, tool calls, ``replay_state``), token usage, cost (USD, :mod:`~harness_middleware.pricing`),
finish reason and failure, the requested and the served route and model, the ``fallback``
attempts, whether a ``cache`` hit served it, total duration and time to the first chunk (ms).
Rows of one conversation share a ``conversation_id`` so a later run can continue it
(:meth:`PromptLog.conversation`): the CLI passes the id in ``options.metadata`` under
:data:`CONVERSATION_KEY`.

The CLI enables this middleware by default (outermost, unless plugins.yaml lists ``prompt-log``
or disables it with ``~prompt-log:``, or ``--no-log`` is given); library users enable it by
listing it in plugins.yaml. Secrets are masked before anything is stored: the api-key patterns
of :mod:`~harness_middleware.redact` always, and the config's own secrets, which the harness
hands over when it starts (the ``use_redactor`` hook). Masking applies to every string,
including the requested and served route and model, error messages and ``replay_state``: a
continued conversation may then be refused by the provider, which is preferred over a stored
key. Binary input (the bytes of a ``FileBlock``, any ``bytes`` value in ``provider_options``) is
stored as its SHA-256 digest (``"sha256:<hex>"``), never the bytes; a
continued conversation sends a short text in place of such a file (:func:`_without_lost_files`;
for a file a tool returned, a line added to the tool result's text).
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import msgspec
import platformdirs

from harness_core import StreamEnd, StreamRecord, observe, open_record
from harness_core.middleware import (
    BlockAssembler,
    CallNext,
    GenerateOptions,
    Message,
    SecretMasking,
    StreamChunk,
    WriteFailureLog,
    hookimpl,
)
from harness_middleware import _sqlite
from harness_middleware._stream import aclose
from harness_middleware.pricing import PricingConfig
from harness_middleware.redact import PRESET_GROUPS, PRESETS, Masker

__all__ = ["CONVERSATION_KEY", "Continuation", "LogEntry", "PromptLog", "PromptLogPlugin", "default_log_path"]

logger = logging.getLogger(__name__)

CONVERSATION_KEY = "harness.conversation_id"
"""``options.metadata`` key naming the conversation a request continues (a log id string)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS log (
    id TEXT PRIMARY KEY,            -- hex uuid4 of the row
    conversation_id TEXT NOT NULL,  -- shared by the turns of one conversation
    ts REAL NOT NULL,               -- unix seconds (UTC) the stream started
    requested_route TEXT,
    requested_model TEXT,
    route TEXT,                     -- the route and model that served it (after fallback)
    model TEXT,
    system TEXT,
    prompt TEXT,                    -- the text of the last user message (searchable)
    request TEXT NOT NULL,          -- JSON: the options without abort/metadata, masked
    response TEXT,                  -- the text of the reply
    message TEXT,                   -- JSON: the assembled assistant message, masked
    input_tokens INTEGER,
    output_tokens INTEGER,
    cache_read_tokens INTEGER,
    cache_write_tokens INTEGER,
    reasoning_tokens INTEGER,
    cost REAL,                      -- USD; NULL when unknown
    price_source TEXT,
    finish_reason TEXT,             -- finish.kind; NULL when the stream had no finish
    error_code TEXT,
    error_message TEXT,
    attempts TEXT,                  -- JSON list of fallback attempts, NULL without fallback
    cached INTEGER NOT NULL DEFAULT 0,
    duration_ms REAL NOT NULL,
    first_chunk_ms REAL
);
CREATE INDEX IF NOT EXISTS log_ts ON log (ts);
CREATE INDEX IF NOT EXISTS log_conversation ON log (conversation_id, ts);
"""


def default_log_path() -> Path:
    """The log used when the config names none: ``<user data dir>/harness/logs.sqlite``."""
    return platformdirs.user_data_path("harness") / "logs.sqlite"


class LogEntry(msgspec.Struct, kw_only=True, frozen=True):
    """One row of the log (see the schema in the module source). Times: ``ts`` unix seconds,
    ``duration_ms`` / ``first_chunk_ms`` milliseconds; ``cost`` USD; JSON columns decoded."""

    id: str
    conversation_id: str
    ts: float
    requested_route: str | None
    requested_model: str | None
    route: str | None
    model: str | None
    system: str | None
    prompt: str | None
    request: dict[str, Any]
    response: str | None
    message: dict[str, Any] | None
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    reasoning_tokens: int | None
    cost: float | None
    price_source: str | None
    finish_reason: str | None
    error_code: str | None
    error_message: str | None
    attempts: list[dict[str, Any]] | None
    cached: bool
    duration_ms: float
    first_chunk_ms: float | None


class Continuation(msgspec.Struct, kw_only=True, frozen=True):
    """The last turn of a logged conversation: its ``options``, the ``history`` to send before a
    new prompt, and the ``conversation_id`` the new turn joins."""

    options: GenerateOptions
    history: list[Message]
    conversation_id: str


_FIELDS = tuple(LogEntry.__struct_fields__)
_JSON_FIELDS = frozenset({"request", "message", "attempts"})


class PromptLog:
    """The SQLite prompt log at ``path``. Methods block: call them from a worker thread.

    Raises :class:`sqlite3.Error` on database faults (every method); reading another SQLite
    database raises its subclass :class:`~harness_middleware._sqlite.NotThisDatabase`.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def insert(self, entry: LogEntry) -> None:
        """Append ``entry``."""
        values = [
            msgspec.json.encode(value).decode() if name in _JSON_FIELDS and value is not None else value
            for name, value in ((name, getattr(entry, name)) for name in _FIELDS)
        ]
        sql = f"INSERT INTO log ({', '.join(_FIELDS)}) VALUES ({', '.join('?' for _ in _FIELDS)})"
        _sqlite.run(self.path, _SCHEMA, lambda conn: conn.execute(sql, values))

    def entries(
        self,
        *,
        limit: int | None = 3,
        query: str | None = None,
        since: float | None = None,
        conversation_id: str | None = None,
    ) -> list[LogEntry]:
        """The newest ``limit`` rows (all when ``None``), returned oldest first; ``[]`` when the
        file does not exist. The database is opened read-only: reading never creates or changes it.

        ``query`` keeps rows whose prompt, system prompt or response contains it (case-insensitive
        for ASCII, SQL ``LIKE``); ``since`` (unix seconds) and ``conversation_id`` filter further.
        """
        where: list[str] = ["ts >= ?"]
        params: list[object] = [since if since is not None else float("-inf")]
        if query:
            escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            where.append("(prompt LIKE ? ESCAPE '\\' OR response LIKE ? ESCAPE '\\' OR system LIKE ? ESCAPE '\\')")
            params += [f"%{escaped}%"] * 3
        if conversation_id is not None:
            where.append("conversation_id = ?")
            params.append(conversation_id)
        sql = f"SELECT {', '.join(_FIELDS)} FROM log WHERE {' AND '.join(where)} ORDER BY ts DESC, rowid DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"

        def read(conn: sqlite3.Connection) -> list[LogEntry]:
            rows = conn.execute(sql, params).fetchall()
            return [_entry(row) for row in reversed(rows)]

        if not self.path.exists():  # nothing logged yet: reading creates nothing
            return []
        return _sqlite.read(self.path, "log", "prompt log", read)

    def continuation(self, conversation_id: str | None = None) -> Continuation | None:
        """What continuing ``conversation_id`` (the newest conversation when ``None``) needs: the
        options of its last turn and the history (that turn's messages plus its reply, with
        ``replay_state``, ``route``, ``source`` and ``model``); ``None`` when the log has no such
        conversation. A last turn that produced no reply contributes its messages only."""
        turns = self.entries(limit=1, conversation_id=conversation_id) if conversation_id else self.entries(limit=1)
        if not turns:
            return None
        last = turns[0]
        options = msgspec.convert(_without_lost_files(last.request), GenerateOptions)
        history = list(options.messages)
        if last.message is not None and last.message.get("content"):
            history.append(msgspec.convert(last.message, Message))
        return Continuation(options=options, history=history, conversation_id=last.conversation_id)


def _without_lost_files(request: dict[str, Any]) -> dict[str, Any]:
    """``request`` with each file block whose bytes were replaced by their digest turned into a
    text block naming it (the log never keeps the bytes, so the file cannot be sent again)."""

    def lost(item: dict[str, Any]) -> bool:
        data = item.get("data")
        return isinstance(data, str) and data.startswith("sha256:")

    def note(item: dict[str, Any]) -> str:
        name = f" {item['filename']}" if item.get("filename") else ""
        return f"[file{name} ({item.get('media_type')}, {item['data']}) was attached; the prompt log keeps no bytes]"

    def block(item: dict[str, Any]) -> dict[str, Any]:
        if item.get("type") == "file" and lost(item):
            return {"type": "text", "text": note(item)}
        files = item.get("files")
        if item.get("type") == "tool-result" and files and any(lost(f) for f in files):
            # a tool result's files: the text says which were returned, those with a URL stay
            texts = [item["content"]] if item["content"] else []
            content = "\n\n".join(texts + [note(f) for f in files if lost(f)])
            return {**item, "content": content, "files": [f for f in files if not lost(f)]}
        return item

    messages = [{**message, "content": [block(item) for item in message["content"]]} for message in request["messages"]]
    return {**request, "messages": messages}


def _entry(row: tuple[Any, ...]) -> LogEntry:
    data = {
        name: msgspec.json.decode(value) if name in _JSON_FIELDS and value is not None else value
        for name, value in zip(_FIELDS, row, strict=True)
    }
    data["cached"] = bool(data["cached"])
    request = data["request"]
    if "provider" in request:  # a row logged before GenerateOptions.provider became .route
        request["route"] = request.pop("provider")
    return msgspec.convert(data, LogEntry)


class PromptLogPlugin(SecretMasking):
    """Middleware writing every stream to the prompt log (see module doc).

    Args:
        config: the validated :class:`PromptLogPlugin.Config`.
        redact: masks the config's secrets in text; the harness hands over its own when it
            starts (``use_redactor``).
    """

    class Config(PricingConfig, forbid_unknown_fields=True, kw_only=True):
        """``prompt-log:`` in plugins.yaml: the pricing fields of
        :class:`~harness_middleware.pricing.PricingConfig`, and

        Fields:
            path: the SQLite file; default ``<user data dir>/harness/logs.sqlite``.
            write_timeout: seconds a log write may take before it is given up (logged).
        """

        path: str | None = None
        write_timeout: Annotated[float, msgspec.Meta(gt=0)] = 5.0

        def __post_init__(self) -> None:
            """Check that ``path`` can be written, so ``config check`` reports it (``ValueError``)."""
            if self.path is not None:
                _sqlite.check_database_path(Path(self.path).expanduser(), "prompt-log")

    def __init__(self, config: Config | None = None, *, redact: Callable[[str], str] | None = None) -> None:
        self.config = config if config is not None else self.Config()
        path = Path(self.config.path).expanduser() if self.config.path is not None else default_log_path()
        self.log = PromptLog(_sqlite.check_database_path(path, "prompt-log"))
        self._failures = WriteFailureLog(logger, f"prompt-log: recording the stream in {path}")
        self.prices = self.config.price_book()
        patterns = {name: PRESETS[name] for name in PRESET_GROUPS["api-keys"]}
        # lazy: the api-key presets are plain ``re`` syntax, and a record without their literals
        # (``sk-``, ``AKIA`` …) is masked without importing ``regex`` (~11 ms of a one-shot run)
        self._masker = Masker(patterns, "[REDACTED:{name}]", 256, lazy=True)
        self._redact = redact

    def continuation(self, conversation_id: str | None) -> Continuation | None:
        """The last turn of ``conversation_id`` (newest when ``None``); see :meth:`PromptLog.continuation`.

        Raises :class:`sqlite3.Error` on database faults."""
        if not self.log.path.exists():
            return None
        return self.log.continuation(conversation_id)

    def _mask(self, value: Any) -> Any:
        """``value`` (builtins) with every string masked and ``bytes`` replaced by their digest."""
        if isinstance(value, str):
            return self.redact(self._masker.mask(value))
        if isinstance(value, bytes):
            return f"sha256:{hashlib.sha256(value).hexdigest()}"
        if isinstance(value, dict):
            return {self._mask(key): self._mask(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self._mask(item) for item in value]
        return value

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        """Pass the stream on unchanged and log it when it ends, however it ends."""
        ts = time.time()
        assembler = BlockAssembler()
        options, record = open_record(options)

        async def on_end(end: StreamEnd) -> None:
            duration = end.ended - end.started
            first_ms = (end.first_chunk - end.started) * 1000 if end.first_chunk is not None else None

            def write() -> None:  # in a worker thread: pricing may load the price table
                self.log.insert(self._entry(options, assembler, record, ts, duration * 1000, first_ms))

            await _sqlite.record(write, bound=self.config.write_timeout, failures=self._failures)

        stream = observe(call_next(options), on_end, assembler.feed)
        try:
            async for chunk in stream:
                yield chunk
        finally:
            await aclose(stream)

    def _entry(
        self,
        options: GenerateOptions,
        assembler: BlockAssembler,
        record: StreamRecord,
        ts: float,
        duration_ms: float,
        first_chunk_ms: float | None,
    ) -> LogEntry:
        """The row of one stream: ``options`` as the caller sent them, what ``assembler`` saw."""
        route, model = record.served()
        usage = assembler.usage
        finish = assembler.finish
        cost = None
        if not record.cached:
            cost = self.prices.cost(route, model, usage, at=datetime.fromtimestamp(ts, tz=UTC))
        failure = finish.failure if finish is not None else None
        message = assembler.message(route=route, model=model)
        stripped = msgspec.structs.replace(options, abort=None, metadata={})
        request = msgspec.to_builtins(stripped, builtin_types=(bytes,))  # bytes stay bytes: stored by digest
        users = [m for m in options.messages if m.role == "user"]
        conversation = options.metadata.get(CONVERSATION_KEY)
        mask = self._mask
        return LogEntry(
            id=uuid.uuid4().hex,
            conversation_id=conversation if isinstance(conversation, str) else uuid.uuid4().hex,
            ts=ts,
            requested_route=mask(options.route) if options.route is not None else None,
            requested_model=mask(options.model) if options.model is not None else None,
            route=mask(route) if route is not None else None,
            model=mask(model) if model is not None else None,
            system=mask(options.system) if options.system is not None else None,
            prompt=mask(users[-1].text) if users else None,
            request=mask(request),
            response=mask(message.text),
            message=mask(msgspec.to_builtins(message)),
            input_tokens=usage.input_tokens if usage else None,
            output_tokens=usage.output_tokens if usage else None,
            cache_read_tokens=usage.cache_read_tokens if usage else None,
            cache_write_tokens=usage.cache_write_tokens if usage else None,
            reasoning_tokens=usage.reasoning_tokens if usage else None,
            cost=0.0 if record.cached else float(cost.total) if cost is not None else None,
            price_source="cache" if record.cached else cost.source if cost is not None else None,
            finish_reason=finish.kind if finish is not None else None,
            error_code=failure.code if failure is not None else None,
            error_message=mask(failure.message) if failure is not None else None,
            attempts=mask(msgspec.to_builtins(record.attempts)) if record.attempts else None,
            cached=record.cached,
            duration_ms=duration_ms,
            first_chunk_ms=first_chunk_ms,
        )
