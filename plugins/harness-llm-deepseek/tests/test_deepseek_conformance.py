"""The deepseek adapter against the conformance suite (the openai plugin's recorded responses:
DeepSeek speaks the same wire)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from harness_core.adapter import LlmAdapter
from harness_core.secret import Secret
from harness_core.testing.conformance import AdapterConformance, load_recordings
from harness_core.types import FileBlock, GenerateOptions, JsonSchemaFormat, Message
from harness_llm_deepseek import DeepSeekAdapter, DeepSeekConfig

KEY = "sk-" + "deepseek-conformance-0123456789"
ASK = [Message.user("Say hello")]
RECORDED = Path(__file__).parents[2] / "harness-llm-openai" / "tests" / "recorded"


class TestDeepSeekConformance(AdapterConformance):
    options = GenerateOptions(model="deepseek-chat", messages=ASK)
    recordings = load_recordings(RECORDED)
    unsupported: ClassVar[dict[str, GenerateOptions]] = {
        "reasoning_effort": GenerateOptions(model="deepseek-chat", messages=ASK, reasoning_effort="max"),
        "image": GenerateOptions(
            model="deepseek-chat", messages=[Message.user("x", FileBlock("image/png", data=b"\x89PNG\r\n"))]
        ),
        "json schema": GenerateOptions(
            model="deepseek-chat", messages=ASK, response_format=JsonSchemaFormat("p", {"type": "object"})
        ),
    }
    api_key = KEY

    def make_adapter(self, base_url: str) -> LlmAdapter:
        return DeepSeekAdapter(DeepSeekConfig(base_url=base_url, api_key=Secret(KEY)))
