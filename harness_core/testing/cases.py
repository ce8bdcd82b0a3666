"""Generic loader and expectation checker for the real-world fault cases (``shared/cases``).

Each case folder holds ``meta.json`` (provider format, status, headers, transport, ``expect``),
``case.md`` and a body file: ``stream.sse`` (a 200 streaming body) or ``response.http`` (a whole
raw HTTP/1.1 response). See ``cases/README.md`` for the format and the ``sequence`` grammar.

Typical adapter test::

    @pytest.mark.parametrize("case", load_cases("openai-chat"), ids=lambda c: c.name)
    async def test_case(case):
        with ScriptedServer(case.reply()) as server:
            chunks, raised = await run_my_adapter(server.url)
        check_case(case, chunks, raised)

The folder comes from ``HARNESS_CASES_DIR``, default ``../shared/cases`` from the current
directory (the repository's root ``conftest.py`` sets the variable for its own tests).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness_core.errors import Failure, LlmError
from harness_core.testing.check import StreamViolation, check_stream
from harness_core.testing.server import Reply
from harness_core.testing.splits import split_at, split_every
from harness_core.types import (
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)

__all__ = ["Case", "CaseMismatch", "cases_dir", "check_case", "load_cases", "sequence_tokens"]


class CaseMismatch(AssertionError):
    """A produced stream does not meet a case's expectations; lists every problem found."""

    def __init__(self, name: str, problems: list[str]) -> None:
        super().__init__(f"case {name}: " + "; ".join(problems))
        self.case = name
        self.problems = problems


def cases_dir() -> Path:
    """The cases folder: ``$HARNESS_CASES_DIR``, else ``../shared/cases`` from the current
    directory (the shared folder beside a repository checkout run from its root). Never a path
    derived from where this package is installed."""
    env = os.environ.get("HARNESS_CASES_DIR")
    if env:
        return Path(env)
    return Path.cwd().parent / "shared" / "cases"


@dataclass(frozen=True)
class Case:
    """One fault case.

    Fields:
        name: the folder name (``"01-split-json-across-reads"``).
        path: the folder.
        meta: the parsed ``meta.json``.
        body: the body file's bytes (for ``response.http`` the whole raw response).
    """

    name: str
    path: Path
    meta: dict[str, Any]
    body: bytes

    @property
    def provider_format(self) -> str:
        """``openai-chat``, ``anthropic-messages``, ``gemini`` …"""
        return str(self.meta["provider_format"])

    @property
    def http_status(self) -> int:
        """The response status."""
        return int(self.meta.get("http_status", 200))

    @property
    def headers(self) -> dict[str, str]:
        """The response headers from ``meta.json``."""
        return dict(self.meta.get("headers", {}))

    @property
    def expect(self) -> dict[str, Any]:
        """The ``expect`` block."""
        return dict(self.meta["expect"])

    @property
    def transport(self) -> dict[str, Any]:
        """The ``transport`` block (``read_boundaries`` / ``read_size``, ``end``)."""
        return dict(self.meta.get("transport", {}))

    @property
    def raw_response(self) -> bool:
        """Whether the body file is a whole raw HTTP response (status line included)."""
        return self.body.startswith(b"HTTP/")

    @property
    def end(self) -> str:
        """``clean-eof`` or ``abrupt``."""
        return str(self.transport.get("end", "clean-eof"))

    def reads(self) -> list[bytes]:
        """The body cut into the reads the transport block asks for (whole body by default)."""
        transport = self.transport
        if "read_boundaries" in transport:
            return split_at(self.body, transport["read_boundaries"])
        if "read_size" in transport:
            return split_every(self.body, int(transport["read_size"]))
        return [self.body] if self.body else []

    def reply(self, reads: Iterable[bytes] | None = None) -> Reply:
        """A :class:`ScriptedServer` reply serving this case (optionally with other ``reads``)."""
        if self.raw_response:
            return Reply(raw=self.body)
        return Reply(
            status=self.http_status,
            headers=self.headers,
            reads=list(self.reads() if reads is None else reads),
            end="abrupt" if self.end == "abrupt" else "eof",
        )

    def check(self, chunks: Iterable[StreamChunk], raised: BaseException | None = None, **kwargs: bool) -> None:
        """:func:`check_case` for this case."""
        check_case(self, chunks, raised, **kwargs)


def load_cases(provider_format: str | None = None, *, directory: Path | None = None) -> list[Case]:
    """Every case in ``directory`` (default :func:`cases_dir`), sorted by name, optionally only
    those of ``provider_format``.

    Raises:
        FileNotFoundError: the folder does not exist (a plain clone has no ``../shared/cases``);
            the message names the folder looked in and how to point ``HARNESS_CASES_DIR`` at it,
            so a test module that loads cases fails to collect with that reason instead of
            running zero cases.
    """
    root = directory or cases_dir()
    if not root.is_dir():
        raise FileNotFoundError(
            f"the fault cases folder {str(root)!r} does not exist: set HARNESS_CASES_DIR to the folder "
            "holding the case folders (shared/cases beside the repository, e.g. "
            "HARNESS_CASES_DIR=/path/to/shared/cases)"
        )
    cases = []
    for meta_path in sorted(root.glob("*/meta.json")):
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if provider_format is not None and meta.get("provider_format") != provider_format:
            continue
        body_file = meta.get("body_file", "stream.sse")
        body = (meta_path.parent / body_file).read_bytes()
        cases.append(Case(name=meta_path.parent.name, path=meta_path.parent, meta=meta, body=body))
    return cases


# ------------------------------------------------------------------------- sequence grammar


def sequence_tokens(chunks: Iterable[StreamChunk], raised: BaseException | None = None) -> list[str]:
    """The chunks as ``sequence`` grammar tokens: ``block-start:text``,
    ``block-start:tool-call#<id>``, ``text-delta``, ``block-end``, ``usage``, ``finish:<kind>``,
    and ``raise`` for a raised error."""
    chunks = list(chunks)
    ids = {c.index: c.block.id for c in chunks if isinstance(c, BlockEnd) and isinstance(c.block, ToolCallBlock)}
    tokens = []
    for chunk in chunks:
        if isinstance(chunk, BlockStart):
            call_id = chunk.id or ids.get(chunk.index)
            tokens.append(f"block-start:{chunk.block_type}" + (f"#{call_id}" if call_id else ""))
        elif isinstance(chunk, Finish):
            tokens.append(f"finish:{chunk.reason.kind}")
        else:
            tokens.append(str(type(chunk).__struct_config__.tag))
    if raised is not None:
        tokens.append("raise")
    return tokens


def _sequence_regex(sequence: list[str], *, through_runtime: bool) -> re.Pattern[str]:
    parts = []
    for element in sequence:
        alternatives = []
        for alternative in element.split("|"):
            token = alternative.strip()
            quantifier = token[-1] if token[-1] in "+*?" else ""
            base = token[: len(token) - len(quantifier)]
            if base == "block-start:tool-call":
                pattern = r"block-start:tool-call(?:#[^\n]*)?\n"
            elif base == "raise" and through_runtime:
                pattern = r"(?:raise|finish:error)\n"
            else:
                pattern = re.escape(base) + r"\n"
            alternatives.append(f"(?:{pattern}){quantifier}")
        parts.append("(?:" + "|".join(alternatives) + ")")
    return re.compile("".join(parts))


# ------------------------------------------------------------------------- checking


def check_case(
    case: Case | dict[str, Any],
    chunks: Iterable[StreamChunk],
    raised: BaseException | None = None,
    *,
    through_runtime: bool = False,
) -> None:
    """Check a produced stream against a case's ``expect`` block.

    ``chunks`` are what the stream yielded; ``raised`` the exception it ended with, if any.
    ``through_runtime=True`` accepts a raise delivered as ``finish{error}`` with the same code
    (docs/runtime.md). Also checks the stream obligations (:func:`check_stream`). Raises
    :class:`CaseMismatch` listing every problem. ``case`` may be a :class:`Case` or a bare
    ``expect`` mapping.
    """
    name = case.name if isinstance(case, Case) else "<expect>"
    expect = case.expect if isinstance(case, Case) else case
    chunks = list(chunks)
    problems: list[str] = []
    try:
        check_stream(chunks, raised)
    except StreamViolation as violation:
        problems.append(f"stream obligation broken: {violation}")
    finish = chunks[-1] if chunks and isinstance(chunks[-1], Finish) else None

    _check_outcome(expect, finish, raised, through_runtime, problems)
    _check_sequence(expect, chunks, raised, through_runtime, problems)
    _check_texts(expect, chunks, problems)
    _check_tool_calls(expect, chunks, problems)
    _check_usage(expect, chunks, problems)
    if "chunks_before_error" in expect:
        before = sum(1 for c in chunks if not isinstance(c, Finish))
        if before != expect["chunks_before_error"]:
            problems.append(f"{before} chunks before the error, expected {expect['chunks_before_error']}")
    if problems:
        raise CaseMismatch(name, problems)


def _check_outcome(
    expect: dict[str, Any],
    finish: Finish | None,
    raised: BaseException | None,
    through_runtime: bool,
    problems: list[str],
) -> None:
    if expect.get("outcome", "finish") == "finish":
        if raised is not None:
            problems.append(f"raised {raised!r}, expected finish:{expect.get('finish_reason')}")
        elif finish is None:
            problems.append("no finish chunk")
        else:
            if "finish_reason" in expect and finish.reason.kind != expect["finish_reason"]:
                problems.append(f"finish kind {finish.reason.kind!r}, expected {expect['finish_reason']!r}")
            if "raw_finish_reason" in expect and finish.reason.raw != expect["raw_finish_reason"]:
                problems.append(f"raw finish reason {finish.reason.raw!r}, expected {expect['raw_finish_reason']!r}")
        return
    delivery = expect.get("error_delivery", ["finish", "raise"])
    error: LlmError | Failure
    if raised is not None:
        if "raise" not in delivery:
            problems.append(f"raised {raised!r}, but this error must be delivered as finish{{error}}")
        if not isinstance(raised, LlmError):
            problems.append(f"raised {type(raised).__name__}, expected LlmError")
            return
        error = raised
    elif finish is not None and finish.reason.kind == "error" and finish.reason.failure is not None:
        if "finish" not in delivery and not through_runtime:
            problems.append("delivered as finish{error}, but this error must be raised")
        error = finish.reason.failure
    else:
        problems.append(f"expected an error, got {finish.reason.kind if finish else 'no finish'}")
        return
    _check_error(expect.get("error", {}), error, problems)


def _check_error(want: dict[str, Any], error: LlmError | Failure, problems: list[str]) -> None:
    fields = {
        "code": error.code,
        "retryable": error.retryable,
        "http_status": error.status,
        "retry_after_s": error.retry_after,
        "provider_type": error.provider_type,
        "provider_code": error.provider_code,
    }
    for key, actual in fields.items():
        if key in want and actual != want[key]:
            problems.append(f"error {key} {actual!r}, expected {want[key]!r}")
    if "message_contains" in want and want["message_contains"] not in error.message:
        problems.append(f"error message {error.message!r} lacks {want['message_contains']!r}")


def _check_sequence(
    expect: dict[str, Any],
    chunks: list[StreamChunk],
    raised: BaseException | None,
    through_runtime: bool,
    problems: list[str],
) -> None:
    if "sequence" not in expect:
        return
    tokens = sequence_tokens(chunks, raised)
    pattern = _sequence_regex(expect["sequence"], through_runtime=through_runtime)
    if not pattern.fullmatch("".join(t + "\n" for t in tokens)):
        problems.append(f"sequence {tokens} does not match {expect['sequence']}")


def _check_texts(expect: dict[str, Any], chunks: list[StreamChunk], problems: list[str]) -> None:
    for key, delta, block_type in (("text", TextDelta, "text"), ("reasoning", ReasoningDelta, "reasoning")):
        if key not in expect:
            continue
        pieces = [c.text for c in chunks if isinstance(c, delta)]
        if expect[key] is None:
            started = any(isinstance(c, BlockStart) and c.block_type == block_type for c in chunks)
            if pieces or started:
                problems.append(f"expected no {key} block, got {''.join(pieces)!r}")
        elif "".join(pieces) != expect[key]:
            problems.append(f"{key} {''.join(pieces)!r}, expected {expect[key]!r}")


def _check_tool_calls(expect: dict[str, Any], chunks: list[StreamChunk], problems: list[str]) -> None:
    if "tool_calls" not in expect:
        return
    calls = [c.block for c in chunks if isinstance(c, BlockEnd) and isinstance(c.block, ToolCallBlock)]
    wanted = expect["tool_calls"] or []
    if not wanted and any(isinstance(c, ToolCallDelta) for c in chunks):
        problems.append("tool-call deltas although no tool call is expected")
    if len(calls) != len(wanted):
        problems.append(f"{len(calls)} tool calls, expected {len(wanted)}")
        return
    if len({call.id for call in calls}) != len(calls):
        problems.append(f"tool call ids are not unique: {[call.id for call in calls]}")
    for position, (call, want) in enumerate(zip(calls, wanted, strict=True)):
        if want.get("id") is None:  # the provider sent no id: any generated one will do
            if "id" in want and not call.id:
                problems.append(f"tool call {position} has an empty id")
        elif call.id != want["id"]:
            problems.append(f"tool call {position} id {call.id!r}, expected {want['id']!r}")
        if "name" in want and call.name != want["name"]:
            problems.append(f"tool call {position} name {call.name!r}, expected {want['name']!r}")
        if "arguments_text" in want and call.arguments != want["arguments_text"]:
            problems.append(f"tool call {position} arguments {call.arguments!r}, expected {want['arguments_text']!r}")
        if "arguments" in want:
            try:
                parsed = json.loads(call.arguments)
            except ValueError:
                problems.append(f"tool call {position} arguments are not JSON: {call.arguments!r}")
                continue
            if parsed != want["arguments"]:
                problems.append(f"tool call {position} arguments {parsed!r}, expected {want['arguments']!r}")


_USAGE_PAIR = re.compile(r"(\w+_tokens)\s*:?\s*(\d+)")


def _check_usage(expect: dict[str, Any], chunks: list[StreamChunk], problems: list[str]) -> None:
    if "usage" not in expect:
        return
    usages = [c.usage for c in chunks if isinstance(c, Usage)]
    want = expect["usage"]
    if want is None:  # none sent: no usage chunk, or one that reports nothing (never invented numbers)
        invented = [u for u in usages if u.input_tokens is not None or u.output_tokens is not None]
        if invented:
            problems.append(f"usage {invented[0]!r} although the provider sent none")
        return
    if isinstance(want, str):  # optional, described in words: check the numbers it names
        if not usages:
            return
        want = {key: int(value) for key, value in _USAGE_PAIR.findall(want)}
    if not usages:
        problems.append(f"no usage chunk, expected {want!r}")
        return
    for key, value in want.items():
        actual = getattr(usages[0], key, None)
        if actual != value:
            problems.append(f"usage {key} {actual!r}, expected {value!r}")
