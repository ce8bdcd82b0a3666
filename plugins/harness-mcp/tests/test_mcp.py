"""harness-mcp: real MCP servers (mcp-server-time over stdio, the tests' FastMCP server over
streamable HTTP) in full tool round trips through a scripted OpenAI-wire provider."""

from __future__ import annotations

import concurrent.futures
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from mcp_kit import ERRORS, FAKE, TIME, text_reply, tool_call_reply, tool_messages, write_config, yaml_list
from pydantic import AnyUrl

from harness_core import Conversation, FileBlock, LlmError, ToolCallBlock
from harness_core.config import ConfigError
from harness_core.loader import load_config
from harness_core.runtime import Harness
from harness_core.testing.server import Reply, ScriptedServer
from harness_mcp import McpConfig, McpPlugin, _result_content, list_all_tools, tool_name


async def round_trip(config: Path, patterns: list[str], prompt: str = "what time is it") -> tuple[Any, Harness]:
    harness = Harness.from_loaded(load_config(config))
    async with harness:
        tools = await harness.select_tools(patterns)
        conversation = Conversation(harness, tools=tools)
        reply = await conversation.send(prompt)
        return reply, harness


# ------------------------------------------------------------------ round trips


def test_stdio_round_trip_with_the_real_time_server(tmp_path: Path) -> None:
    with ScriptedServer(tool_call_reply("time_get_current_time", '{"timezone": "UTC"}'), text_reply("noon")) as api:
        config = write_config(tmp_path, api.url, f"  mcp:time: {{command: {yaml_list(TIME)}}}\n")
        reply, _ = anyio.run(round_trip, config, ["time_*"])
        assert reply.text == "noon"
        first, second = api.requests[0].json(), api.requests[1].json()
    assert [t["function"]["name"] for t in first["tools"]] == ["time_get_current_time", "time_convert_time"]
    assert first["tools"][0]["function"]["parameters"]["required"] == ["timezone"]
    (result,) = tool_messages(second)
    assert result["tool_call_id"] == "call_1"
    data = json.loads(result["content"])  # the real server's answer
    assert data["timezone"] == "UTC"
    assert data["datetime"].endswith("+00:00")


def test_http_round_trip_with_the_tests_fastmcp_server(tmp_path: Path, http_server: str) -> None:
    with ScriptedServer(tool_call_reply("fake_echo", '{"text": "hi there"}'), text_reply("done")) as api:
        config = write_config(tmp_path, api.url, f"  mcp:fake: {{url: {http_server}}}\n")
        reply, _ = anyio.run(round_trip, config, ["fake_echo"])
        assert reply.text == "done"
        second = api.requests[1].json()
    assert [m["content"] for m in tool_messages(second)] == ["echo: hi there"]
    assert [t["function"]["name"] for t in api.requests[0].json()["tools"]] == ["fake_echo"]


def test_mcp_tool_error_is_a_tool_error_for_the_model(tmp_path: Path, http_server: str) -> None:
    with ScriptedServer(tool_call_reply("fake_fail", '{"reason": "no"}'), text_reply("ok")) as api:
        config = write_config(tmp_path, api.url, f"  mcp:fake: {{url: {http_server}}}\n")
        reply, _ = anyio.run(round_trip, config, ["fake_fail"])
        assert reply.text == "ok"
        (result,) = tool_messages(api.requests[1].json())
    assert "refused: no" in result["content"]


def test_a_server_crashing_mid_call_is_a_tool_error_naming_the_instance(tmp_path: Path) -> None:
    async def main() -> None:
        plugin = McpPlugin(McpConfig(command=[sys.executable, FAKE, "stdio"], call_timeout=300))
        try:
            tools = {t.name: t for t in await plugin.list_tools("mcp:fake")}
            with anyio.fail_after(30):  # answered as soon as the pipe closes, never at call_timeout
                crashed = await tools["fake_crash"].run(ToolCallBlock("c1", "fake_crash", "{}"))
            assert crashed.is_error
            assert "plugin 'mcp:fake': tool 'crash' was not answered: the MCP server stopped" in crashed.content
            assert "its stderr ends: " in crashed.content
            assert crashed.content.endswith("fake server: crashing now")
            served = plugin._server.served if plugin._server is not None else None
            assert served is not None
            # the session's task ends once the pipe closes (bounded wait, in a worker thread)
            await anyio.to_thread.run_sync(concurrent.futures.wait, [served], 30)
            after = await tools["fake_echo"].run(ToolCallBlock("c2", "fake_echo", '{"text": "x"}'))
            assert after.is_error
            assert "the MCP server stopped" in after.content
        finally:
            await plugin.aclose()

    anyio.run(main)


def test_a_slow_tool_outlasting_call_timeout_is_a_tool_error(tmp_path: Path) -> None:
    servers = f"  mcp:fake: {{command: {yaml_list([sys.executable, FAKE, 'stdio'])}, call_timeout: 0.5}}\n"
    with ScriptedServer(tool_call_reply("fake_slow", '{"seconds": 30}'), text_reply("gave up")) as api:
        config = write_config(tmp_path, api.url, "  timeout: {total: 60}\n" + servers)
        reply, _ = anyio.run(round_trip, config, ["fake_slow"])
        assert reply.text == "gave up"
        (result,) = tool_messages(api.requests[1].json())
    assert result["content"] == "plugin 'mcp:fake': tool 'slow' did not answer within 0.5 s"


def test_an_aborted_call_is_cancelled_and_the_server_keeps_serving() -> None:
    async def main() -> None:
        plugin = McpPlugin(McpConfig(command=[sys.executable, FAKE, "stdio"]))
        try:
            tools = {t.name: t for t in await plugin.list_tools("mcp:fake")}
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as group:
                    group.start_soon(tools["fake_slow"].run, ToolCallBlock("c1", "fake_slow", '{"seconds": 300}'))
                    await anyio.wait_all_tasks_blocked()  # the call waits in the portal: abort it
                    scope.cancel()
            assert scope.cancelled_caught
            echoed = await tools["fake_echo"].run(ToolCallBlock("c2", "fake_echo", '{"text": "still here"}'))
            assert echoed.content == "echo: still here"
        finally:
            await plugin.aclose()

    anyio.run(main)


def test_a_result_the_sdk_refuses_is_a_tool_error() -> None:
    async def main() -> None:
        plugin = McpPlugin(McpConfig(command=[sys.executable, ERRORS]))
        try:
            (broken,) = await plugin.list_tools("mcp:err")
            result = await broken.run(ToolCallBlock("c1", broken.name, "{}"))
        finally:
            await plugin.aclose()
        assert result.is_error
        assert result.content.startswith(
            "plugin 'mcp:err': tool 'broken' failed: RuntimeError: Invalid structured content returned by tool broken"
        )

    anyio.run(main)


def test_every_page_of_tools_is_listed() -> None:
    class Pages:
        def __init__(self) -> None:
            self.cursors: list[str | None] = []

        async def list_tools(self, cursor: str | None = None) -> types.ListToolsResult:
            self.cursors.append(cursor)
            tool = types.Tool(name=f"t{len(self.cursors)}", inputSchema={"type": "object"})
            return types.ListToolsResult(tools=[tool], nextCursor="p2" if cursor is None else None)

    session = Pages()
    assert [t.name for t in anyio.run(list_all_tools, session)] == ["t1", "t2"]
    assert session.cursors == [None, "p2"]


# ------------------------------------------------------------------ starting and failing


def test_a_missing_program_is_a_config_error_naming_the_instance() -> None:
    async def main() -> None:
        plugin = McpPlugin(McpConfig(command=["/nonexistent/mcp-server"]))
        with pytest.raises(LlmError) as caught:
            await plugin.list_tools("mcp:gone")
        assert caught.value.code == "CONFIG"
        assert "plugin 'mcp:gone': the MCP server failed to start: " in str(caught.value)
        with pytest.raises(LlmError, match="started already"):
            await plugin.list_tools("mcp:gone")
        await plugin.aclose()
        await plugin.aclose()  # twice is harmless

    anyio.run(main)


def test_a_server_exiting_at_once_quotes_its_stderr() -> None:
    code = "import sys; sys.stderr.write('bad flag --x\\n'); sys.exit(2)"
    plugin = McpPlugin(McpConfig(command=[sys.executable, "-c", code], start_timeout=20))
    with pytest.raises(LlmError) as caught:
        anyio.run(plugin.list_tools, "mcp:bad")
    assert "its stderr ends: bad flag --x" in str(caught.value)


def test_a_server_that_never_answers_times_out() -> None:
    code = "import time; time.sleep(60)"
    plugin = McpPlugin(McpConfig(command=[sys.executable, "-c", code], start_timeout=0.5))
    with pytest.raises(LlmError) as caught:
        anyio.run(plugin.list_tools, "mcp:mute")
    assert caught.value.code == "TIMEOUT"
    assert "plugin 'mcp:mute': the MCP server did not start within 0.5 s" in str(caught.value)


def test_a_call_before_start_is_a_tool_error() -> None:
    plugin = McpPlugin(McpConfig(url="http://127.0.0.1:9/mcp"))
    with pytest.raises(Exception, match="the MCP server is not running"):
        anyio.run(plugin.call_tool, "x", {})


def test_harness_select_tools_reports_a_failed_server(tmp_path: Path) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9", "  mcp:gone: {command: [/nonexistent/mcp]}\n")

    async def main() -> None:
        async with Harness.from_loaded(load_config(config)) as harness:
            assert await harness.select_tools([]) == []
            with pytest.raises(LlmError, match="plugin 'mcp:gone'"):
                await harness.select_tools(["gone_*"])
            listed, failures = await harness.list_tools()
            assert listed == []
            assert list(failures) == ["mcp:gone"]

    anyio.run(main)


def test_a_redirect_to_another_host_is_not_followed() -> None:
    location = {"location": "http://other.invalid/mcp"}
    with ScriptedServer(routes={("POST", "/mcp"): Reply(status=307, headers=location)}) as redirecting:
        plugin = McpPlugin(McpConfig(url=redirecting.url + "/mcp", start_timeout=10))
        with pytest.raises(LlmError) as caught:
            anyio.run(plugin.list_tools, "mcp:moved")
    assert "plugin 'mcp:moved': the MCP server failed to start: " in str(caught.value)
    assert "Redirect to http://other.invalid/mcp not followed" in str(caught.value)
    assert [(r.method, r.path) for r in redirecting.requests] == [("POST", "/mcp")]  # asked once, never elsewhere


# ------------------------------------------------------------------ names, config, results


def test_tool_names_are_provider_safe() -> None:
    assert tool_name("time", "get_current_time") == "time_get_current_time"
    assert tool_name("fs", "read.file v2") == "fs_read_file_v2"
    long = tool_name("x", "a" * 100)
    assert len(long) == 64
    assert long.startswith("x_aaaa")
    clash = tool_name("fs", "a.b", {"fs_a_b"})
    assert clash != "fs_a_b"
    assert clash.startswith("fs_a_b_")


def test_the_prefix_comes_from_the_instance_or_the_config() -> None:
    plugin = McpPlugin(McpConfig(url="http://127.0.0.1/mcp"))
    assert plugin.tool_prefix("mcp:my.docs") == "my_docs_"
    assert plugin.tool_prefix("mcp") == "mcp_"
    assert McpPlugin(McpConfig(url="http://h/mcp", prefix="d")).tool_prefix("mcp:x") == "d_"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("{}", "give exactly one of `command`"),
        ("{command: [a], url: http://h/mcp}", "give exactly one of `command`"),
        ("{command: []}", "`command` needs at least the program"),
        ("{command: [a], headers: {X: abc123}}", "`headers` is for `url` servers"),
        ("{url: http://h/mcp, env: {A: b12}}", "`env` and `cwd` are for `command` servers"),
        ("{url: ftp://h/mcp}", "`url` must be an http:// or https:// URL"),
        ("{url: http://h/mcp, call_timeout: 0}", "expected a number greater than 0"),
    ],
)
def test_config_problems_are_located(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "plugins.yaml"
    path.write_text(f"plugins:\n  mcp:x: {body}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    text = str(caught.value)
    assert message in text
    assert "mcp:x" in text
    assert "plugins.yaml:2" in text


def test_env_and_header_values_are_secrets(tmp_path: Path) -> None:
    token = "tok" + "en-" + "9" * 12
    path = tmp_path / "plugins.yaml"
    path.write_text(
        f"plugins:\n  mcp:x: {{url: http://h/mcp, headers: {{Authorization: {token}}}}}\n", encoding="utf-8"
    )
    loaded = load_config(path)
    (plugin,) = [p.instance for p in loaded.plugins]
    assert isinstance(plugin, McpPlugin)
    assert token not in repr(plugin.config)
    assert loaded.redact(f"echo {token}") == "echo **********"


def test_result_content_maps_to_text_and_files() -> None:
    def result(*content: Any, structured: Any = None) -> types.CallToolResult:
        return types.CallToolResult(content=list(content), structuredContent=structured)

    text = types.TextContent(type="text", text="one")
    image = types.ImageContent(type="image", data="AAAA", mimeType="image/PNG")
    audio = types.AudioContent(type="audio", data="AAAA", mimeType="audio/wav")
    broken = types.ImageContent(type="image", data="not base64!", mimeType="image/png")
    nameless = types.ImageContent(type="image", data="AAAA", mimeType="png")
    embedded = types.EmbeddedResource(
        type="resource", resource=types.TextResourceContents(uri=AnyUrl("file:///a"), text="inside")
    )
    blob = types.EmbeddedResource(
        type="resource", resource=types.BlobResourceContents(uri=AnyUrl("file:///b"), blob="AA==")
    )
    link = types.ResourceLink(type="resource_link", uri=AnyUrl("file:///c"), name="c")
    assert _result_content(result(text, image, audio)) == (
        "one",
        (FileBlock("image/png", data=b"\0\0\0"), FileBlock("audio/wav", data=b"\0\0\0")),
    )
    shown, files = _result_content(result(broken, nameless))
    assert files == ()
    first, second = shown.split("\n\n")
    assert first.startswith("[image image/png: not passed on: ")
    assert second.startswith("[image png: not passed on: ")
    assert "media type" in second
    assert _result_content(result(embedded, blob, link)) == (
        "inside\n\n[resource file:///b (binary)]\n\n[resource link file:///c]",
        (),
    )
    assert _result_content(result(structured={"a": 1})) == ('{"a":1}', ())
    assert _result_content(result(image, structured={"a": 1}))[0] == ""
    assert _result_content(result()) == ("", ())


def test_an_image_result_reaches_the_tool_result_as_a_file(http_server: str) -> None:
    async def main() -> None:
        plugin = McpPlugin(McpConfig(url=http_server))
        try:
            tools = {t.name: t for t in await plugin.list_tools("mcp:fake")}
            shown = await tools["fake_picture_png"].run(ToolCallBlock("c", "fake_picture_png", "{}"))
            assert shown.content == ""
            assert shown.files == (FileBlock("image/png", data=b"\x89PNG\r\n\x1a\n" + b"\0" * 8),)
        finally:
            await plugin.aclose()

    anyio.run(main)


def test_a_secret_the_server_prints_is_masked_in_the_error(tmp_path: Path) -> None:
    token = "sk-" + "x7" * 12
    code = "import os, sys; sys.stderr.write('token is ' + os.environ['TOKEN']); sys.exit(1)"
    servers = f"  mcp:leaky: {{command: {yaml_list([sys.executable, '-c', code])}, env: {{TOKEN: {token}}}}}\n"
    config = write_config(tmp_path, "http://127.0.0.1:9", servers)

    async def main() -> str:
        async with Harness.from_loaded(load_config(config)) as harness:
            with pytest.raises(LlmError) as caught:
                await harness.select_tools(["leaky_*"])
        return str(caught.value)

    message = anyio.run(main)
    assert token not in message
    assert "its stderr ends: token is **********" in message
