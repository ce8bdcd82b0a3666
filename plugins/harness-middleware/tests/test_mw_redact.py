"""redact: requests and streamed replies masked; secrets split at every offset; signed reasoning untouched."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from mw_helpers import Script, collect, finish, options, reasoning_chunks, stop, text_chunks, tool_chunks

from harness_core.errors import LlmError
from harness_core.types import (
    BlockEnd,
    BlockStart,
    FileBlock,
    GenerateOptions,
    Message,
    ReasoningBlock,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
)
from harness_middleware.redact import PRESETS, Masker, RedactPlugin

pytestmark = pytest.mark.anyio

KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123"
SAMPLES = [
    f"my key is {KEY} ok",
    "mail bob.smith@example.co.uk now",
    f"ends with {KEY}",
    "aws AKIA" + "ABCDEFGHIJKLMNOP and Authorization: Bearer abcdefghijklmnop.QRSTUVWX== x",
    "no secret here at all, just words",
    "two: a@b.io,c@d.io",
]


def plugin(**config: Any) -> RedactPlugin:
    return RedactPlugin(msgspec.convert(config, RedactPlugin.Config))


def splits(text: str) -> list[list[str]]:
    """Every 2-way split, every 3-way split around each offset pair step 3, and 1-char pieces."""
    out = [[text[:i], text[i:]] for i in range(1, len(text))]
    out += [[text[:i], text[i:j], text[j:]] for i in range(1, len(text), 3) for j in range(i + 1, len(text), 5)]
    out.append(list(text))
    return out


def delta_text(chunks: list[StreamChunk]) -> str:
    return "".join(c.text for c in chunks if isinstance(c, TextDelta))


def test_presets_are_bounded() -> None:
    assert RedactPlugin.Config().max_match_length is None  # no bound asked for
    assert set(PRESETS) >= {"openai-key", "aws-access-key", "bearer", "email"}
    plugin(max_match_length=212)  # the longest preset match


def test_whole_text_masking() -> None:
    masker = plugin().masker
    assert masker.mask(SAMPLES[0]) == "my key is [REDACTED:openai-key] ok"
    assert masker.mask(SAMPLES[1]) == "mail [REDACTED:email] now"
    assert masker.mask(SAMPLES[3]) == ("aws [REDACTED:aws-access-key] and Authorization: [REDACTED:bearer] x")
    assert masker.mask(SAMPLES[4]) == SAMPLES[4]


@pytest.mark.parametrize("text", SAMPLES)
async def test_every_split_masks_like_the_whole_text(text: str) -> None:
    p = plugin()
    expected = p.masker.mask(text)
    for pieces in splits(text):
        chunks = await collect(p.llm_stream(options(), Script([*text_chunks(*pieces), stop()])))
        assert delta_text(chunks) == expected, pieces
        end = next(c for c in chunks if isinstance(c, BlockEnd))
        assert end.block == TextBlock(expected)
        assert "sk-proj" not in delta_text(chunks)


async def test_non_secret_text_is_not_held_back() -> None:
    p = plugin()
    stream = p.masker.stream()
    assert stream.feed("hello, ") == "hello, "  # nothing here can start a match
    assert stream.feed("bob") == ""  # could be the start of an e-mail address: held
    assert stream.feed("@example.com") == ""  # still growing at the end
    assert stream.feed(" hi") == "[REDACTED:email] "  # decided: released at once; "hi" may start one
    assert stream.feed("x" * 300) == "hi" + "x" * 300  # a local part is at most 64 characters
    assert stream.feed("  carol") == "  "
    assert stream.flush() == "carol"
    assert stream.emitted == "hello, [REDACTED:email] hi" + "x" * 300 + "  carol"


def test_a_long_match_is_masked_whole() -> None:
    masker = Masker({"p": r"ab+c", "q": r"xy{2,}"}, "<{name}>")
    stream = masker.stream()
    assert stream.feed("zz abbbbb") == "zz "  # undecided: held however long
    assert stream.feed("bc xyyyyyy") == "<p> "
    assert stream.feed("y") == ""
    assert stream.feed("z") == "<q>z"
    assert stream.flush() == ""


def test_no_patterns() -> None:
    masker = Masker({}, "<{name}>")
    assert masker.mask("sk-anything") == "sk-anything"
    stream = masker.stream()
    assert stream.feed("abc") == "abc"
    assert stream.flush() == ""


async def test_no_presets_passes_text_through() -> None:
    chunks = await collect(plugin(presets=[]).llm_stream(options(), Script([*text_chunks("a", KEY), stop()])))
    assert delta_text(chunks) == "a" + KEY


async def test_custom_pattern_and_replacement() -> None:
    p = plugin(presets=["emails"], patterns={"ticket": r"TICKET-\d{4}"}, replacement="***")
    chunks = await collect(p.llm_stream(options(), Script([*text_chunks("see TICK", "ET-1234 or x@y.io"), stop()])))
    assert delta_text(chunks) == "see *** or ***"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"patterns": {"bad": "("}}, "not a valid regular expression"),
        ({"patterns": {"empty": "a*"}}, "matches the empty string"),
        ({"replacement": "{nope}"}, "replacement"),
        ({"replacement": "{"}, "replacement"),
    ],
)
def test_invalid_config(config: dict[str, Any], message: str) -> None:
    with pytest.raises(LlmError, match=message) as caught:
        plugin(**config)
    assert caught.value.code == "CONFIG"


def test_unknown_preset_rejected_by_config() -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"presets": ["nope"]}, RedactPlugin.Config)


async def test_request_is_masked() -> None:
    history = [
        Message(role="user", content=[TextBlock(f"key {KEY}"), FileBlock("text/plain", data=KEY.encode())]),
        Message(
            role="assistant",
            content=[
                ReasoningBlock(f"signed {KEY}", signed=True),
                ReasoningBlock(f"plain {KEY}"),
                ToolCallBlock(id="c1", name="f", arguments=f'{{"k": "{KEY}"}}'),
            ],
        ),
        Message(role="tool", content=[ToolResultBlock(tool_call_id="c1", content=f"result {KEY}")]),
    ]
    script = Script([stop()])
    await collect(plugin().llm_stream(GenerateOptions(route="fake", messages=history, system=f"sys {KEY}"), script))
    sent = script.calls[0]
    masked = "[REDACTED:openai-key]"
    assert sent.system == f"sys {masked}"
    # a file's bytes pass unchanged: masking text inside arbitrary media would corrupt it
    assert sent.messages[0].content == [TextBlock(f"key {masked}"), FileBlock("text/plain", data=KEY.encode())]
    assert sent.messages[1].content == [
        ReasoningBlock(f"signed {KEY}", signed=True),  # signed: never altered
        ReasoningBlock(f"plain {masked}"),
        ToolCallBlock(id="c1", name="f", arguments=f'{{"k": "{KEY}"}}'),  # arguments: not by default
    ]
    assert sent.messages[2].content == [ToolResultBlock(tool_call_id="c1", content=f"result {masked}")]


async def test_request_options_for_reasoning_and_tool_arguments() -> None:
    history = [
        Message(
            role="assistant",
            content=[ReasoningBlock(f"plain {KEY}"), ToolCallBlock(id="c1", name="f", arguments=f'"{KEY}"')],
        )
    ]
    script = Script([stop()])
    p = plugin(reasoning=False, tool_arguments=True)
    await collect(p.llm_stream(GenerateOptions(messages=history), script))
    assert script.calls[0].messages[0].content == [
        ReasoningBlock(f"plain {KEY}"),
        ToolCallBlock(id="c1", name="f", arguments='"[REDACTED:openai-key]"'),
    ]
    assert script.calls[0].system is None


async def test_requests_off() -> None:
    script = Script([stop()])
    await collect(plugin(requests=False).llm_stream(options(KEY), script))
    assert script.calls[0].messages[0].content == [TextBlock(KEY)]


async def test_responses_off() -> None:
    expected = [*text_chunks(KEY), stop()]
    assert await collect(plugin(responses=False).llm_stream(options(), Script(expected))) == expected


async def test_signed_reasoning_is_never_altered() -> None:
    expected = [*reasoning_chunks("think ", KEY, signed=True), stop()]
    assert await collect(plugin().llm_stream(options(), Script(expected))) == expected


async def test_unsigned_reasoning_is_masked_unless_disabled() -> None:
    script = [*reasoning_chunks("think ", KEY[:5], KEY[5:]), stop()]
    chunks = await collect(plugin().llm_stream(options(), Script(script)))
    assert chunks[-2] == BlockEnd(index=0, block=ReasoningBlock("think [REDACTED:openai-key]"))
    assert await collect(plugin(reasoning=False).llm_stream(options(), Script(script))) == script


async def test_tool_arguments_default_untouched() -> None:
    expected = [*tool_chunks('{"k": "', KEY, '"}'), finish("tool-calls")]
    assert await collect(plugin().llm_stream(options(), Script(expected))) == expected


async def test_tool_arguments_masked_when_enabled() -> None:
    script: list[StreamChunk] = [
        BlockStart(index=0, block_type="tool-call", id="c1"),
        ToolCallDelta(index=0, id="c1", name="lookup", arguments_delta='{"k": "sk-'),
        ToolCallDelta(index=0, id="c1", arguments_delta=KEY[3:]),
        ToolCallDelta(index=0, id="c1", arguments_delta='"}'),
        BlockEnd(index=0, block=ToolCallBlock(id="c1", name="lookup", arguments=f'{{"k": "{KEY}"}}')),
        BlockStart(index=1, block_type="tool-call", id="c2", name="empty"),
        BlockEnd(index=1, block=ToolCallBlock(id="c2", name="empty", arguments="{}")),
        BlockStart(index=2, block_type="tool-call", id="c3", name="tail"),
        ToolCallDelta(index=2, id="c3", name="tail", arguments_delta=f'"{KEY}'),
        BlockEnd(index=2, block=ToolCallBlock(id="c3", name="tail", arguments=f'"{KEY}')),
        finish("tool-calls"),
    ]
    chunks = await collect(plugin(tool_arguments=True).llm_stream(options(), Script(script)))
    deltas = [c for c in chunks if isinstance(c, ToolCallDelta)]
    assert deltas[0] == ToolCallDelta(index=0, id="c1", name="lookup", arguments_delta='{"k": "')
    assert "".join(d.arguments_delta for d in deltas if d.index == 0) == '{"k": "[REDACTED:openai-key]"}'
    assert BlockEnd(index=1, block=ToolCallBlock(id="c2", name="empty", arguments="{}")) in chunks
    # a held-back tail is flushed as a final delta at block-end
    assert deltas[-2:] == [
        ToolCallDelta(index=2, id="c3", name="tail", arguments_delta='"'),
        ToolCallDelta(index=2, id="c3", arguments_delta="[REDACTED:openai-key]"),
    ]


async def test_block_end_without_deltas_is_masked_whole() -> None:
    # not a legal stream (content without deltas): masked anyway rather than leaked
    script: list[StreamChunk] = [
        BlockStart(index=0, block_type="text"),
        BlockEnd(index=0, block=TextBlock(KEY)),
        stop(),
    ]
    out = [c async for c in plugin().llm_stream(options(), Script(script))]
    assert out[1] == BlockEnd(index=0, block=TextBlock("[REDACTED:openai-key]"))


async def test_unknown_chunk_kinds_pass_through() -> None:
    class Odd(msgspec.Struct):
        index: int

    odd_in_block, odd_plain = Odd(index=0), object()
    script = [BlockStart(index=0, block_type="text"), odd_in_block, odd_plain, TextDelta(index=0, text="x"), stop()]
    out = [c async for c in plugin().llm_stream(options(), Script(script))]  # type: ignore[arg-type]
    assert out[1:3] == [odd_in_block, odd_plain]
