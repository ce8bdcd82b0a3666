"""Tool calls traced by otel (``execute_tool`` spans for a Python tool and the real
``mcp-server-time``) and an MCP image result reaching an Anthropic-wire provider, each in a full
round trip through a scripted provider."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import msgspec
from mcp_kit import (
    FAKE,
    TIME,
    anthropic_text_reply,
    anthropic_tool_call_reply,
    text_reply,
    tool_call_reply,
    write_config,
    yaml_list,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from harness_core import Conversation, Tool
from harness_core.loader import load_config
from harness_core.runtime import Harness
from harness_core.testing.server import ScriptedServer
from harness_middleware.otel import OtelPlugin


def traced(config: Path, exporter: InMemorySpanExporter, **otel: Any) -> Harness:
    """A harness over ``config`` with an ``otel`` middleware exporting to ``exporter``."""
    loaded = load_config(config)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    middleware = OtelPlugin(msgspec.convert(otel, OtelPlugin.Config), tracer_provider=provider)
    return Harness([("otel", middleware), *loaded.plugins], defaults=loaded.defaults, redact=loaded.redactor)


async def converse(harness: Harness, patterns: list[str], tools: list[Tool], prompt: str) -> str:
    async with harness:
        selected = [*tools, *await harness.select_tools(patterns)]
        return (await Conversation(harness, tools=selected).send(prompt)).text


def tool_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]


def test_a_python_tool_call_is_an_execute_tool_span_with_masked_content(tmp_path: Path) -> None:
    key = "sk-" + "k3y" * 8  # built at run time: the provider's key, which the tool leaks
    calls = []

    def reveal(label: str) -> str:
        """Show a label."""
        calls.append(label)
        return f"{label}: {key}"

    exporter = InMemorySpanExporter()
    with ScriptedServer(tool_call_reply("reveal", '{"label": "the key"}'), text_reply("ok")) as api:
        config = write_config(tmp_path, api.url, "")
        config.write_text(config.read_text().replace("not-a-key", key), encoding="utf-8")
        harness = traced(config, exporter, capture_content=True)
        assert anyio.run(converse, harness, [], [Tool(reveal)], "go") == "ok"
        second = api.requests[1].json()
    assert calls == ["the key"]
    assert [m["content"] for m in second["messages"] if m["role"] == "tool"] == [f"the key: {key}"]  # the model gets it
    names = [s.name for s in exporter.get_finished_spans()]
    assert names == ["chat gpt-test", "execute_tool reveal", "chat gpt-test"]
    (span,) = tool_spans(exporter)
    assert span.kind == SpanKind.INTERNAL
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "reveal",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Show a label.",
        "gen_ai.tool.call.arguments": '{"label": "the key"}',
        "gen_ai.tool.call.result": "the key: **********",
    }
    assert span.status.status_code == StatusCode.UNSET
    assert key not in json.dumps([dict(s.attributes or {}) for s in exporter.get_finished_spans()])


def test_an_mcp_tool_call_is_an_execute_tool_span_without_content_by_default(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    with ScriptedServer(tool_call_reply("time_get_current_time", '{"timezone": "UTC"}'), text_reply("noon")) as api:
        config = write_config(tmp_path, api.url, f"  mcp:time: {{command: {yaml_list(TIME)}}}\n")
        assert anyio.run(converse, traced(config, exporter), ["time_get_current_time"], [], "time?") == "noon"
        second = api.requests[1].json()
    (result,) = [m for m in second["messages"] if m["role"] == "tool"]
    assert json.loads(result["content"])["timezone"] == "UTC"  # the real server answered
    (span,) = tool_spans(exporter)
    assert span.name == "execute_tool time_get_current_time"
    attributes = dict(span.attributes or {})
    assert str(attributes.pop("gen_ai.tool.description")).startswith("Get current time")
    assert attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "time_get_current_time",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.type": "function",
    }


def test_an_mcp_tool_error_is_an_error_span_naming_no_content(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    with ScriptedServer(
        tool_call_reply("time_get_current_time", '{"timezone": "Nowhere/Nope"}'), text_reply("k")
    ) as api:
        config = write_config(tmp_path, api.url, f"  mcp:time: {{command: {yaml_list(TIME)}}}\n")
        anyio.run(converse, traced(config, exporter), ["time_*"], [], "time?")
        second = api.requests[1].json()
    (result,) = [m for m in second["messages"] if m["role"] == "tool"]
    assert "Nowhere/Nope" in result["content"]
    (span,) = tool_spans(exporter)
    assert span.attributes is not None
    assert span.attributes["error.type"] == "tool_error"
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description == "the tool answered with an error"


def test_an_mcp_image_reaches_the_anthropic_request_as_an_image_block(tmp_path: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 8  # what fake_server.py's picture.png tool returns
    server = [sys.executable, FAKE, "stdio"]
    with ScriptedServer(anthropic_tool_call_reply("fake_picture_png", "{}"), anthropic_text_reply("a dot")) as api:
        path = tmp_path / "plugins.yaml"
        path.write_text(
            "plugins:\n"
            f"  anthropic: {{base_url: {api.url}, api_key: not-a-key}}\n"
            f"  mcp:fake: {{command: {yaml_list(server)}}}\n"
            "defaults: {route: anthropic, model: claude-test}\n",
            encoding="utf-8",
        )

        async def main() -> str:
            async with Harness.from_loaded(load_config(path)) as harness:
                tools = await harness.select_tools(["fake_picture_png"])
                return (await Conversation(harness, tools=tools).send("draw")).text

        assert anyio.run(main) == "a dot"
        second = api.requests[1].json()
    (turn,) = [m for m in second["messages"] if m["role"] == "user" and m["content"][0]["type"] == "tool_result"]
    assert turn["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(png).decode()},
                }
            ],
        }
    ]
