"""The vocabulary: exact JSON round trips, wire names, canonical JSON."""

from __future__ import annotations

import msgspec
import pytest

from harness_core import (
    AbortSignal,
    BlockEnd,
    BlockStart,
    Failure,
    Finish,
    FinishReason,
    GenerateOptions,
    Message,
    ModelInfo,
    NamedToolChoice,
    ReasoningBlock,
    ReasoningDelta,
    ReasoningSignature,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    ToolSpec,
    Usage,
    canonical_json,
)

CHUNKS: list[StreamChunk] = [
    BlockStart(0, "reasoning", signed=True),
    ReasoningDelta(0, "think é😀"),
    BlockEnd(0, ReasoningBlock("think é😀", signed=True, signature=ReasoningSignature("anthropic", "m", "c2ln"))),
    BlockStart(1, "text"),
    TextDelta(1, "hi"),
    BlockEnd(1, TextBlock("hi")),
    BlockStart(2, "tool-call", id="call_1", name="get"),
    ToolCallDelta(2, "call_1", '{"a": 1 }', name="get"),
    BlockEnd(2, ToolCallBlock("call_1", "get", '{"a": 1 }')),
    Usage(TokenUsage(10, 5, cache_read_tokens=3, reasoning_tokens=2)),
    Finish(
        FinishReason(
            "error",
            raw="error",
            failure=Failure("OVERLOADED", "busy", retryable=True, status=529, retry_after=1.5),
        ),
        replay_state={"v": 1, "blocks": {"0": {"signature": "abc"}}},
    ),
]


def test_chunks_round_trip_exactly() -> None:
    encoded = msgspec.json.encode(CHUNKS)
    assert msgspec.json.decode(encoded, type=list[StreamChunk]) == CHUNKS


@pytest.mark.parametrize(
    ("chunk", "wire_name"),
    [
        (BlockStart(0, "text"), "block-start"),
        (TextDelta(0, "x"), "text-delta"),
        (ReasoningDelta(0, "x"), "reasoning-delta"),
        (ToolCallDelta(0, "i", "{}"), "tool-call-delta"),
        (BlockEnd(0, TextBlock("x")), "block-end"),
        (Usage(TokenUsage(None, None)), "usage"),
        (Finish(FinishReason("stop")), "finish"),
    ],
)
def test_type_tag_is_the_wire_name(chunk: StreamChunk, wire_name: str) -> None:
    assert msgspec.to_builtins(chunk)["type"] == wire_name


def test_defaults_are_omitted_and_unknown_usage_is_null() -> None:
    assert msgspec.json.encode(Usage(TokenUsage(None, 3))) == (
        b'{"type":"usage","usage":{"input_tokens":null,"output_tokens":3}}'
    )
    assert msgspec.json.encode(BlockStart(0, "text")) == b'{"type":"block-start","index":0,"block_type":"text"}'


def test_message_round_trip_keeps_route_source_and_replay_state() -> None:
    message = Message(
        role="assistant",
        content=[TextBlock("a"), ToolCallBlock("c", "echo", "{}")],
        route="openai",
        source="openai:work",
        replay_state={"id": "resp_1"},
    )
    tool = Message(role="tool", content=[ToolResultBlock("c", "boom", is_error=True)])
    decoded = msgspec.json.decode(msgspec.json.encode([message, tool]), type=list[Message])
    assert decoded == [message, tool]
    assert message.text == "a"
    assert message.tool_calls == [ToolCallBlock("c", "echo", "{}")]
    assert Message.user("hello") == Message(role="user", content=[TextBlock("hello")])


def test_generate_options_is_frozen_and_derived_with_replace() -> None:
    options = GenerateOptions(route="mock", model="echo", messages=[Message.user("x")])
    with pytest.raises(AttributeError):
        options.model = "other"  # type: ignore[misc]
    changed = msgspec.structs.replace(options, model="other")
    assert (changed.model, options.model) == ("other", "echo")


def test_canonical_json_drops_abort_and_metadata_and_sorts_keys() -> None:
    base = GenerateOptions(
        route="mock",
        model="echo",
        messages=[Message.user("x")],
        tools=[ToolSpec("echo", "Echo text")],
        tool_choice=NamedToolChoice("echo"),
    )
    with_extras = msgspec.structs.replace(base, abort=AbortSignal(), metadata={"user": "u1"})
    assert canonical_json(base) == canonical_json(with_extras)
    decoded = msgspec.json.decode(canonical_json(base))
    assert list(decoded) == sorted(decoded)
    assert "abort" not in decoded
    assert "metadata" not in decoded
    assert decoded["tool_choice"] == {"name": "echo"}
    assert canonical_json(base) != canonical_json(msgspec.structs.replace(base, temperature=0.5))


def test_tool_spec_default_parameters_are_an_empty_object_schema() -> None:
    assert ToolSpec("t").parameters == {"type": "object", "properties": {}}
    assert ToolSpec("a").parameters is not ToolSpec("b").parameters


def test_model_info_round_trip() -> None:
    info = ModelInfo(model="m", reasoning_efforts=["off", "low", "high"], default_effort="low")
    assert msgspec.json.decode(msgspec.json.encode(info), type=ModelInfo) == info


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"messages": "hello"}, TypeError, "messages must be a list, got str"),
        ({"messages": ["hello"]}, TypeError, r"messages\[0\] has the wrong type: str"),
        ({"tools": [{"name": "x"}]}, TypeError, r"tools\[0\] has the wrong type: dict"),
        (
            {"tools": [ToolSpec("a"), ToolSpec("b"), ToolSpec("a")]},
            ValueError,
            r"^GenerateOptions\.tools\[2\]\.name 'a' is offered more than once: tool names must be unique$",
        ),
        ({"model": 5}, TypeError, "model must be a str or None, got int"),
        ({"max_tokens": "10"}, TypeError, "max_tokens must be a number or None, got str"),
        ({"max_tokens": True}, TypeError, "max_tokens must be a number or None, got bool"),
        ({"max_tokens": 0}, ValueError, "max_tokens must be at least 1, got 0"),
        (
            {"max_tokens": 10**30},
            ValueError,
            r"max_tokens must be an integer in range \(at most 2147483647\), got 1000000000000000000000000000000$",
        ),
        ({"temperature": -0.5}, ValueError, "temperature must be at least 0, got -0.5"),
        ({"top_p": 1.5}, ValueError, "top_p must be between 0 and 1, got 1.5"),
        ({"seed": 1.5}, TypeError, "seed must be a number or None, got float"),
        ({"stop": "END"}, TypeError, "stop must be a list, got str"),
        ({"tool_choice": "any"}, TypeError, "tool_choice must be 'auto', 'none', 'required' or a NamedToolChoice"),
        ({"provider_options": {"openai": 1}}, TypeError, "provider_options must be a dict of dicts"),
        ({"metadata": []}, TypeError, "metadata must be a dict, got list"),
        ({"abort": "yes"}, TypeError, "abort must be an AbortSignal or None, got str"),
    ],
)
def test_generate_options_reject_wrong_shapes_naming_the_field(
    fields: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        GenerateOptions(**fields)  # type: ignore[arg-type]
    with pytest.raises(error, match=message):
        msgspec.structs.replace(GenerateOptions(), **fields)


def test_generate_options_accept_every_valid_shape() -> None:
    options = GenerateOptions(
        route="p",
        model="m",
        system="s",
        reasoning_effort="low",
        messages=[Message.user("x")],
        tools=[ToolSpec("t")],
        max_tokens=1,
        seed=3,
        temperature=0,
        top_p=1,
        stop=["END"],
        tool_choice="required",
        provider_options={"openai": {"top_k": 3}},
        metadata={"user": "u"},
        abort=AbortSignal(),
    )
    assert msgspec.structs.replace(options, tool_choice=NamedToolChoice("t")).tool_choice == NamedToolChoice("t")


def test_a_reasoning_signature_binds_its_provider_and_model_and_hides_its_value_in_repr() -> None:
    signature = ReasoningSignature("anthropic", "claude-x", "S" * 300)
    assert signature.binds("anthropic", "claude-x")
    assert not signature.binds("anthropic", "claude-y")
    assert not signature.binds("openai", "claude-x")
    assert not signature.binds(None, "claude-x")
    assert repr(signature) == "ReasoningSignature('anthropic', 'claude-x', 300 chars)"
    redacted = ReasoningSignature("anthropic", None, "DATA", redacted=True)
    assert repr(redacted) == "ReasoningSignature('anthropic', None, redacted, 4 chars)"
    assert redacted.binds("anthropic", None)
    block = ReasoningBlock("", signed=True, signature=redacted)
    encoded = msgspec.json.encode(block)
    assert encoded == (
        b'{"type":"reasoning","text":"","signed":true,'
        b'"signature":{"provider":"anthropic","model":null,"value":"DATA","redacted":true}}'
    )
    assert msgspec.json.decode(encoded, type=ReasoningBlock) == block
    assert msgspec.json.encode(ReasoningBlock("t")) == b'{"type":"reasoning","text":"t"}'  # unchanged without one


def test_a_reasoning_block_refuses_a_bad_signature_naming_it() -> None:
    with pytest.raises(TypeError, match=r"ReasoningBlock\.signature must be a ReasoningSignature or None, got str"):
        ReasoningBlock("t", signed=True, signature="SIG")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not signed"):
        ReasoningBlock("t", signature=ReasoningSignature("anthropic", "m", "S"))
    with pytest.raises(msgspec.ValidationError, match="not signed"):
        msgspec.json.decode(
            b'{"type":"reasoning","text":"t","signature":{"provider":"a","model":"m","value":"S"}}', type=ReasoningBlock
        )
