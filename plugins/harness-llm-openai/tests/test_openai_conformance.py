"""The openai adapter against the conformance suite (recorded responses in ``recorded/``)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from openai_fixtures import MEDIA, SCHEMA

from harness_core.adapter import LlmAdapter
from harness_core.secret import Secret
from harness_core.testing.conformance import AdapterConformance, load_recordings
from harness_core.types import GenerateOptions, Message
from harness_llm_openai import Config, OpenAIAdapter

KEY = "sk-" + "conformance-0123456789abcdef"
ASK = [Message.user("Say hello")]


class TestOpenAIConformance(AdapterConformance):
    options = GenerateOptions(model="gpt-4o-mini", messages=ASK)
    recordings = load_recordings(Path(__file__).parent / "recorded")
    media_options = GenerateOptions(model="gpt-4o-mini", messages=[Message.user("Compare", *MEDIA)])
    schema_options = GenerateOptions(model="gpt-4o-mini", messages=ASK, response_format=SCHEMA)
    unsupported: ClassVar[dict[str, GenerateOptions]] = {
        "n=2": GenerateOptions(model="gpt-4o-mini", messages=ASK, provider_options={"openai": {"n": 2}}),
        "reasoning_effort": GenerateOptions(model="gpt-4o-mini", messages=ASK, reasoning_effort="high"),
    }
    api_key = KEY

    def make_adapter(self, base_url: str) -> LlmAdapter:
        return OpenAIAdapter(Config(base_url=base_url, api_key=Secret(KEY)))
