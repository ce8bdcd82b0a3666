"""Replay state reaches an adapter only from messages its own plugin instance produced
(docs/stream-obligations.md#9-replay-state)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from runtime_scripted import AdapterPlugin, ScriptedAdapter, reply

from harness_core import (
    Finish,
    FinishReason,
    GenerateOptions,
    Harness,
    Message,
    ReasoningBlock,
    ReasoningSignature,
    StreamChunk,
    TextBlock,
    hookimpl,
)
from harness_core.boundary import strip_replay

pytestmark = pytest.mark.anyio


class Seen:
    """Records the options the chain receives."""

    def __init__(self) -> None:
        self.options: list[GenerateOptions] = []

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        self.options.append(options)
        async for chunk in call_next(options):
            yield chunk


def history() -> list[Message]:
    return [
        Message.user("hi"),
        Message(role="assistant", content=[TextBlock("a")], route="work", source="openai:work", replay_state={"id": 1}),
        Message(role="assistant", content=[TextBlock("b")], route="home", source="openai:home", replay_state={"id": 2}),
        Message(role="assistant", content=[TextBlock("c")], replay_state={"orphan": True}),  # no source: never replayed
        Message.user("again"),
    ]


def replay_states(options: GenerateOptions) -> list[object]:
    return [m.replay_state for m in options.messages]


@pytest.mark.parametrize("round_trip", [False, True])
async def test_replay_kept_for_the_owner_and_stripped_for_others(round_trip: bool) -> None:
    messages = history()
    if round_trip:  # a saved and reloaded conversation behaves the same
        messages = msgspec.json.decode(msgspec.json.encode(messages), type=list[Message])
        assert messages == history()
    work, home, seen = ScriptedAdapter(reply()), ScriptedAdapter(reply()), Seen()
    plugins = [
        ("seen", seen),
        ("openai:work", AdapterPlugin(work, ["work"])),
        ("openai:home", AdapterPlugin(home, ["home"])),
    ]
    async with Harness(plugins) as harness:
        await harness.generate(GenerateOptions(route="work", messages=messages))
        await harness.generate(GenerateOptions(route="home", messages=messages))
        async with harness.stream(GenerateOptions(route="elsewhere", messages=messages)) as chunks:
            assert [type(chunk) async for chunk in chunks] == [Finish]  # NO_ADAPTER
    assert replay_states(work.calls[0]) == [None, {"id": 1}, None, None, None]
    assert replay_states(home.calls[0]) == [None, None, {"id": 2}, None, None]
    # stripped before the chain sees them (a cache keys on what the adapter will get)
    assert [replay_states(o) for o in seen.options] == [
        [None, {"id": 1}, None, None, None],
        [None, None, {"id": 2}, None, None],
        [None, None, None, None, None],
    ]
    assert [m.content for m in work.calls[0].messages] == [m.content for m in messages]


async def test_nothing_to_strip_passes_the_same_options() -> None:
    seen = Seen()
    options = GenerateOptions(route="work", model="m", messages=[Message.user("x")])
    async with Harness([("seen", seen), ("openai:work", AdapterPlugin(ScriptedAdapter(reply()), ["work"]))]) as h:
        await h.generate(options)
    [passed] = seen.options
    assert passed.messages is options.messages  # not copied: nothing to strip
    record = passed.metadata.pop("harness.record")  # the stream's record is all the core adds
    assert passed == options
    assert (record.requested_route, record.served_route) == ("work", "work")


class Reroute:
    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        async for chunk in call_next(msgspec.structs.replace(options, route="home")):
            yield chunk


async def test_a_rerouted_request_is_stripped_for_the_new_owner() -> None:
    """``work``'s state survives the pre-chain strip; the boundary strips it for ``home``'s adapter."""
    work, home = ScriptedAdapter(reply()), ScriptedAdapter(reply())
    plugins = [
        ("reroute", Reroute()),
        ("openai:work", AdapterPlugin(work, ["work"])),
        ("openai:home", AdapterPlugin(home, ["home"])),
    ]
    async with Harness(plugins) as harness:
        await harness.generate(GenerateOptions(route="work", messages=history()))
    assert replay_states(home.calls[0]) == [None, None, None, None, None]


async def test_generated_message_carries_route_source_and_replay_for_the_next_turn() -> None:
    script = [*reply("one")[:-1], Finish(FinishReason(kind="stop"), replay_state={"response_id": "resp_1"})]
    work = ScriptedAdapter(script)
    async with Harness([("openai:work", AdapterPlugin(work, ["work"]))]) as harness:
        first = await harness.generate(GenerateOptions(route="work", messages=[Message.user("q")]))
        assert first.replay_state == {"response_id": "resp_1"}
        assert (first.message.route, first.message.source) == ("work", "openai:work")
        saved = msgspec.json.encode([Message.user("q"), first.message, Message.user("q2")])
        messages = msgspec.json.decode(saved, type=list[Message])
        await harness.generate(GenerateOptions(route="work", messages=messages))
    assert work.calls[1].messages[1].replay_state == {"response_id": "resp_1"}


SIGNED = ReasoningSignature("openai", "m", "SIG")


def signed_history() -> list[Message]:
    thinking = ReasoningBlock("hmm", signed=True, signature=SIGNED)
    return [
        Message.user("hi"),
        Message(
            role="assistant",
            content=[thinking, TextBlock("a")],
            route="work",
            source="openai:work",
            replay_state={"id": 1},
        ),
        Message.user("again"),
    ]


def signatures(options: GenerateOptions) -> list[object]:
    return [getattr(block, "signature", None) for m in options.messages for block in m.content]


@pytest.mark.parametrize("round_trip", [False, True])
async def test_a_typed_signature_is_kept_for_the_same_provider_and_model_only(round_trip: bool) -> None:
    messages = signed_history()
    if round_trip:  # a saved and reloaded conversation behaves the same
        messages = msgspec.json.decode(msgspec.json.encode(messages), type=list[Message])
        assert messages == signed_history()
    work, home, acme = ScriptedAdapter(reply()), ScriptedAdapter(reply()), ScriptedAdapter(reply())
    plugins = [
        ("openai:work", AdapterPlugin(work, ["work"])),
        ("openai:home", AdapterPlugin(home, ["home"])),
        ("acme", AdapterPlugin(acme, ["acme"])),
    ]
    async with Harness(plugins) as harness:
        await harness.generate(GenerateOptions(route="work", model="m", messages=messages))  # same instance
        await harness.generate(GenerateOptions(route="work", model="other", messages=messages))  # another model
        await harness.generate(GenerateOptions(route="home", model="m", messages=messages))  # another instance
        await harness.generate(GenerateOptions(route="acme", model="m", messages=messages))  # another provider
    kept, unsigned = [None, SIGNED, None, None], [None, None, None, None]
    assert signatures(work.calls[0]) == kept
    assert signatures(work.calls[1]) == unsigned
    assert work.calls[1].messages[1].replay_state == {"id": 1}  # its own instance's state stays
    assert work.calls[1].messages[1].content[0] == ReasoningBlock("hmm", signed=True)  # the block stays, signed
    assert signatures(home.calls[0]) == kept
    assert home.calls[0].messages[1].replay_state is None  # another instance: replay_state goes, the signature not
    assert signatures(acme.calls[0]) == unsigned
    assert acme.calls[0].messages[1].replay_state is None


def test_strip_replay_without_an_owner_drops_every_signature_and_keeps_other_messages() -> None:
    options = GenerateOptions(model="m", messages=signed_history())
    stripped = strip_replay(options, None)
    assert signatures(stripped) == [None, None, None, None]
    assert stripped.messages[0] is options.messages[0]  # a user message is never copied
    assert stripped.messages[1].replay_state is None
    same = GenerateOptions(model="m", messages=[m for m in signed_history() if m.role == "assistant"])
    same = msgspec.structs.replace(same, messages=[msgspec.structs.replace(same.messages[0], replay_state=None)])
    assert strip_replay(same, "openai:elsewhere") is same  # same provider and model, no replay_state: untouched
