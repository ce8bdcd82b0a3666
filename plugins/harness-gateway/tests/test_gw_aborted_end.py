"""A generation the gateway aborts while its client is still there ends as a failure in the
client's dialect, never as a complete reply: checked with the official ``openai`` and
``anthropic`` SDKs after the partial text they received.

The aborts are real: the drain timeout of a reload (``drain_timeout: 0`` and the file watcher)
and the console's Abort button (``POST /console/live/{id}/abort``), on a stream from a gated
upstream (:class:`~gw_helpers.GatedUpstream`: its second event is held until the test ends).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from gw_helpers import Clients, GatedUpstream, gateway_yaml, ledger_rows, serve_gateway

import harness_gateway.server as server_module
from harness_gateway.console import auth
from harness_gateway.errors import DRAINED

HI = [{"role": "user", "content": "hi there"}]
PIECE = "x" * 400
"""The text the upstream streams before it stalls (long: the output masker holds a short tail back)."""
MASTER = "mk-aborted-end-0123456789"
DIALECTS = ["chat", "messages", "responses"]
CONSOLE_ABORT = "aborted by an operator from the console"


def _yaml(tmp_path: Path, upstream: GatedUpstream, gateway: str = "") -> str:
    extra = f"  openai:up: {{base_url: '{upstream.url}/v1', api_key: dummy-key, routes: [up]}}"
    return gateway_yaml(f"    master_key: {MASTER}\n{gateway}", extra, db=tmp_path / "gw.sqlite")


def _stream(clients: Clients, dialect: str) -> Iterator[str]:
    """The text pieces of a streamed reply to ``HI`` through the dialect's SDK; fails on any
    event claiming the reply ended normally; the SDK's error propagates."""
    events: Any  # the SDKs' stream types are unions this test does not narrow
    if dialect == "chat":
        events = clients.openai(MASTER).chat.completions.create(model="up/m", messages=HI, stream=True)  # type: ignore[arg-type]
        for chunk in events:
            for choice in chunk.choices:
                assert choice.finish_reason is None, chunk  # never a normal finish
                if choice.delta.content:
                    yield choice.delta.content
    elif dialect == "messages":
        events = clients.anthropic(MASTER).messages.create(model="up/m", max_tokens=100, messages=HI, stream=True)  # type: ignore[arg-type]
        for event in events:
            assert event.type not in ("message_delta", "message_stop"), event  # no end_turn
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                yield event.delta.text
    else:
        events = clients.openai(MASTER).responses.create(model="up/m", input="hi there", stream=True)
        for item in events:
            assert item.type not in ("response.completed", "response.incomplete"), item
            if item.type == "response.output_text.delta":
                yield item.delta


def _collect(clients: Clients, dialect: str) -> Any:
    """A collected (non-streaming) reply to ``HI`` through the dialect's SDK."""
    if dialect == "chat":
        return clients.openai(MASTER).chat.completions.create(model="up/m", messages=HI)  # type: ignore[arg-type]
    if dialect == "messages":
        return clients.anthropic(MASTER).messages.create(model="up/m", max_tokens=100, messages=HI)  # type: ignore[arg-type]
    return clients.openai(MASTER).responses.create(model="up/m", input="hi there")


def _partial_then_error(pieces: Iterator[str], abort: Any) -> tuple[str, Exception]:
    """Read ``pieces`` until most of :data:`PIECE` arrived, call ``abort()``, then read on until
    the SDK raises; the text received and the error raised."""
    received = ""
    while "x" * 300 not in received:
        received += next(pieces)
    abort()
    try:
        for piece in pieces:
            received += piece
    except (openai.APIError, anthropic.APIError) as error:
        return received, error
    raise AssertionError(f"the stream ended without an error after {received!r}")


def _check_error(dialect: str, error: Exception, message: str, anthropic_type: str) -> None:
    """``error`` is the SDK's in-stream error with code ``ABORTED`` and ``message``."""
    if dialect == "messages":
        assert isinstance(error, anthropic.APIStatusError)
        assert error.body == {"type": "error", "error": {"type": anthropic_type, "message": message}}
    else:
        assert type(error) is openai.APIError  # raised on the in-stream error event, not an HTTP status
        assert error.message == message
        assert error.code == "ABORTED"
        assert error.type == "server_error"


def _reload(running: Any, yaml_text: str) -> None:
    """Change plugins.yaml: the watcher reloads, the old runtime drains (``drain_timeout: 0``)."""
    running.config.write_text(yaml_text.replace("  gateway:\n", "  gateway:\n    aliases: {again: up/m}\n"))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_stream_the_reload_drain_aborts_raises_in_the_sdk_after_its_partial_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dialect: str
) -> None:
    monkeypatch.setattr(server_module, "_WATCH_INTERVAL", 0.01)
    with GatedUpstream([PIECE, "never sent"]) as upstream:
        yaml_text = _yaml(tmp_path, upstream, "    drain_timeout: 0\n    prices: {up/m: {input: 1, output: 1}}")
        with serve_gateway(tmp_path, yaml_text, watch=True) as running:
            clients = Clients(running.url)
            try:
                received, error = _partial_then_error(_stream(clients, dialect), lambda: _reload(running, yaml_text))
            finally:
                clients.close()
        (row,) = ledger_rows(tmp_path / "gw.sqlite")
    assert received == PIECE  # the partial text, whole: then the failure, not an end
    _check_error(dialect, error, DRAINED, "overloaded_error")  # 503's type in Anthropic's table
    assert row["status"] == "aborted"  # the ledger as before, charged what was streamed
    assert row["output_tokens"] == 100


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_stream_aborted_from_the_console_raises_in_the_sdk_after_its_partial_text(
    tmp_path: Path, dialect: str
) -> None:
    with GatedUpstream([PIECE, "never sent"]) as upstream:
        with serve_gateway(tmp_path, _yaml(tmp_path, upstream)) as running:
            clients = Clients(running.url)
            admin = httpx.Client(base_url=running.url, headers={"authorization": f"Bearer {MASTER}"}, timeout=30)

            def abort() -> None:
                with admin.stream("GET", "/console/live/events") as live:
                    shown = next(line for line in live.iter_lines() if line.startswith("data: [{"))
                ticket = json.loads(shown[6:])[0]["id"]
                pressed = admin.post(f"/console/live/{ticket}/abort", data={"csrf": auth.csrf_token(MASTER, MASTER)})
                assert pressed.status_code == 303

            try:
                received, error = _partial_then_error(_stream(clients, dialect), abort)
            finally:
                clients.close()
                admin.close()
        (row,) = ledger_rows(tmp_path / "gw.sqlite")
    assert received == PIECE
    _check_error(dialect, error, CONSOLE_ABORT, "api_error")  # ABORTED is 499: Anthropic's api_error
    assert row["status"] == "aborted"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_collected_reply_the_drain_aborts_is_a_503_not_a_partial_200(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dialect: str
) -> None:
    monkeypatch.setattr(server_module, "_WATCH_INTERVAL", 0.01)
    with GatedUpstream([PIECE, "never sent"]) as upstream:
        yaml_text = _yaml(tmp_path, upstream, "    drain_timeout: 0")
        with serve_gateway(tmp_path, yaml_text, watch=True) as running:
            clients = Clients(running.url)
            try:
                with ThreadPoolExecutor(1) as pool:
                    reply = pool.submit(_collect, clients, dialect)
                    assert upstream.requested.wait(30), "the gateway never asked the upstream"
                    _reload(running, yaml_text)
                    with pytest.raises((openai.APIStatusError, anthropic.APIStatusError)) as raised:
                        reply.result(60)
            finally:
                clients.close()
        (row,) = ledger_rows(tmp_path / "gw.sqlite")
    error: Any = raised.value
    assert error.status_code == 503  # the gateway is going away: a retry may succeed elsewhere or later
    if dialect == "messages":
        assert error.body == {"type": "error", "error": {"type": "overloaded_error", "message": DRAINED}}
    else:
        assert error.body == {"message": DRAINED, "type": "server_error", "param": None, "code": "ABORTED"}
    assert row["status"] == "aborted"
