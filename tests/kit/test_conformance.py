"""The conformance suite on the toy adapter: it passes, and deliberately broken adapters fail it
with the obligation and the scenario named."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from kit_adapter import ToyAdapter, ToyConfig, ToyTranslator

from harness_core.adapter import LlmAdapter
from harness_core.errors import LlmError
from harness_core.http import ErrorDetails
from harness_core.secret import Secret
from harness_core.sse import SSEEvent
from harness_core.testing.conformance import (
    AdapterConformance,
    ConformanceFailure,
    Recording,
    load_recordings,
)
from harness_core.types import (
    FileBlock,
    Finish,
    FinishReason,
    GenerateOptions,
    JsonSchemaFormat,
    Message,
    ModelInfo,
    StreamChunk,
)

KEY = "sk-" + "toy-conformance-0123456789"
ASK = [Message.user("hi")]


def events(*data: str) -> bytes:
    return "".join(f"data: {piece}\n\n" for piece in data).encode()


def error_body(status: int, message: str, **headers: str) -> Recording:
    return Recording(json.dumps({"error": message}).encode(), status, {"x-request-id": "req_1", **headers})


RECORDINGS: dict[str, Recording | bytes] = {
    "text": b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"
    + events("t:Café ", "t:😀 ", "t:你好", "u:3,4", "end"),
    "reasoning": Recording(events("r:think", "r: more", "t:answer", "end")),
    "tool-call": Recording(events("r:plan", 'c:call_1,get,{"a": 1}', "end")),
    "parallel-tool-calls": Recording(events('c:call_1,a,{"x": 1}', "c:call_2,b,{}", "end")),
    "usage": Recording(events("t:x", "u:1,2") + b"data: end"),  # the last event cut by EOF
    "in-band-error": Recording(events("t:partial", "x:overloaded")),
    "truncated": Recording(events("t:cut", "t:off")),
    "http-401": error_body(401, "bad key"),
    "http-429": error_body(429, "slow down", **{"retry-after": "3"}),
    "http-500": error_body(500, "oops"),
}


class TestToyConformance(AdapterConformance):
    """The toy adapter adopts the suite in a few lines, and passes."""

    options = GenerateOptions(model="toy-1", messages=ASK)
    recordings = RECORDINGS
    unsupported: ClassVar[dict[str, GenerateOptions]] = {"seed": GenerateOptions(model="toy-1", messages=ASK, seed=1)}
    api_key = KEY
    max_two_way_splits = 40

    def make_adapter(self, base_url: str) -> LlmAdapter:
        return ToyAdapter(ToyConfig(base_url=base_url, api_key=Secret(KEY)))


# ---------------------------------------------------------------------- broken adapters


class Broken(TestToyConformance):
    """A toy variant: ``adapter_type`` replaces the adapter; asyncio only, to stay quick."""

    __test__ = False
    backends = ("asyncio",)
    adapter_type: ClassVar[type[ToyAdapter]] = ToyAdapter

    def make_adapter(self, base_url: str) -> LlmAdapter:
        return self.adapter_type(ToyConfig(base_url=base_url, api_key=Secret(KEY)))


def broken(adapter_type: type[ToyAdapter], **attributes: Any) -> Broken:
    suite_type: type[Broken] = type("BrokenSuite", (Broken,), {"adapter_type": adapter_type, **attributes})
    return suite_type()


def translating(**overrides: Callable[..., Any]) -> type[ToyAdapter]:
    """A toy adapter whose translator has ``overrides`` as methods."""
    translator_type = type("BrokenTranslator", (ToyTranslator,), overrides)

    class Adapter(ToyAdapter):
        def make_translator(self, options: GenerateOptions, request_id: str | None) -> ToyTranslator:
            return translator_type(request_id)  # type: ignore[no-any-return]

    return Adapter


def _usage_after_finish(self: ToyTranslator, event: SSEEvent) -> Sequence[StreamChunk]:
    out = list(ToyTranslator.feed(self, event))
    if len(out) >= 2 and type(out[-2]).__name__ == "Usage":
        out[-2], out[-1] = out[-1], out[-2]
    return out


def _no_abort_finish(self: ToyTranslator, reason: str) -> Sequence[StreamChunk]:
    self.done = True
    return ()


def _abort_raises(self: ToyTranslator, reason: str) -> Sequence[StreamChunk]:
    raise LlmError("INTERNAL", "cannot abort")


def _eof_is_fine(self: ToyTranslator) -> Sequence[StreamChunk]:
    return self._end(FinishReason("stop"))


def _end_is_malformed(self: ToyTranslator, event: SSEEvent) -> Sequence[StreamChunk]:
    if event.data == "end":
        raise LlmError("PROTOCOL", "toy: cannot parse the end")
    return ToyTranslator.feed(self, event)


def _quiet_until_end(self: ToyTranslator, event: SSEEvent) -> Sequence[StreamChunk]:
    out = ToyTranslator.feed(self, event)
    return out if self.done else ()


class WrongCode(ToyAdapter):
    def classify_error(self, status: int | None, body: dict[str, Any] | None) -> ErrorDetails | None:
        return ErrorDetails(code="SERVER")


class LeaksKey(ToyAdapter):
    def classify_error(self, status: int | None, body: dict[str, Any] | None) -> ErrorDetails | None:
        return ErrorDetails(message=f"rejected key {KEY}")


class IgnoresSeed(ToyAdapter):
    def encode_request(self, options: GenerateOptions, info: ModelInfo) -> bytes:
        return b"{}"


class CountsRequests(ToyAdapter):
    """Answers differently on every request: the chunks depend on history, not on the bytes."""

    def make_translator(self, options: GenerateOptions, request_id: str | None) -> ToyTranslator:
        self.calls = getattr(self, "calls", 0) + 1
        translator = ToyTranslator(request_id)
        translator._next = self.calls - 1
        return translator


@pytest.mark.parametrize(
    ("suite", "method", "obligation", "scenario"),
    [
        (broken(translating(feed=_usage_after_finish)), "test_stream_obligations", "stream", "text"),
        (broken(CountsRequests), "test_every_byte_split", "every-byte-split", "text"),
        (broken(translating(abort=_no_abort_finish)), "test_abort_at_every_chunk_boundary", "abort", "text"),
        (broken(translating(abort=_abort_raises)), "test_abort_at_every_chunk_boundary", "abort", "text"),
        (broken(CountsRequests), "test_early_break", "early-break", "text"),
        (broken(WrongCode), "test_http_errors", "http-error", "http-401"),
        (broken(LeaksKey), "test_http_errors", "http-error", "http-401"),
        (
            broken(translating(end_of_input=_eof_is_fine)),
            "test_truncated_stream_raises_network",
            "truncated",
            "truncated",
        ),
        (broken(IgnoresSeed), "test_unsupported_options", "unsupported", "seed"),
        (broken(translating(feed=_end_is_malformed)), "test_stream_obligations", "stream", "text"),
        (broken(translating(feed=_quiet_until_end), hang_guard=0.5), "test_task_cancellation", "cancellation", "text"),
    ],
)
def test_a_broken_adapter_fails_with_the_obligation_and_scenario_named(
    suite: Broken, method: str, obligation: str, scenario: str
) -> None:
    with pytest.raises(ConformanceFailure) as caught:
        getattr(suite, method)()
    failure = caught.value
    assert (failure.obligation, failure.scenario) == (obligation, scenario)
    assert str(failure).startswith(f"[{obligation}] scenario {scenario!r}: ")


def _end_with_replay_state(self: ToyTranslator, reason: FinishReason) -> Sequence[StreamChunk]:
    out = list(ToyTranslator._end(self, reason))
    last = out[-1]
    assert isinstance(last, Finish)
    out[-1] = Finish(last.reason, {"signature": "sig-" + "0123456789abcdef" * 2, "v": 1, "parts": [3, "ok"]})
    return out


@pytest.mark.parametrize(
    ("attributes", "method", "obligation"),
    [
        (
            {
                "media_options": GenerateOptions(
                    model="toy-1", messages=[Message.user("x", FileBlock("image/png", data=b"png"))]
                )
            },
            "test_media_reaches_the_wire",
            "media",
        ),
        (
            {
                "schema_options": GenerateOptions(
                    model="toy-1", messages=ASK, response_format=JsonSchemaFormat("s", {"type": "object"})
                )
            },
            "test_schema_reaches_the_wire",
            "schema",
        ),
    ],
)
def test_a_request_without_the_file_or_schema_fails(attributes: dict[str, Any], method: str, obligation: str) -> None:
    with pytest.raises(ConformanceFailure) as caught:
        getattr(broken(ToyAdapter, **attributes), method)()
    assert (caught.value.obligation, caught.value.scenario) == (obligation, "text")
    assert "is not in the request" in str(caught.value)


def test_replay_state_that_is_not_sent_back_fails() -> None:
    recordings = {**RECORDINGS, "replay": RECORDINGS["tool-call"]}
    suite = broken(translating(_end=_end_with_replay_state), recordings=recordings)
    suite.test_stream_obligations()  # the replay scenario shows its replay_state
    with pytest.raises(ConformanceFailure) as caught:
        suite.test_replay_state_goes_back_byte_exact()
    assert (caught.value.obligation, caught.value.scenario) == ("replay", "replay")
    assert "'sig-0123456789abcdef0123'… was not sent back" in str(caught.value)


def test_the_api_key_is_never_shown_in_the_failure() -> None:
    with pytest.raises(ConformanceFailure) as caught:
        broken(LeaksKey).test_http_errors()
    assert KEY not in str(caught.value)
    assert "API key appears" in str(caught.value)


# ---------------------------------------------------------------------- suite configuration


def test_recordings_must_name_known_scenarios_and_include_text() -> None:
    with pytest.raises(ConformanceFailure, match=r"^\[recordings\] scenario 'txet'"):
        broken(ToyAdapter, recordings={**RECORDINGS, "txet": b""}).test_recordings_are_named_after_known_scenarios()
    without_text = {name: rec for name, rec in RECORDINGS.items() if name != "text"}
    with pytest.raises(ConformanceFailure, match="text recording is required"):
        broken(ToyAdapter, recordings=without_text).test_recordings_are_named_after_known_scenarios()


def test_make_adapter_must_be_defined() -> None:
    class Bare(AdapterConformance):
        options = GenerateOptions(model="m", messages=ASK)
        recordings: ClassVar[dict[str, Recording | bytes]] = {"text": RECORDINGS["text"]}
        backends = ("asyncio",)

    with pytest.raises(NotImplementedError, match="make_adapter"):
        Bare().test_stream_obligations()


def test_a_suite_without_key_truncation_or_unsupported_options_skips_those_checks() -> None:
    only_http = {name: RECORDINGS[name] for name in ("text", "http-401")}
    suite = broken(ToyAdapter, api_key=None, unsupported={}, recordings=only_http)
    suite.test_truncated_stream_raises_network()
    suite.test_unsupported_options()
    suite.test_http_errors()


def test_trio_is_skipped_when_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "trio" else real(name))
    suite = broken(ToyAdapter, backends=("trio",), recordings={"text": RECORDINGS["text"]})
    suite.test_stream_obligations()  # nothing runs: no backend left


# ---------------------------------------------------------------------- recordings


def test_recording_from_a_raw_http_response_with_a_chunked_body() -> None:
    raw = (
        b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 3\r\n"
        b'Transfer-Encoding: chunked\r\n\r\n5;ext=1\r\n{"a":\r\n3\r\n 1}\r\n0\r\n\r\n'
    )
    recording = Recording.from_http(raw)
    assert (recording.status, recording.body) == (429, b'{"a": 1}')
    assert recording.headers == {"content-type": "application/json", "retry-after": "3"}


def test_a_chunked_body_without_its_last_chunk_keeps_what_arrived() -> None:
    raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"
    assert Recording.from_http(raw).body == b"abc"


def test_recording_from_a_raw_http_response_with_bare_line_feeds() -> None:
    recording = Recording.from_http(b"HTTP/1.0 200 OK\nContent-Length: 9\n\ndata: x\n\n")
    assert (recording.status, recording.headers, recording.body) == (200, {}, b"data: x\n\n")


@pytest.mark.parametrize("raw", [b"", b"garbage\r\n\r\n", b"HTTP/1.1 abc\r\n\r\n", b"HTTP/2 200\r\n\r\n"])
def test_recording_rejects_what_is_not_an_http_response(raw: bytes) -> None:
    with pytest.raises(ValueError, match=r"not an HTTP/1\.x response"):
        Recording.from_http(raw)


def test_recording_reply_defaults_the_content_type() -> None:
    assert dict(Recording(b"data: x\n\n").reply().header_pairs())["content-type"] == "text/event-stream"
    assert dict(Recording(b"{}", 500).reply().header_pairs())["content-type"] == "application/json"
    reply = Recording(b"abc", headers={"Content-Type": "text/plain"}).reply([b"a", b"", b"bc"], end="abrupt")
    assert (reply.reads, reply.end) == ([b"a", b"bc"], "abrupt")


def test_load_recordings_reads_http_and_sse_files(tmp_path: Path) -> None:
    (tmp_path / "text.sse").write_bytes(b"data: t:x\n\ndata: end\n\n")
    (tmp_path / "http-500.http").write_bytes(b"HTTP/1.1 500 Internal Server Error\r\n\r\n{}")
    (tmp_path / "README.md").write_text("ignored")
    found = load_recordings(tmp_path)
    assert found == {
        "text": Recording(b"data: t:x\n\ndata: end\n\n"),
        "http-500": Recording(b"{}", 500, {}),
    }
    (tmp_path / "txet.sse").write_bytes(b"")
    with pytest.raises(ValueError, match=r"txet.sse: unknown scenario 'txet'"):
        load_recordings(tmp_path)


def test_the_testing_package_exports_the_suite() -> None:
    import harness_core.testing as testing

    assert testing.AdapterConformance is AdapterConformance
    assert testing.Recording is Recording
