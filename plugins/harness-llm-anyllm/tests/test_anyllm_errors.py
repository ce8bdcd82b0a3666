"""Library exceptions → stable error codes (status, retry-after, request id kept), with the key
masked out of every message; provider errors are real HTTP responses of a scripted server."""

from __future__ import annotations

import base64
import logging

import pytest
from anyllm_wire import OPENAI_TEXT, key, make_adapter, options, run

from harness_core.errors import LlmError
from harness_core.secret import MASK
from harness_core.testing.server import Reply, ScriptedServer
from harness_llm_anyllm.adapter import AnyLLMAdapter
from harness_llm_anyllm.config import AnyLLMConfig
from harness_llm_anyllm.errors import error_from_library, scrub

pytestmark = pytest.mark.anyio


async def _error(server: ScriptedServer, provider: str, reply: Reply, **fields: object) -> LlmError:
    server.add(reply)
    adapter = make_adapter(provider, server, **fields)
    try:
        chunks, error = await run(adapter)
    finally:
        await adapter.aclose()
    assert error is not None
    assert not chunks
    return error


async def test_rate_limit_keeps_status_retry_after_type_and_request_id(server: ScriptedServer) -> None:
    body = {"error": {"message": "Slow down", "type": "rate_limit_error", "code": "rate_limit_exceeded"}}
    reply = Reply.json(429, body, headers={"retry-after": "7", "x-request-id": "req_123"})
    error = await _error(server, "openai", reply)
    assert (error.code, error.status, error.retry_after, error.request_id) == ("RATE_LIMITED", 429, 7.0, "req_123")
    assert (error.provider, error.provider_type, error.provider_code) == (
        "anyllm",
        "rate_limit_error",
        "rate_limit_exceeded",
    )
    assert error.retryable
    assert "Slow down" in error.message


async def test_spent_quota_is_not_a_rate_limit(server: ScriptedServer) -> None:
    body = {"error": {"message": "You exceeded your quota", "type": "insufficient_quota", "code": "insufficient_quota"}}
    error = await _error(server, "openai", Reply.json(429, body))
    assert error.code == "QUOTA"
    assert not error.retryable


async def test_context_overflow(server: ScriptedServer) -> None:
    body = {"error": {"message": "maximum context length is 8192 tokens", "type": "invalid_request_error"}}
    error = await _error(server, "openai", Reply.json(400, body))
    assert (error.code, error.status) == ("CONTEXT_LENGTH", 400)


async def test_anthropic_overloaded_529(server: ScriptedServer) -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    error = await _error(server, "anthropic", Reply.json(529, body, headers={"request-id": "req_ant"}))
    assert (error.code, error.status, error.provider_type, error.request_id) == (
        "OVERLOADED",
        529,
        "overloaded_error",
        "req_ant",
    )


async def test_mistral_error_body_text_is_read(server: ScriptedServer) -> None:
    body = {"object": "error", "message": "Invalid model", "type": "invalid_request_error", "code": "1500"}
    error = await _error(server, "mistral", Reply.json(400, body))
    assert (error.code, error.status, error.provider_type, error.provider_code) == (
        "BAD_REQUEST",
        400,
        "invalid_request_error",
        "1500",
    )


@pytest.mark.parametrize("provider", ["openai", "anthropic", "mistral"])
async def test_a_key_echoed_by_the_provider_is_masked(server: ScriptedServer, provider: str) -> None:
    secret = key()
    partial = secret[:3] + "*" * 10 + secret[-4:]
    body = {
        "error": {"message": f"Incorrect API key provided: {partial} (full: {secret})", "type": "authentication_error"}
    }
    error = await _error(server, provider, Reply.json(401, body))
    assert (error.code, error.status) == ("AUTH", 401)
    assert secret not in error.message
    assert partial not in error.message
    assert secret[-4:] not in error.message
    assert MASK in error.message


async def test_a_body_cut_mid_stream_is_a_network_error(server: ScriptedServer) -> None:
    reply = Reply(reads=[OPENAI_TEXT[:200]], end="abrupt")
    server.add(reply)
    adapter = make_adapter("openai", server)
    try:
        _, error = await run(adapter)
    finally:
        await adapter.aclose()
    assert error is not None
    assert error.code == "NETWORK"
    assert error.retryable


async def test_a_stream_ending_without_a_finish_reason_is_a_network_error(server: ScriptedServer) -> None:
    from anyllm_wire import chunk, openai_sse

    error = await _error(server, "openai", Reply(reads=[openai_sse(chunk(usage=None), done=True)]))
    assert error.code == "NETWORK"
    assert "finish_reason" in error.message


async def test_a_reset_connection_is_a_network_error(server: ScriptedServer) -> None:
    error = await _error(server, "anthropic", Reply(end="reset"))
    assert error.code == "NETWORK"


async def test_a_silent_server_runs_into_the_configured_timeout(server: ScriptedServer) -> None:
    error = await _error(server, "openai", Reply(reads=[b": ping\n\n"], end="stall"), timeout=0.5)
    assert error.code == "TIMEOUT"


async def test_seed_is_unsupported_by_anthropic_before_any_request(server: ScriptedServer) -> None:
    adapter = make_adapter("anthropic", server)
    try:
        _, error = await run(adapter, options(seed=1))
    finally:
        await adapter.aclose()
    assert error is not None
    assert error.code == "UNSUPPORTED"
    assert "'seed'" in error.message
    assert not server.requests


async def test_an_option_the_sdk_does_not_take_is_unsupported_naming_it(server: ScriptedServer) -> None:
    adapter = make_adapter("anthropic", server)
    try:
        _, error = await run(adapter, options(provider_options={"anyllm": {"bogus_option": 1}}))
    finally:
        await adapter.aclose()
    assert error is not None
    assert error.code == "UNSUPPORTED"
    assert "'bogus_option'" in error.message
    assert not server.requests


async def test_a_provider_without_its_sdk_installed_is_a_config_error() -> None:
    _, error = await run(AnyLLMAdapter(AnyLLMConfig(provider="vertexai")))
    assert error is not None
    assert error.code == "CONFIG"
    assert "pip install 'any-llm-sdk[vertexai]'" in error.message


async def test_no_key_anywhere_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MISTRAL_API_KEY", raising=False)
    _, error = await run(AnyLLMAdapter(AnyLLMConfig(provider="mistral")))
    assert error is not None
    assert error.code == "CONFIG"
    assert "MISTRAL_API_KEY" in error.message


# ---------------------------------------------------------------------- error_from_library


def test_an_unexpected_exception_is_internal_and_logged_masked(caplog: pytest.LogCaptureFixture) -> None:
    secret = key()
    with caplog.at_level(logging.ERROR, logger="harness_llm_anyllm"):
        error = error_from_library(RuntimeError(f"boom {secret}"), library_provider="openai", secret=secret)
    assert error.code == "INTERNAL"
    assert secret not in error.message
    assert "RuntimeError" in error.message
    [record] = caplog.records
    assert "Traceback" in record.getMessage() or "RuntimeError" in record.getMessage()
    assert secret not in record.getMessage()


def test_library_exception_classes_without_status() -> None:
    from any_llm.exceptions import (
        ContextLengthExceededError,
        GatewayTimeoutError,
        ProviderError,
        RateLimitError,
        UnsupportedParameterError,
    )

    rate = error_from_library(RateLimitError("slow", retry_after="3"), library_provider="x")
    assert (rate.code, rate.retry_after, rate.status) == ("RATE_LIMITED", 3.0, None)
    assert error_from_library(ContextLengthExceededError("long"), library_provider="x").code == "CONTEXT_LENGTH"
    assert error_from_library(GatewayTimeoutError(), library_provider="x").code == "TIMEOUT"
    assert error_from_library(ProviderError("odd"), library_provider="x").code == "SERVER"
    unsupported = error_from_library(UnsupportedParameterError("top_k", "x"), library_provider="x")
    assert unsupported.code == "UNSUPPORTED"
    assert "top_k" in unsupported.message


def test_content_filter_refines_a_400() -> None:
    from any_llm.exceptions import ContentFilterError

    error = error_from_library(ContentFilterError("blocked", status_code=400), library_provider="x")
    assert (error.code, error.status) == ("CONTENT_FILTER", 400)


def test_transport_failures_under_the_library() -> None:
    from any_llm.exceptions import ProviderError

    cause = ConnectionResetError("peer reset")
    wrapped = ProviderError("connection", original_exception=cause)
    assert error_from_library(wrapped, library_provider="x").code == "NETWORK"
    outer = ValueError("wrapper")
    outer.__cause__ = TimeoutError("slow")
    assert error_from_library(outer, library_provider="x").code == "TIMEOUT"


def test_not_implemented_and_refused_arguments() -> None:
    import pydantic
    from any_llm.types.completion import CompletionParams

    assert error_from_library(NotImplementedError(), library_provider="x").code == "UNSUPPORTED"
    with pytest.raises(pydantic.ValidationError) as invalid:
        CompletionParams(model_id="m", messages=[])
    assert error_from_library(invalid.value, library_provider="x").code == "BAD_REQUEST"
    assert error_from_library(invalid.value, library_provider="x", reading=True).code == "PROTOCOL"


def test_an_llm_error_passes_through() -> None:
    original = LlmError("ABORTED", "stop")
    assert error_from_library(original, library_provider="x") is original


def test_scrub() -> None:
    secret = key()
    assert scrub(f"a {secret} b", secret) == f"a {MASK} b"
    assert scrub(f"key '{secret[:6]}***{secret[-4:]}' bad", secret) == f"key '{MASK}' bad"
    assert scrub("nothing here", secret) == "nothing here"
    assert scrub("short abc", "abc") == f"short {MASK}"
    assert scrub("text", None) == "text"
    encoded = base64.b64encode(f"user:{secret}".encode()).decode()  # an echoed Basic auth header
    assert encoded[8:20] not in scrub(f"Authorization: Basic {encoded}", secret)
