"""The HTTP surface under hostile input: nested JSON, unknown paths, metric labels, /metrics access."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from gw_helpers import error_records, gateway_yaml, serve_gateway

from harness_gateway import metrics as metrics_module
from harness_gateway.metrics import OTHER_MODEL, GatewayMetrics

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def uvicorn_errors() -> Iterator[list[logging.LogRecord]]:
    with error_records() as records:
        yield records


def test_deeply_nested_json_is_a_400_in_each_dialect(tmp_path: Path, uvicorn_errors: list[logging.LogRecord]) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    chat = '{"model": "mock/echo", "messages": [{"role": "user", "content": "hi"}], "metadata": ' + deep + "}"
    messages = '{"model": "mock/echo", "max_tokens": 5, "messages": [], "metadata": ' + deep + "}"
    headers = {"content-type": "application/json"}
    with (
        serve_gateway(tmp_path, gateway_yaml(db=tmp_path / "gw.sqlite")) as running,
        httpx.Client(base_url=running.url, timeout=30) as client,
    ):
        openai_style = client.post("/v1/chat/completions", content=chat, headers=headers)
        anthropic_style = client.post("/v1/messages", content=messages, headers=headers)
        fine = "[" * 50 + "]" * 50  # what real requests nest is served
        served = client.post("/v1/chat/completions", content=chat.replace(deep, fine), headers=headers)
    assert openai_style.status_code == 400
    assert openai_style.json()["error"]["type"] == "invalid_request_error"
    assert "nests too deeply" in openai_style.json()["error"]["message"]
    assert anthropic_style.status_code == 400
    assert anthropic_style.json()["type"] == "error"
    assert anthropic_style.json()["error"]["type"] == "invalid_request_error"
    assert served.status_code == 200
    assert not uvicorn_errors, [r.getMessage() for r in uvicorn_errors]  # no traceback per request


def test_an_empty_body_is_a_400_saying_so_in_each_dialect(tmp_path: Path) -> None:
    empty = "the request body is empty; expected a JSON object"
    openai_paths = ("/v1/chat/completions", "/v1/responses", "/v1/embeddings")
    anthropic_paths = ("/v1/messages", "/v1/messages/count_tokens")
    with (
        serve_gateway(tmp_path, gateway_yaml(db=tmp_path / "gw.sqlite")) as running,
        httpx.Client(base_url=running.url, timeout=30) as client,
    ):
        answers = {path: client.post(path) for path in (*openai_paths, *anthropic_paths)}
        blank = client.post("/v1/chat/completions", content=b" \r\n\t", headers={"content-type": "application/json"})
        truncated = client.post(
            "/v1/chat/completions", content=b'{"model": ', headers={"content-type": "application/json"}
        )
    for path in openai_paths:
        assert answers[path].status_code == 400, path
        assert answers[path].json() == {
            "error": {"message": empty, "type": "invalid_request_error", "param": None, "code": "invalid_request"}
        }
    for path in anthropic_paths:
        assert answers[path].status_code == 400, path
        assert answers[path].json() == {"type": "error", "error": {"type": "invalid_request_error", "message": empty}}
    assert (blank.status_code, blank.json()["error"]["message"]) == (400, empty)  # JSON whitespace holds nothing
    assert truncated.status_code == 400
    assert truncated.json()["error"]["message"].startswith("the request body is not valid JSON: ")  # not empty


def test_unknown_paths_and_methods_answer_json_in_the_dialect_of_the_path(tmp_path: Path) -> None:
    with (
        serve_gateway(tmp_path, gateway_yaml(db=tmp_path / "gw.sqlite")) as running,
        httpx.Client(base_url=running.url, timeout=30) as client,
    ):
        count = client.post("/v1/messages/batches", json={"model": "mock/echo", "messages": HI})
        openai_404 = client.post("/v1/audio/speech", json={})  # not served (/v1/embeddings is)
        elsewhere = client.get("/nothing-here")
        wrong_method = client.get("/v1/chat/completions")
        wrong_anthropic = client.get("/v1/messages")
    assert count.status_code == 404
    assert count.json() == {
        "type": "error",
        "error": {"type": "not_found_error", "message": count.json()["error"]["message"]},
    }
    assert "POST /v1/messages/batches: no such endpoint" in count.json()["error"]["message"]
    served = elsewhere.json()["error"]["message"].split("(served: ", 1)[1].rstrip(")").split("; ")
    assert served[:3] == ["POST /v1/chat/completions", "POST /v1/messages", "POST /v1/responses"]
    for endpoint in (  # every route of the table, read from it: /v1/responses/{id}, /healthz, /metrics …
        "GET, DELETE /v1/responses/{response_id}", "GET /v1/responses/{response_id}/input_items",
        "POST /v1/embeddings", "GET /v1/models", "GET /v1/models/{model_id}", "GET /healthz", "GET /metrics",
        "GET, POST /admin/keys", "DELETE, PATCH /admin/keys/{key}", "GET /console",
    ):  # fmt: skip
        assert endpoint in served
    assert not [entry for entry in served if "/console/" in entry]  # the console's own pages are its own
    for response in (openai_404, elsewhere):
        assert response.status_code == 404
        assert response.headers["content-type"] == "application/json"
        assert response.json()["error"]["code"] == "unknown_endpoint"
        assert response.json()["error"]["type"] == "not_found_error"
    assert wrong_method.status_code == 405
    assert wrong_method.headers["allow"] == "POST"
    assert wrong_method.json()["error"]["code"] == "method_not_allowed"
    assert "allowed: POST" in wrong_method.json()["error"]["message"]
    assert wrong_anthropic.status_code == 405
    assert wrong_anthropic.json()["error"]["type"] == "invalid_request_error"
    assert wrong_anthropic.json()["type"] == "error"


def test_client_chosen_model_names_collapse_into_one_series(tmp_path: Path) -> None:
    with (
        serve_gateway(tmp_path, gateway_yaml(db=tmp_path / "gw.sqlite")) as running,
        httpx.Client(base_url=running.url, timeout=30) as client,
    ):
        for n in range(20):  # the route exists, the models do not: the mock refuses them
            body = {"model": f"mock/scan-{n}-{secrets.token_hex(4)}", "messages": HI}
            assert client.post("/v1/chat/completions", json=body).status_code == 404
        assert client.post("/v1/chat/completions", json={"model": "mock/echo", "messages": HI}).status_code == 200
        text = client.get("/metrics").text
    assert "scan-" not in text
    assert f'api="openai",model="{OTHER_MODEL}",route="mock",status="error"}} 20.0' in text
    assert 'api="openai",model="echo",route="mock",status="complete"} 1.0' in text  # served: its own label


def test_the_model_label_set_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_module, "MAX_MODEL_LABELS", 2)
    metrics = GatewayMetrics()
    assert metrics.model_label("r", "a") == OTHER_MODEL  # never served yet
    for model in ("a", "b", "c"):
        metrics.served("r", model)
    assert [metrics.model_label("r", m) for m in ("a", "b", "c")] == ["a", "b", OTHER_MODEL]
    assert metrics.model_label("other-route", "a") == OTHER_MODEL  # per route


MASTER = "master-" + "m" * 24  # built at run time: no key-shaped literal committed
TOKEN = "scrape-" + "t" * 24


def test_metrics_need_the_master_key_or_the_token_where_keys_are_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GW_MASTER", MASTER)
    monkeypatch.setenv("GW_SCRAPE", TOKEN)
    settings = "    master_key: ${{ env.GW_MASTER }}\n    metrics_token: ${{ env.GW_SCRAPE }}"
    yaml_text = gateway_yaml(settings, db=tmp_path / "gw.sqlite")
    with (
        serve_gateway(tmp_path, yaml_text, host="0.0.0.0") as running,  # beyond loopback: keys required
        httpx.Client(base_url=running.url, timeout=30) as client,
    ):
        anonymous = client.get("/metrics")
        wrong = client.get("/metrics", headers={"authorization": "Bearer " + "w" * 30})
        by_master = client.get("/metrics", headers={"authorization": f"Bearer {MASTER}"})
        by_token = client.get("/metrics", headers={"x-api-key": TOKEN})
        token_elsewhere = client.get("/admin/keys", headers={"authorization": f"Bearer {TOKEN}"})
    assert anonymous.status_code == 401
    assert "metrics token" in anonymous.json()["error"]["message"]
    assert anonymous.json()["error"]["code"] == "missing_api_key"  # no key, as on every endpoint
    assert wrong.status_code == 401
    assert wrong.json()["error"]["code"] == "invalid_api_key"
    assert TOKEN not in anonymous.text + wrong.text
    assert by_master.status_code == 200
    assert by_token.status_code == 200
    assert "harness_gateway_requests" in by_token.text
    assert token_elsewhere.status_code == 401  # the token reads /metrics and nothing else


def test_protected_metrics_without_any_secret_warn_and_refuse(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    yaml_text = gateway_yaml("    metrics_require_key: true", db=tmp_path / "gw.sqlite")
    with (
        caplog.at_level(logging.WARNING, "harness_gateway"),
        serve_gateway(tmp_path, yaml_text) as running,
        httpx.Client(base_url=running.url, timeout=30) as client,
    ):
        assert client.get("/metrics").status_code == 401
        assert client.get("/healthz").status_code == 200  # only /metrics is closed
    assert "/metrics answers 401 to every scrape" in caplog.text


def test_an_empty_conversation_is_a_400_naming_its_field_in_each_dialect(tmp_path: Path) -> None:
    """Found by a fresh-user trial: ``messages: []`` (``input: []``) was answered 200 with nothing."""
    with (
        serve_gateway(tmp_path, gateway_yaml(db=tmp_path / "gw.sqlite")) as running,
        httpx.Client(base_url=running.url, timeout=30) as client,
    ):
        chat = client.post("/v1/chat/completions", json={"model": "mock/echo", "messages": []})
        messages = client.post("/v1/messages", json={"model": "mock/echo", "max_tokens": 5, "messages": []})
        counted = client.post("/v1/messages/count_tokens", json={"model": "mock/echo", "messages": []})
        responses = client.post("/v1/responses", json={"model": "mock/echo", "input": []})
        served = client.post("/v1/responses", json={"model": "mock/echo", "input": "hi"})
    assert (chat.status_code, chat.json()["error"]["param"]) == (400, "messages")
    assert "at least one message" in chat.json()["error"]["message"]
    assert messages.status_code == 400
    assert messages.json()["error"]["type"] == "invalid_request_error"
    assert "messages" in messages.json()["error"]["message"]
    assert counted.status_code == 400
    assert "messages" in counted.json()["error"]["message"]
    assert (responses.status_code, responses.json()["error"]["param"]) == (400, "input")
    assert served.status_code == 200


def test_a_body_that_is_not_a_json_object_or_not_json_typed_is_refused_by_name(tmp_path: Path) -> None:
    """Found by a fresh-user trial: a JSON array answered "model is required", and a form body
    was read as JSON; a refused option value named no field."""
    with (
        serve_gateway(tmp_path, gateway_yaml(db=tmp_path / "gw.sqlite")) as running,
        httpx.Client(base_url=running.url, timeout=30) as client,
    ):
        array = client.post("/v1/messages", json=[{"model": "mock/echo"}])
        form = client.post("/v1/chat/completions", content=b"model=mock/echo", headers={"content-type": "text/plain"})
        typed = client.post(  # a +json type and parameters are JSON
            "/v1/chat/completions",
            content=b'{"model": "mock/echo", "messages": [{"role": "user", "content": "hi"}]}',
            headers={"content-type": "application/vnd.api+json; charset=utf-8"},
        )
        negative = client.post("/v1/chat/completions", json={"model": "mock/echo", "messages": HI, "max_tokens": -1})
        huge = client.post("/v1/chat/completions", json={"model": "mock/echo", "messages": HI, "max_tokens": 10**30})
        floated = client.post("/v1/chat/completions", json={"model": "mock/echo", "messages": HI, "max_tokens": 1e30})
        newer = client.post(
            "/v1/chat/completions", json={"model": "mock/echo", "messages": HI, "max_completion_tokens": 0}
        )
        responses = client.post("/v1/responses", json={"model": "mock/echo", "input": "hi", "max_output_tokens": 0})
        stops = client.post(
            "/v1/messages", json={"model": "mock/echo", "max_tokens": 5, "messages": HI, "temperature": -2}
        )
        hot = client.post(
            "/v1/messages", json={"model": "mock/echo", "max_tokens": 5, "messages": HI, "temperature": 10**14}
        )
    assert array.status_code == 400
    assert array.json()["error"]["message"] == "expected an object, got a list"
    assert form.status_code == 415
    assert form.json()["error"]["param"] == "content-type"
    assert "send content-type: application/json, not 'text/plain'" in form.json()["error"]["message"]
    assert typed.status_code == 200
    assert (negative.status_code, negative.json()["error"]["param"]) == (400, "max_tokens")
    assert negative.json()["error"]["message"] == "max_tokens: must be at least 1, got -1"
    assert huge.status_code == 400
    assert huge.json()["error"]["param"] == "max_tokens"
    assert huge.json()["error"]["message"] == (
        f"max_tokens: must be an integer in range (at most 2147483647), got {10**30}"  # an integer, not 1e+30
    )
    assert floated.status_code == 400
    assert floated.json()["error"]["param"] == "max_tokens"
    assert newer.json()["error"]["param"] == "max_completion_tokens"
    assert responses.json()["error"]["param"] == "max_output_tokens"
    assert stops.status_code == 400
    assert "temperature" in stops.json()["error"]["message"]
    assert hot.json()["error"]["message"] == "temperature: must be between 0 and 1, got 100000000000000"
