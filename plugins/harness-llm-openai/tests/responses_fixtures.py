"""Builders of Responses API SSE bodies and a decoder + translator runner for the openai plugin's tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from openai_fixtures import run_translator

from harness_core.types import StreamChunk
from harness_llm_openai.responses_translate import ResponsesTranslator

RECORDED = Path(__file__).parent / "recorded-responses"
"""The Responses recordings (written by ``make_responses_recordings.py``)."""


def recorded(name: str) -> bytes:
    """The body of ``recorded-responses/<name>.sse``."""
    return (RECORDED / f"{name}.sse").read_bytes()


def event(kind: str, **fields: Any) -> dict[str, Any]:
    """One event object ``{"type": kind, **fields}``."""
    return {"type": kind, **fields}


def completed(usage: dict[str, Any] | None = None, status: str = "completed", **fields: Any) -> dict[str, Any]:
    """A terminal event (``response.<status>``) carrying ``usage``."""
    return event(f"response.{status}", response={"id": "resp_1", "status": status, "usage": usage, **fields})


def sse(*events: dict[str, Any] | str, event_lines: bool = True) -> bytes:
    """An SSE body: each dict as ``event: <type>`` + ``data: <json>``, each str as a raw ``data:``."""
    parts = []
    for item in events:
        if isinstance(item, str):
            parts.append(f"data: {item}\n\n")
            continue
        head = f"event: {item['type']}\n" if event_lines else ""
        parts.append(f"{head}data: {json.dumps(item, ensure_ascii=False)}\n\n")
    return "".join(parts).encode()


def translate(body: bytes, reads: list[bytes] | None = None, **kwargs: Any) -> list[StreamChunk]:
    """Run ``body`` (optionally cut into ``reads``) through the SSE decoder and a fresh
    :class:`ResponsesTranslator` (``model`` defaults to ``o4-mini``)."""
    kwargs.setdefault("model", "o4-mini")
    return run_translator(ResponsesTranslator(**kwargs), body, reads)
