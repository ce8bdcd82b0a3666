"""LlmError: codes, retryability, Failure round trip."""

from __future__ import annotations

import pytest

from harness_core import Failure, LlmError
from harness_core.errors import ERROR_CODES, RETRYABLE_CODES


def test_retryable_is_derived_from_the_code() -> None:
    for code in ERROR_CODES:
        assert LlmError(code, "m").retryable is (code in RETRYABLE_CODES)  # type: ignore[arg-type]
    assert {"RATE_LIMITED", "OVERLOADED", "SERVER", "TIMEOUT", "NETWORK"} == RETRYABLE_CODES


def test_unknown_code_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown LlmError code 'RATE_LIMIT'"):
        LlmError("RATE_LIMIT", "x")  # type: ignore[arg-type]


def test_str_and_repr_name_code_and_status() -> None:
    error = LlmError("RATE_LIMITED", "slow down", status=429, retry_after=7.0)
    assert str(error) == "RATE_LIMITED (HTTP 429): slow down"
    assert repr(error) == "LlmError('RATE_LIMITED', 'slow down', status=429)"
    assert str(LlmError("NETWORK", "reset")) == "NETWORK: reset"


def test_long_messages_are_truncated() -> None:
    error = LlmError("SERVER", "x" * 5000)
    assert len(error.message) == 2000
    assert error.message.endswith("…")


def test_failure_round_trip() -> None:
    error = LlmError(
        "OVERLOADED",
        "Overloaded",
        status=529,
        retry_after=2.0,
        provider="anthropic",
        provider_type="overloaded_error",
        provider_code="529",
        request_id="req_1",
        field="temperature",
    )
    failure = error.to_failure()
    assert failure == Failure(
        code="OVERLOADED",
        message="Overloaded",
        retryable=True,
        status=529,
        retry_after=2.0,
        provider="anthropic",
        provider_type="overloaded_error",
        provider_code="529",
        request_id="req_1",
        field="temperature",
    )
    again = LlmError.from_failure(failure)
    assert again.to_failure() == failure
    assert again.retryable
