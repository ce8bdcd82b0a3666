"""Stored responses (``store``, ``previous_response_id``, ``GET`` / ``DELETE /v1/responses/{id}``,
``input_items``): the official ``openai`` SDK against a real gateway over scripted providers and
the mock, ownership by key, retention with the clock driven by a parameter, and the store's rows."""

from __future__ import annotations

import functools
import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import openai
import pytest
from gw_helpers import Clients, gateway_yaml, ledger_rows, openai_sse, serve_gateway, wait_until
from test_gw_cross import anthropic_events
from test_gw_keys import MASTER, create_key

from harness_core.errors import Failure
from harness_core.testing import Reply, ScriptedServer
from harness_core.types import BlockStart, Finish, FinishReason, TextBlock, TextDelta, TokenUsage, Usage
from harness_gateway.config import RETENTION_MAX, GatewayConfig, ResponsesConfig, duration_seconds
from harness_gateway.dialect import Ending
from harness_gateway.errors import GatewayError
from harness_gateway.keys import KeyRecord
from harness_gateway.openai_responses import (
    OPENAI_RESPONSES,
    ResponsesStreamEncoder,
    continued,
    pack_state,
    parse_responses_request,
)
from harness_gateway.responses_store import (
    StoredResponse,
    chain,
    delete,
    fetch,
    follow_retention,
    input_items_page,
    owner_of,
    purge,
    purge_expired,
    purge_forever,
    put,
)
from harness_gateway.sqlite import SQLiteStore

CLAUDE = "  anthropic:claude: {{base_url: '{}', api_key: dummy-key, routes: [claude]}}"


def test_previous_response_id_rebuilds_the_conversation_with_the_stored_thinking(tmp_path: Path) -> None:
    provider = ScriptedServer(*(Reply(reads=anthropic_events()) for _ in range(3)))
    with (
        provider,
        serve_gateway(tmp_path, gateway_yaml("", CLAUDE.format(provider.url), db=tmp_path / "gw.sqlite")) as running,
    ):
        clients = Clients(running.url)
        try:
            client = clients.openai()
            first = client.responses.create(model="claude/claude-x", instructions="be brief", input="hi")
            assert first.model_dump()["store"] is True
            assert all(getattr(item, "encrypted_content", None) is None for item in first.output)  # not asked for
            with client.responses.stream(
                model="claude/claude-x", input="again", previous_response_id=first.id
            ) as stream:
                second = stream.get_final_response()
            assert second.previous_response_id == first.id
            sent = provider.requests[1].json()
            assert "system" not in sent  # the first turn's instructions are not carried over (as the API does)
            assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
            thinking, text = sent["messages"][1]["content"]
            assert thinking == {"type": "thinking", "thinking": "hmm", "signature": "SIG-1"}  # byte for byte
            assert text == {"type": "text", "text": "Hello"}
            assert sent["messages"][2]["content"] == [{"type": "text", "text": "again"}]

            third = client.responses.create(model="claude/claude-x", input="once more", previous_response_id=second.id)
            messages = provider.requests[2].json()["messages"]
            assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
            assert messages[3]["content"][0]["signature"] == "SIG-1"  # the second turn's own state

            kept = client.responses.retrieve(second.id)
            assert (kept.id, kept.status, kept.output_text) == (second.id, "completed", "Hello")
            assert kept.usage == second.usage
            assert [i.model_dump()["id"] for i in kept.output] == [i.model_dump()["id"] for i in second.output]
            assert kept.previous_response_id == first.id
            items = client.responses.input_items.list(first.id)
            assert [item.model_dump()["content"][0]["text"] for item in items.data] == ["hi"]
            assert items.data[0].id == f"{first.id}_in_0"

            client.responses.delete(first.id)  # the SDK returns nothing (the body: test_delete_answers_…)
            raw = httpx.delete(f"{running.url}/v1/responses/{first.id}")
            assert raw.status_code == 404
            with pytest.raises(openai.NotFoundError) as missing:
                client.responses.retrieve(first.id)
            assert missing.value.code == "response_not_found"
            with pytest.raises(openai.NotFoundError) as broken:  # the chain runs through the deleted response
                client.responses.create(model="claude/claude-x", input="x", previous_response_id=third.id)
            assert broken.value.param == "previous_response_id"
            assert len(provider.requests) == 3  # refused before the provider was asked
        finally:
            clients.close()


def test_delete_answers_the_deleted_object(tmp_path: Path) -> None:
    with serve_gateway(tmp_path, gateway_yaml(db=tmp_path / "gw.sqlite")) as running:
        created = httpx.post(running.url + "/v1/responses", json={"model": "mock/echo", "input": "hi"}).json()
        answer = httpx.delete(f"{running.url}/v1/responses/{created['id']}")
        assert answer.json() == {"id": created["id"], "object": "response", "deleted": True}
        assert httpx.get(f"{running.url}/v1/responses/{created['id']}/input_items").status_code == 404


def test_store_false_keeps_nothing(tmp_path: Path) -> None:
    with serve_gateway(tmp_path, gateway_yaml(db=tmp_path / "gw.sqlite")) as running:
        clients = Clients(running.url)
        try:
            client = clients.openai()
            reply = client.responses.create(model="mock/echo", input="hi", store=False)
            assert reply.model_dump()["store"] is False
            with pytest.raises(openai.NotFoundError):
                client.responses.retrieve(reply.id)
            with pytest.raises(openai.NotFoundError) as continued_from:
                client.responses.create(model="mock/echo", input="x", previous_response_id=reply.id)
            assert continued_from.value.code == "previous_response_not_found"
            with client.responses.stream(model="mock/echo", input="hi", store=False) as stream:
                streamed = stream.get_final_response()
            with pytest.raises(openai.NotFoundError):
                client.responses.retrieve(streamed.id)
        finally:
            clients.close()
    rows = sqlite3.connect(tmp_path / "gw.sqlite").execute("SELECT count(*) FROM gateway_responses").fetchone()
    assert rows == (0,)


def test_the_mock_sees_the_earlier_turns_through_a_stream(tmp_path: Path) -> None:
    with serve_gateway(tmp_path, gateway_yaml(db=tmp_path / "gw.sqlite")) as running:
        clients = Clients(running.url)
        try:
            client = clients.openai()
            with client.responses.stream(model="mock/echo", input="one two three") as stream:
                first = stream.get_final_response()
            second = client.responses.create(model="mock/echo", input="four", previous_response_id=first.id)
            assert second.output_text == "four"
            assert second.usage is not None
            assert second.usage.input_tokens == 3 + 3 + 1  # the first turn's input and output, then its own
        finally:
            clients.close()


@pytest.fixture
def keyed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("GW_MASTER", MASTER)
    settings = "    require_keys: true\n    master_key: ${{ env.GW_MASTER }}\n"
    with serve_gateway(tmp_path, gateway_yaml(settings, db=tmp_path / "gw.sqlite")) as running:
        yield running


def test_a_key_sees_only_its_own_responses_and_the_master_key_all(keyed) -> None:  # type: ignore[no-untyped-def]
    clients = Clients(keyed.url)
    try:
        mine = clients.openai(create_key(keyed, "--name", "mine"))
        theirs = clients.openai(create_key(keyed, "--name", "theirs"))
        master = clients.openai(MASTER)
        made = mine.responses.create(model="mock/echo", input="secret plans")
        assert mine.responses.retrieve(made.id).output_text == "secret plans"
        with pytest.raises(openai.NotFoundError) as hidden:
            theirs.responses.retrieve(made.id)
        assert hidden.value.code == "response_not_found"  # the same answer as for an id never issued
        with pytest.raises(openai.NotFoundError) as foreign:
            theirs.responses.create(model="mock/echo", input="x", previous_response_id=made.id)
        assert (foreign.value.code, foreign.value.param) == ("previous_response_not_found", "previous_response_id")
        with pytest.raises(openai.NotFoundError):
            theirs.responses.input_items.list(made.id)
        assert httpx.delete(
            f"{keyed.url}/v1/responses/{made.id}", headers={"authorization": "Bearer " + theirs.api_key}
        ).status_code == 404  # fmt: skip
        assert master.responses.retrieve(made.id).id == made.id
        follow = master.responses.create(model="mock/echo", input="more", previous_response_id=made.id)
        with pytest.raises(openai.NotFoundError):  # the master key's own response is not the key's
            mine.responses.retrieve(follow.id)
        assert httpx.get(f"{keyed.url}/v1/responses/{made.id}").status_code == 401
    finally:
        clients.close()


def test_stored_responses_hold_no_secret_and_ids_are_the_gateways(keyed) -> None:  # type: ignore[no-untyped-def]
    """What a stored Response keeps is masked: the configuration's secrets (the master key here)
    and gateway keys quoted in the input or the reply; two keys sending one ``x-request-id`` get
    two responses, each stored and each its own (the id is the gateway's, never the client's)."""
    clients = Clients(keyed.url)
    try:
        mine_key, theirs_key = create_key(keyed, "--name", "mine"), create_key(keyed, "--name", "theirs")
        mine = clients.openai(mine_key)
        theirs = clients.openai(theirs_key)
        quoted = f"echo {MASTER} and {theirs_key}"
        same = {"x-request-id": "dup-id-1"}
        made = mine.responses.create(model="mock/echo", input=quoted, extra_headers=same)
        other = theirs.responses.create(model="mock/echo", input="hello", extra_headers=same)
        assert made.id != other.id
        assert (made.model_dump()["store"], other.model_dump()["store"]) == (True, True)
        assert theirs.responses.retrieve(other.id).output_text == "hello"
        again = theirs.responses.create(model="mock/echo", input="more", previous_response_id=other.id)
        assert again.model_dump()["store"] is True
        items = json.dumps([item.model_dump() for item in mine.responses.input_items.list(made.id)])
        assert MASTER not in items
        assert theirs_key not in items
        assert "**********" in items
        stored = mine.responses.retrieve(made.id).model_dump_json()
        assert MASTER not in stored
        assert theirs_key not in stored
    finally:
        clients.close()
    with sqlite3.connect(keyed.config.parent / "gw.sqlite") as db:
        dumped = "\n".join(db.iterdump())
    assert MASTER not in dumped
    assert theirs_key not in dumped


def test_input_items_pages_like_the_api(tmp_path: Path) -> None:
    with serve_gateway(tmp_path, gateway_yaml(db=tmp_path / "gw.sqlite")) as running:
        items = [
            {"type": "message", "role": "user", "content": "a", "id": "own"},
            {"role": "assistant", "content": "b"},  # easy messages: listed in the API's shape
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "c"}]},
        ]
        created = httpx.post(running.url + "/v1/responses", json={"model": "mock/echo", "input": items}).json()
        base = f"{running.url}/v1/responses/{created['id']}/input_items"
        newest = httpx.get(base, params={"limit": "2"}).json()
        assert [item["content"] for item in newest["data"]] == [
            [{"type": "input_text", "text": "c"}],
            [{"type": "output_text", "text": "b", "annotations": []}],
        ]  # desc by default
        assert [item["type"] for item in newest["data"]] == ["message", "message"]
        assert (newest["first_id"], newest["has_more"]) == (f"{created['id']}_in_2", True)
        rest = httpx.get(base, params={"after": newest["last_id"]}).json()
        assert [item["id"] for item in rest["data"]] == ["own"]
        assert rest["has_more"] is False
        oldest = httpx.get(base, params={"order": "asc", "after": "own"}).json()
        assert [item["content"][0]["text"] for item in oldest["data"]] == ["b", "c"]
        for query, param in (
            ({"order": "up"}, "order"),
            ({"limit": "0"}, "limit"),
            ({"after": "x"}, "after"),
            ("order=asc&order=desc", "order"),  # given twice: one was kept in silence
        ):
            answer = httpx.get(base, params=query)
            assert answer.status_code == 400
            assert (answer.json()["error"]["param"], answer.json()["error"]["code"]) == (param, "invalid_value")


# ---------------------------------------------------------------------- the store, the clock a parameter

T0 = 1_800_000_000.0


def record(response_id: str, *, previous: str | None = None, owner: str = "", at: float = T0) -> StoredResponse:
    return StoredResponse(
        id=response_id, owner=owner, previous_id=previous, route="mock", model="echo", source="mock",
        replay_state={"n": response_id}, input_items=[{"type": "message", "role": "user", "content": response_id}],
        response={"id": response_id, "output": []}, created_at=at, expires_at=at + 60,
    )  # fmt: skip


def test_retention_expires_and_purges_rows(tmp_path: Path) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "gw.sqlite")
        await store.migrate()
        await put(store, record("resp_a"), now=T0)
        await put(store, record("resp_b", previous="resp_a", at=T0 + 30), now=T0 + 30)
        found = await fetch(store, "resp_a", "", now=T0 + 59)
        assert found is not None
        assert found.replay_state == {"n": "resp_a"}
        assert [r.id for r in await chain(store, "resp_b", "", now=T0 + 59)] == ["resp_a", "resp_b"]
        assert await fetch(store, "resp_a", "", now=T0 + 60) is None  # expired: never answered
        with pytest.raises(GatewayError) as broken:
            await chain(store, "resp_b", "", now=T0 + 60)
        assert (broken.value.status, broken.value.param) == (404, "previous_response_id")
        assert "resp_a" in broken.value.message
        assert not await delete(store, "resp_a", None, now=T0 + 60)
        count = "SELECT count(*) FROM gateway_responses"
        assert await store.transaction(lambda tx: tx.one(count), write=False) == (2,)  # lazily: still there
        await put(store, record("resp_c", at=T0 + 100), now=T0 + 100)  # a store purges what expired
        assert await store.transaction(lambda tx: tx.one(count), write=False) == (1,)
        assert await store.transaction(lambda tx: purge(tx, T0 + 1000)) == 1
        await store.aclose()

    anyio.run(main)


def test_owners_and_the_master_view(tmp_path: Path) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "gw.sqlite")
        await store.migrate()
        await put(store, record("resp_k", owner="key:k1"), now=T0)
        assert await fetch(store, "resp_k", "key:k2", now=T0) is None
        assert await fetch(store, "resp_k", None, now=T0) is not None  # the master key sees all
        assert not await delete(store, "resp_k", "", now=T0)
        assert await delete(store, "resp_k", "key:k1", now=T0)
        await store.aclose()

    anyio.run(main)
    key = KeyRecord(id="k1", name="n", routes=None, budget=None, rpm=None, tpm=None,
                    expires_at=None, created_at=0.0, revoked_at=None, spent=0.0)  # fmt: skip
    assert (owner_of(key), owner_of(True), owner_of(None)) == ("key:k1", "master", "")


def test_input_items_page_without_items() -> None:
    empty = record("resp_e")
    page = input_items_page(msgspec.structs.replace(empty, input_items=[]), {})
    assert page == {"object": "list", "data": [], "first_id": None, "last_id": None, "has_more": False}
    for bad_limit in ("\u00b2", "\u0662", "0", "101"):  # '²' passed str.isdigit and failed int(): a 500
        with pytest.raises(GatewayError) as refused:
            input_items_page(empty, {"limit": bad_limit})
        assert (refused.value.status, refused.value.param) == (400, "limit")


def test_retention_settings_are_validated() -> None:
    assert ResponsesConfig().retention_seconds == 30 * 86400
    assert msgspec.convert({"responses": {"retention": "12h"}}, GatewayConfig).responses.retention_seconds == 43200
    assert duration_seconds(90, "x") == 90
    assert duration_seconds("1.5m", "x") == 90
    assert duration_seconds("45", "x") == 45
    for bad in ("2w", "-1d", 0, float("inf")):
        with pytest.raises(ValueError, match=r"responses\.retention"):
            duration_seconds(bad, "responses.retention")
    with pytest.raises(
        msgspec.ValidationError, match=r"^field 'retention': expected a duration .* at `\$\.responses`$"
    ):
        msgspec.convert({"responses": {"retention": "soon"}}, GatewayConfig)


# ---------------------------------------------------------------------- the dialect's hooks


def ending(store: Any, parsed: Any, *, kind: str = "stop", state: Any = None) -> Ending:
    finish = Finish(reason=FinishReason(kind=kind), replay_state=state)  # type: ignore[arg-type]
    return Ending(
        store=store, retention=60.0, parsed=parsed, route="r", model="m", source="a", finish=finish, redact=str
    )


def test_a_store_fault_answers_with_store_false(tmp_path: Path) -> None:
    async def main() -> None:
        path = tmp_path / "gw.sqlite"
        store = SQLiteStore(path, timeout=0.2)
        await store.migrate()
        parsed = parse_responses_request({"model": "r/m", "input": "hi"}, "a")
        body: dict[str, Any] = {"id": "resp_x", "output": [], "store": True}
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")  # the store is away: the write times out (a 503)
        try:
            await OPENAI_RESPONSES.conclude(ending(store, parsed), body)
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert body["store"] is False
        assert await fetch(store, "resp_x", None) is None
        await store.aclose()

    anyio.run(main)


def test_collected_failures_and_unstored_generations_are_not_kept(tmp_path: Path) -> None:
    """A collected failure is an HTTP error (no Response object to keep); ``store: false`` keeps nothing."""

    async def main() -> None:
        store = SQLiteStore(tmp_path / "gw.sqlite")
        await store.migrate()
        kept = parse_responses_request({"model": "r/m", "input": "hi"}, "a")
        unkept = parse_responses_request({"model": "r/m", "input": "hi", "store": False}, "a")
        for parsed, kind in ((kept, "error"), (kept, "aborted"), (unkept, "stop")):
            await OPENAI_RESPONSES.conclude(ending(store, parsed, kind=kind), {"id": "resp_no", "output": []})
        assert await fetch(store, "resp_no", None) is None
        encoder = ResponsesStreamEncoder("resp_s", kept)
        await OPENAI_RESPONSES.conclude(ending(store, kept, state={"sig": "S"}), encoder)
        stored = await fetch(store, "resp_s", None)
        assert stored is not None
        assert stored.replay_state == {"sig": "S"}
        assert stored.response == encoder.final(ending(store, kept).finish)
        await store.aclose()

    anyio.run(main)


GPT = "  openai:gpt: {{base_url: '{}/v1', api_key: dummy-key, routes: [gpt]}}"


def sse_events(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in data.decode().splitlines() if line.startswith("data: ")]


def test_a_stream_failing_midway_shows_and_stores_the_usage_it_is_charged(tmp_path: Path) -> None:
    """An upstream cut after "Hello wor": ``response.failed`` carried usage 0 though the ledger
    charged what was streamed (an estimate: the upstream reported none), and the response was
    not stored. Now the event's usage is the ledger row's, and ``GET /v1/responses/{id}`` answers
    the failed response the client saw (status, error, items, usage); it cannot be continued."""
    provider = ScriptedServer(Reply(reads=openai_sse("Hello ", "wor"), end="abrupt"))
    db = tmp_path / "gw.sqlite"
    settings = "    prices: {gpt/*: {input: 1.0, output: 2.0}}"
    with provider, serve_gateway(tmp_path, gateway_yaml(settings, GPT.format(provider.url), db=db)) as running:
        request = {"model": "gpt/gpt-x", "input": "say hello to the world", "stream": True}
        with httpx.stream("POST", running.url + "/v1/responses", json=request, timeout=30) as answer:
            seen = sse_events(answer.read())
        assert [event["type"] for event in seen][-2:] == ["error", "response.failed"]
        failed = seen[-1]["response"]
        assert (failed["status"], failed["error"]["code"]) == ("failed", "NETWORK")
        assert failed["output"][0]["content"][0]["text"] == "Hello wor"
        ticket = failed["id"].removeprefix("resp_")
        wait_until(lambda: any(row["id"] == ticket for row in ledger_rows(db)))  # settled after the answer
        (row,) = [row for row in ledger_rows(db) if row["id"] == ticket]
        assert row["status"] == "error"
        assert row["cost"] > 0
        usage = failed["usage"]
        assert (usage["input_tokens"], usage["output_tokens"]) == (row["input_tokens"], row["output_tokens"])
        assert (usage["output_tokens"], usage["total_tokens"]) == (3, row["input_tokens"] + 3)  # 9 characters
        assert usage["input_tokens"] > 0

        stored = httpx.get(f"{running.url}/v1/responses/{failed['id']}", timeout=30)
        assert stored.status_code == 200
        assert stored.json() == failed  # what the client saw
        again = httpx.post(
            running.url + "/v1/responses",
            json={"model": "gpt/gpt-x", "input": "go on", "previous_response_id": failed["id"]},
            timeout=30,
        )
        assert again.status_code == 400
        error = again.json()["error"]
        assert error["param"] == "previous_response_id"
        assert error["message"] == (
            f"previous_response_id: response {failed['id']!r} failed and cannot be continued: send the"
            " conversation again without previous_response_id"
        )
        assert len(provider.requests) == 1  # refused before any upstream call


def test_a_stream_failing_before_any_content_shows_the_nothing_it_is_charged(tmp_path: Path) -> None:
    """A tool call opened (no arguments yet), then the upstream cut: nothing was streamed, so the
    request is charged nothing and its ``response.failed`` says so, stored as sent."""
    opened = {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [{"index": 0, "delta": {
        "role": "assistant",
        "tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "echo", "arguments": ""}}],
    }, "finish_reason": None}]}  # fmt: skip
    provider = ScriptedServer(Reply(reads=[f"data: {json.dumps(opened)}\n\n".encode()], end="abrupt"))
    db = tmp_path / "gw.sqlite"
    settings = "    prices: {gpt/*: {input: 1.0, output: 2.0}}"
    with provider, serve_gateway(tmp_path, gateway_yaml(settings, GPT.format(provider.url), db=db)) as running:
        request = {"model": "gpt/gpt-x", "input": "call echo", "stream": True, "tools": [
            {"type": "function", "name": "echo", "parameters": {"type": "object"}}
        ]}  # fmt: skip
        with httpx.stream("POST", running.url + "/v1/responses", json=request, timeout=30) as answer:
            seen = sse_events(answer.read())
        failed = seen[-1]["response"]
        assert (seen[-1]["type"], failed["output"][0]["status"]) == ("response.failed", "incomplete")
        ticket = failed["id"].removeprefix("resp_")
        wait_until(lambda: any(row["id"] == ticket for row in ledger_rows(db)))
        (row,) = [row for row in ledger_rows(db) if row["id"] == ticket]
        assert (row["input_tokens"], row["output_tokens"], row["cost"]) == (None, None, 0.0)
        assert failed["usage"]["total_tokens"] == 0
        assert httpx.get(f"{running.url}/v1/responses/{failed['id']}", timeout=30).json() == failed


def test_a_failed_response_after_another_names_the_one_to_continue_from(tmp_path: Path) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "gw.sqlite")
        await store.migrate()
        earlier = msgspec.structs.replace(record("resp_1"), response={"id": "resp_1", "status": "completed"})
        failed = {"id": "resp_2", "status": "failed"}
        await put(store, msgspec.structs.replace(earlier, created_at=T0 + 1e9, expires_at=T0 + 2e9))
        await put(
            store,
            msgspec.structs.replace(record("resp_2", previous="resp_1"), response=failed, expires_at=T0 + 2e9),
        )
        parsed = parse_responses_request({"model": "r/m", "input": "next", "previous_response_id": "resp_2"}, "a")
        with pytest.raises(GatewayError) as refused:
            await OPENAI_RESPONSES.resolve(store, None, parsed)
        assert (refused.value.status, refused.value.param) == (400, "previous_response_id")
        assert refused.value.message.endswith("continue from the response before it ('resp_1')")
        await store.aclose()

    anyio.run(main)


def test_a_streamed_failure_is_stored_as_it_was_sent(tmp_path: Path) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "gw.sqlite")
        await store.migrate()
        parsed = parse_responses_request({"model": "r/m", "input": "hi"}, "a")
        encoder = ResponsesStreamEncoder("resp_f", parsed)
        for chunk in (BlockStart(0, "text"), TextDelta(0, "par"), Usage(TokenUsage(4, 1))):
            encoder.feed(chunk)
        finish = Finish(FinishReason(kind="aborted", failure=Failure(code="ABORTED", message="aborted")))
        end = Ending(
            store=store, retention=60.0, parsed=parsed, route="r", model="m", source="a", finish=finish, redact=str
        )
        await OPENAI_RESPONSES.conclude(end, encoder)
        sent = sse_events(encoder.feed(finish))[-1]["response"]
        stored = await fetch(store, "resp_f", None)
        assert stored is not None
        assert stored.response == sent
        assert (sent["status"], sent["error"], sent["usage"]["total_tokens"]) == (
            "failed",
            {"code": "ABORTED", "message": "aborted"},
            5,
        )
        await store.aclose()

    anyio.run(main)


def test_continued_restores_the_state_once_and_drops_the_clients_carrier() -> None:
    parsed = parse_responses_request({"model": "r/m", "input": "next", "previous_response_id": "resp_1"}, "a")
    carrier = {"type": "reasoning", "id": "rs_resp_1_state", "summary": [], "encrypted_content": "old"}
    answer = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "yes"}]}
    earlier = msgspec.structs.replace(
        record("resp_1"), source="a", replay_state={"sig": "S"}, response={"id": "resp_1", "output": [carrier, answer]}
    )
    rebuilt = continued(parsed, [earlier], "key:k")
    user, assistant, last = rebuilt.options.messages
    assert user.content == [TextBlock("resp_1")]
    assert assistant.content == [TextBlock("yes")]
    assert (assistant.replay_state, assistant.source) == ({"sig": "S"}, "a")
    assert last.content == [TextBlock("next")]
    assert rebuilt.extras.account == "key:k"
    assert rebuilt.options.system is None
    assert pack_state("a", {"sig": "S"}, carrier=True).startswith("hgw1.")


RECORDED = Path(__file__).parents[2] / "harness-llm-openai" / "tests" / "recorded-responses" / "reasoning.sse"
BLOB = "gAAAAABoZk9yZW5jcnlwdGVkLXJlYXNvbmluZy1i"  # how the recording's encrypted reasoning starts
UPSTREAM = (
    "  openai:resp: {{base_url: '{0}/v1', api_key: dummy-key, api: responses, routes: [resp]}}\n"
    "  openai:other: {{base_url: '{0}/v1', api_key: dummy-key, api: responses, routes: [other]}}"
)


def upstream_reasoning(request: Any) -> list[dict[str, Any]]:
    return [item for item in request.json()["input"] if item.get("type") == "reasoning"]


def test_a_responses_upstreams_encrypted_reasoning_round_trips_byte_exact(tmp_path: Path) -> None:
    recorded = RECORDED.read_bytes()
    blob = next(
        item["encrypted_content"]
        for line in recorded.decode().splitlines()
        if line.startswith("data: ") and '"response.output_item.done"' in line
        for item in [msgspec.json.decode(line[6:])["item"]]
        if item["type"] == "reasoning"
    )
    assert blob.startswith(BLOB)
    provider = ScriptedServer(*(Reply(reads=[recorded]) for _ in range(5)))
    with (
        provider,
        serve_gateway(tmp_path, gateway_yaml("", UPSTREAM.format(provider.url), db=tmp_path / "gw.sqlite")) as running,
    ):
        clients = Clients(running.url)
        try:
            client = clients.openai()
            include: Any = ["reasoning.encrypted_content"]
            # stateless: the client carries the state in encrypted_content and sends it back
            first = client.responses.create(model="resp/o4-mini", input="hi", store=False, include=include)
            carried = [item for item in first.output if item.type == "reasoning"]
            assert carried
            assert carried[0].encrypted_content is not None
            history: list[Any] = [{"role": "user", "content": "hi"}]
            history += [item.model_dump(exclude_none=True) for item in first.output]
            history.append({"role": "user", "content": "again"})
            client.responses.create(model="resp/o4-mini", input=history, store=False)
            assert [item["encrypted_content"] for item in upstream_reasoning(provider.requests[1])] == [blob]
            # stateful: the gateway kept the state; the client sends only the new turn
            kept = client.responses.create(model="resp/o4-mini", input="hi")
            client.responses.create(model="resp/o4-mini", input="again", previous_response_id=kept.id)
            assert [item["encrypted_content"] for item in upstream_reasoning(provider.requests[3])] == [blob]
            # another plugin instance never receives it (docs/stream-obligations.md#9-replay-state)
            client.responses.create(model="other/o4-mini", input="again", previous_response_id=kept.id)
            assert BLOB not in provider.requests[4].body.decode()
            assert len(provider.requests[4].json()["input"]) >= 2  # the earlier turn itself is there
        finally:
            clients.close()


def test_an_agents_sdk_run_chains_its_turns_by_previous_response_id(tmp_path: Path) -> None:
    import agents

    echoed: list[str] = []

    @agents.function_tool
    def echo(text: str) -> str:
        """Echo the text back."""
        echoed.append(text)
        return "ECHOED"

    with serve_gateway(tmp_path, gateway_yaml(db=tmp_path / "gw.sqlite")) as running:

        async def run() -> Any:
            async with openai.AsyncOpenAI(
                base_url=running.url + "/v1", api_key="unused-on-loopback", max_retries=0
            ) as client:
                model = agents.OpenAIResponsesModel(model="mock/echo", openai_client=client)
                agent = agents.Agent(name="echoer", instructions="use the tool", model=model, tools=[echo])
                config = agents.RunConfig(tracing_disabled=True)
                # the second turn sends only the tool's output; the gateway supplies the call before it
                return await agents.Runner.run(
                    agent, "please echo this", run_config=config, auto_previous_response_id=True
                )

        result = anyio.run(run)
        assert echoed == ["please echo this"]
        assert result.final_output == "The echo tool returned: ECHOED"
        last = httpx.get(f"{running.url}/v1/responses/{result.last_response_id}").json()
        assert last["previous_response_id"] is not None
        items = httpx.get(f"{running.url}/v1/responses/{result.last_response_id}/input_items").json()["data"]
        assert [item["type"] for item in items] == ["function_call_output"]


def test_the_live_rows_follow_the_current_retention(tmp_path: Path) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "gw.sqlite")
        await store.migrate()
        await put(store, record("resp_old"), now=T0)  # stored with 60 s
        await put(store, record("resp_new", at=T0 + 40), now=T0 + 40)
        assert await purge_expired(store, T0 + 50, retention=30.0) == 1  # lowered: resp_old expired at T0 + 30
        assert await fetch(store, "resp_old", "", now=T0 + 50) is None
        assert (await fetch(store, "resp_new", "", now=T0 + 50)).expires_at == T0 + 70  # type: ignore[union-attr]
        assert await purge_expired(store, T0 + 60, retention=3600.0) == 0  # raised: the live row lives longer
        assert (await fetch(store, "resp_new", "", now=T0 + 60)).expires_at == T0 + 3640  # type: ignore[union-attr]
        assert await store.transaction(lambda tx: follow_retention(tx, 3600.0, T0 + 60)) == 0  # nothing to change
        await store.aclose()

    anyio.run(main)


def test_an_absurd_retention_is_refused() -> None:
    with pytest.raises(ValueError, match=r"field 'retention': must be at most 3650d, got '99999d'"):
        ResponsesConfig(retention="99999d")
    assert ResponsesConfig(retention="3650d").retention_seconds == RETENTION_MAX


def test_expired_rows_are_purged_periodically_without_new_responses(tmp_path: Path) -> None:
    async def rows(store: SQLiteStore) -> Any:
        return await store.transaction(lambda tx: tx.one("SELECT count(*) FROM gateway_responses"), write=False)

    async def main() -> None:
        path = tmp_path / "gw.sqlite"
        store = SQLiteStore(path, timeout=0.2)
        assert await purge_expired(store, T0) == 0  # not migrated: nothing to purge (and no table to ask)
        await store.migrate()
        for name in ("resp_1", "resp_2", "resp_3"):
            await put(store, record(name), now=T0)
        await put(store, record("resp_live", at=T0 + 100), now=T0)
        assert await purge_expired(store, T0 + 60, batch=2) == 3  # two batches: a full one, then the rest
        assert await rows(store) == (1,)
        await put(store, record("resp_4"), now=T0)
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")  # the store is away: logged, not raised; the next tick retries
        try:
            assert await purge_expired(store, T0 + 60) == 0
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        ticks: list[float] = []
        ticked = anyio.Event()

        def clock() -> float:
            ticks.append(T0 + 60)
            if len(ticks) == 2:
                ticked.set()
            return ticks[-1]

        async with anyio.create_task_group() as group:
            await group.start(functools.partial(purge_forever, store, 0.0, clock=clock))
            with anyio.fail_after(10):
                await ticked.wait()
            group.cancel_scope.cancel()
        assert await rows(store) == (1,)  # resp_4 purged by the periodic task
        await store.aclose()

    anyio.run(main)


def test_a_strict_function_tool_reaches_a_responses_upstream_strict(tmp_path: Path) -> None:
    """The Agents SDK marks every function tool ``strict`` (``strict_json_schema`` defaults to
    true); the gateway passes it on (it sent ``strict: false`` whatever the client asked)."""
    provider = ScriptedServer(*(Reply(reads=[RECORDED.read_bytes()]) for _ in range(2)))
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
        "additionalProperties": False,
    }
    with (
        provider,
        serve_gateway(tmp_path, gateway_yaml("", UPSTREAM.format(provider.url), db=tmp_path / "gw.sqlite")) as running,
    ):
        clients = Clients(running.url)
        try:
            client = clients.openai()
            tools: Any = [
                {"type": "function", "name": "exact", "parameters": schema, "strict": True},
                {"type": "function", "name": "loose", "parameters": schema},
            ]
            client.responses.create(model="resp/o4-mini", input="hi", tools=tools, store=False)
        finally:
            clients.close()
    sent = provider.requests[0].json()["tools"]
    assert [(tool["name"], tool["strict"]) for tool in sent] == [("exact", True), ("loose", False)]


def test_text_and_reasoning_fields_beyond_the_mapped_reach_a_responses_upstream(tmp_path: Path) -> None:
    provider = ScriptedServer(*(Reply(reads=[RECORDED.read_bytes()]) for _ in range(2)))
    with (
        provider,
        serve_gateway(tmp_path, gateway_yaml("", UPSTREAM.format(provider.url), db=tmp_path / "gw.sqlite")) as running,
    ):
        clients = Clients(running.url)
        try:
            clients.openai().responses.create(
                model="resp/o4-mini",
                input="hi",
                store=False,
                text={"verbosity": "low", "format": {"type": "text"}},
                reasoning={"effort": "low", "summary": "detailed"},
            )
            clients.openai().responses.create(
                model="resp/o4-mini", input="hi", store=False, reasoning={"effort": "low"}
            )
        finally:
            clients.close()
    first, second = (request.json() for request in provider.requests)
    assert first["text"] == {"verbosity": "low", "format": {"type": "text"}}
    assert first["reasoning"] == {"effort": "low", "summary": "detailed"}  # the route's own summary setting yields
    assert "text" not in second
    assert second["reasoning"]["effort"] == "low"
