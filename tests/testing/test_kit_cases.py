"""The shared fault cases: loading, serving, and checking streams against their expectations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness_core.errors import Failure, LlmError
from harness_core.http import open_sse_stream
from harness_core.testing.cases import Case, CaseMismatch, cases_dir, check_case, load_cases, sequence_tokens
from harness_core.testing.fake import text_reply
from harness_core.testing.server import ScriptedServer
from harness_core.types import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)
from pytest_harness import load_cases_or_skip

CASES = {case.name: case for case in load_cases_or_skip()}


def case(prefix: str) -> Case:
    return next(c for name, c in CASES.items() if name.startswith(prefix))


def tool_block(index: int, call_id: str | None, real_id: str, name: str, args: str) -> list[StreamChunk]:
    return [
        BlockStart(index=index, block_type="tool-call", id=call_id, name=name if call_id else None),
        ToolCallDelta(index=index, id=real_id, name=None if call_id else name, arguments_delta=args),
        BlockEnd(index=index, block=ToolCallBlock(real_id, name, args)),
    ]


def finish(kind: str, raw: str | None = None, failure: Failure | None = None) -> Finish:
    return Finish(FinishReason(kind=kind, raw=raw, failure=failure))  # type: ignore[arg-type]


OVERLOADED = Failure(code="OVERLOADED", message="Overloaded", retryable=True, provider_type="overloaded_error")
RATE = Failure(
    code="RATE_LIMITED",
    message="Rate limit exceeded",
    retryable=True,
    status=429,
    retry_after=7.0,
    provider_type="rate_limited",
)
TEXT_13 = "Here is the first part of the answer"

GOOD: dict[str, list[StreamChunk]] = {
    "01": text_reply("The ans", "wer is 42."),
    "03": text_reply("Hello there"),
    "06": text_reply("Paris", ".", usage=TokenUsage(input_tokens=14, output_tokens=2)),
    "08": [
        *tool_block(0, None, "call_a", "get_weather", '{"city":"Paris"}'),
        *tool_block(1, "call_b", "call_b", "get_time", '{"tz":"Europe/Paris"}'),
        Usage(TokenUsage(input_tokens=40, output_tokens=24)),
        finish("tool-calls", "tool_calls"),
    ],
    "10": [
        *tool_block(0, "call_001", "call_001", "get_current_weather", '{"location":"Paris, FR","unit":"celsius"}'),
        finish("tool-calls", "stop"),
    ],
    "13": [
        *text_reply(TEXT_13)[:3],
        Usage(TokenUsage(input_tokens=20, output_tokens=None)),
        finish("error", failure=OVERLOADED),
    ],
    "15": [
        BlockStart(index=0, block_type="reasoning"),
        ReasoningDelta(index=0, text="The user asks for 1+1; that is 2."),
        BlockEnd(index=0, block=ReasoningBlock("The user asks for 1+1; that is 2.")),
        BlockStart(index=1, block_type="text"),
        TextDelta(index=1, text="1 + 1 = 2."),
        BlockEnd(index=1, block=TextBlock("1 + 1 = 2.")),
        Usage(TokenUsage(input_tokens=12, output_tokens=20, reasoning_tokens=13)),
        finish("stop", "stop"),
    ],
    "18": [],
}


def test_loading() -> None:
    assert cases_dir().is_dir()
    assert {name[:2] for name in CASES} >= set(GOOD)
    assert [c.name[:2] for c in load_cases("anthropic-messages")] == ["13"]
    assert all(c.provider_format == "openai-chat" for c in load_cases("openai-chat"))
    first = case("01")
    assert first.http_status == 200
    assert first.headers == {"content-type": "text/event-stream"}
    assert first.end == "clean-eof"
    assert not first.raw_response
    reads = first.reads()
    assert [len(r) for r in reads[:-1]] == [336, 369 - 336, 542 - 369, 711 - 542]
    assert b"".join(reads) == first.body
    assert case("03").reads() == [case("03").body]
    raw = case("18")
    assert raw.raw_response
    assert raw.reply().raw == raw.body
    assert first.reply(reads=[b"x"]).reads == [b"x"]


def test_directory_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "99-abrupt"
    folder.mkdir()
    meta = {
        "provider_format": "gemini",
        "body_file": "stream.sse",
        "transport": {"read_size": 4, "end": "abrupt"},
        "expect": {"outcome": "error"},
    }
    (folder / "meta.json").write_text(json.dumps(meta))
    (folder / "stream.sse").write_bytes(b"data: 1\n\n")
    empty = tmp_path / "98-empty"
    empty.mkdir()
    (empty / "meta.json").write_text(json.dumps({"provider_format": "gemini", "expect": {}}))
    (empty / "stream.sse").write_bytes(b"")
    monkeypatch.setenv("HARNESS_CASES_DIR", str(tmp_path))
    assert cases_dir() == tmp_path
    loaded = load_cases("gemini")
    assert [c.name for c in loaded] == ["98-empty", "99-abrupt"]
    assert loaded[0].reads() == []
    assert loaded[0].http_status == 200
    assert loaded[1].reads() == [b"data", b": 1\n", b"\n"]
    assert loaded[1].reply().end == "abrupt"
    with pytest.raises(FileNotFoundError) as raised:
        load_cases(directory=tmp_path / "missing")
    assert f"the fault cases folder {str(tmp_path / 'missing')!r} does not exist" in str(raised.value)
    assert "set HARNESS_CASES_DIR to the folder" in str(raised.value)


@pytest.mark.anyio
async def test_a_case_served_by_the_scripted_server() -> None:
    first = case("01")
    with ScriptedServer(first.reply()) as server:
        async with httpx.AsyncClient() as client:
            request = client.build_request("POST", server.url)
            async with open_sse_stream(client, request) as events:
                data = [event.data async for event in events]
    assert data[-1] == "[DONE]"
    assert len(data) == 5


@pytest.mark.parametrize("prefix", sorted(GOOD))
def test_conforming_streams_pass(prefix: str) -> None:
    if prefix == "18":
        error = LlmError(
            "RATE_LIMITED", "Rate limit exceeded", status=429, retry_after=7.0, provider_type="rate_limited"
        )
        check_case(case("18"), [], error)
        case("18").check([finish("error", failure=RATE)], through_runtime=True)
        return
    check_case(case(prefix), GOOD[prefix])


def test_case_13_both_deliveries() -> None:
    streamed = text_reply(TEXT_13)[:2]
    check_case(case("13"), streamed, LlmError("OVERLOADED", "Overloaded", provider_type="overloaded_error"))
    check_case(case("13"), [*text_reply(TEXT_13)[:3], finish("error", failure=OVERLOADED)])


def test_sequence_tokens() -> None:
    assert sequence_tokens(GOOD["08"], LlmError("NETWORK", "x")) == [
        "block-start:tool-call#call_a",
        "tool-call-delta",
        "block-end",
        "block-start:tool-call#call_b",
        "tool-call-delta",
        "block-end",
        "usage",
        "finish:tool-calls",
        "raise",
    ]


def mismatch(target: Case | dict[str, Any], chunks: list[Any], raised: BaseException | None = None) -> str:
    with pytest.raises(CaseMismatch) as info:
        check_case(target, chunks, raised)
    return str(info.value)


def test_mismatches_are_reported() -> None:
    first = case("01")
    assert "text 'nope'" in mismatch(first, text_reply("nope"))
    assert "finish kind 'length'" in mismatch(first, text_reply("The answer is 42.", reason="length"))
    assert "raised" in mismatch(first, text_reply("The answer is 42.")[:3], LlmError("NETWORK", "x"))
    assert "no finish chunk" in mismatch(first, text_reply("The answer is 42.")[:3])
    assert "usage" in mismatch(first, text_reply("The answer is 42.", usage=TokenUsage(1, 1)))
    assert "does not match" in mismatch(first, [])
    assert "raw finish reason" in mismatch(case("10"), [*GOOD["10"][:-1], finish("tool-calls", "tool_calls")])
    assert "expected no text block" in mismatch(case("10"), [*[*text_reply("x")[:3], *GOOD["10"]][:-1], GOOD["10"][-1]])
    reasoning_first = [*GOOD["15"][:3], *[c for c in GOOD["15"][3:6]], finish("stop")]
    assert "expected no reasoning block" in mismatch(case("01"), reasoning_first)


def test_error_mismatches() -> None:
    raw = case("18")
    assert "must be delivered as finish" not in mismatch(raw, [], LlmError("SERVER", "x"))
    assert "error code 'SERVER'" in mismatch(raw, [], LlmError("SERVER", "x"))
    assert "lacks 'Rate limit exceeded'" in mismatch(raw, [], LlmError("RATE_LIMITED", "x"))
    assert "must be raised" in mismatch(raw, [finish("error", failure=RATE)])
    assert "expected LlmError" in mismatch(raw, [], KeyError("x"))
    assert "expected an error, got stop" in mismatch(raw, text_reply("x"))
    assert "expected an error, got no finish" in mismatch(raw, [])
    assert "chunks before the error" in mismatch(raw, text_reply("x")[:3], LlmError("RATE_LIMITED", "x"))
    only_finish = {"outcome": "error", "error_delivery": ["finish"], "error": {"code": "SERVER"}}
    assert "must be delivered as finish" in mismatch(only_finish, [], LlmError("SERVER", "x"))
    assert mismatch({"outcome": "finish"}, []).startswith("case <expect>:")


def test_tool_call_mismatches() -> None:
    calls = case("08")
    good = GOOD["08"]
    assert "1 tool calls, expected 2" in mismatch(calls, [*good[3:], *good[-2:]][:-2])
    swapped = [
        *tool_block(0, "call_x", "call_x", "other", '{"city": "Paris"}'),
        *tool_block(1, "call_b", "call_b", "get_time", "not json"),
        *good[-2:],
    ]
    text = mismatch(calls, swapped)
    assert "tool call 0 id 'call_x'" in text
    assert "tool call 0 name 'other'" in text
    assert 'tool call 0 arguments \'{"city": "Paris"}\'' in text
    assert "tool call 1 arguments are not JSON" in text
    wrong_value = [*tool_block(0, None, "call_a", "get_weather", '{"city":"Rome"}'), *good[3:]]
    assert "tool call 0 arguments {'city': 'Rome'}" in mismatch(calls, wrong_value)
    assert "tool-call deltas although no tool call" in mismatch(case("01"), [*GOOD["10"][:2], *text_reply("x")])


def test_usage_mismatches() -> None:
    paris = case("06")
    assert "no usage chunk" in mismatch(paris, text_reply("Paris."))
    assert "usage output_tokens 5" in mismatch(paris, text_reply("Paris.", usage=TokenUsage(14, 5)))
    overloaded = case("13")
    wrong = [*text_reply(TEXT_13)[:3], Usage(TokenUsage(21, None)), finish("error", failure=OVERLOADED)]
    assert "usage input_tokens 21" in mismatch(overloaded, wrong)
    check_case(overloaded, [*text_reply(TEXT_13)[:3], finish("error", failure=OVERLOADED)])
    nothing_sent = {"usage": None}
    check_case(nothing_sent, [Usage(TokenUsage(None, None)), finish("stop")])
    assert "although the provider sent none" in mismatch(nothing_sent, [Usage(TokenUsage(1, None)), finish("stop")])


def test_bare_expectations() -> None:
    expect = {
        "outcome": "finish",
        "sequence": ["block-start:tool-call", "tool-call-delta*", "block-end", "finish:tool-calls"],
        "tool_calls": [{"name": "get_time"}],
    }
    check_case(expect, [*tool_block(0, "call_b", "call_b", "get_time", "{}"), GOOD["08"][-1]])


def test_obligation_violations_are_reported() -> None:
    assert "stream obligation broken" in mismatch(case("03"), [*text_reply("Hello there"), finish("stop")])


def test_without_the_variable_the_folder_is_beside_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = tmp_path / "repo"
    checkout.mkdir()
    monkeypatch.delenv("HARNESS_CASES_DIR")
    monkeypatch.chdir(checkout)
    assert cases_dir() == tmp_path / "shared" / "cases"


def test_a_null_id_accepts_any_generated_id_but_ids_stay_unique() -> None:
    expect = {"tool_calls": [{"id": None, "name": "a"}, {"id": None, "name": "b"}]}
    end = finish("tool-calls")
    check_case(expect, [*tool_block(0, "gen_1", "gen_1", "a", "{}"), *tool_block(1, "gen_2", "gen_2", "b", "{}"), end])
    same = [*tool_block(0, "gen_1", "gen_1", "a", "{}"), *tool_block(1, "gen_1", "gen_1", "b", "{}"), end]
    assert "ids are not unique" in mismatch(expect, same)
    empty = [*tool_block(0, "", "", "a", "{}"), *tool_block(1, "gen_2", "gen_2", "b", "{}"), end]
    assert "tool call 0 has an empty id" in mismatch(expect, empty)
