"""retry over a real wire: case 18 (HTTP 429 with Retry-After) through the openai adapter.

Mock the provider, not the harness: a scripted HTTP server replays the case's raw 429 response,
then a successful stream; the retry layer must wait exactly what the header asked for.
"""

from __future__ import annotations

import json

import pytest
from mw_helpers import options

from harness_core import Harness
from harness_core.testing import CheckedStream, Reply, ScriptedServer
from harness_core.types import Finish, TextBlock
from harness_middleware.retry import RetryPlugin

pytestmark = pytest.mark.anyio

openai = pytest.importorskip("harness_llm_openai")
load_cases_or_skip = pytest.importorskip("pytest_harness").load_cases_or_skip

# loaded at import: without the shared cases folder the module skips with the reason (CI: fails)
CASES = load_cases_or_skip("openai-chat")


def sse(*events: dict[str, object]) -> bytes:
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode() + b"data: [DONE]\n\n"


def completion(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m1",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


async def test_case_18_retry_after_from_the_wire() -> None:
    [case] = [c for c in CASES if c.name.startswith("18-")]
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    success = Reply(reads=[sse(completion({"role": "assistant", "content": "hi"}), completion({}, "stop"))])
    with ScriptedServer(case.reply(), success) as server:
        adapter_plugin = openai.OpenAIPlugin(openai.OpenAIPlugin.Config(base_url=f"{server.url}/v1", routes=["fake"]))
        retry = RetryPlugin(RetryPlugin.Config(max_attempts=4, max_elapsed=30), sleep=sleep)
        harness = Harness([("retry", retry), ("openai", adapter_plugin)])
        async with harness, harness.stream(options()) as chunks:
            got = [chunk async for chunk in CheckedStream(chunks)]
        assert len(server.requests) == 2
    # the Retry-After header of the 429, honoured exactly. (The raw 429 reply closes its
    # connection; httpx may reuse it once and fail with NETWORK, which is retried with backoff.)
    assert waits[0] == 7.0
    assert len(waits) <= 2
    assert isinstance(got[-1], Finish)
    assert got[-1].reason.kind == "stop"
    assert TextBlock("hi") in [getattr(c, "block", None) for c in got]
