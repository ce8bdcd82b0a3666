"""The Responses adapter against the conformance suite (recordings in ``recorded-responses/``), with
media and option scenarios it must refuse before any request."""

from __future__ import annotations

from typing import ClassVar

from openai_fixtures import MEDIA, SCHEMA
from responses_fixtures import RECORDED

from harness_core.adapter import LlmAdapter
from harness_core.secret import Secret
from harness_core.testing.conformance import AdapterConformance, load_recordings
from harness_core.types import FileBlock, GenerateOptions, Message
from harness_llm_openai import Config, ResponsesAdapter

KEY = "sk-" + "responses-conformance-0123456789"
MODEL = "o4-mini"
ASK = [Message.user("Say hello")]


class TestResponsesConformance(AdapterConformance):
    options = GenerateOptions(model=MODEL, messages=ASK)
    recordings = load_recordings(RECORDED)
    unsupported: ClassVar[dict[str, GenerateOptions]] = {
        "seed": GenerateOptions(model=MODEL, messages=ASK, seed=1),
        "stop": GenerateOptions(model=MODEL, messages=ASK, stop=["x"]),
        "reasoning_effort": GenerateOptions(model="gpt-4.1-mini", messages=ASK, reasoning_effort="high"),
        "csv file": GenerateOptions(model=MODEL, messages=[Message.user("x", FileBlock("text/csv", data=b"a,b"))]),
        "audio url": GenerateOptions(
            model=MODEL, messages=[Message.user("x", FileBlock("audio/wav", url="https://example.com/a.wav"))]
        ),
    }
    media_options = GenerateOptions(model=MODEL, messages=[Message.user("Compare", *MEDIA)])
    schema_options = GenerateOptions(model=MODEL, messages=ASK, response_format=SCHEMA)
    api_key = KEY

    def make_adapter(self, base_url: str) -> LlmAdapter:
        return ResponsesAdapter(Config(base_url=base_url, api_key=Secret(KEY), api="responses"))
