"""Bad input the gateway passed on or answered 200 (a fresh-user trial): each is now a 400 naming
the field (``param`` where the dialect has one), as the real provider answers, through a real
gateway over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from gw_helpers import Running, gateway_yaml, serve_gateway

MASTER = "master-" + "b" * 24  # built at run time: no key-shaped literal committed
HI = [{"role": "user", "content": "hi"}]
EXTRA = (  # a route whose model takes efforts without "off" (never reached: the adapter refuses first)
    "  openai:gpt: {base_url: 'http://127.0.0.1:9', api_key: dummy-key, routes: [gpt],"
    " models: {gpt-x: {reasoning_efforts: [low, high]}}}"
)


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp_path = tmp_path_factory.mktemp("bad-input")
    yaml = gateway_yaml(f"    master_key: {MASTER}", EXTRA, db=tmp_path / "gw.sqlite")
    with serve_gateway(tmp_path, yaml) as served:
        yield served


@pytest.fixture
def http(running: Running) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=running.url, timeout=30) as client:
        yield client


def refused(response: httpx.Response) -> tuple[int, str | None, str]:
    """Status, ``param`` and message of an OpenAI error answer."""
    error = response.json()["error"]
    return response.status_code, error["param"], error["message"]


def anthropic_refusal(response: httpx.Response) -> tuple[int, str, str]:
    """Status, error type and message of an Anthropic error answer (which has no ``param``)."""
    body = response.json()
    assert "param" not in body["error"]
    return response.status_code, body["error"]["type"], body["error"]["message"]


def chat(http: httpx.Client, **fields: Any) -> httpx.Response:
    return http.post("/v1/chat/completions", json={"model": "mock/echo", "messages": HI, **fields})


def messages(http: httpx.Client, **fields: Any) -> httpx.Response:
    return http.post("/v1/messages", json={"model": "mock/echo", "max_tokens": 5, "messages": HI, **fields})


def responses(http: httpx.Client, **fields: Any) -> httpx.Response:
    return http.post("/v1/responses", json={"model": "mock/echo", "input": "hi", **fields})


def test_stream_options_without_stream_is_refused_as_openai_does(http: httpx.Client) -> None:
    """It was read (and ignored) on a request that does not stream."""
    message = "stream_options: this parameter is only allowed when 'stream' is enabled"
    for fields in ({}, {"stream": False}):
        answer = chat(http, stream_options={"include_usage": True}, **fields)
        assert refused(answer) == (400, "stream_options", message)
    streamed = chat(http, stream=True, stream_options={"include_usage": True})
    assert streamed.status_code == 200
    assert '"usage":' in streamed.text


def test_more_than_four_stop_sequences_are_refused_on_chat_only(http: httpx.Client) -> None:
    """OpenAI takes up to 4; Anthropic's stop_sequences has no such bound (none is invented)."""
    too_many = chat(http, stop=["a", "b", "c", "d", "e"])
    assert refused(too_many) == (400, "stop", "stop: expected at most 4 sequences, got 5")
    assert chat(http, stop=["a", "b", "c", "d"]).status_code == 200
    assert messages(http, stop_sequences=[str(i) for i in range(10)]).status_code == 200


def function(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
