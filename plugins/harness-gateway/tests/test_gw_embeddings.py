"""``POST /v1/embeddings`` against a real gateway: the official ``openai`` SDK (base64 by default,
and ``encoding_format="float"``) over the mock and over a scripted OpenAI embeddings upstream;
keys, route permissions, budgets, tpm, the ledger, ``/metrics``, the console and 400 field errors."""

from __future__ import annotations

import base64
import json
import logging
import socket
import struct
import threading
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import openai
import pytest
from emb_scripted_plugin import install
from gw_helpers import Clients, Running, gateway_yaml, serve_gateway, wait_until

from harness_core.embedding import EmbedOptions
from harness_core.testing import Reply, ScriptedServer
from harness_gateway.errors import GatewayError
from harness_gateway.keys import KeySpec
from harness_gateway.observe import RunEnd, RunInfo
from harness_gateway.openai_embeddings import EmbeddingRequest, embeddings_body
from harness_gateway.sqlite import SQLiteStore
from harness_llm_mock import MockAdapter, MockConfig

MASTER = "master-" + "e" * 24  # built at run time: no key-shaped literal committed
PRICED = "    prices: {mock/hash: {input: 1000000, output: 1000000}}\n"  # 1 USD per input token


def settings(extra: str = "") -> str:
    return f"    require_keys: true\n    master_key: {MASTER}\n    aliases: {{vec: mock/hash}}\n{PRICED}{extra}"


PROVIDERS = (
    "  mock:free: {routes: [free]}\n"  # no price known
    "  mock:limited: {routes: [limited], error: RATE_LIMITED}\n"
    "  anthropic: {api_key: provider-test-credential, routes: [claude]}\n"  # streams, does not embed
)


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Running]:
    with serve_gateway(tmp_path, gateway_yaml(settings(), PROVIDERS, db=tmp_path / "gw.sqlite")) as running:
        yield running


@pytest.fixture
def clients(gateway: Running) -> Iterator[Clients]:
    opened = Clients(gateway.url)
    yield opened
    opened.close()


def in_store(running: Running, work: Any) -> Any:
    """Run ``work(store)`` on a store of the gateway's database (another connection, as another process)."""

    async def main() -> Any:
        store = SQLiteStore(running.config.parent / "gw.sqlite")
        try:
            await store.migrate()
            return await work(store)
        finally:
            await store.aclose()

    return anyio.run(main)


def new_key(running: Running, spec: KeySpec) -> tuple[str, str]:
    """A key issued by the gateway's store: ``(key, key id)``."""
    key, record = in_store(running, lambda store: store.create_key(spec))
    return key, record.id


def ledger(running: Running, key_id: str | None = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = in_store(running, lambda store: store.ledger(key_id))
    return rows


def post(running: Running, body: Any, key: str | None = MASTER) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if key is not None else {}
    return httpx.post(running.url + "/v1/embeddings", json=body, headers=headers, timeout=60)


def mock_vectors(texts: list[str], dimensions: int | None = None) -> list[list[float]]:
    """What the mock embeds, straight from its adapter (no gateway)."""

    async def main() -> list[list[float]]:
        return (await MockAdapter(MockConfig()).embed(EmbedOptions(inputs=texts, dimensions=dimensions))).tolist()

    return anyio.run(main)


# ---------------------------------------------------------------------- the openai SDK over the mock


def test_the_openai_sdk_gets_base64_by_default_and_float_on_request(gateway: Running, clients: Clients) -> None:
    texts = ["the quick brown fox", "jumps"]
    attempts: list[dict[str, Any]] = []
    hooks = {"request": [lambda request: attempts.append(json.loads(request.content))]}
    with openai.DefaultHttpxClient(event_hooks=hooks) as http:
        client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=MASTER, max_retries=0, http_client=http)
        default = client.embeddings.create(model="mock/hash", input=texts)
        floats = client.embeddings.create(model="vec", input=texts, encoding_format="float", user="end-user-7")
        single = client.embeddings.create(model="mock/hash", input="jumps", dimensions=16)
    assert attempts[0]["encoding_format"] == "base64"  # what the SDK asks for unless told otherwise
    assert attempts[1]["encoding_format"] == "float"
    expected = mock_vectors(texts)
    assert [d.embedding for d in default.data] == expected  # float32 values, decoded by the SDK
    assert [d.embedding for d in floats.data] == expected
    assert [(d.index, d.object) for d in default.data] == [(0, "embedding"), (1, "embedding")]
    assert (default.object, default.model, floats.model) == ("list", "mock/hash", "vec")  # as the client wrote it
    assert (default.usage.prompt_tokens, default.usage.total_tokens) == (5, 5)  # the mock counts words
    assert single.data[0].embedding == mock_vectors(["jumps"], 16)[0]
    assert len(single.data[0].embedding) == 16


def test_base64_is_the_little_endian_float32_buffer(gateway: Running) -> None:
    raw = post(gateway, {"model": "mock/hash", "input": ["a b", "c"], "encoding_format": "base64"}).json()
    expected = mock_vectors(["a b", "c"])
    for item, vector in zip(raw["data"], expected, strict=True):
        assert item["embedding"] == base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
    floats = post(gateway, {"model": "mock/hash", "input": ["a b", "c"]}).json()  # float: the API's default
    assert [item["embedding"] for item in floats["data"]] == expected
    assert floats["usage"] == {"prompt_tokens": 3, "total_tokens": 3}


def test_embeddings_body_encodes_from_the_buffer() -> None:
    from harness_core.embedding import Embeddings

    result = Embeddings(array("f", [0.5, -1.0, 2.0, 0.25]), 2, model="m")  # no usage reported
    options = EmbedOptions(inputs=["x", "y"])
    body = json.loads(embeddings_body(EmbeddingRequest(model="r/m", options=options, encoding_format="base64"), result))
    assert [base64.b64decode(d["embedding"]) for d in body["data"]] == [
        struct.pack("<2f", 0.5, -1.0),
        struct.pack("<2f", 2.0, 0.25),
    ]
    assert body["usage"] == {"prompt_tokens": 0, "total_tokens": 0}
    assert body["model"] == "r/m"


# ---------------------------------------------------------------------- keys, budgets, the ledger


def test_the_model_list_holds_the_embedding_models(gateway: Running, clients: Clients) -> None:
    listed = [m.id for m in clients.openai(MASTER).models.list()]
    assert {"mock/echo", "mock/hash", "free/echo", "free/hash", "limited/hash"} <= set(listed)
    assert listed.count("mock/hash") == 1
    assert not any(name.startswith("claude/") and name.endswith("hash") for name in listed)  # it does not embed
    key, _ = new_key(gateway, KeySpec(name="free-only", routes=["free"]))
    assert [m.id for m in clients.openai(key).models.list()] == ["free/echo", "free/hash"]


def test_keys_are_required_and_route_permissions_apply(gateway: Running, clients: Clients) -> None:
    anonymous = post(gateway, {"model": "mock/hash", "input": "hi"}, key=None)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "missing_api_key"
    with pytest.raises(openai.AuthenticationError):
        clients.openai("hk-wrong").embeddings.create(model="mock/hash", input="hi")
    key, _ = new_key(gateway, KeySpec(name="only-free", routes=["free"]))
    with pytest.raises(openai.PermissionDeniedError) as refused:
        clients.openai(key).embeddings.create(model="vec", input="hi")
    assert "may not use route 'mock'" in refused.value.message
    assert refused.value.body["param"] == "model"  # type: ignore[index]
    assert clients.openai(key).embeddings.create(model="free/hash", input="hi").data


def test_a_spend_row_priced_by_the_price_book_and_a_budget_refusal(gateway: Running, clients: Clients) -> None:
    key, key_id = new_key(gateway, KeySpec(name="budget", budget=2.0))
    client = clients.openai(key)
    client.embeddings.create(model="vec", input=["a b", "c"])  # 3 tokens at 1 USD: admitted, then over budget
    with pytest.raises(openai.RateLimitError) as refused:
        client.embeddings.create(model="vec", input="d")
    assert refused.value.code == "insufficient_quota"
    assert refused.value.response.headers["x-should-retry"] == "false"
    [row] = ledger(gateway, key_id)
    assert (row["route"], row["model"], row["status"]) == ("mock", "hash", "complete")
    assert (row["input_tokens"], row["output_tokens"], row["cost"]) == (3, 0, 3.0)
    spent = in_store(gateway, lambda store: store.list_keys())
    assert [k.spent for k in spent if k.id == key_id] == [3.0]


def test_tpm_counts_embedding_tokens(gateway: Running, clients: Clients) -> None:
    key, _ = new_key(gateway, KeySpec(name="tokens", tpm=3))
    client = clients.openai(key)
    client.embeddings.create(model="free/hash", input="a b c")
    with pytest.raises(openai.RateLimitError) as limited:
        client.embeddings.create(model="free/hash", input="d")
    assert "tokens per minute" in limited.value.message
    assert 1 <= int(limited.value.response.headers["retry-after"]) <= 61


def test_an_unpriced_model_is_charged_zero_and_said_so(gateway: Running, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="harness_gateway"):
        assert post(gateway, {"model": "free/hash", "input": "hello"}).status_code == 200
    assert "charging 0 USD for free/hash requests: no price is known" in caplog.text
    [row] = [r for r in ledger(gateway) if r["route"] == "free"]
    assert (row["cost"], row["input_tokens"], row["status"]) == (0.0, 1, "complete")


# ---------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"input": "x"}, "model", "required"),
        ({"model": "mock/hash"}, "input", "this field is required"),
        ({"model": "mock/hash", "input": [1, 2, 3]}, "input", "token-id inputs are not supported"),
        ({"model": "mock/hash", "input": [[1, 2], [3]]}, "input[0]", "token-id inputs are not supported"),
        ({"model": "mock/hash", "input": []}, "input", "at least one input"),
        ({"model": "mock/hash", "input": ""}, "input", "must not be an empty string"),
        ({"model": "mock/hash", "input": ["a", ""]}, "input[1]", "must not be an empty string"),
        ({"model": "mock/hash", "input": ["a", None]}, "input[1]", "expected a string, got null"),
        ({"model": "mock/hash", "input": [True]}, "input[0]", "expected a string, got a boolean"),
        ({"model": "mock/hash", "input": {"text": "a"}}, "input", "a string or a list of strings, got an object"),
        ({"model": "mock/hash", "input": "a", "dimensions": 0}, "dimensions", "must be between 1 and 65536, got 0"),
        ({"model": "mock/hash", "input": "a", "dimensions": 2**70}, "dimensions", "must be between 1 and 65536"),
        ({"model": "mock/hash", "input": ["a", ["b"]]}, "input[1]", "expected a string, got a list"),
        ({"model": "mock/hash", "input": "a", "dimensions": "8"}, "dimensions", "expected an integer"),
        ({"model": "mock/hash", "input": "a", "encoding_format": "int8"}, "encoding_format", "float or base64"),
        ({"model": "mock/hash", "input": "a", "input_type": "query"}, "input_type", "route 'mock' cannot take"),
    ],
)
def test_bad_fields_are_400_naming_the_field(gateway: Running, body: dict[str, Any], param: str, words: str) -> None:
    response = post(gateway, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param
    assert error["type"] == "invalid_request_error"
    assert words in error["message"]
    assert error["message"].startswith(param)


def test_unserved_routes_models_and_provider_errors(
    gateway: Running, clients: Clients, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="harness_gateway.spend")
    client = clients.openai(MASTER)
    with pytest.raises(openai.NotFoundError) as unknown:
        client.embeddings.create(model="nowhere/x", input="hi")
    assert "model 'nowhere/x' is not served here" in unknown.value.message
    with pytest.raises(openai.BadRequestError) as streams_only:
        client.embeddings.create(model="claude/claude-sonnet-4-5", input="hi")
    assert streams_only.value.code == "UNSUPPORTED"
    assert "route 'claude' does not serve embeddings" in streams_only.value.message
    with pytest.raises(openai.NotFoundError) as no_model:
        client.embeddings.create(model="mock/echo", input="hi")  # the mock embeds with `hash` only
    assert "no embedding model 'echo'" in no_model.value.message
    assert no_model.value.body["param"] == "model"  # type: ignore[index]
    with pytest.raises(openai.RateLimitError) as limited:
        client.embeddings.create(model="limited/hash", input="hi")
    assert limited.value.code == "RATE_LIMITED"
    statuses = {(row["route"], row["status"]) for row in ledger(gateway)}
    assert statuses == {("claude", "error"), ("mock", "error"), ("limited", "error")}  # 404 before admission: none
    with pytest.raises(openai.BadRequestError) as too_wide:
        client.embeddings.create(model="mock/hash", input="hi", dimensions=5000)  # the mock's own bound
    assert "dimensions must be 1…4096, got 5000" in too_wide.value.message
    assert too_wide.value.body["param"] == "dimensions"  # type: ignore[index]  # the route's refusal names it
    # a refused request cost nothing, and nothing is missing: no "charging 0 USD … no usage" warning
    assert not [record.getMessage() for record in caplog.records if record.name == "harness_gateway.spend"]


def test_metrics_count_the_endpoint(gateway: Running) -> None:
    post(gateway, {"model": "mock/hash", "input": "a b"})
    post(gateway, {"model": "mock/hash", "input": ""})
    text = httpx.get(gateway.url + "/metrics", headers={"authorization": f"Bearer {MASTER}"}).text
    assert 'harness_gateway_requests_total{api="embeddings",model="hash",route="mock",status="complete"} 1.0' in text
    assert 'harness_gateway_requests_total{api="embeddings",model="-",route="-",status="400"} 1.0' in text
    assert 'harness_gateway_tokens_total{direction="input",model="hash",route="mock"} 2.0' in text
    assert 'harness_gateway_cost_usd_total{model="hash",route="mock"} 2.0' in text
    unknown = httpx.get(gateway.url + "/v1/nope")
    assert "POST /v1/embeddings" in unknown.json()["error"]["message"]


# ---------------------------------------------------------------------- the console and observers


def test_the_console_lists_embedding_calls_with_their_inputs(gateway: Running) -> None:
    body = {"model": "mock/hash", "input": ["find me in the console", "second"]}
    assert post(gateway, body).status_code == 200
    [row] = ledger(gateway)
    with httpx.Client(base_url=gateway.url, headers={"authorization": f"Bearer {MASTER}"}, timeout=30) as http:
        listing = http.get("/console/requests").text  # recorded before the response was sent
        assert f'<a href="/console/requests/{row["id"]}">' in listing
        assert '<td class="api">embeddings</td>' in listing
        page = http.get(f"/console/requests/{row['id']}").text
    assert "find me in the console" in page
    assert "role-input" in page
    assert "usage" in page  # the timeline's usage event, then its finish
    assert "stop" in page


def test_an_observer_failing_does_not_fail_the_call(gateway: Running, caplog: pytest.LogCaptureFixture) -> None:
    seen: list[tuple[str, Any]] = []

    class Watch:
        def chunk(self, chunk: Any) -> None:
            seen.append(("chunk", type(chunk).__name__))

        async def ended(self, end: RunEnd) -> None:
            raise RuntimeError("observer bug")

    class Observer:
        def started(self, info: RunInfo) -> Watch:
            seen.append(("started", (info.dialect, info.route, info.model, info.options)))
            return Watch()

    gateway.gateway.observers.append(Observer())
    with caplog.at_level(logging.ERROR, logger="harness_gateway"):
        assert post(gateway, {"model": "mock/hash", "input": "x y"}).status_code == 200
        assert post(gateway, {"model": "limited/hash", "input": "x y"}).status_code == 429
    options = EmbedOptions(inputs=["x y"], route="mock", model="hash")
    assert seen[0] == ("started", ("embeddings", "mock", "hash", options))
    assert seen[1:3] == [("chunk", "Usage"), ("chunk", "Finish")]
    assert seen[4] == ("chunk", "Finish")  # the failed call reported no usage
    assert caplog.text.count("an observer failed at the end of an embedding call") == 2


# ---------------------------------------------------------------------- a scripted OpenAI upstream


def upstream_reply(*vectors: tuple[float, ...], usage: int | None = 4) -> Reply:
    data = [
        {"object": "embedding", "index": i, "embedding": base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode()}
        for i, v in enumerate(vectors)
    ]
    body: dict[str, Any] = {"object": "list", "data": data, "model": "text-embedding-3-small"}
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage, "total_tokens": usage}
    return Reply(headers={"content-type": "application/json"}, reads=[json.dumps(body).encode()])


def scripted_yaml(tmp_path: Path, url: str) -> str:
    extra = "    price_providers: {scripted: openai}\n"  # priced from the genai-prices table
    provider = f"  scripted-embed: {{base_url: '{url}', routes: [scripted]}}\n"
    return gateway_yaml(settings(extra), provider, db=tmp_path / "gw.sqlite")


def test_a_scripted_openai_upstream_batched_base64_and_priced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(tmp_path / "site", monkeypatch)
    first, second, third = (0.5, -1.0, 2.0), (1.5, 0.25, -0.125), (3.0, 0.0, -2.5)
    replies = upstream_reply(first, second), upstream_reply(third, usage=2), upstream_reply(first, usage=None)
    upstream = ScriptedServer(*replies)
    with upstream, serve_gateway(tmp_path, scripted_yaml(tmp_path, upstream.url)) as running:
        client = openai.OpenAI(base_url=running.url + "/v1", api_key=MASTER, max_retries=0)
        try:
            reply = client.embeddings.create(
                model="scripted/text-embedding-3-small", input=["one", "two", "three"], dimensions=3
            )
            unreported = client.embeddings.create(model="scripted/text-embedding-3-small", input="one")
        finally:
            client.close()
        rows = ledger(running)
    assert [d.embedding for d in reply.data] == [list(first), list(second), list(third)]  # exact float32 values
    assert reply.usage.prompt_tokens == 6  # both batches' usage, summed
    sent = [request.json() for request in upstream.requests]
    assert [body["input"] for body in sent] == [["one", "two"], ["three"], ["one"]]  # batches of the embedder's limit
    assert {(body["model"], body.get("dimensions")) for body in sent[:2]} == {("text-embedding-3-small", 3)}
    assert unreported.usage.prompt_tokens == 0
    first_row, second_row = rows
    assert first_row["cost"] == pytest.approx(6 * 0.02 / 1e6)  # text-embedding-3-small: 0.02 USD per million
    assert (first_row["input_tokens"], first_row["output_tokens"]) == (6, 0)
    assert (second_row["cost"], second_row["input_tokens"], second_row["status"]) == (0.0, None, "complete")


def test_an_unreachable_upstream_is_a_502_naming_the_route(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(tmp_path / "site", monkeypatch)
    upstream = ScriptedServer(Reply(end="reset"))
    with upstream, serve_gateway(tmp_path, scripted_yaml(tmp_path, upstream.url)) as running:
        response = post(running, {"model": "scripted/m", "input": "hi"})
    assert response.status_code == 502
    message = response.json()["error"]["message"]
    assert message.startswith("route 'scripted' is unreachable")
    assert upstream.url not in message  # the detail is for the server log only


def raw_request(url: str, body: dict[str, Any], key: str = MASTER) -> socket.socket:
    """Send ``POST /v1/embeddings`` on a plain socket (closed by the caller: the client leaves)."""
    host, port = url.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    head = (
        f"POST /v1/embeddings HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {key}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n"
    )
    sock = socket.create_connection((host, int(port)))
    sock.sendall(head.encode() + data)
    return sock


def test_a_slow_call_records_its_estimate_and_a_client_leaving_aborts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    install(tmp_path / "site", monkeypatch)
    upstream = ScriptedServer(Reply(headers={"content-type": "application/json"}, end="stall"))
    upstream.add(Reply(headers={"content-type": "application/json"}, end="stall"))
    body = {"model": "scripted/text-embedding-3-small", "input": ["x" * 40, "y" * 7]}
    with upstream, serve_gateway(tmp_path, scripted_yaml(tmp_path, upstream.url)) as running:
        key, _ = new_key(running, KeySpec(name="slow"))  # a key's call has its row from admission on
        sock = raw_request(running.url, body, key)
        try:  # after a second it records 47 characters, 12 tokens at 4 per token, in its running row
            wait_until(lambda: [(r["status"], r["input_tokens"]) for r in ledger(running)] == [("running", 12)])
        finally:
            sock.close()
        wait_until(lambda: ledger(running)[0]["status"] == "aborted")
        assert ledger(running)[0]["input_tokens"] is None  # the call ended with no usage

        attempted = threading.Event()

        async def failing(*args: Any, **kwargs: Any) -> bool:
            attempted.set()
            raise GatewayError(503, "the store is down", code="store_unavailable")

        running.gateway.store.record = failing  # the store fails the record, not the rest
        with caplog.at_level(logging.INFO, logger="harness_gateway"):
            sock = raw_request(running.url, body, key)
            try:
                assert attempted.wait(30)
            finally:
                sock.close()
            wait_until(lambda: len(ledger(running)) == 2 and ledger(running)[1]["status"] == "aborted")
    assert "could not record its usage so far: the store is down" in caplog.text
    assert "client disconnected, aborting the embedding call" in caplog.text


def test_the_openai_plugin_embeds_through_the_gateway(tmp_path: Path) -> None:
    """The whole path with the real ``harness-llm-openai`` embedder: the openai SDK → ``harness
    serve`` → ``POST /embeddings`` on a scripted OpenAI server (base64 asked upstream, decoded into
    the buffer, base64 again to the client), priced from the table and recorded in the ledger."""
    vector = (0.25, -0.5, 1.0)
    upstream = ScriptedServer(upstream_reply(vector, usage=3))
    with upstream:
        extra = "    price_providers: {gpt: openai}\n"
        provider = (
            f"  openai:gpt: {{base_url: '{upstream.url}/v1', api_key: provider-test-credential, routes: [gpt]}}\n"
        )
        yaml_text = gateway_yaml(settings(extra), provider, db=tmp_path / "gw.sqlite")
        with serve_gateway(tmp_path, yaml_text) as running:
            client = openai.OpenAI(base_url=running.url + "/v1", api_key=MASTER, max_retries=0)
            try:
                reply = client.embeddings.create(model="gpt/text-embedding-3-small", input="hello there")
            finally:
                client.close()
            rows = ledger(running)
    assert reply.data[0].embedding == list(vector)
    assert reply.usage.prompt_tokens == 3
    (sent,) = [request.json() for request in upstream.requests]
    assert sent == {"model": "text-embedding-3-small", "input": ["hello there"], "encoding_format": "base64"}
    assert upstream.requests[0].path == "/v1/embeddings"
    (row,) = rows
    assert (row["route"], row["input_tokens"], row["status"]) == ("gpt", 3, "complete")
    assert row["cost"] == pytest.approx(3 * 0.02 / 1e6)
