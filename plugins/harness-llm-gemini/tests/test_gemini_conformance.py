"""The gemini adapter against the conformance suite (bodies in Gemini's ``alt=sse`` shape:
https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent, errors as
``google.rpc.Status``: https://ai.google.dev/gemini-api/docs/troubleshooting)."""

from __future__ import annotations

from typing import Any, ClassVar

from gemini_fixtures import (
    API_KEY,
    MODEL,
    SIGNATURE,
    THINKING_TOOL_BODY,
    chunk,
    google_error,
    sse,
    usage,
)

from harness_core.adapter import LlmAdapter
from harness_core.secret import Secret
from harness_core.testing.conformance import AdapterConformance, Recording
from harness_core.types import FileBlock, GenerateOptions, JsonSchemaFormat, Message
from harness_llm_gemini.adapter import GeminiAdapter
from harness_llm_gemini.config import GeminiConfig

ASK = [Message.user("Say hello")]
HEADERS = {"content-type": "application/json; charset=UTF-8", "x-request-id": "rq-conformance"}
PHOTO = FileBlock(media_type="image/png", data=b"\x89PNG\r\n\x1a\n" + bytes(range(200)), filename="photo.png")
REPORT = FileBlock(media_type="application/pdf", url="https://example.com/files/report.pdf")
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}

TEXT_BODY = sse(
    chunk({"text": "Hello w\u00f6rld, "}),
    chunk({"text": "\U0001f600 \u4f60\u597d"}),
    chunk({"text": ""}, finish="STOP", usage=usage(3, 6)),
)
"""Text in three responses (multi-byte characters: splits fall inside them), usage on the last."""

PARALLEL_TOOLS_BODY = sse(
    chunk(
        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": SIGNATURE},
        {"functionCall": {"name": "get_weather", "args": {"city": "Tokyo"}}},
    ),
    chunk({"functionCall": {"name": "get_time", "args": {"zone": "Asia/Tokyo"}}}, finish="STOP", usage=usage(12, 9)),
)
"""Three whole calls without ids (generated ones must be unique); the signature on the first."""

USAGE_BODY = sse(
    chunk({"text": "Counting"}, usage=usage(7, 1)),
    chunk({"text": " tokens."}, usage=usage(7, 3, 12)),
    chunk({"text": ""}, finish="STOP", usage=usage(7, 4, 12, totalTokenCount=23)),
)
"""Cumulative ``usageMetadata`` on every response (the last one counts)."""

INBAND_ERROR_BODY = sse(
    chunk({"text": "Once upon"}),
    {"error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}},
)
"""An error object after a 200 (the stream ends with ``finish{error}``)."""


def error(status: int, rpc_status: str, message: str, *details: dict[str, Any], **headers: str) -> Recording:
    """An HTTP error response with a ``google.rpc.Status`` body."""
    return Recording(google_error(status, rpc_status, message, *details), status, {**HEADERS, **headers})


class TestGeminiConformance(AdapterConformance):
    options = GenerateOptions(model=MODEL, messages=ASK, max_tokens=256)
    recordings: ClassVar[dict[str, Recording]] = {
        "text": Recording(TEXT_BODY),
        "usage": Recording(USAGE_BODY),
        "reasoning": Recording(THINKING_TOOL_BODY),
        "tool-call": Recording(THINKING_TOOL_BODY),
        "parallel-tool-calls": Recording(PARALLEL_TOOLS_BODY),
        "in-band-error": Recording(INBAND_ERROR_BODY),
        "truncated": Recording(TEXT_BODY[: TEXT_BODY.index(b'"finishReason"')]),
        "replay": Recording(THINKING_TOOL_BODY),
        "http-400-auth": error(
            400,
            "INVALID_ARGUMENT",
            "API key not valid. Please pass a valid API key.",
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"},
        ),
        "http-401": error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials."),
        "http-429": error(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota.",
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"},
            **{"retry-after": "37"},
        ),
        "http-500": error(500, "INTERNAL", "An internal error has occurred."),
    }
    media_options = GenerateOptions(model=MODEL, messages=[Message.user("Describe both", PHOTO, REPORT)])
    schema_options = GenerateOptions(
        model=MODEL, messages=ASK, response_format=JsonSchemaFormat(name="person", schema=SCHEMA)
    )
    unsupported: ClassVar[dict[str, GenerateOptions]] = {
        "media type": GenerateOptions(
            model=MODEL, messages=[Message.user("x", FileBlock(media_type="application/zip", data=b"PK\x03\x04"))]
        ),
        "URL scheme": GenerateOptions(
            model=MODEL, messages=[Message.user("x", FileBlock(media_type="image/png", url="ftp://host/a.png"))]
        ),
    }
    api_key = API_KEY

    def make_adapter(self, base_url: str) -> LlmAdapter:
        return GeminiAdapter(GeminiConfig(base_url=base_url + "/v1beta", api_key=Secret(API_KEY)))
