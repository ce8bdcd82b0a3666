"""Testing kit for harness adapters, middleware and applications.

Importable by anyone (no pytest import): the pytest plugin ``pytest-harness`` only wraps these.

- :class:`ScriptedServer` / :class:`Reply` / :class:`RecordedRequest`: a scripted HTTP/1.1
  provider on 127.0.0.1 (each read its own chunked-transfer chunk; stalls, abrupt closes, resets).
- :func:`every_split`, :func:`split_at`, :func:`split_every`, :func:`one_byte_reads`: ways to cut
  a body into reads.
- :func:`check_stream`, :class:`StreamChecker`, :class:`CheckedStream`, :class:`StreamViolation`:
  the docs/stream-obligations.md stream obligations, checked chunk by chunk.
- :class:`FakeAdapter` with :class:`Delay`, :class:`Stall`, :class:`Raise`, and the
  :func:`text_reply` / :func:`tool_call_reply` script builders.
- :func:`load_cases`, :func:`check_case`, :class:`Case`, :class:`CaseMismatch`: the shared
  real-world fault cases and their expectations.
- :class:`AdapterConformance`, :class:`Recording`, :func:`load_recordings`,
  :class:`ConformanceFailure`: the adapter conformance suite (loaded on first use: it imports
  httpx).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness_core._lazy import lazy_exports
from harness_core.testing.cases import Case, CaseMismatch, cases_dir, check_case, load_cases, sequence_tokens
from harness_core.testing.check import CheckedStream, StreamChecker, StreamViolation, check_stream
from harness_core.testing.fake import Delay, FakeAdapter, Raise, Script, Stall, Step, text_reply, tool_call_reply
from harness_core.testing.server import RecordedRequest, Reply, Responder, ScriptedServer
from harness_core.testing.splits import every_split, one_byte_reads, split_at, split_every

if TYPE_CHECKING:  # pragma: no cover - typing only; the suite loads on first use
    from harness_core.testing.conformance import AdapterConformance, ConformanceFailure, Recording, load_recordings

__all__ = [
    "AdapterConformance",
    "Case",
    "CaseMismatch",
    "CheckedStream",
    "ConformanceFailure",
    "Delay",
    "FakeAdapter",
    "Raise",
    "RecordedRequest",
    "Recording",
    "Reply",
    "Responder",
    "Script",
    "ScriptedServer",
    "Stall",
    "Step",
    "StreamChecker",
    "StreamViolation",
    "cases_dir",
    "check_case",
    "check_stream",
    "every_split",
    "load_cases",
    "load_recordings",
    "one_byte_reads",
    "sequence_tokens",
    "split_at",
    "split_every",
    "text_reply",
    "tool_call_reply",
]

_CONFORMANCE = "harness_core.testing.conformance"
__getattr__ = lazy_exports(
    __name__,
    dict.fromkeys(("AdapterConformance", "ConformanceFailure", "Recording", "load_recordings"), _CONFORMANCE),
)
