"""The adapter conformance suite: every stream obligation, checked against recorded responses.

An adapter author subclasses :class:`AdapterConformance` in a test module (the subclass name
starts with ``Test`` so pytest collects it), gives a factory and recordings, and the suite's
``test_*`` methods check the obligations of ``docs/stream-obligations.md`` against a
:class:`~harness_core.testing.server.ScriptedServer` on 127.0.0.1 (the provider is mocked, never
the harness)::

    class TestAcmeConformance(AdapterConformance):
        options = GenerateOptions(model="acme-1", messages=[Message.user("hi")])
        recordings = load_recordings(Path(__file__).parent / "recorded")   # or a dict
        unsupported = {"seed": GenerateOptions(model="acme-1", messages=[...], seed=1)}
        api_key = KEY

        def make_adapter(self, base_url: str) -> LlmAdapter:
            return AcmeAdapter(AcmeConfig(base_url=base_url, api_key=Secret(self.api_key)))

A scenario the wire does not have is simply left out of ``recordings``. A failure is a
:class:`ConformanceFailure` whose message starts with ``[obligation] scenario 'name':``. The
methods are synchronous (each run uses :func:`anyio.run` on every backend in :attr:`backends`),
so the suite needs no pytest plugin and no ``anyio_backend`` fixture; importing this module does
not import pytest.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import importlib.util
import re
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Final, TypeVar

import anyio
import msgspec

from harness_core.abort import AbortSignal
from harness_core.assembler import BlockAssembler
from harness_core.errors import LlmError
from harness_core.http import parse_retry_after, prefer_transport, preferred_transport
from harness_core.testing.check import check_stream
from harness_core.testing.server import Reply, ScriptedServer
from harness_core.testing.splits import one_byte_reads, split_at
from harness_core.types import (
    BlockStart,
    Finish,
    GenerateOptions,
    JsonSchemaFormat,
    Message,
    StreamChunk,
    ToolResultBlock,
    Usage,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_core.adapter import LlmAdapter

__all__ = [
    "ERROR_SCENARIOS",
    "SCENARIOS",
    "STREAM_SCENARIOS",
    "AdapterConformance",
    "ConformanceFailure",
    "Recording",
    "load_recordings",
]

_T = TypeVar("_T")
_R = TypeVar("_R")

STREAM_SCENARIOS: Final = (
    "text",
    "reasoning",
    "tool-call",
    "parallel-tool-calls",
    "usage",
    "in-band-error",
    "replay",
)
"""Scenarios whose recording is a complete 2xx event stream (checked at every byte split);
``replay`` is a response whose ``finish`` carries ``replay_state`` (signed or encrypted
reasoning) that the next turn must send back."""

ERROR_SCENARIOS: Final[Mapping[str, tuple[int, tuple[str, ...]]]] = {
    "http-400-auth": (400, ("AUTH",)),
    "http-401": (401, ("AUTH",)),
    "http-429": (429, ("RATE_LIMITED",)),
    "http-500": (500, ("SERVER", "OVERLOADED")),
}
"""HTTP error scenarios → (expected status, accepted error codes). ``http-400-auth`` is a 400
whose body says the key is invalid (Gemini's ``API_KEY_INVALID``): still ``AUTH``."""

SCENARIOS: Final = (*STREAM_SCENARIOS, *ERROR_SCENARIOS, "truncated")
"""Every scenario name a recording may have (``truncated``: a 2xx stream cut before its
terminal event)."""


class ConformanceFailure(AssertionError):
    """An adapter broke an obligation in a scenario.

    Attributes:
        obligation: the obligation's name (``"every-byte-split"``, ``"abort"`` …).
        scenario: the scenario name, or ``None`` for an obligation over the whole suite.
        detail: what went wrong.
    """

    def __init__(self, obligation: str, scenario: str | None, detail: str) -> None:
        where = f"scenario {scenario!r}" if scenario is not None else "suite"
        super().__init__(f"[{obligation}] {where}: {detail}")
        self.obligation = obligation
        self.scenario = scenario
        self.detail = detail


@dataclass(frozen=True)
class Recording:
    """One recorded provider response.

    Fields:
        body: the response body (for a stream: the ``text/event-stream`` bytes as sent).
        status: the HTTP status.
        headers: response headers; ``content-type`` defaults to ``text/event-stream`` for a 2xx
            and ``application/json`` otherwise.
    """

    body: bytes
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_http(cls, raw: bytes) -> Recording:
        """Parse a raw HTTP/1.1 response (status line, headers, blank line, body; a
        ``Transfer-Encoding: chunked`` body is de-chunked, RFC 9112 §7.1).

        Raises:
            ValueError: for bytes that are not an HTTP/1.x response.
        """
        head, sep, body = raw.partition(b"\r\n\r\n")
        if not sep:
            head, sep, body = raw.partition(b"\n\n")
        lines = head.decode("latin-1").splitlines()
        parts = lines[0].split(" ", 2) if lines else []
        if (
            not sep
            or len(parts) < 2
            or not parts[0].startswith("HTTP/1.")
            or not (parts[1].isascii() and parts[1].isdigit())
        ):
            raise ValueError(f"not an HTTP/1.x response: {raw[:60]!r}")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.pop("transfer-encoding", "").lower() == "chunked":
            body = _dechunk(body)
        headers.pop("content-length", None)
        return cls(body=body, status=int(parts[1]), headers=headers)

    def reply(self, reads: Sequence[bytes] | None = None, *, end: str = "eof") -> Reply:
        """A :class:`~harness_core.testing.server.Reply` serving this recording in ``reads``
        (default: the whole body in one read)."""
        headers = dict(self.headers)
        if not any(name.lower() == "content-type" for name in headers):
            headers["content-type"] = "text/event-stream" if 200 <= self.status <= 299 else "application/json"
        pieces = [self.body] if reads is None else list(reads)
        return Reply(status=self.status, headers=headers, reads=[p for p in pieces if p], end=end)  # type: ignore[arg-type]


def _dechunk(body: bytes) -> bytes:
    out = bytearray()
    rest = body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        rest = rest[size + 2 :]
    return bytes(out)


def load_recordings(folder: Path) -> dict[str, Recording]:
    """Recordings from ``folder``: ``<scenario>.http`` (a raw HTTP response) or
    ``<scenario>.sse`` (a 200 ``text/event-stream`` body). Other files are ignored.

    Raises:
        ValueError: for a file named after no known scenario (naming the file).
    """
    found: dict[str, Recording] = {}
    for path in sorted(folder.iterdir()):
        if path.suffix not in (".http", ".sse"):
            continue
        if path.stem not in SCENARIOS:
            raise ValueError(f"{path}: unknown scenario {path.stem!r}; expected one of {', '.join(SCENARIOS)}")
        data = path.read_bytes()
        found[path.stem] = Recording.from_http(data) if path.suffix == ".http" else Recording(data)
    return found


@dataclass
class _Run:
    """What one stream produced."""

    chunks: list[StreamChunk] = field(default_factory=list)
    error: LlmError | None = None


class AdapterConformance:
    """The conformance suite; subclass it as ``Test…`` and fill the class attributes.

    Class attributes:
        options: the :class:`GenerateOptions` sent in every scenario (no ``abort``: the suite
            adds its own).
        recordings: scenario name → :class:`Recording` (or raw HTTP response bytes); see
            :data:`SCENARIOS`. ``text`` is required.
        unsupported: a label → options the adapter declares it cannot honour; each must raise
            ``LlmError("UNSUPPORTED")`` before any request is sent.
        media_options: options whose user messages hold :class:`~harness_core.types.FileBlock` s
            the adapter takes (``None``: the wire takes no files): each file must reach the
            request whole (its bytes base64-encoded, or its URL as given).
        schema_options: options with a :class:`~harness_core.types.JsonSchemaFormat` the adapter
            honours (``None``: no structured output): the request must carry the schema.
        api_key: the secret :meth:`make_adapter` configures; it must appear in no error.
        backends: the event loops each obligation runs on: ``asyncio``, ``asyncio+aiohttp``
            (asyncio with ``transport: auto`` meaning aiohttp, see
            :func:`harness_core.http.prefer_transport`; skipped without httpx-aiohttp) and
            ``trio`` (skipped when it is not installed).
        max_two_way_splits: the every-byte-split obligation cuts each body in two at every
            offset; for a longer body it cuts at this many offsets spread evenly (always
            including every offset of the first and last events). One-byte reads, which put a
            read boundary at every offset at once, always run.
        hang_guard: seconds without the end of a run before it fails as hung (a guard against
            a deadlock, not a timing assertion).
    """

    options: ClassVar[GenerateOptions]
    recordings: ClassVar[Mapping[str, Recording | bytes]]
    unsupported: ClassVar[Mapping[str, GenerateOptions]] = {}
    media_options: ClassVar[GenerateOptions | None] = None
    schema_options: ClassVar[GenerateOptions | None] = None
    api_key: ClassVar[str | None] = None
    backends: ClassVar[Sequence[str]] = ("asyncio", "asyncio+aiohttp", "trio")
    max_two_way_splits: ClassVar[int] = 200
    hang_guard: ClassVar[float] = 60.0

    def make_adapter(self, base_url: str) -> LlmAdapter:
        """A fresh adapter whose provider lives at ``base_url`` (``http://127.0.0.1:<port>``)."""
        raise NotImplementedError("subclass AdapterConformance and define make_adapter(base_url)")

    # ------------------------------------------------------------------ obligations

    def test_recordings_are_named_after_known_scenarios(self) -> None:
        """Every recording names a scenario of :data:`SCENARIOS`, and ``text`` is present."""
        unknown = sorted(set(self.recordings) - set(SCENARIOS))
        if unknown:
            raise ConformanceFailure("recordings", unknown[0], f"unknown scenario; expected one of {SCENARIOS}")
        if "text" not in self.recordings:
            raise ConformanceFailure("recordings", "text", "a text recording is required")

    def test_stream_obligations(self) -> None:
        """Each stream scenario in one read: a valid stream (indices, block-end consistency,
        usage before finish, one finish last, ``tool-calls`` iff a tool block) showing what the
        scenario is about."""
        for scenario in self._present(STREAM_SCENARIOS):
            self._each_backend("stream", scenario, self._check_scenario, scenario)

    def test_every_byte_split(self) -> None:
        """The chunks do not depend on how the body is cut into reads (cuts inside UTF-8
        characters, CRLF pairs and field names included)."""
        for scenario in self._present(STREAM_SCENARIOS):
            self._each_backend("every-byte-split", scenario, self._check_splits, scenario)

    def test_abort_at_every_chunk_boundary(self) -> None:
        """The abort signal fired after each chunk: the stream stops reading and ends valid,
        with ``finish{aborted}`` carrying the reason (or the natural finish when the terminal
        event was already read), its chunks a prefix of the full stream, the connection
        closed."""
        for scenario in self._present(STREAM_SCENARIOS):
            self._each_backend("abort", scenario, self._check_abort, scenario)

    def test_early_break(self) -> None:
        """The consumer stops after each chunk and closes the stream: the connection is
        closed (or back in the pool) and no task is left behind."""
        for scenario in self._present(STREAM_SCENARIOS):
            self._each_backend("early-break", scenario, self._check_break, scenario)

    def test_task_cancellation(self) -> None:
        """The consuming task is cancelled while the provider stalls before the terminal event
        of the ``text`` recording (which has at least two events): the cancellation propagates,
        the connection is released, no task is left behind."""
        self._each_backend("cancellation", "text", self._check_cancel, "text")

    def test_http_errors(self) -> None:
        """HTTP error statuses raise ``LlmError`` with the stable code, the status and (429)
        the ``Retry-After`` delay; no chunk is yielded."""
        for scenario in self._present(tuple(ERROR_SCENARIOS)):
            self._each_backend("http-error", scenario, self._check_http_error, scenario)

    def test_truncated_stream_raises_network(self) -> None:
        """A 2xx stream cut before its terminal event raises ``LlmError("NETWORK")`` and
        yields no ``finish`` (whether the body ends cleanly or the connection drops)."""
        if "truncated" in self.recordings:
            self._each_backend("truncated", "truncated", self._check_truncated, "truncated")

    def test_unsupported_options(self) -> None:
        """Options the adapter declares it cannot honour raise ``UNSUPPORTED`` before any I/O."""
        for label, options in self.unsupported.items():
            self._each_backend("unsupported", label, self._check_unsupported, options)

    def test_media_reaches_the_wire(self) -> None:
        """Every file of :attr:`media_options` is in the request: its bytes base64-encoded
        (RFC 4648 §4) or its URL as given; nothing is downloaded."""
        if self.media_options is not None:
            self._each_backend("media", "text", self._check_media, self.media_options)

    def test_schema_reaches_the_wire(self) -> None:
        """The JSON schema of :attr:`schema_options` is in the request, byte for byte as
        ``msgspec`` encodes it."""
        if self.schema_options is not None:
            self._each_backend("schema", "text", self._check_schema, self.schema_options)

    def test_replay_state_goes_back_byte_exact(self) -> None:
        """The ``replay`` recording's assistant turn (with its ``replay_state``, and a result for
        each tool call) sent back: every string of ``replay_state`` longer than 15 characters
        (signatures, encrypted reasoning, ids) appears in the next request exactly as JSON
        encodes it."""
        if "replay" in self.recordings:
            self._each_backend("replay", "replay", self._check_replay, "replay")

    # ------------------------------------------------------------------ scenario checks

    async def _check_scenario(self, scenario: str) -> None:
        run = await self._run(scenario)
        chunks = self._valid(run)
        finish = chunks[-1]
        assert isinstance(finish, Finish)
        starts = [c for c in chunks if isinstance(c, BlockStart)]
        kinds = [s.block_type for s in starts]
        expect: dict[str, tuple[bool, str]] = {
            "text": ("text" in kinds and finish.reason.kind != "error", "a text block and a non-error finish"),
            "reasoning": ("reasoning" in kinds, "a reasoning block"),
            "tool-call": (kinds.count("tool-call") >= 1 and finish.reason.kind == "tool-calls", "a tool call"),
            "parallel-tool-calls": (kinds.count("tool-call") >= 2, "two or more tool-call blocks"),
            "usage": (any(isinstance(c, Usage) for c in chunks), "a usage chunk"),
            "in-band-error": (finish.reason.kind == "error", "finish{error} (an in-band error never raises)"),
            "replay": (finish.replay_state is not None, "finish.replay_state"),
        }
        ok, what = expect[scenario]
        assert ok, f"expected {what}; got blocks {kinds} and finish {finish.reason.kind!r}"

    async def _check_splits(self, scenario: str) -> None:
        body = self._recording(scenario).body
        deliveries: list[Sequence[bytes]] = [one_byte_reads(body)]
        deliveries += [split_at(body, [offset]) for offset in self._split_offsets(body)]
        async with self._adapter() as (server, adapter):
            reference = self._valid(await self._stream(server, adapter, self._recording(scenario).reply()))
            for reads in deliveries:
                run = await self._stream(server, adapter, self._recording(scenario).reply(reads))
                got = self._valid(run)
                cut = [len(piece) for piece in reads[:-1]] if len(reads) == 2 else "one byte per read"
                assert got == reference, f"reads cut at {cut} give other chunks than one read"

    def _split_offsets(self, body: bytes) -> list[int]:
        size = len(body)
        if size - 1 <= self.max_two_way_splits:
            return list(range(1, size))
        ends = _event_ends(body)
        first_end = ends[0]
        last_start = ends[-2] if len(ends) > 1 else 0
        step = max(1, size // self.max_two_way_splits)
        offsets = set(range(1, max(2, first_end))) | set(range(max(1, last_start), size)) | set(range(1, size, step))
        return sorted(offsets)

    async def _check_abort(self, scenario: str) -> None:
        recording = self._recording(scenario)
        async with self._adapter() as (server, adapter):
            reference = self._valid(await self._stream(server, adapter, recording.reply()))
            for boundary in range(len(reference)):
                signal = AbortSignal()
                reason = f"conformance abort after chunk {boundary}"
                where = f"abort after chunk {boundary}"
                server.add(recording.reply(_event_reads(recording.body)))
                run = _Run()
                with anyio.fail_after(self.hang_guard):  # a hang guard, not a timing assertion
                    try:
                        async for chunk in adapter.stream(self._options(abort=signal)):
                            run.chunks.append(chunk)
                            if len(run.chunks) == boundary + 1:
                                signal.fire(reason)
                    except LlmError as exc:
                        raise AssertionError(f"{where}: raised {exc!r}") from exc
                chunks = check_stream(run.chunks)
                assert chunks[: boundary + 1] == reference[: boundary + 1], f"{where}: the chunks before it changed"
                finish = chunks[-1]
                assert isinstance(finish, Finish)
                if finish.reason.kind == "aborted":
                    assert finish.reason.failure is not None
                    assert finish.reason.failure.message == reason, f"{where}: the reason was not carried"
                    await self._released(server, adapter, where)
                else:
                    assert chunks == reference, f"{where}: finished {finish.reason.kind!r} with other chunks"

    async def _check_break(self, scenario: str) -> None:
        recording = self._recording(scenario)
        async with self._adapter() as (server, adapter):
            reference = self._valid(await self._stream(server, adapter, recording.reply()))
            for boundary in range(len(reference) - 1):
                server.add(recording.reply(_event_reads(recording.body)))
                stream = adapter.stream(self._options())
                got: list[StreamChunk] = []
                with anyio.fail_after(self.hang_guard):  # a hang guard, not a timing assertion
                    while len(got) <= boundary:
                        chunk = await anext(stream, None)
                        assert chunk is not None, f"the stream ended after {len(got)} chunks"
                        got.append(chunk)
                    await stream.aclose()  # type: ignore[attr-defined]
                assert got == reference[: boundary + 1]
                await self._released(server, adapter, f"break after chunk {boundary}")

    async def _check_cancel(self, scenario: str) -> None:
        body = self._recording(scenario).body
        ends = [0, *_event_ends(body)]
        before_last = body[: ends[-2]]  # every event but the terminal one, which never comes
        async with self._adapter() as (server, adapter):
            server.add(self._recording(scenario).reply([before_last], end="stall"))
            started = anyio.Event()
            cancelled = False

            async def consume(scope: anyio.CancelScope) -> None:
                nonlocal cancelled
                with scope:
                    async for _ in adapter.stream(self._options()):
                        started.set()
                cancelled = scope.cancelled_caught

            with anyio.fail_after(self.hang_guard):  # a hang guard, not a timing assertion
                async with anyio.create_task_group() as group:
                    scope = anyio.CancelScope()
                    group.start_soon(consume, scope)
                    await started.wait()  # the adapter now waits for the stalled terminal event
                    scope.cancel()
            assert cancelled, "the cancellation did not propagate (or the stream ended while the provider stalls)"
            await self._released(server, adapter, "cancellation")

    async def _check_http_error(self, scenario: str) -> None:
        status, codes = ERROR_SCENARIOS[scenario]
        recording = self._recording(scenario)
        run = await self._run(scenario)
        assert not run.chunks, f"chunks were yielded before the error: {run.chunks[:3]}"
        error = run.error
        assert error is not None, "no LlmError was raised"
        assert error.code in codes, f"code {error.code!r}, expected {' or '.join(codes)}"
        assert error.status == status, f"status {error.status!r}, expected {status}"
        expected_retry = parse_retry_after(recording.headers)
        if expected_retry is not None:
            assert error.retry_after is not None, "retry_after was not carried"
            assert abs(error.retry_after - expected_retry) < 5, f"retry_after {error.retry_after} != {expected_retry}"
        self._no_secret(error)

    async def _check_truncated(self, scenario: str) -> None:
        recording = self._recording(scenario)
        for end in ("eof", "abrupt"):
            async with self._adapter() as (server, adapter):
                run = await self._stream(server, adapter, recording.reply(end=end))
            assert run.error is not None, f"end={end}: no LlmError was raised"
            assert run.error.code == "NETWORK", f"end={end}: code {run.error.code!r}, expected NETWORK"
            assert not any(isinstance(c, Finish) for c in run.chunks), f"end={end}: a finish and an error"
            check_stream(run.chunks, run.error)
            self._no_secret(run.error)

    async def _check_unsupported(self, options: GenerateOptions) -> None:
        async with self._adapter() as (server, adapter):
            run = await self._stream(server, adapter, None, options)
        assert run.error is not None, "no LlmError was raised"
        assert run.error.code == "UNSUPPORTED", f"code {run.error.code!r}, expected UNSUPPORTED"
        assert not server.requests, "a request was sent"
        self._no_secret(run.error)

    async def _check_media(self, options: GenerateOptions) -> None:
        files = [block for message in options.messages for block in message.files]
        assert files, "media_options holds no FileBlock"
        body = await self._sent(options)
        for block in files:
            wire = base64.b64encode(block.data).decode() if block.data is not None else block.url
            assert wire is not None
            assert wire.encode() in body, f"{block.describe()} is not in the request"

    async def _check_schema(self, options: GenerateOptions) -> None:
        fmt = options.response_format
        assert isinstance(fmt, JsonSchemaFormat), "schema_options has no JsonSchemaFormat"
        body = await self._sent(options)
        assert msgspec.json.encode(fmt.schema) in body, "the schema is not in the request"

    async def _check_replay(self, scenario: str) -> None:
        first = self._valid(await self._run(scenario))
        assembler = BlockAssembler()
        for chunk in first:
            assembler.feed(chunk)
        turn = assembler.message()
        results = [Message(role="tool", content=[ToolResultBlock(call.id, "ok")]) for call in turn.tool_calls]
        messages = [*self.options.messages, turn, *results, Message.user("go on")]
        options = msgspec.structs.replace(self._options(), messages=messages)
        body = await self._sent(options)
        for value in _strings(turn.replay_state):
            # the model id a replay state is tagged with may travel in the URL path (Gemini), not the body
            if len(value) > 15 and value != options.model:
                assert msgspec.json.encode(value) in body, f"replay_state string {value[:24]!r}… was not sent back"

    async def _sent(self, options: GenerateOptions) -> bytes:
        """The request body ``options`` made (the ``text`` recording answers it)."""
        async with self._adapter() as (server, adapter):
            run = await self._stream(server, adapter, self._recording("text").reply(), options)
        self._valid(run)
        (request,) = server.requests
        return request.body

    # ------------------------------------------------------------------ helpers

    def _present(self, names: Sequence[str]) -> list[str]:
        return [name for name in names if name in self.recordings]

    def _recording(self, scenario: str) -> Recording:
        value = self.recordings[scenario]
        return value if isinstance(value, Recording) else Recording.from_http(value)

    def _options(self, abort: AbortSignal | None = None) -> GenerateOptions:
        import msgspec

        return msgspec.structs.replace(self.options, abort=abort)

    def _each_backend(
        self, obligation: str, scenario: str, check: Callable[[_T], Awaitable[None]], argument: _T
    ) -> None:
        for backend in self.backends:
            loop, _, transport = backend.partition("+")
            if importlib.util.find_spec("httpx_aiohttp" if transport else loop) is None:
                continue
            before = preferred_transport()
            prefer_transport("aiohttp" if transport else "httpcore")
            try:
                problem = _run_in_thread(functools.partial(anyio.run, self._guarded, check, argument, backend=loop))
            finally:
                prefer_transport(before)
            if problem is not None:
                detail, cause = problem
                raise ConformanceFailure(obligation, scenario, f"{detail} (on {backend})") from cause

    async def _guarded(self, check: Callable[[_T], Awaitable[None]], argument: _T) -> tuple[str, BaseException] | None:
        """Run ``check``; return what went wrong (the exceptions stay inside the event loop)."""
        try:
            await check(argument)
            if _on_asyncio():
                leaked = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
                assert not leaked, f"tasks left behind: {leaked}"
        except TimeoutError as exc:
            return f"no progress for {self.hang_guard:g} s", exc
        except (AssertionError, LlmError) as exc:
            return str(exc), exc
        return None

    def _adapter(self) -> _AdapterContext:
        return _AdapterContext(self)

    async def _run(self, scenario: str) -> _Run:
        async with self._adapter() as (server, adapter):
            return await self._stream(server, adapter, self._recording(scenario).reply())

    async def _stream(
        self, server: ScriptedServer, adapter: LlmAdapter, reply: Reply | None, options: GenerateOptions | None = None
    ) -> _Run:
        if reply is not None:
            server.add(reply)
        run = _Run()
        with anyio.fail_after(self.hang_guard):  # a hang guard, not a timing assertion
            try:
                async for chunk in adapter.stream(options or self._options()):
                    run.chunks.append(chunk)
            except LlmError as exc:
                run.error = exc
        return run

    def _valid(self, run: _Run) -> list[StreamChunk]:
        if run.error is not None:
            raise AssertionError(f"the stream raised {run.error!r}")
        return check_stream(run.chunks)

    async def _released(self, server: ScriptedServer, adapter: LlmAdapter, where: str) -> None:
        """The connection of a stream that ended early is closed or back in the pool: a
        follow-up stream on the same adapter completes, after which at most one connection
        (the pooled one) is open."""
        follow_up = await self._stream(server, adapter, self._recording("text").reply())
        assert follow_up.error is None, f"{where}: the next stream on the adapter raised {follow_up.error!r}"
        ok = await anyio.to_thread.run_sync(lambda: server.wait_idle(most=1))
        assert ok, f"{where}: the connection was left open ({server.open_connections} open)"

    def _no_secret(self, error: LlmError) -> None:
        key = self.api_key
        if not key:
            return
        import msgspec

        for text in (str(error), repr(error), msgspec.json.encode(error.to_failure()).decode()):
            assert key not in text, "the API key appears in an error"


class _AdapterContext:
    """``async with`` a started server and a fresh adapter pointing at it; both closed on exit."""

    def __init__(self, suite: AdapterConformance) -> None:
        self._suite = suite
        self._server = ScriptedServer()
        self._adapter: LlmAdapter | None = None

    async def __aenter__(self) -> tuple[ScriptedServer, LlmAdapter]:
        self._server.start()
        try:
            self._adapter = self._suite.make_adapter(self._server.url)
        except BaseException:
            self._server.stop()
            raise
        return self._server, self._adapter

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._adapter is not None
        try:
            await self._adapter.aclose()
        finally:
            self._server.stop()


_BLANK_LINE: Final = re.compile(rb"\r\n\r\n|\n\n|\r\r")


def _strings(value: object) -> list[str]:
    """Every string leaf of a JSON value (dict keys excluded)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _strings(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _strings(item)]
    return []


def _event_ends(body: bytes) -> list[int]:
    """Offsets just after each event's blank line (the body's length ends the list)."""
    ends = [match.end() for match in _BLANK_LINE.finditer(body)]
    if not ends or ends[-1] != len(body):
        ends.append(len(body))
    return ends


def _event_reads(body: bytes) -> list[bytes]:
    """``body`` delivered one event per read."""
    ends = _event_ends(body)
    return [body[start:end] for start, end in zip([0, *ends[:-1]], ends, strict=True)]


def _run_in_thread(function: Callable[[], _R]) -> _R:
    """``function()`` in a fresh thread (its own event loop, away from any loop of the caller
    and from the caller's tracing state); its exception is re-raised here."""
    outcome: list[_R] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            outcome.append(function())
        except BaseException as exc:  # re-raised in the calling thread
            failure.append(exc)

    thread = threading.Thread(target=target, name="harness-conformance")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return outcome[0]


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
