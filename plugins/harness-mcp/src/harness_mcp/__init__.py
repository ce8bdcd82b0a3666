"""harness-mcp: the tools of a Model Context Protocol server as harness tools.

Entry point ``mcp``; one plugin instance per server (https://modelcontextprotocol.io, spec
2025-06-18), on the official ``mcp`` Python SDK (its ``ClientSession`` and transports; no
JSON-RPC here)::

    mcp:time:                                  # stdio: the server is a child process
      command: [uvx, mcp-server-time]
      env: {TZ_API_TOKEN: "${{ env.TOKEN }}"}  # every value is a Secret (masked everywhere)
    mcp:docs:                                  # streamable HTTP
      url: https://mcp.example.com/mcp
      headers: {Authorization: "${{ env.DOCS_AUTH }}"}

Tools are named ``PREFIX_NAME`` (``prefix`` defaults to the instance name: ``time`` for
``mcp:time``, ``mcp`` for a plain ``mcp:``) made provider-safe: every character outside
``[a-zA-Z0-9_-]`` becomes ``_`` and a name longer than 64 characters is cut and ends with 8
hex digits of its SHA-256 (also when two tools would get the same name), so
``^[a-zA-Z0-9_-]{1,64}$`` always holds. Their JSON schema is the server's ``inputSchema``.

The server starts lazily, when its tools are listed (``harness tools``, ``--tool`` naming a
tool with its prefix or a glob that could match it), never for a run without tools. Its session
runs in a daemon thread of its own (an anyio blocking portal), so it outlives the task that started it
and is closed from any task: :meth:`McpPlugin.aclose` (the harness's exit, also after Ctrl-C or
SIGTERM) closes the session; a stdio child then gets end of input, SIGTERM after 2 s, SIGKILL
after 2 more (the SDK's shutdown), so no process is left behind. A server that cannot start,
does not answer within ``start_timeout`` seconds, or dies is an ``LlmError`` naming the plugin
instance (with the last lines the server wrote on stderr); a call that outlasts
``call_timeout`` seconds, a server that died, and an MCP tool error (``isError``) are tool
errors the model reads, never a crash or a hang.

Results: text content as is (several items joined by blank lines), ``structuredContent`` as
JSON when there is no text, an embedded text resource as its text; images and audio become
the result's ``files`` (``FileBlock`` s: sent to the model where the route's wire takes media in
a tool result, docs/vocabulary.md), an image whose data or media type is malformed a line saying
why; binary resources and resource links become a line naming them.
HTTP servers never follow a redirect to another origin (the SDK's transport refuses it; the
client itself follows none).
"""

from __future__ import annotations

import base64
import binascii
import concurrent.futures
import contextlib
import functools
import hashlib
import logging
import queue
import re
import tempfile
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import IO, Annotated, Any, Final, TypeVar
from urllib.parse import urlsplit

import anyio
import anyio.abc
import anyio.from_thread
import msgspec

from harness_core import FileBlock, LlmError, RegisterToolSource, Secret, SecretMasking, Tool, ToolError, hookimpl

__all__ = ["McpConfig", "McpPlugin", "tool_name"]

__version__ = "0.1.0"
"""The distribution's version (the single source: ``pyproject.toml`` reads it)."""

logger = logging.getLogger(__name__)

T = TypeVar("T")
Seconds = Annotated[float, msgspec.Meta(gt=0)]

MAX_NAME: Final = 64
_UNSAFE: Final = re.compile(r"[^a-zA-Z0-9_-]")
_STDERR_TAIL: Final = 2000  # characters of the server's stderr quoted in an error
_CLOSE_WAIT: Final = 8.0  # seconds closing waits for the session (the SDK's stdio shutdown takes up to ~4)


class McpConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """One MCP server: ``command`` (stdio) or ``url`` (streamable HTTP), exactly one.

    Fields:
        command: the program and its arguments (``[uvx, mcp-server-time]``); started with the
            SDK's default environment (``PATH``, ``HOME`` …) plus ``env``.
        env: extra environment variables of the child (stdio only); values are secrets.
        cwd: the child's working directory (stdio only).
        url: the ``http(s)://`` endpoint (streamable HTTP only).
        headers: HTTP headers sent with every request (HTTP only); values are secrets.
        prefix: what tool names start with (default: the instance name).
        start_timeout: seconds the start (process or connection, ``initialize``, ``tools/list``)
            may take.
        call_timeout: seconds one tool call may take before it is a tool error.
    """

    command: list[str] | None = None
    env: dict[str, Secret] = msgspec.field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, Secret] = msgspec.field(default_factory=dict)
    prefix: Annotated[str, msgspec.Meta(pattern=r"^[a-zA-Z0-9_-]{1,40}$")] | None = None
    start_timeout: Seconds = 30.0
    call_timeout: Seconds = 60.0

    def __post_init__(self) -> None:
        """Check the transport (``ValueError`` naming the field, reported at its YAML line)."""
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of `command` (a stdio server) or `url` (a streamable-HTTP server)")
        if self.command is not None:
            if not self.command or not self.command[0]:
                raise ValueError("`command` needs at least the program to run")
            if self.headers:
                raise ValueError("`headers` is for `url` servers; a `command` server takes `env`")
        else:
            if self.env or self.cwd is not None:
                raise ValueError("`env` and `cwd` are for `command` servers; a `url` server takes `headers`")
            parts = urlsplit(self.url or "")
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError("`url` must be an http:// or https:// URL with a host")


def tool_name(prefix: str, name: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """The provider-safe name of tool ``name`` of the server with ``prefix`` (module docstring).

    ``taken`` holds names already given: a clash gets the hash ending too."""
    safe = _UNSAFE.sub("_", f"{prefix}_{name}")
    if len(safe) <= MAX_NAME and safe not in taken:
        return safe
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{safe[: MAX_NAME - 9]}_{digest}"


def _result_content(result: Any) -> tuple[str, tuple[FileBlock, ...]]:
    """The text and the files of an MCP ``CallToolResult`` (see the module docstring for each
    content type)."""
    from mcp import types

    parts: list[str] = []
    files: list[FileBlock] = []
    for item in result.content:
        if isinstance(item, types.TextContent):
            parts.append(item.text)
        elif isinstance(item, types.ImageContent | types.AudioContent):
            kind = "image" if isinstance(item, types.ImageContent) else "audio"
            try:
                files.append(FileBlock(item.mimeType.lower(), data=base64.b64decode(item.data, validate=True)))
            except (ValueError, binascii.Error) as exc:
                parts.append(f"[{kind} {item.mimeType}: not passed on: {exc}]")
        elif isinstance(item, types.EmbeddedResource) and isinstance(item.resource, types.TextResourceContents):
            parts.append(item.resource.text)
        elif isinstance(item, types.EmbeddedResource):
            parts.append(f"[resource {item.resource.uri} ({item.resource.mimeType or 'binary'})]")
        else:  # a resource link
            parts.append(f"[resource link {item.uri}]")
    if not parts and not files and result.structuredContent is not None:
        return msgspec.json.encode(result.structuredContent).decode(), ()
    return "\n\n".join(parts), tuple(files)


async def list_all_tools(session: Any) -> list[Any]:
    """Every tool of ``session`` (an SDK ``ClientSession``), following ``nextCursor`` pages."""
    tools: list[Any] = []
    cursor: str | None = None
    while True:
        page = await session.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.nextCursor
        if not cursor:
            return tools


class _Server:
    """One running server: its session, served by a task in a blocking portal's thread."""

    def __init__(self, config: McpConfig, where: str, redact: Callable[[str], str]) -> None:
        self.config = config
        self.where = where
        self.redact = redact
        self.portal: anyio.from_thread.BlockingPortal | None = None
        self.thread: threading.Thread | None = None
        self.session: Any = None
        self.wake: anyio.Event | None = None  # made by serve(), in the portal's event loop
        self.stopping = False
        self.served: concurrent.futures.Future[None] | None = None
        self.errlog: IO[str] | None = None

    def stderr_tail(self) -> str:
        """The last lines the server wrote on stderr (masked), as ``: …`` or ``""``."""
        if self.errlog is None:
            return ""
        with contextlib.suppress(OSError, ValueError):  # the file was closed already: nothing to quote
            self.errlog.seek(0)
            text = self.errlog.read()[-_STDERR_TAIL:].strip()
            if text:
                return f"; its stderr ends: {self.redact(text)}"
        return ""

    def transport(self) -> Any:
        """The SDK transport context manager for the config."""
        config = self.config
        if config.command is not None:
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            # the server's stderr, quoted in errors; closed by close_log once the server is gone
            self.errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            env = {key: value.get_secret_value() for key, value in config.env.items()}
            parameters = StdioServerParameters(
                command=config.command[0], args=config.command[1:], env=env or None, cwd=config.cwd
            )
            return stdio_client(parameters, errlog=self.errlog)
        import httpx
        from mcp.client.streamable_http import streamable_http_client

        headers = {key: value.get_secret_value() for key, value in config.headers.items()}
        client = httpx.AsyncClient(
            headers=headers, timeout=httpx.Timeout(config.start_timeout, read=None), follow_redirects=False
        )
        assert config.url is not None  # McpConfig checks: a server without a command has a url
        return _with_client(client, streamable_http_client(config.url, http_client=client))

    async def serve(self, *, task_status: anyio.abc.TaskStatus[list[Any]]) -> None:
        """Open the transport and the session, list the tools, report them, and hold everything
        open until :meth:`stop` (in the portal's thread). The server's messages pass through a
        pump that wakes this task when they end (the process died, the connection dropped): the
        SDK then fails the requests in flight (``Connection closed``) and this raises
        ``ConnectionError``. (No cancel scope races here: CPython 3.11 stops tracing a frame
        after it catches a cancellation, cpython#106749, which would hide lines from coverage.)"""
        from mcp import ClientSession

        wake = self.wake = anyio.Event()
        async with contextlib.AsyncExitStack() as stack:
            read, write, *_ = await stack.enter_async_context(self.transport())
            pumped, received = anyio.create_memory_object_stream[Any](0)
            stack.enter_context(received)
            group = await stack.enter_async_context(anyio.create_task_group())
            group.start_soon(self._pump, read, pumped, wake)
            session = await stack.enter_async_context(ClientSession(received, write))
            with anyio.fail_after(self.config.start_timeout):  # scopes entered above are exited after it
                await session.initialize()
                tools = await list_all_tools(session)
            self.session = session
            task_status.started(tools)
            await wake.wait()
            if not self.stopping:
                raise ConnectionError("the server closed the connection (its process exited?)")
            group.cancel_scope.cancel()

    async def _pump(self, read: Any, pumped: Any, wake: anyio.Event) -> None:
        """Pass the server's messages on; wake :meth:`serve` when they end."""
        try:
            async with pumped, read:
                async for message in read:
                    await pumped.send(message)
        finally:
            wake.set()

    def stop(self) -> None:
        """End :meth:`serve` (in the portal's thread): the session and transport close."""
        self.stopping = True
        assert self.wake is not None  # called only while serve() runs
        self.wake.set()

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """``tools/call`` in the portal's thread, bounded by ``call_timeout`` (``TimeoutError``)."""
        with anyio.fail_after(self.config.call_timeout):
            return await self.session.call_tool(name, arguments)

    async def _host(self, ready: queue.SimpleQueue[anyio.from_thread.BlockingPortal]) -> None:
        """The portal's event loop (in a daemon thread: a harness never closed cannot hold the
        interpreter's exit; the stdio child then sees end of input)."""
        async with anyio.from_thread.BlockingPortal() as portal:
            ready.put(portal)
            await portal.sleep_until_stopped()

    def close(self) -> None:
        """Stop the session and the portal (blocking; run in a worker thread), each wait bounded
        by ``_CLOSE_WAIT`` seconds."""
        portal, self.portal = self.portal, None
        if portal is None:
            return
        try:
            if self.served is not None and not self.served.done():
                portal.call(self.stop)
                with contextlib.suppress(Exception):  # how it ended was reported when it did (or: too slow)
                    self.served.result(timeout=_CLOSE_WAIT)
        finally:
            portal.call(portal.stop, True)  # cancel whatever is left (an abandoned call)
            assert self.thread is not None  # a portal runs in its thread
            self.thread.join(_CLOSE_WAIT)

    def close_log(self) -> None:
        """Close the file holding the server's stderr (after its tail was quoted)."""
        if self.errlog is not None:
            self.errlog.close()

    def start(self) -> list[Any]:
        """Start the portal and the session (blocking; run in a worker thread); the tools listed."""
        ready: queue.SimpleQueue[anyio.from_thread.BlockingPortal] = queue.SimpleQueue()
        self.thread = threading.Thread(target=anyio.run, args=(self._host, ready), name=self.where, daemon=True)
        self.thread.start()
        self.portal = ready.get()
        try:
            self.served, tools = self.portal.start_task(self.serve)
        except BaseException:
            self.close()
            raise
        return list(tools)


@contextlib.asynccontextmanager
async def _with_client(client: Any, transport: Any) -> Any:
    """``transport`` entered inside ``client`` (closed after it)."""
    async with client, transport as streams:
        yield streams


class McpPlugin(SecretMasking):
    """The ``mcp`` plugin: one MCP server's tools (see the module docstring)."""

    Config = McpConfig

    def __init__(self, config: McpConfig) -> None:
        self.config = config
        self._server: _Server | None = None
        self._owner = "mcp"
        self._lock = anyio.Lock()
        self._dead: str | None = None

    @hookimpl
    def register_tool_source(self, register: RegisterToolSource) -> None:
        """Offer this server's tools (listed, and the server started, only when asked for)."""
        register(self)

    def tool_prefix(self, owner: str) -> str:
        """``prefix`` of the config, else the instance name of ``owner`` (``mcp:time`` → ``time``)."""
        if self.config.prefix is not None:
            return self.config.prefix + "_"
        return _UNSAFE.sub("_", owner.partition(":")[2] or owner) + "_"

    async def list_tools(self, owner: str) -> Sequence[Tool]:
        """Start the server and return its tools as :class:`~harness_core.Tool` s.

        Raises:
            LlmError: ``CONFIG`` when the server cannot start (naming ``owner``, the cause and
                the end of its stderr), ``TIMEOUT`` when it did not answer in ``start_timeout``.
        """
        self._owner = owner
        prefix = self.tool_prefix(owner).removesuffix("_")
        async with self._lock:
            if self._server is not None:
                raise LlmError("CONFIG", f"plugin {owner!r}: the MCP server was started already")
            server = self._server = _Server(self.config, owner, self.redact)
            try:
                listed = await anyio.to_thread.run_sync(server.start)
            except Exception as exc:  # raised through the session's task groups: look at the leaf
                if isinstance(_leaf(exc), TimeoutError):
                    message = f"the MCP server did not start within {self.config.start_timeout:g} s"
                    raise LlmError("TIMEOUT", self._explain(server, message, last=True)) from None
                message = f"the MCP server failed to start: {_cause(exc)}"
                raise LlmError("CONFIG", self._explain(server, message, last=True)) from None
        assert server.served is not None  # started
        server.served.add_done_callback(self._ended)
        tools: list[Tool] = []
        taken: set[str] = set()
        for item in listed:
            name = tool_name(prefix, item.name, taken)
            taken.add(name)
            description = item.description or item.title or ""
            tools.append(Tool(self._caller(item.name), name=name, description=description, parameters=item.inputSchema))
        return tools

    def _explain(self, server: _Server, message: str, *, last: bool = False) -> str:
        """``message`` naming the plugin and the server, with the end of its stderr (masked);
        ``last``: the server is gone for good, its stderr file is closed."""
        where = " ".join(self.config.command or []) if self.config.command else self.config.url
        text = self.redact(f"plugin {self._owner!r}: {message} ({where}){server.stderr_tail()}")
        if last:
            server.close_log()
        return text

    def _ended(self, future: concurrent.futures.Future[None]) -> None:
        """The session's task ended (the server died, or it was closed)."""
        exc = None if future.cancelled() else future.exception()
        self._dead = f"the MCP server stopped: {_cause(exc)}" if exc is not None else "the MCP server was closed"
        if exc is not None:
            logger.warning("%s", self.redact(f"plugin {self._owner!r}: {self._dead}"))

    def _caller(self, name: str) -> Callable[[dict[str, Any]], Awaitable[str | list[str | FileBlock]]]:
        async def call(arguments: dict[str, Any]) -> str | list[str | FileBlock]:
            return await self.call_tool(name, arguments)

        return call

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> str | list[str | FileBlock]:
        """Call tool ``name`` (the server's own name); its result text (masked), or with files
        (images, audio) the list ``[text, *files]`` (:class:`~harness_core.tools.Tool` makes it a
        result with ``files``).

        Raises:
            ToolError: the tool reported an error, the call outlasted ``call_timeout``, or the
                server is not running (died, closed): the model reads it (naming the plugin).
        """
        server = self._server
        if server is None or server.portal is None or self._dead is not None:
            raise ToolError(self.redact(f"plugin {self._owner!r}: {self._dead or 'the MCP server is not running'}"))
        served = server.served
        assert served is not None  # a server with a portal was started
        future = server.portal.start_task_soon(server.call, name, arguments)
        try:
            result = await _wait(future, served)
        except ConnectionError:
            raise ToolError(self._explain(server, f"tool {name!r} was not answered: the MCP server stopped")) from None
        except Exception as exc:
            if isinstance(_leaf(exc), TimeoutError):
                raise ToolError(
                    f"plugin {self._owner!r}: tool {name!r} did not answer within {self.config.call_timeout:g} s"
                ) from None
            raise ToolError(self._explain(server, f"tool {name!r} failed: {_cause(exc)}")) from None
        text, files = _result_content(result)
        text = self.redact(text)
        if result.isError:
            raise ToolError(text or f"tool {name!r} reported an error")
        return [text, *files] if files else text

    async def aclose(self) -> None:
        """Stop the server (no process left behind); called when the harness closes."""
        server, self._server = self._server, None
        if server is not None:
            await anyio.to_thread.run_sync(server.close, abandon_on_cancel=True)  # the harness bounds the wait
            server.close_log()


async def _wait(future: concurrent.futures.Future[T], served: concurrent.futures.Future[None]) -> T:
    """The result of ``future`` (a call in the portal's thread), awaited in a worker thread so
    the loop never blocks; ``ConnectionError`` when ``served`` (the session's task) ends first:
    the server is gone and the call would never be answered. Cancelling the wait cancels the
    call in the portal."""
    pending: list[concurrent.futures.Future[Any]] = [future, served]
    both = functools.partial(concurrent.futures.wait, pending, return_when=concurrent.futures.FIRST_COMPLETED)
    try:
        await anyio.to_thread.run_sync(both, abandon_on_cancel=True)
    finally:
        if not future.done():
            future.cancel()
    if future.cancelled():
        raise ConnectionError("the server closed the connection (its process exited?)")
    return future.result()


def _leaf(exc: BaseException) -> BaseException:
    """``exc``, or the first leaf of an exception group."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def _cause(exc: BaseException) -> str:
    """``Type: message`` of ``exc`` (the first leaf of an exception group)."""
    exc = _leaf(exc)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
