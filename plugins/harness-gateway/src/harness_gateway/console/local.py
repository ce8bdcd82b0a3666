"""``harness console``: the console over this machine's usage ledger and prompt log (no gateway).

For people who use ``harness run`` / ``harness chat`` without a gateway: Spend and Traffic read
the usage ledger of the ``usage`` middleware (every stream, with tokens by kind, cost, latency
and time to first chunk), the request list and inspector read the prompt log of the
``prompt-log`` middleware (messages and reply, tool calls, usage, finish, fallback attempts; the
log keeps no per-chunk timeline, so the inspector shows the finish only). There is no Live page
(streams run in other processes) and no Keys page (keys are the gateway's).

Access: a token made at start-up (or ``HARNESS_CONSOLE_TOKEN``) is the sign-in secret; it is
printed once on the terminal that started the console, like a new key. The server listens on
loopback unless told otherwise.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Final

import anyio
import msgspec
from starlette.applications import Starlette

from harness_core import GenerateOptions, Message, ReasoningBlock, TextBlock, ToolCallBlock
from harness_gateway.console.pages import Console
from harness_gateway.console.timeline import Timeline
from harness_middleware.promptlog import LogEntry, PromptLog
from harness_middleware.usage import UsageLedger

__all__ = ["LOG_WINDOW", "LocalRecords", "local_app"]

LOG_WINDOW: Final = 1000
"""How many of the newest prompt-log entries the request list and inspector read."""


class LocalRecords:
    """:class:`~harness_gateway.console.records.Records` over a usage ledger and a prompt log
    (SQLite files; missing files read as empty). Raises :class:`sqlite3.Error` on database faults."""

    keep = LOG_WINDOW

    def __init__(self, usage: Path, log: Path) -> None:
        self.usage = usage
        self.log = log

    async def since(self, since: float) -> list[dict[str, Any]]:
        """Usage-ledger rows of streams started at ``since`` or later, oldest first."""
        if not self.usage.exists():
            return []
        rows = await anyio.to_thread.run_sync(UsageLedger(self.usage).rows)
        return [_ledger_row(i, row) for i, row in enumerate(rows) if row["ts"] >= since]

    async def _entries(self) -> list[LogEntry]:
        if not self.log.exists():
            return []
        entries: list[LogEntry] = await anyio.to_thread.run_sync(lambda: PromptLog(self.log).entries(limit=LOG_WINDOW))
        return entries

    async def recent(self, limit: int, **match: str) -> list[dict[str, Any]]:
        """The newest ``limit`` prompt-log entries whose row fields equal ``match``, newest first."""
        rows = [_log_row(entry) for entry in reversed(await self._entries())]
        return [row for row in rows if all(row[name] == value for name, value in match.items())][:limit]

    async def get(self, ticket: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The prompt-log entry ``ticket`` (among the newest :data:`LOG_WINDOW`) and its detail."""
        for entry in await self._entries():
            if entry.id == ticket:
                return _log_row(entry), _log_detail(entry)
        return None


def _row(**values: Any) -> dict[str, Any]:
    return {"key_id": None, "key_name": None, "dialect": "cli", "attempts": [], "error_message": None, **values}


def _ledger_row(index: int, row: dict[str, Any]) -> dict[str, Any]:
    """A usage-ledger row as a console record: asked for the requested route and model (the served
    ones in rows of older ledgers, which did not record them), served by the ledger's ``route``/``model``."""
    route, model = row["route"] or "-", row["model"] or "-"
    return _row(
        id=f"usage-{index}", request_id=f"usage-{index}", route=row["requested_route"] or route,
        model=row["requested_model"] or model, served_route=route, served_model=model, started_at=row["ts"],
        status=row["status"], first_token_ms=row["first_chunk_ms"], latency_ms=row["latency_ms"],
        input_tokens=row["input_tokens"], output_tokens=row["output_tokens"],
        cache_read_tokens=row["cache_read_tokens"], cache_write_tokens=row["cache_write_tokens"],
        reasoning_tokens=row["reasoning_tokens"], cost=row["cost"] or 0.0, error_code=row["error_code"],
    )  # fmt: skip


def _log_row(entry: LogEntry) -> dict[str, Any]:
    status = entry.finish_reason if entry.finish_reason in ("error", "aborted") else "complete"
    attempts = [f"{a.get('route')}/{a.get('model')}: {(a.get('failure') or {}).get('code', 'skipped')}"
                for a in entry.attempts or [] if a.get("failure") or a.get("skipped")]  # fmt: skip
    return _row(
        id=entry.id, request_id=entry.id, route=entry.requested_route or "-", model=entry.requested_model or "-",
        served_route=entry.route or "-", served_model=entry.model or "-", started_at=entry.ts, status=status,
        first_token_ms=entry.first_chunk_ms, latency_ms=entry.duration_ms, input_tokens=entry.input_tokens,
        output_tokens=entry.output_tokens, cache_read_tokens=entry.cache_read_tokens,
        cache_write_tokens=entry.cache_write_tokens, reasoning_tokens=entry.reasoning_tokens,
        cost=entry.cost or 0.0, error_code=entry.error_code, error_message=entry.error_message, attempts=attempts,
    )  # fmt: skip


def _log_detail(entry: LogEntry) -> dict[str, Any]:
    """The inspector's detail of a log entry (already masked when it was logged)."""
    timeline = Timeline()
    if entry.message is not None:
        reply = msgspec.convert(entry.message, Message)
        timeline.reply = [b for b in reply.content if isinstance(b, TextBlock | ReasoningBlock | ToolCallBlock)]
        timeline.tool_calls = reply.tool_calls
    try:
        options = msgspec.convert(entry.request, GenerateOptions)
    except msgspec.ValidationError:  # a file logged by its digest does not decode as bytes
        options = GenerateOptions(messages=[Message.user(msgspec.json.encode(entry.request).decode())])
    detail = timeline.detail(options, str)
    detail["first_chunk_ms"] = entry.first_chunk_ms
    finish: dict[str, Any] = {"t": entry.duration_ms, "event": "finish", "kind": entry.finish_reason or "none"}
    if entry.error_code is not None:
        finish["error"] = {"code": entry.error_code, "message": entry.error_message, "status": None}
    detail["timeline"] = [finish]
    return detail


def local_app(usage: Path, log: Path, token: str) -> Starlette:
    """The ``harness console`` ASGI app: the console over ``usage`` and ``log``, signed in with ``token``."""
    console = Console(token, LocalRecords(usage, log))
    app = Starlette(routes=console.routes())
    app.state.started = time.time()
    return app
