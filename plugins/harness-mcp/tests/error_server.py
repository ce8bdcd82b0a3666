"""An MCP server (the SDK's low-level ``Server``, stdio) whose one tool answers with structured
content that breaks its own output schema (the SDK's client refuses such a result):
``python error_server.py``."""

from __future__ import annotations

from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

server: Server[Any, Any] = Server("errors")


@server.list_tools()  # type: ignore[no-untyped-call]  # the SDK's decorator factory is untyped
async def list_tools() -> list[types.Tool]:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    return [
        types.Tool(
            name="broken",
            description="A result breaking its schema.",
            inputSchema={"type": "object"},
            outputSchema=schema,
        )
    ]


@server.call_tool()
async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text="n")], structuredContent={"n": "one"})


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
