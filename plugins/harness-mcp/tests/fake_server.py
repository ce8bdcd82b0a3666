"""The tests' own MCP server (FastMCP): ``python fake_server.py stdio`` or ``… http PORT``."""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.fastmcp import FastMCP, Image

server = FastMCP("fake", host="127.0.0.1", port=int(sys.argv[2]) if len(sys.argv) > 2 else 8000)


@server.tool()
def echo(text: str) -> str:
    """Return the text given."""
    return f"echo: {text}"


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"refused: {reason}")


@server.tool()
def crash() -> str:
    """Ends the server process at once."""
    sys.stderr.write("fake server: crashing now\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool()
async def slow(seconds: float) -> str:
    """Answers after ``seconds``."""
    await anyio.sleep(seconds)
    return "finally"


@server.tool(name="picture.png")
def picture() -> Image:
    """A one-pixel PNG."""
    return Image(data=b"\x89PNG\r\n\x1a\n" + b"\0" * 8, format="png")


if __name__ == "__main__":
    server.run("streamable-http" if sys.argv[1] == "http" else "stdio")
