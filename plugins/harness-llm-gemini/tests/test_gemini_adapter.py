"""The adapter over HTTP against a scripted Gemini server: request shape, HTTP and in-band errors,
end of stream, abort, model listing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from gemini_fixtures import API_KEY, MODEL, chunk, google_error, make_config, sse, text_body, usage

from harness_core.abort import AbortSignal
from harness_core.errors import LlmError
from harness_core.secret import Secret
from harness_core.testing.check import check_stream
from harness_core.testing.server import Reply, ScriptedServer
from harness_core.types import (
    BlockEnd,
    Finish,
    GenerateOptions,
    Message,
    ModelInfo,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolResultBlock,
)
from harness_llm_gemini.adapter import GeminiAdapter, model_path
from harness_llm_gemini.config import GeminiConfig, ModelConfig
from harness_llm_gemini.errors import classifier, retry_delay

pytestmark = pytest.mark.anyio

OPTIONS = GenerateOptions(model=MODEL, messages=[Message.user("hi")])


async def collect(adapter: GeminiAdapter, options: GenerateOptions = OPTIONS) -> list[StreamChunk]:
    return [chunk async for chunk in adapter.stream(options)]


async def failure(adapter: GeminiAdapter, options: GenerateOptions = OPTIONS) -> LlmError:
    with pytest.raises(LlmError) as info:
        await collect(adapter, options)
    return info.value


def finish_of(chunks: list[StreamChunk]) -> Finish:
    assert isinstance(chunks[-1], Finish)
    return chunks[-1]


async def test_request_shape(server: ScriptedServer) -> None:
    server.add(Reply(reads=[text_body("Hi!")]))
    adapter = GeminiAdapter(make_config(server, headers={"x-goog-user-project": "p1"}))
    try:
        chunks = await collect(adapter)
    finally:
        await adapter.aclose()
        await adapter.aclose()  # idempotent
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["Hi!"]
    [request] = server.requests
    assert request.method == "POST"
    assert request.path == f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
    assert request.headers["x-goog-api-key"] == API_KEY
    assert request.headers["x-goog-user-project"] == "p1"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "text/event-stream"
    assert API_KEY not in request.path
    assert request.json() == {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


def test_model_paths() -> None:
    assert model_path("gemini-2.5-flash") == "models/gemini-2.5-flash"
    assert model_path("tunedModels/my-model") == "tunedModels/my-model"
    assert model_path("models/a b?") == "models/a%20b%3F"


async def test_no_key_sends_no_key_header(server: ScriptedServer) -> None:
    server.add(Reply(reads=[text_body()]))
    adapter = GeminiAdapter(GeminiConfig(base_url=server.url))
    try:
        await collect(adapter)
    finally:
        await adapter.aclose()
    assert "x-goog-api-key" not in server.requests[0].headers


@pytest.mark.parametrize(
    ("status", "body", "headers", "code", "retry_after", "provider_code"),
    [
        (
            400,
            google_error(
                400,
                "INVALID_ARGUMENT",
                "API key not valid. Please pass a valid API key.",
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"},
            ),
            {},
            "AUTH",
            None,
            "API_KEY_INVALID",
        ),
        (
            429,
            google_error(
                429,
                "RESOURCE_EXHAUSTED",
                "You exceeded your current quota.",
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure"},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"},
            ),
            {},
            "RATE_LIMITED",
            37.0,
            "429",
        ),
        (
            429,
            google_error(
                429,
                "RESOURCE_EXHAUSTED",
                "slow down",
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "9s"},
            ),
            {"retry-after": "3"},
            "RATE_LIMITED",
            3.0,
            "429",
        ),
        (
            400,
            google_error(
                400,
                "INVALID_ARGUMENT",
                "The input token count (2000000) exceeds the maximum number of tokens allowed (1048576).",
            ),
            {},
            "CONTEXT_LENGTH",
            None,
            "400",
        ),
        (400, google_error(400, "INVALID_ARGUMENT", "Invalid JSON payload received."), {}, "BAD_REQUEST", None, "400"),
        (
            400,
            google_error(400, "FAILED_PRECONDITION", "Free tier unavailable; enable billing."),
            {},
            "QUOTA",
            None,
            "400",
        ),
        (
            400,
            google_error(400, "FAILED_PRECONDITION", "User location is not supported for the API use."),
            {},
            "PERMISSION",
            None,
            "400",
        ),
        (403, google_error(403, "PERMISSION_DENIED", "Permission denied."), {}, "PERMISSION", None, "403"),
        (
            401,
            google_error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials."),
            {},
            "AUTH",
            None,
            "401",
        ),
        (
            404,
            google_error(404, "NOT_FOUND", "models/nope is not found for API version v1beta"),
            {},
            "NOT_FOUND",
            None,
            "404",
        ),
        (500, google_error(500, "INTERNAL", "An internal error has occurred."), {}, "SERVER", None, "500"),
        (503, google_error(503, "UNAVAILABLE", "The model is overloaded."), {}, "OVERLOADED", None, "503"),
        (504, google_error(504, "DEADLINE_EXCEEDED", "Deadline exceeded."), {}, "SERVER", None, "504"),
        (
            503,
            b'[{"error": {"code": 503, "message": "wrapped", "status": "UNAVAILABLE"}}]',
            {},
            "OVERLOADED",
            None,
            "503",
        ),
        (502, b"<html><title>502 Bad Gateway</title></html>", {}, "SERVER", None, None),
        (409, google_error(409, "ABORTED", "conflict"), {}, "SERVER", None, "409"),
    ],
)
async def test_http_errors(
    server: ScriptedServer,
    adapter: GeminiAdapter,
    status: int,
    body: bytes,
    headers: dict[str, str],
    code: str,
    retry_after: float | None,
    provider_code: str | None,
) -> None:
    server.add(Reply(status=status, headers={"content-type": "application/json", **headers}, reads=[body]))
    error = await failure(adapter)
    assert (error.code, error.status, error.retry_after, error.provider_code) == (
        code,
        status,
        retry_after,
        provider_code,
    )
    assert error.provider == "gemini"
    assert API_KEY not in str(error)


def test_classifier_edges() -> None:
    assert classifier(400, None) is None
    assert classifier(400, {"error": "text"}) is None
    details = classifier(None, {"error": {"code": 429, "message": 5, "status": 7, "details": "x"}})
    assert details is not None
    assert details.code == "RATE_LIMITED"
    unknown = classifier(None, {"error": {"code": 200, "status": "WEIRD"}})
    assert unknown is not None
    assert unknown.code is None
    assert retry_delay([{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "soon"}, "x"]) is None
    assert retry_delay([{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.5s"}]) == 0.5


async def test_a_2xx_that_is_not_a_stream_is_a_protocol_error(server: ScriptedServer, adapter: GeminiAdapter) -> None:
    server.add(Reply(headers={"content-type": "application/json"}, reads=[b'[{"candidates": []}]']))
    error = await failure(adapter)
    assert error.code == "PROTOCOL"
    assert "application/json" in error.message


async def test_end_of_stream_before_a_finish_reason(server: ScriptedServer, adapter: GeminiAdapter) -> None:
    server.add(Reply(reads=[sse(chunk({"text": "partial"}))]))
    assert (await failure(adapter)).code == "NETWORK"
    server.add(Reply(reads=[sse(chunk({"text": "partial"}))], end="abrupt"))
    assert (await failure(adapter)).code == "NETWORK"


async def test_inband_error_after_200(server: ScriptedServer, adapter: GeminiAdapter) -> None:
    error = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    server.add(Reply(headers={"x-request-id": "rq-1"}, reads=[sse(chunk({"text": "part"}, usage=usage()), error)]))
    chunks = await collect(adapter)
    check_stream(chunks)
    reason = finish_of(chunks).reason
    assert reason.kind == "error"
    assert reason.failure is not None
    assert (reason.failure.code, reason.failure.request_id) == ("OVERLOADED", "rq-1")
    assert chunks[2] == BlockEnd(0, TextBlock("part"))


async def test_abort_before_start_sends_nothing(server: ScriptedServer, adapter: GeminiAdapter) -> None:
    abort = AbortSignal()
    abort.fire("not needed")
    chunks = await collect(adapter, GenerateOptions(model=MODEL, messages=[Message.user("x")], abort=abort))
    reason = finish_of(chunks).reason
    assert reason.kind == "aborted"
    assert reason.failure is not None
    assert reason.failure.message == "not needed"
    assert server.requests == []


async def test_abort_while_the_server_stalls(server: ScriptedServer, adapter: GeminiAdapter) -> None:
    server.add(Reply(reads=[sse(chunk({"text": "partial"}, usage=usage(4, 1)))], end="stall"))
    abort = AbortSignal()
    chunks: list[StreamChunk] = []
    async for piece in adapter.stream(GenerateOptions(model=MODEL, messages=[Message.user("x")], abort=abort)):
        chunks.append(piece)
        if isinstance(piece, TextDelta):
            abort.fire()  # the next read would block forever
    check_stream(chunks)
    assert [type(c).__name__ for c in chunks] == ["BlockStart", "TextDelta", "BlockEnd", "Usage", "Finish"]
    reason = finish_of(chunks).reason
    assert reason.kind == "aborted"
    assert reason.failure is not None
    assert reason.failure.message == "aborted by the caller"
    assert server.wait_idle()


async def test_an_unknown_effort_fails_before_any_request(server: ScriptedServer, adapter: GeminiAdapter) -> None:
    error = await failure(adapter, GenerateOptions(model=MODEL, messages=[Message.user("x")], reasoning_effort="max"))
    assert error.code == "UNSUPPORTED"
    assert server.requests == []


def models_page(*models: dict[str, Any], token: str | None = None) -> bytes:
    page: dict[str, Any] = {"models": list(models)}
    if token:
        page["nextPageToken"] = token
    return json.dumps(page).encode()


JSON = {"content-type": "application/json"}


async def test_list_models_pages_and_filters(server: ScriptedServer) -> None:
    server.add(
        Reply(
            headers=JSON,
            reads=[
                models_page(
                    {
                        "name": "models/gemini-2.5-flash",
                        "inputTokenLimit": 1048576,
                        "outputTokenLimit": 65536,
                        "supportedGenerationMethods": ["generateContent", "countTokens"],
                        "thinking": True,
                    },
                    {"name": "models/text-embedding-004", "supportedGenerationMethods": ["embedContent"]},
                    token="next-1",
                )
            ],
        ),
        Reply(
            headers=JSON,
            reads=[
                models_page(
                    {
                        "name": "models/gemini-2.0-flash",
                        "inputTokenLimit": 1048576,
                        "outputTokenLimit": 8192,
                        "supportedGenerationMethods": ["generateContent"],
                    },
                    {
                        "name": "models/gemini-3-pro-preview",
                        "supportedGenerationMethods": ["generateContent"],
                        "thinking": True,
                    },
                )
            ],
        ),
    )
    config = make_config(server, models={"gemini-2.0-flash": ModelConfig(context_window=1000)}, default_effort="low")
    adapter = GeminiAdapter(config)
    try:
        models = await adapter.list_models()
    finally:
        await adapter.aclose()
    assert models == [
        ModelInfo(
            model="gemini-2.5-flash",
            context_window=1048576,
            max_output_tokens=65536,
            reasoning_efforts=["off", "low", "medium", "high"],
            default_effort="low",
        ),
        ModelInfo(model="gemini-2.0-flash", context_window=1000, max_output_tokens=8192),
        ModelInfo(model="gemini-3-pro-preview", reasoning_efforts=["low", "high"], default_effort="low"),
    ]
    assert server.requests[0].path == "/v1beta/models?pageSize=1000"
    assert server.requests[1].path == "/v1beta/models?pageSize=1000&pageToken=next-1"
    assert server.requests[0].headers["x-goog-api-key"] == API_KEY


async def test_list_models_failures(server: ScriptedServer, adapter: GeminiAdapter) -> None:
    server.add(
        Reply(
            status=400,
            headers=JSON,
            reads=[google_error(400, "INVALID_ARGUMENT", "API key not valid.", {"reason": "API_KEY_INVALID"})],
        )
    )
    with pytest.raises(LlmError) as info:
        await adapter.list_models()
    assert info.value.code == "AUTH"
    server.add(Reply(headers=JSON, reads=[b'{"models": "nope"}']))
    with pytest.raises(LlmError) as info:
        await adapter.list_models()
    assert info.value.code == "PROTOCOL"
    server.add(Reply(headers=JSON, reads=[b'{"models": []'], end="reset"))
    with pytest.raises(LlmError) as info:
        await adapter.list_models()
    assert info.value.code == "NETWORK"


def test_resolve_model() -> None:
    config = GeminiConfig(
        api_key=Secret("k"),
        models={"custom": ModelConfig(context_window=10, max_output_tokens=5, efforts={}, default_effort="x")},
    )
    adapter = GeminiAdapter(config)
    assert adapter.resolve_model("custom") == ModelInfo(model="custom", context_window=10, max_output_tokens=5)
    assert adapter.resolve_model("gemini-3-flash-preview").reasoning_efforts == ["minimal", "low", "medium", "high"]
    assert adapter.resolve_model("models/gemini-3-pro").reasoning_efforts == ["low", "high"]
    levels = GeminiConfig(thinking_levels={"quick": "low"})
    assert GeminiAdapter(levels).resolve_model("gemini-3-flash").reasoning_efforts == ["quick"]


async def test_gemini_3_gets_the_placeholder_signature_on_foreign_calls(server: ScriptedServer) -> None:
    history = [
        Message.user("Weather?"),
        Message(role="assistant", content=[ToolCallBlock("call_x", "get_weather", '{"city": "Oslo"}')]),
        Message(role="tool", content=[ToolResultBlock("call_x", "3 C")]),
    ]
    server.add(Reply(reads=[text_body()]), Reply(reads=[text_body()]))
    adapter = GeminiAdapter(make_config(server))
    try:
        await collect(adapter, GenerateOptions(model="gemini-3-pro-preview", messages=history))
        await collect(adapter, GenerateOptions(model=MODEL, messages=history))
    finally:
        await adapter.aclose()
    gemini_3, gemini_25 = (request.json()["contents"][1]["parts"][0] for request in server.requests)
    assert gemini_3["thoughtSignature"] == "skip_thought_signature_validator"
    assert "thoughtSignature" not in gemini_25
