"""The adapter kit end to end: a toy adapter on :class:`HttpAdapter` against a scripted server."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence

import anyio
import httpx
import msgspec
import pytest
from kit_adapter import TOY_URL, ToyAdapter, ToyConfig, ToyPlugin, ToyTranslator

import harness_core.kit as kit
from harness_core.abort import AbortSignal
from harness_core.adapter import LlmAdapter
from harness_core.config import EnvFallback
from harness_core.errors import LlmError
from harness_core.http import make_client
from harness_core.kit import (
    DEFAULT_ABORT_REASON,
    HttpAdapter,
    HttpTimeouts,
    StreamTranslator,
    abort_reason,
    client_options,
    request_json,
    stream_sse,
)
from harness_core.secret import Secret
from harness_core.testing.check import check_stream
from harness_core.testing.server import Reply, ScriptedServer
from harness_core.types import Finish, GenerateOptions, Message, StreamChunk, TextDelta

pytestmark = pytest.mark.anyio

OPTIONS = GenerateOptions(model="toy-1", messages=[Message.user("hi")])
BODY = [b"data: t:Hel\n\n", b"data: t:lo\n\n", b"data: end\n\n"]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
async def adapter(server: ScriptedServer) -> AsyncIterator[ToyAdapter]:
    toy = ToyAdapter(ToyConfig(base_url=server.url, api_key=Secret("sk-toy-0123456789")))
    try:
        yield toy
    finally:
        await toy.aclose()


async def collect(adapter: ToyAdapter, options: GenerateOptions = OPTIONS) -> list[StreamChunk]:
    return [chunk async for chunk in adapter.stream(options)]


def texts(chunks: list[StreamChunk]) -> str:
    return "".join(c.text for c in chunks if isinstance(c, TextDelta))


# ---------------------------------------------------------------------- the translator stage


def test_abort_reason_defaults_and_keeps_the_signals_reason() -> None:
    assert abort_reason(None) == DEFAULT_ABORT_REASON
    signal = AbortSignal()
    signal.fire()
    assert abort_reason(signal) == DEFAULT_ABORT_REASON
    named = AbortSignal()
    named.fire("user pressed stop")
    assert abort_reason(named) == "user pressed stop"


def test_toy_translator_satisfies_the_protocol() -> None:
    assert isinstance(ToyTranslator(None), StreamTranslator)


# ---------------------------------------------------------------------- HttpAdapter + stream_sse


async def test_stream_sends_the_request_and_translates_the_events(server: ScriptedServer, adapter: ToyAdapter) -> None:
    server.add(Reply(reads=BODY, headers={"x-request-id": "req_1"}))
    chunks = check_stream(await collect(adapter))
    assert texts(chunks) == "Hello"
    assert isinstance(chunks[-1], Finish)
    assert chunks[-1].reason.kind == "stop"
    request = server.requests[0]
    assert (request.method, request.path) == ("POST", "/stream")
    assert request.json() == {"model": "toy-1", "n": 1}
    assert request.headers["authorization"] == "Bearer sk-toy-0123456789"
    assert request.headers["accept"] == "text/event-stream"
    assert request.headers["content-type"] == "application/json"


async def test_events_after_the_terminal_one_are_drained_and_the_connection_reused(
    server: ScriptedServer, adapter: ToyAdapter
) -> None:
    server.add(Reply(reads=[*BODY, b"data: t:late\n\n"]), Reply(reads=BODY))
    first = await collect(adapter)
    assert texts(first) == "Hello"
    assert texts(await collect(adapter)) == "Hello"
    assert server.connections_opened == 1


async def test_a_fault_after_the_terminal_event_is_not_raised(server: ScriptedServer, adapter: ToyAdapter) -> None:
    server.add(Reply(reads=[*BODY, b"data: " + b"x" * 64 + b"\n\n"], end="abrupt"))
    client = make_client(base_url=server.url)
    try:
        request = client.build_request("POST", "/stream")
        stream = stream_sse(client, request, ToyTranslator, drain_timeout=30.0)
        chunks = [chunk async for chunk in stream]
    finally:
        await client.aclose()
    assert texts(chunks) == "Hello"


async def test_in_band_error_finishes_with_error(server: ScriptedServer, adapter: ToyAdapter) -> None:
    server.add(Reply(reads=[b"data: t:a\n\n", b"data: x:boom\n\n"], headers={"request-id": "req_9"}))
    finish = (await collect(adapter))[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.kind == "error"
    assert finish.reason.failure is not None
    assert (finish.reason.failure.message, finish.reason.failure.request_id) == ("boom", "req_9")


async def test_eof_before_the_terminal_event_raises_the_translators_error(
    server: ScriptedServer, adapter: ToyAdapter
) -> None:
    server.add(Reply(reads=BODY[:2]))
    with pytest.raises(LlmError) as caught:
        await collect(adapter)
    assert caught.value.code == "NETWORK"


async def test_http_error_uses_the_adapters_classifier_and_keeps_retry_after(
    server: ScriptedServer, adapter: ToyAdapter
) -> None:
    server.add(
        Reply(
            status=400,
            headers={"content-type": "application/json", "retry-after": "7"},
            reads=[b'{"error": "slow down"}'],
        )
    )
    with pytest.raises(LlmError) as caught:
        await collect(adapter)
    error = caught.value
    assert (error.code, error.status, error.retry_after, error.provider) == ("RATE_LIMITED", 400, 7.0, "toy")


async def test_option_errors_come_from_the_iteration_before_any_io(server: ScriptedServer, adapter: ToyAdapter) -> None:
    stream = adapter.stream(GenerateOptions(model="toy-1", messages=[Message.user("x")], seed=1))
    with pytest.raises(LlmError) as caught:
        await stream.__anext__()
    assert caught.value.code == "UNSUPPORTED"
    with pytest.raises(LlmError) as missing:
        await collect(adapter, GenerateOptions(messages=[Message.user("x")]))
    assert (missing.value.code, missing.value.provider) == ("BAD_REQUEST", "toy")
    assert server.requests == []


async def test_abort_before_the_request_sends_nothing(server: ScriptedServer, adapter: ToyAdapter) -> None:
    signal = AbortSignal()
    signal.fire()
    chunks = await collect(adapter, GenerateOptions(model="toy-1", messages=[Message.user("x")], abort=signal))
    assert len(chunks) == 1
    assert isinstance(chunks[0], Finish)
    assert chunks[0].reason.failure is not None
    assert chunks[0].reason.failure.message == DEFAULT_ABORT_REASON
    assert server.requests == []


async def test_abort_during_a_stalled_read_closes_open_blocks(server: ScriptedServer, adapter: ToyAdapter) -> None:
    server.add(Reply(reads=BODY[:1], end="stall"))
    signal = AbortSignal()
    options = GenerateOptions(model="toy-1", messages=[Message.user("x")], abort=signal)
    chunks: list[StreamChunk] = []
    with anyio.fail_after(30):  # a hang guard, not a timing assertion
        async for chunk in adapter.stream(options):
            chunks.append(chunk)
            if isinstance(chunk, TextDelta):
                signal.fire("stop")
    check_stream(chunks)
    assert [type(c).__name__ for c in chunks] == ["BlockStart", "TextDelta", "BlockEnd", "Finish"]
    assert server.wait_idle()


async def test_a_prebuilt_request_is_sent_as_is(server: ScriptedServer) -> None:
    server.add(Reply(reads=BODY))
    async with make_client(base_url=server.url) as client:
        request = client.build_request("POST", "/other", content=b"{}")
        chunks = [chunk async for chunk in stream_sse(client, request, ToyTranslator)]
    assert texts(chunks) == "Hello"
    assert server.requests[0].path == "/other"


async def test_headers_config_wins_and_no_key_sends_no_authorization(server: ScriptedServer) -> None:
    server.add(Reply(reads=BODY))
    toy = ToyAdapter(ToyConfig(base_url=server.url + "/", headers={"accept": "*/*", "x-extra": "1"}))
    try:
        await collect(toy)
    finally:
        await toy.aclose()
        await toy.aclose()  # idempotent
    headers = server.requests[0].headers
    assert "authorization" not in headers
    assert (headers["accept"], headers["x-extra"]) == ("*/*", "1")


# ---------------------------------------------------------------------- list_models / request_json


async def test_list_models_reads_the_openai_shape(server: ScriptedServer, adapter: ToyAdapter) -> None:
    server.add(Reply(headers={"content-type": "application/json"}, reads=[b'{"data": [{"id": "a"}, {"id": 2}]}']))
    assert [info.model for info in await adapter.list_models()] == ["a", "2"]
    assert (server.requests[0].method, server.requests[0].path) == ("GET", "/models")


@pytest.mark.parametrize("body", [b"{}", b"[]", b"not json", b'{"data": [{"name": "x"}]}', b'{"data": 3}'])
async def test_list_models_rejects_other_shapes_as_protocol(
    server: ScriptedServer, adapter: ToyAdapter, body: bytes
) -> None:
    server.add(Reply(headers={"content-type": "application/json"}, reads=[body]))
    with pytest.raises(LlmError) as caught:
        await adapter.list_models()
    assert caught.value.code == "PROTOCOL"
    assert "/models" in caught.value.message


async def test_list_models_maps_http_errors(server: ScriptedServer, adapter: ToyAdapter) -> None:
    server.add(Reply(status=401, headers={"content-type": "application/json"}, reads=[b'{"error": "bad key"}']))
    with pytest.raises(LlmError) as caught:
        await adapter.list_models()
    assert (caught.value.code, caught.value.message) == ("AUTH", "bad key")


async def test_list_models_without_a_models_path_is_unsupported() -> None:
    class NoModels(ToyAdapter):
        models_path = None

    with pytest.raises(LlmError) as caught:
        await NoModels(ToyConfig()).list_models()
    assert caught.value.code == "UNSUPPORTED"


async def test_request_json_maps_transport_faults() -> None:
    with ScriptedServer() as gone:
        url = gone.url
    async with make_client(base_url=url) as client:
        with pytest.raises(LlmError) as caught:
            await request_json(client, "/models", bytes, params={"limit": 1}, provider="toy")
    assert (caught.value.code, caught.value.provider) == ("NETWORK", "toy")


# ---------------------------------------------------------------------- config and plugin


def test_a_key_that_cannot_be_sent_is_config_when_the_adapter_is_built() -> None:
    with pytest.raises(LlmError) as caught:
        ToyAdapter(ToyConfig(api_key=Secret("sk-toy-0123456789\r")))
    assert (caught.value.code, caught.value.provider) == ("CONFIG", "toy")
    assert "sk-toy" not in str(caught.value)


def test_config_defaults_and_client_options() -> None:
    config = ToyConfig(base_url="http://h:1/v1/", timeout=HttpTimeouts(read=None), max_connections=3)
    assert client_options(config) == {
        "base_url": "http://h:1/v1/",
        "connect_timeout": 10.0,
        "read_timeout": None,
        "write_timeout": 60.0,
        "pool_timeout": 30.0,
        "max_connections": 3,
        "max_keepalive_connections": 3,
        "backend": "auto",
    }


async def test_plugin_registers_the_adapter_for_its_routes() -> None:
    plugin = ToyPlugin()
    assert plugin.config == ToyConfig()
    assert repr(plugin) == f"ToyPlugin(base_url={TOY_URL!r}, routes=['toy'])"
    registered: list[tuple[list[str], object]] = []

    def register(routes: Sequence[str], adapter: LlmAdapter) -> Callable[[], None]:
        registered.append((list(routes), adapter))
        return lambda: None

    plugin.register_adapter(register)
    [(routes, adapter)] = registered
    assert routes == ["toy"]
    assert isinstance(adapter, ToyAdapter)
    assert adapter.config is plugin.config
    await adapter.aclose()


def test_kit_names_load_lazily() -> None:
    assert kit.HttpTimeouts is HttpTimeouts
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = kit.nope


async def test_the_adapter_makes_one_client_on_first_use(adapter: ToyAdapter) -> None:
    assert isinstance(adapter.client, httpx.AsyncClient)
    assert adapter.client is adapter.client


async def test_the_default_classifier_keeps_the_generic_mapping(adapter: ToyAdapter) -> None:
    assert HttpAdapter.classify_error(adapter, 400, {"error": "slow down"}) is None


def test_the_vendor_key_falls_back_to_its_variable_only_for_the_vendor_host() -> None:
    [api_key] = [field for field in msgspec.structs.fields(ToyConfig) if field.name == "api_key"]
    [marker] = [meta for meta in api_key.type.__metadata__ if isinstance(meta, EnvFallback)]
    assert (marker.var, marker.only_when) == ("TOY_API_KEY", {"base_url": TOY_URL})


class _PerModelPath(ToyAdapter):
    """A path naming the model, as Gemini's does."""

    def request_path(self, options: GenerateOptions) -> str:
        return f"/models/{options.model}:stream?alt=sse"


async def test_each_request_goes_to_its_own_path_whatever_the_url_cache_holds(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness_core.kit.adapter

    monkeypatch.setattr(harness_core.kit.adapter, "_MAX_URLS", 2)
    toy = _PerModelPath(ToyConfig(base_url=server.url + "/v1/", api_key=Secret("sk-toy-0123456789")))
    models = ["a", "b", "a", "c", "d", "a"]
    try:
        for model in models:
            server.add(Reply(reads=BODY))
            assert texts(await collect(toy, msgspec.structs.replace(OPTIONS, model=model))) == "Hello"
            assert len(toy._urls) <= 2  # bounded: cleared when full
    finally:
        await toy.aclose()
    assert [request.path for request in server.requests] == [f"/v1/models/{model}:stream?alt=sse" for model in models]


def test_building_an_adapter_imports_no_http_library() -> None:
    code = (
        "import sys\n"
        "from harness_core.kit.adapter import HttpAdapter\n"
        "from harness_core.http import ErrorDetails, check_headers, code_for_status\n"
        "import harness_core.kit.request, harness_core.kit.stream\n"
        "check_headers({'authorization': 'Bearer k'})\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('httpx', 'httpcore', 'aiohttp')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
