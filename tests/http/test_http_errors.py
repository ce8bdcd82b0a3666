"""HTTP error mapping: statuses, bodies, headers, in-band payloads, httpx exceptions."""

from __future__ import annotations

import email.utils
from typing import Any

import httpx
import pytest

from harness_core.http import (
    ErrorDetails,
    code_for_provider_type,
    code_for_status,
    describe_error_body,
    error_from_exception,
    error_from_payload,
    error_from_response,
    make_client,
    parse_error_body,
    parse_retry_after,
    request_id_from,
)

STATUS_CODES = [
    (400, "BAD_REQUEST"),
    (401, "AUTH"),
    (402, "QUOTA"),
    (403, "PERMISSION"),
    (404, "NOT_FOUND"),
    (408, "TIMEOUT"),
    (409, "SERVER"),
    (413, "CONTEXT_LENGTH"),
    (418, "BAD_REQUEST"),
    (422, "BAD_REQUEST"),
    (429, "RATE_LIMITED"),
    (500, "SERVER"),
    (501, "SERVER"),
    (502, "SERVER"),
    (503, "OVERLOADED"),
    (504, "SERVER"),
    (529, "OVERLOADED"),
    (599, "SERVER"),
    (302, "PROTOCOL"),
    (101, "PROTOCOL"),
    (200, "PROTOCOL"),
]


@pytest.mark.parametrize(("status", "code"), STATUS_CODES)
def test_code_for_status(status: int, code: str) -> None:
    assert code_for_status(status) == code


NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"retry-after": "7"}, 7.0),
        ({"Retry-After": " 1.5 "}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # ms wins
        ({"retry-after-ms": "junk", "retry-after": "9"}, 9.0),
        ({"retry-after": "-3"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": ""}, None),
        ({"retry-after": email.utils.formatdate(NOW + 30, usegmt=True)}, 30.0),
        ({"retry-after": email.utils.formatdate(NOW - 30, usegmt=True)}, 0.0),  # past: no wait
        ({"retry-after": "Tue, 14 Nov 2023 22:13:50 -0000"}, 30.0),  # no zone: GMT
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers, now=NOW) == expected


def test_parse_retry_after_defaults_to_the_clock() -> None:
    far = email.utils.formatdate(4_000_000_000, usegmt=True)
    value = parse_retry_after(httpx.Headers({"retry-after": far}))
    assert value is not None
    assert value > 0


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"x-request-id": "req_1"}, "req_1"),
        ({"Request-Id": "req_2"}, "req_2"),
        ({"X-Generation-Id": "gen-3"}, "gen-3"),
        ({"x-request-id": "", "request-id": "b"}, "b"),
        ({}, None),
    ],
)
def test_request_id_from(headers: dict[str, str], expected: str | None) -> None:
    assert request_id_from(headers) == expected


@pytest.mark.parametrize(
    ("body", "obj", "snippet"),
    [
        (b'{"error": {"message": "m"}}', {"error": {"message": "m"}}, '{"error": {"message": "m"}}'),
        (b'[{"error": {"message": "m"}}]', {"error": {"message": "m"}}, '[{"error": {"message": "m"}}]'),
        (b"[1, 2]", None, "[1, 2]"),
        (b'"just a string"', None, '"just a string"'),
        (b"", None, ""),
        (b"  \n ", None, ""),
        (b"<html><head><title>502 Bad Gateway</title></head><body>x</body></html>", None, "502 Bad Gateway"),
        (b"<html><body><h1>Service\n  Unavailable</h1></body></html>", None, "Service Unavailable"),
        (b"upstream \xff\xfe failed", None, "upstream \ufffd\ufffd failed"),
    ],
)
def test_parse_error_body(body: bytes, obj: dict[str, Any] | None, snippet: str) -> None:
    assert parse_error_body(body) == (obj, snippet)


def test_parse_error_body_truncates() -> None:
    _, snippet = parse_error_body(b"x" * 5000)
    assert len(snippet) == 1000
    assert snippet.endswith("…")


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (None, ErrorDetails()),
        (
            {"error": {"message": "m", "type": "t", "code": "c"}},
            ErrorDetails(message="m", provider_type="t", provider_code="c"),
        ),
        (
            {"error": {"message": "m", "status": "RESOURCE_EXHAUSTED", "code": 429}},
            ErrorDetails(message="m", provider_type="RESOURCE_EXHAUSTED", provider_code="429"),
        ),
        ({"error": "boom", "type": "t"}, ErrorDetails(message="boom", provider_type="t")),
        ({"error": ""}, ErrorDetails()),
        (
            {"object": "error", "message": "Rate limit exceeded", "type": "rate_limited", "code": "1300"},
            ErrorDetails(message="Rate limit exceeded", provider_type="rate_limited", provider_code="1300"),
        ),
        ({"detail": "Not Found"}, ErrorDetails(message="Not Found")),
        ({"detail": [{"msg": "x"}]}, ErrorDetails()),
        ({"msg": "m", "code": True}, ErrorDetails(message="m")),
        ({"error": {"message": 3.5, "code": ["x"]}}, ErrorDetails(message="3.5")),
    ],
)
def test_describe_error_body(obj: dict[str, Any] | None, expected: ErrorDetails) -> None:
    assert describe_error_body(obj) == expected


def test_error_from_response_generic() -> None:
    error = error_from_response(
        429,
        {"retry-after": "7", "x-request-id": "req_9"},
        b'{"error": {"message": "Too many", "type": "requests", "code": "rate_limit_exceeded"}}',
        provider="openai",
    )
    assert error.code == "RATE_LIMITED"
    assert error.retryable
    assert error.status == 429
    assert error.retry_after == 7.0
    assert error.message == "Too many"
    assert error.provider == "openai"
    assert error.provider_type == "requests"
    assert error.provider_code == "rate_limit_exceeded"
    assert error.request_id == "req_9"


def test_error_from_response_uses_classifier() -> None:
    seen: list[tuple[int | None, dict[str, Any] | None]] = []

    def classify(status: int | None, body: dict[str, Any] | None) -> ErrorDetails | None:
        seen.append((status, body))
        if body and body["error"].get("code") == "insufficient_quota":
            return ErrorDetails(code="QUOTA", message="out of credit", provider_type="billing")
        return None

    body = b'[{"error": {"message": "quota", "type": "insufficient_quota", "code": "insufficient_quota"}}]'
    error = error_from_response(429, {}, body, classifier=classify)
    assert (error.code, error.message, error.provider_type, error.provider_code) == (
        "QUOTA",
        "out of credit",
        "billing",
        "insufficient_quota",
    )
    assert not error.retryable
    assert seen == [(429, {"error": {"message": "quota", "type": "insufficient_quota", "code": "insufficient_quota"}})]
    assert error_from_response(429, {}, b"{}", classifier=classify).code == "RATE_LIMITED"


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (502, b"<html><title>Bad gateway</title></html>", "Bad gateway"),
        (500, b"", "HTTP 500 Internal Server Error"),
        (599, b"", "HTTP 599 error"),
        (401, b'{"unexpected": true}', '{"unexpected": true}'),
        (400, b"\xff" * 10, "\ufffd" * 10),
    ],
)
def test_error_from_response_message_fallbacks(status: int, body: bytes, message: str) -> None:
    error = error_from_response(status, {}, body)
    assert error.message == message
    assert error.code == code_for_status(status)


def test_error_from_response_truncates_provider_message() -> None:
    body = b'{"error": {"message": "' + b"m" * 3000 + b'"}}'
    assert len(error_from_response(400, {}, body).message) == 1000


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ("overloaded_error", "OVERLOADED"),
        ("RESOURCE_EXHAUSTED", "RATE_LIMITED"),
        ("insufficient_quota", "QUOTA"),
        ("context_length_exceeded", "CONTEXT_LENGTH"),
        ("insufficient_system_resource", "OVERLOADED"),
        ("timeout_error", "TIMEOUT"),
        ("something_else", None),
        ("", None),
        (None, None),
    ],
)
def test_code_for_provider_type(value: str | None, code: str | None) -> None:
    assert code_for_provider_type(value) == code


@pytest.mark.parametrize(
    ("payload", "status", "code", "message"),
    [
        ({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, None, "OVERLOADED", None),
        (
            {"error": {"message": "ctx", "type": "invalid_request_error", "code": "context_length_exceeded"}},
            200,
            "CONTEXT_LENGTH",
            "ctx",
        ),
        ([{"error": {"message": "x", "type": "server_error"}}], None, "SERVER", "x"),
        ({"error": {"message": "odd"}}, 503, "OVERLOADED", "odd"),
        ({"error": {"message": "odd"}}, 200, "SERVER", "odd"),
        ({"error": {"message": "odd"}}, None, "SERVER", "odd"),
        ("plain failure", None, "SERVER", "plain failure"),
        ({"foo": 1}, None, "SERVER", '{"foo": 1}'),
        (None, None, "SERVER", "provider reported an error without a message"),
        (42, None, "SERVER", "42"),
        ([], None, "SERVER", "provider reported an error without a message"),
    ],
)
def test_error_from_payload(payload: Any, status: int | None, code: str, message: str | None) -> None:
    error = error_from_payload(payload, status=status, provider="p")
    assert error.code == code
    assert error.provider == "p"
    assert error.status == status
    if message is not None:
        assert error.message == message


def test_error_from_payload_classifier_headers_and_default() -> None:
    def classify(status: int | None, body: dict[str, Any] | None) -> ErrorDetails:
        return ErrorDetails(code="CONTENT_FILTER", provider_code="blocked")

    error = error_from_payload(
        {"error": {"message": "no"}},
        headers={"retry-after": "2", "request-id": "r"},
        classifier=classify,
    )
    assert (error.code, error.provider_code, error.retry_after, error.request_id) == (
        "CONTENT_FILTER",
        "blocked",
        2.0,
        "r",
    )
    assert error_from_payload({"error": {"message": "?"}}, default_code="PROTOCOL").code == "PROTOCOL"


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (httpx.ReadTimeout("slow"), "TIMEOUT"),
        (httpx.ConnectTimeout("slow"), "TIMEOUT"),
        (httpx.PoolTimeout("slow"), "TIMEOUT"),
        (httpx.ConnectError("refused"), "NETWORK"),
        (httpx.ReadError(""), "NETWORK"),
        (httpx.RemoteProtocolError("incomplete chunked read"), "NETWORK"),
        (httpx.DecodingError("bad gzip"), "PROTOCOL"),
        (httpx.StreamConsumed(), "INTERNAL"),
    ],
)
def test_error_from_exception(exc: httpx.HTTPError, code: str) -> None:
    error = error_from_exception(exc, provider="x")
    assert error.code == code
    assert error.provider == "x"
    assert error.message.startswith(type(exc).__name__)


def test_error_from_exception_without_text_names_the_type() -> None:
    assert error_from_exception(httpx.ReadError("")).message == "ReadError"


@pytest.mark.anyio
async def test_make_client_configuration() -> None:
    async with make_client(
        base_url="http://example.invalid/v1",
        headers={"x-api-key": "k"},
        connect_timeout=1.0,
        read_timeout=None,
        pool_timeout=2.0,
        max_connections=3,
    ) as client:
        assert client.base_url == httpx.URL("http://example.invalid/v1/")
        assert client.headers["x-api-key"] == "k"
        assert client.timeout == httpx.Timeout(connect=1.0, read=None, write=60.0, pool=2.0)
        assert not client.follow_redirects


def test_transport_errors_name_the_request_and_the_limit() -> None:
    import httpx

    from harness_core.http import error_from_exception

    timeouts = {"read": 600.0, "connect": 5.0, "pool": 30.0, "write": 5.0}
    request = httpx.Request("POST", "https://api.example.com/v1/chat?key=hidden", extensions={"timeout": timeouts})
    read = error_from_exception(httpx.ReadTimeout("", request=request))
    assert (read.code, read.message) == (
        "TIMEOUT",
        "ReadTimeout: no progress for 600 s (read timeout) on POST https://api.example.com/v1/chat",
    )
    pool = error_from_exception(httpx.PoolTimeout("", request=request))
    assert (
        pool.message
        == "PoolTimeout: no free connection for 30 s (pool timeout) on POST https://api.example.com/v1/chat"
    )
    unlimited = httpx.Request("GET", "http://user:pw@h:8080/x", extensions={"timeout": {"read": None}})
    slow = error_from_exception(httpx.ReadTimeout("slow", request=unlimited)).message
    assert slow == "ReadTimeout: slow on GET http://h:8080/x"  # the port shown, the userinfo never
    connect = error_from_exception(httpx.ConnectError("refused", request=request))
    assert connect.message == "ConnectError: refused on POST https://api.example.com/v1/chat"
    assert "hidden" not in connect.message
    assert error_from_exception(httpx.ConnectError("refused")).message == "ConnectError: refused"


def test_a_classifier_can_supply_retry_after_and_a_header_wins() -> None:
    def from_body(status: int | None, body: dict[str, Any] | None) -> ErrorDetails | None:
        return ErrorDetails(retry_after=12.5)

    body = b'{"error": {"message": "slow down"}}'
    assert error_from_response(429, {}, body, classifier=from_body).retry_after == 12.5
    assert error_from_response(429, {"retry-after": "2"}, body, classifier=from_body).retry_after == 2.0
    assert error_from_payload({"error": {"message": "x"}}, classifier=from_body).retry_after == 12.5
    header = {"retry-after-ms": "500"}
    assert error_from_payload({"error": "x"}, headers=header, classifier=from_body).retry_after == 0.5
