"""The HTTP provider config refuses what no request could use: a bad base_url, header name,
pool size or timeout is a config problem located at its field, found before any request."""

from __future__ import annotations

import msgspec
import pytest
from kit_adapter import ToyConfig

from harness_core.kit.config import HttpTimeouts, base_url_problem, header_name_problem


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("", "base_url is empty"),
        ("not a url", "space or control character (U+0020 at position 4)"),
        ("ftp://127.0.0.1/v1", "must start with http:// or https://"),
        ("127.0.0.1:18931/v1", "must start with http:// or https://"),
        ("localhost:8080", "must start with http:// or https://"),
        ("http:///v1", "has no host"),
        ("http://127.0.0.1:99999/v1", "the port must be a number in 1..65535"),
        ("http://127.0.0.1:x/v1", "the port must be a number in 1..65535"),
        ("http://127.0.0.1:0/v1", "has port 0"),
        ("http://h/v1\n", "U+000A at position 12"),
        ("http://h/\x7fv1", "U+007F at position 10"),
    ],
)
def test_bad_base_urls_are_refused_with_the_reason(url: str, reason: str) -> None:
    problem = base_url_problem(url)
    assert problem is not None
    assert reason in problem
    if url.strip():
        assert url.strip() not in problem  # the URL may come from the environment: never quoted


@pytest.mark.parametrize(
    "url", ["https://api.openai.com/v1", "HTTP://127.0.0.1:8080/v1/", "http://[::1]:65535/v1?x=1", "http://h"]
)
def test_good_base_urls_pass(url: str) -> None:
    assert base_url_problem(url) is None


def test_header_names_must_be_tokens_written_literally() -> None:
    assert header_name_problem("X-Request-Source") is None
    assert header_name_problem("x_!#$%&'*+.^`|~1") is None
    for bad in ("X Bad", "X:Bad", "", "Ünicode", "X\r\nInjected"):
        problem = header_name_problem(bad)
        assert problem is not None
        assert "not a valid HTTP field name" in problem
        assert bad not in problem or not bad
    expression = header_name_problem("${{ env.HEADER }}")
    assert expression is not None
    assert "expanded in header values only" in expression


def test_the_config_refuses_them_when_built() -> None:
    with pytest.raises(msgspec.ValidationError, match="field 'base_url': base_url has no host"):
        msgspec.convert({"base_url": "https://"}, ToyConfig)
    with pytest.raises(msgspec.ValidationError, match="field 'headers': a header name holds ' ' at position 2"):
        msgspec.convert({"base_url": "http://h", "headers": {"X Bad": "1"}}, ToyConfig)
    for field, value, expected in [
        ("max_connections", 0, ">= 1"),
        ("pool_timeout", -1, ">= 0"),
        ("timeout", {"connect": -0.5}, ">= 0"),
        ("timeout", {"read": -1}, ">= 0"),
    ]:
        with pytest.raises(msgspec.ValidationError, match=expected):
            msgspec.convert({"base_url": "http://h", field: value}, ToyConfig)
    assert msgspec.convert({"base_url": "http://h", "timeout": {"read": None, "connect": 0}}, ToyConfig).timeout == (
        HttpTimeouts(connect=0, read=None)
    )


def test_the_gen_ai_provider_is_the_config_s_else_the_adapter_s_else_the_plugin_s() -> None:
    from kit_adapter import ToyAdapter

    class AcmeAdapter(ToyAdapter):
        gen_ai_provider_name = "acme"

    assert ToyAdapter(ToyConfig()).gen_ai_provider("toy") == "toy"  # the kit's default: the plugin's name
    assert AcmeAdapter(ToyConfig()).gen_ai_provider("toy") == "acme"
    assert AcmeAdapter(ToyConfig(gen_ai_provider="groq")).gen_ai_provider("toy") == "groq"
    with pytest.raises(msgspec.ValidationError, match=r"length >= 1 - at `\$.gen_ai_provider`"):
        msgspec.convert({"gen_ai_provider": ""}, ToyConfig)
