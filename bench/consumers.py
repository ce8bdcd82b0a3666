"""The consumers compared side by side: each reads one scenario's stream and counts its deltas.

Every consumer returns :class:`Read`: the number of deltas (text pieces, or tool-argument pieces)
it saw, their total length in characters, and the time from the start of the request to the
first delta (TTFC). The worker checks both counts against :func:`bench.streams.expected`, so a
consumer that silently drops work cannot look fast.

Consumers (``NAME`` for ``python -m bench.worker --consumer NAME``):

=====================  ===========================================================================
``floor``              httpx ``aiter_lines`` + ``json.loads`` (the 1.0× reference), OpenAI format
``floor-anthropic``    the same over the Anthropic-format stream
``bytes``              httpx ``aiter_bytes`` without parsing (a lower bound for any parser)
``msgspec``            httpx ``aiter_lines`` + msgspec typed decode
``harness-openai``     harness → harness-llm-openai, 0 middlewares (``-3mw``: 3 pass-throughs;
                       ``-3mw-abort``: and an AbortSignal in the options, as ``harness run``)
``harness-anthropic``  harness → harness-llm-anthropic (``-3mw`` likewise)
``floor-gemini``       the floor over the Gemini-format stream (text scenarios only)
``harness-gemini``     harness → harness-llm-gemini (``-3mw`` likewise; text scenarios only)
``openai-sdk``         the openai SDK's ``AsyncOpenAI(...).chat.completions.create(stream=True)``
``litellm``, ``llm``   peers, measured with ``--peers`` when installed
``chain-N``            harness → the mock adapter with N pass-through middlewares (no HTTP)
``chain-full``         harness → the mock with all six harness-middleware plugins enabled
``request-bare``       harness → the mock, no middleware: the bare route, per request (``balance``)
``request-pass``       the same with one pass-through middleware (the hop every middleware pays)
``request-pool``       harness → a ``balance`` pool of two mock members (``a/echo``, ``b/echo``)
=====================  ===========================================================================
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import msgspec

__all__ = ["BENCH_KEY", "CONSUMERS", "Consumer", "Read", "make"]

_PROMPT = [{"role": "user", "content": "Say something."}]

BENCH_KEY = "-".join(("sk", "bench", secrets.token_urlsafe(36)))
"""The API key every consumer sends: 57 characters like a real provider key (``sk-proj-…`` keys
are longer still), built at run time so no key-shaped literal is committed. Its length matters:
the harness masks configured keys in streamed text, and a short key once hid a 10× cost there."""


@dataclass
class Read:
    """What one consumer saw of one stream: deltas, characters, seconds to the first delta."""

    deltas: int
    chars: int
    ttfc: float | None


class FirstChunk:
    """The clocks of one read from the request's start to its first delta: :meth:`stop` returns
    the wall seconds and records the CPU seconds (``process_time``) in :attr:`cpu_samples`. With
    :attr:`profiler` set (``bench.worker --task ttfc --profile cprofile``) only that stretch of
    every read is profiled."""

    cpu_samples: ClassVar[list[float]] = []
    profiler: ClassVar[Any] = None

    __slots__ = ("cpu", "wall")

    def __init__(self) -> None:
        if self.profiler is not None:
            self.profiler.enable()
        self.cpu = time.process_time()
        self.wall = time.perf_counter()

    def stop(self) -> float:
        wall = time.perf_counter() - self.wall
        self.cpu_samples.append(time.process_time() - self.cpu)
        if self.profiler is not None:
            self.profiler.disable()
        return wall


class Consumer:
    """Base class: :meth:`start` once per process, :meth:`read` per stream, :meth:`aclose`."""

    fmt = "openai"
    uses_server = True
    extra_deltas = 0
    """How many deltas more than the scenario's this consumer may report (its characters must
    match exactly): harness holds back a tail of a delta that could begin a configured key
    (:data:`BENCH_KEY`) until the next one, and the last such tail of a block ends it as a delta
    of its own."""

    def __init__(self, base: str, max_connections: int) -> None:
        self.base = base
        self.max_connections = max_connections

    def supports(self, scenario: str) -> bool:
        """Whether this consumer can read ``scenario`` (all do, except ``llm`` for tool calls)."""
        return True

    def expected(self, scenario: str) -> tuple[int, int]:
        """(deltas, characters) this consumer must report for ``scenario``."""
        from bench.streams import expected

        return expected(scenario)

    async def start(self) -> None:
        """Create clients (not timed)."""

    async def read(self, scenario: str) -> Read:
        """Read one complete stream of ``scenario``."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close clients."""


# ----------------------------------------------------------------------------- plain httpx


class _Httpx(Consumer):
    client: Any
    transport = "httpcore"

    async def start(self) -> None:
        import httpx

        limits = httpx.Limits(max_connections=self.max_connections, max_keepalive_connections=self.max_connections)
        backend = None
        if self.transport == "aiohttp":
            from httpx_aiohttp import AiohttpTransport

            backend = AiohttpTransport(limits=limits)
        self.client = httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(120.0), transport=backend)
        self.url = f"{self.base}/v1/chat/completions" if self.fmt == "openai" else f"{self.base}/v1/messages"
        self.headers = {"authorization": f"Bearer {BENCH_KEY}"}

    def body(self, scenario: str) -> dict[str, Any]:
        return {"model": scenario, "messages": _PROMPT, "stream": True, "max_tokens": 100_000}

    async def aclose(self) -> None:
        await self.client.aclose()


def openai_piece(chunk: dict[str, Any]) -> str | None:
    """The text (or tool-argument) piece of one decoded OpenAI stream chunk, if any: the floors'
    whole per-chunk work after ``json.loads``."""
    choices = chunk["choices"]
    if not choices:
        return None
    delta = choices[0]["delta"]
    piece: str | None = delta.get("content")
    if not piece and delta.get("tool_calls"):
        piece = delta["tool_calls"][0]["function"].get("arguments")
    return piece


class Floor(_Httpx):
    """httpx ``aiter_lines`` + ``json.loads``: the reference consumer (1.0×)."""

    async def read(self, scenario: str) -> Read:
        start = FirstChunk()
        async with self.client.stream("POST", self.url, json=self.body(scenario), headers=self.headers) as response:
            response.raise_for_status()
            return await openai_lines(response.aiter_lines(), start)


async def openai_lines(lines: AsyncIterator[str], start: FirstChunk) -> Read:
    """What a floor reads from the lines of an OpenAI stream: ``data:`` lines through
    ``json.loads`` up to ``[DONE]`` (the floors' whole per-line work)."""
    loads = json.loads
    deltas = chars = 0
    ttfc = None
    async for line in lines:
        if not line.startswith("data: "):
            continue
        data = line[6:]
        if data == "[DONE]":
            break
        piece = openai_piece(loads(data))
        if piece:
            if ttfc is None:
                ttfc = start.stop()
            deltas += 1
            chars += len(piece)
    return Read(deltas, chars, ttfc)


class FloorAiohttp(Floor):
    """The floor's code over httpx-aiohttp's transport (httpx's API, aiohttp's HTTP parser)."""

    transport = "aiohttp"


class FloorRawAiohttp(Consumer):
    """aiohttp alone (no httpx): ``ClientSession.post``, lines of the body + ``json.loads``: the
    floor of time to first chunk on aiohttp's transport."""

    async def start(self) -> None:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=self.max_connections)
        self.session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120))
        self.url = f"{self.base}/v1/chat/completions"
        self.headers = {"authorization": f"Bearer {BENCH_KEY}"}

    async def read(self, scenario: str) -> Read:
        body = {"model": scenario, "messages": _PROMPT, "stream": True, "max_tokens": 100_000}
        start = FirstChunk()
        async with self.session.post(self.url, json=body, headers=self.headers) as response:
            response.raise_for_status()
            lines = (raw.decode().rstrip("\r\n") async for raw in response.content)  # a line per item
            return await openai_lines(lines, start)

    async def aclose(self) -> None:
        await self.session.close()


class RawSockets(Consumer):
    """Raw asyncio sockets + ``json.loads``: a hand-written HTTP/1.1 client (one connection per
    stream, chunked framing parsed with ``readuntil``/``readexactly``): the lower bound of the
    1,000-stream target."""

    async def read(self, scenario: str) -> Read:
        import asyncio

        host, _, port = self.base.removeprefix("http://").partition(":")
        body = json.dumps({"model": scenario, "messages": _PROMPT, "stream": True}).encode()
        head = (
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: %s\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n" % (host.encode(), len(body))
        )
        loads = json.loads
        deltas = chars = 0
        ttfc = None
        start = FirstChunk()
        reader, writer = await asyncio.open_connection(host, int(port), limit=1 << 20)
        try:
            writer.write(head + body)
            await reader.readuntil(b"\r\n\r\n")
            buffer = b""
            while True:
                size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
                if size == 0:
                    break
                buffer += (await reader.readexactly(size + 2))[:-2]
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if not line.startswith(b"data: ") or line == b"data: [DONE]":
                        continue
                    piece = openai_piece(loads(line[6:]))
                    if piece:
                        if ttfc is None:
                            ttfc = start.stop()
                        deltas += 1
                        chars += len(piece)
        finally:
            writer.close()
        return Read(deltas, chars, ttfc)


class FloorAnthropic(_Httpx):
    """httpx ``aiter_lines`` + ``json.loads`` over the Anthropic-format stream."""

    fmt = "anthropic"

    async def read(self, scenario: str) -> Read:
        loads = json.loads
        deltas = chars = 0
        ttfc = None
        start = FirstChunk()
        async with self.client.stream("POST", self.url, json=self.body(scenario), headers=self.headers) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                event = loads(line[6:])
                kind = event["type"]
                if kind == "content_block_delta":
                    delta = event["delta"]
                    piece = delta.get("text") or delta.get("partial_json")
                    if piece:
                        if ttfc is None:
                            ttfc = start.stop()
                        deltas += 1
                        chars += len(piece)
                elif kind == "message_stop":
                    break
        return Read(deltas, chars, ttfc)


def _text_only(self: Consumer, scenario: str) -> bool:
    """``supports`` of the Gemini consumers: Gemini sends a tool call's arguments whole."""
    return not scenario.startswith("tool")


class FloorGemini(_Httpx):
    """httpx ``aiter_lines`` + ``json.loads`` over the Gemini-format stream (text scenarios)."""

    fmt = "gemini"
    supports = _text_only

    async def read(self, scenario: str) -> Read:
        loads = json.loads
        deltas = chars = 0
        ttfc = None
        url = f"{self.base}/v1beta/models/{scenario}:streamGenerateContent?alt=sse"
        body = {"contents": [{"role": "user", "parts": [{"text": "Say something."}]}]}
        start = FirstChunk()
        async with self.client.stream("POST", url, json=body, headers={"x-goog-api-key": BENCH_KEY}) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                for part in loads(line[6:])["candidates"][0]["content"]["parts"]:
                    piece = part.get("text")
                    if piece:
                        if ttfc is None:
                            ttfc = start.stop()
                        deltas += 1
                        chars += len(piece)
        return Read(deltas, chars, ttfc)


class RawBytes(_Httpx):
    """httpx ``aiter_bytes``, no parsing at all: a lower bound (counts are taken as expected)."""

    async def read(self, scenario: str) -> Read:
        from bench.streams import expected

        ttfc = None
        start = FirstChunk()
        async with self.client.stream("POST", self.url, json=self.body(scenario), headers=self.headers) as response:
            response.raise_for_status()
            async for _ in response.aiter_bytes():
                if ttfc is None:
                    ttfc = start.stop()
        deltas, chars = expected(scenario)
        return Read(deltas, chars, ttfc)


class _Function(msgspec.Struct):
    arguments: str | None = None


class _ToolCall(msgspec.Struct):
    function: _Function | None = None


class _Delta(msgspec.Struct):
    content: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Choice(msgspec.Struct):
    delta: _Delta


class _Chunk(msgspec.Struct):
    choices: list[_Choice] = []


class Msgspec(_Httpx):
    """httpx ``aiter_lines`` + msgspec typed decode (Structs for the chunk)."""

    async def start(self) -> None:
        await super().start()
        self.decode: Callable[[str], _Chunk] = msgspec.json.Decoder(_Chunk).decode

    async def read(self, scenario: str) -> Read:
        decode = self.decode
        deltas = chars = 0
        ttfc = None
        start = FirstChunk()
        async with self.client.stream("POST", self.url, json=self.body(scenario), headers=self.headers) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    break
                choices = decode(data).choices
                if not choices:
                    continue
                delta = choices[0].delta
                piece = delta.content
                if not piece and delta.tool_calls and delta.tool_calls[0].function:
                    piece = delta.tool_calls[0].function.arguments
                if piece:
                    if ttfc is None:
                        ttfc = start.stop()
                    deltas += 1
                    chars += len(piece)
        return Read(deltas, chars, ttfc)


# ----------------------------------------------------------------------------- harness


def passthrough_plugins(count: int) -> list[tuple[str, object]]:
    """``count`` pass-through middleware plugins (``async for chunk in call_next: yield chunk``)."""
    from harness_core import hookimpl

    class PassThrough:
        @hookimpl
        async def llm_stream(self, options: Any, call_next: Any) -> AsyncIterator[Any]:
            async for chunk in call_next(options):
                yield chunk

    return [(f"pass{i}", PassThrough()) for i in range(count)]


async def _read_harness(harness: Any, options: Any) -> Read:
    from harness_core import Finish, TextDelta, ToolCallDelta

    deltas = chars = 0
    ttfc = None
    last = None
    start = FirstChunk()
    async with harness.stream(options) as chunks:
        async for chunk in chunks:
            kind = type(chunk)
            if kind is TextDelta:
                piece = chunk.text
            elif kind is ToolCallDelta:
                piece = chunk.arguments_delta
            else:
                last = chunk
                continue
            if ttfc is None:
                ttfc = start.stop()
            deltas += 1
            chars += len(piece)
    if not isinstance(last, Finish) or last.reason.kind not in ("stop", "tool-calls"):
        raise RuntimeError(f"stream did not finish normally: {last!r}")
    return Read(deltas, chars, ttfc)


class _Harness(Consumer):
    middlewares = 0
    extra_deltas = 1
    transport = "httpcore"
    route = "bench"

    def adapter_plugin(self) -> tuple[str, object]:
        raise NotImplementedError

    def http_plugin(self, key: str, config_type: Any, plugin_type: Any, base_url: str) -> tuple[str, object]:
        """``(key, plugin)`` of an HTTP provider plugin configured for the bench server."""
        from harness_core import Secret

        config = config_type(
            base_url=base_url,
            api_key=Secret(BENCH_KEY),
            routes=[self.route],
            max_connections=self.max_connections,
            transport=self.transport,
        )
        return (key, plugin_type(config))

    async def start(self) -> None:
        from harness_core import Harness

        self.harness = Harness([*passthrough_plugins(self.middlewares), self.adapter_plugin()])
        await self.harness.__aenter__()

    def options(self, scenario: str) -> Any:
        from harness_core import GenerateOptions, Message

        return GenerateOptions(route=self.route, model=scenario, messages=[Message.user("Say something.")])

    async def read(self, scenario: str) -> Read:
        return await _read_harness(self.harness, self.options(scenario))

    async def aclose(self) -> None:
        await self.harness.__aexit__(None, None, None)


class HarnessOpenAI(_Harness):
    """harness → harness-llm-openai (``Harness([...])`` with plugin objects)."""

    def adapter_plugin(self) -> tuple[str, object]:
        from harness_llm_openai import Config, OpenAIPlugin

        return self.http_plugin("openai", Config, OpenAIPlugin, f"{self.base}/v1")


class HarnessOpenAI3(HarnessOpenAI):
    middlewares = 3


class HarnessOpenAIAiohttp(HarnessOpenAI):
    """``harness-openai`` with ``transport: aiohttp``."""

    transport = "aiohttp"


class HarnessOpenAI3Aiohttp(HarnessOpenAIAiohttp):
    middlewares = 3


class HarnessOpenAI3Abort(HarnessOpenAI3):
    """As ``harness-openai-3mw``, with an :class:`AbortSignal` in the options (as ``harness run``
    always passes one): every read is then raced against the signal."""

    def options(self, scenario: str) -> Any:
        import msgspec

        from harness_core import AbortSignal

        return msgspec.structs.replace(super().options(scenario), abort=AbortSignal())


class HarnessAnthropic(_Harness):
    """harness → harness-llm-anthropic."""

    fmt = "anthropic"

    def adapter_plugin(self) -> tuple[str, object]:
        from harness_llm_anthropic import AnthropicPlugin
        from harness_llm_anthropic.config import AnthropicConfig

        return self.http_plugin("anthropic", AnthropicConfig, AnthropicPlugin, self.base)


class HarnessAnthropic3(HarnessAnthropic):
    middlewares = 3


class HarnessAnthropicAiohttp(HarnessAnthropic):
    """``harness-anthropic`` with ``transport: aiohttp``."""

    transport = "aiohttp"


class HarnessGemini(_Harness):
    """harness → harness-llm-gemini (text scenarios: Gemini sends tool arguments whole)."""

    fmt = "gemini"
    supports = _text_only

    def adapter_plugin(self) -> tuple[str, object]:
        from harness_llm_gemini import GeminiConfig, GeminiPlugin

        return self.http_plugin("gemini", GeminiConfig, GeminiPlugin, f"{self.base}/v1beta")


class HarnessGemini3(HarnessGemini):
    middlewares = 3


class HarnessGeminiAiohttp(HarnessGemini):
    """``harness-gemini`` with ``transport: aiohttp``."""

    transport = "aiohttp"


class Chain(_Harness):
    """harness → the mock adapter with N pass-through middlewares; scenario ``text-N`` = N words."""

    uses_server = False
    route = "mock"

    def adapter_plugin(self) -> tuple[str, object]:
        from harness_llm_mock import MockConfig, MockPlugin

        return ("mock", MockPlugin(MockConfig()))

    @staticmethod
    def _text(scenario: str) -> str:
        from bench.streams import parse_scenario

        return " ".join(["word"] * parse_scenario(scenario).n)

    def expected(self, scenario: str) -> tuple[int, int]:
        """The mock echoes one word (with its trailing space) per delta."""
        text = self._text(scenario)
        return text.count(" ") + 1, len(text)

    def options(self, scenario: str) -> Any:
        from harness_core import GenerateOptions, Message

        return GenerateOptions(route=self.route, model="echo", messages=[Message.user(self._text(scenario))])


def _chain(count: int) -> type[Chain]:
    return type(f"Chain{count}", (Chain,), {"middlewares": count})


MIDDLEWARES = ("otel", "retry", "timeout", "usage", "redact", "cache")


class RequestPool(Chain):
    """harness → a ``balance`` pool (default strategy ``weighted``, in-memory state, no limits) of
    two mock members, ``a/echo`` and ``b/echo``: what balancing costs per request in one process
    against ``request-bare`` (the same mock route without it)."""

    route = "pool"

    async def start(self) -> None:
        import msgspec

        from harness_core import Harness
        from harness_llm_mock import MockConfig, MockPlugin
        from harness_middleware.balance import BalancePlugin

        pools = {"pool": [{"target": "a/echo"}, {"target": "b/echo"}]}
        balance = BalancePlugin(msgspec.convert({"pools": pools, "seed": 1}, BalancePlugin.Config))
        members = [(f"mock:{name}", MockPlugin(MockConfig(routes=[name]))) for name in ("a", "b")]
        self.harness = Harness([("balance", balance), *members])
        await self.harness.__aenter__()


class ChainFull(Chain):
    """harness → mock with the six first-party middlewares (retry, timeout, usage, redact, cache,
    otel), each with its default config (cache misses: every request differs by ``seed``)."""

    stack: tuple[str, ...] = MIDDLEWARES

    async def start(self) -> None:
        import tempfile

        from harness_core import Harness
        from harness_core.loader import load_config

        self.tmp = tempfile.TemporaryDirectory(prefix="harness-bench-")
        path = f"{self.tmp.name}/plugins.yaml"
        entries = "".join(f"  {name}:{MIDDLEWARE_YAML[name]}\n" for name in self.stack)
        text = ("plugins:\n" + entries + "  mock: {{}}\n").format(dir=self.tmp.name)
        Path(path).write_text(text)  # noqa: ASYNC240 - set-up, not timed
        config = load_config(path)
        if config.failures:
            raise RuntimeError(f"full stack failed to load: {config.failures}")
        self.harness = Harness(config.plugins, defaults=config.defaults)
        await self.harness.__aenter__()
        self.seed = 0

    def options(self, scenario: str) -> Any:
        import msgspec

        self.seed += 1
        return msgspec.structs.replace(super().options(scenario), seed=self.seed)

    async def aclose(self) -> None:
        await super().aclose()
        self.tmp.cleanup()


MIDDLEWARE_YAML = {
    "otel": " {{}}",
    "retry": " {{}}",
    "timeout": " {{}}",
    "usage": "\n    path: {dir}/usage.sqlite",
    "redact": " {{}}",
    "cache": "\n    path: {dir}/cache.sqlite",
}
"""Each first-party middleware's ``plugins.yaml`` entry in the full stack, outermost first."""


# ----------------------------------------------------------------------------- peers


class OpenAISDK(Consumer):
    """The official openai SDK, streaming."""

    async def start(self) -> None:
        import openai

        self.client = openai.AsyncOpenAI(
            base_url=f"{self.base}/v1",
            api_key=BENCH_KEY,
            max_retries=0,
            http_client=None,
        )
        if self.max_connections > 100:
            import httpx2  # openai >= 3 is built on httpx2

            limits = httpx2.Limits(max_connections=self.max_connections, max_keepalive_connections=self.max_connections)
            self.client = openai.AsyncOpenAI(
                base_url=f"{self.base}/v1",
                api_key=BENCH_KEY,
                max_retries=0,
                http_client=openai.DefaultAsyncHttpxClient(limits=limits),
            )

    async def read(self, scenario: str) -> Read:
        deltas = chars = 0
        ttfc = None
        start = FirstChunk()
        stream = await self.client.chat.completions.create(
            model=scenario, messages=_PROMPT, stream=True, stream_options={"include_usage": True}
        )
        async for chunk in stream:
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            piece = delta.content
            if not piece and delta.tool_calls:
                piece = delta.tool_calls[0].function.arguments
            if piece:
                if ttfc is None:
                    ttfc = start.stop()
                deltas += 1
                chars += len(piece)
        return Read(deltas, chars, ttfc)

    async def aclose(self) -> None:
        await self.client.close()


class LiteLLM(Consumer):
    """LiteLLM's ``acompletion(stream=True)`` against the OpenAI-format route."""

    async def start(self) -> None:
        import os

        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # offline: no cost-map download
        import litellm

        self.litellm = litellm

    async def read(self, scenario: str) -> Read:
        deltas = chars = 0
        ttfc = None
        start = FirstChunk()
        stream = await self.litellm.acompletion(
            model=f"openai/{scenario}",
            api_base=f"{self.base}/v1",
            api_key=BENCH_KEY,
            messages=_PROMPT,
            stream=True,
        )
        async for chunk in stream:
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            piece = delta.content
            if not piece and delta.tool_calls:
                piece = delta.tool_calls[0].function.arguments
            if piece:
                if ttfc is None:
                    ttfc = start.stop()
                deltas += 1
                chars += len(piece)
        return Read(deltas, chars, ttfc)


class Llm(Consumer):
    """simonw's ``llm``: its async OpenAI chat model pointed at the loopback server (text only:
    its prompt iterator yields text, tool calls need a tool-calling conversation)."""

    def supports(self, scenario: str) -> bool:
        return not scenario.startswith("tool")

    async def start(self) -> None:
        from llm.default_plugins.openai_models import AsyncChat

        self.make = lambda scenario: AsyncChat(
            model_id=f"bench-{scenario}", model_name=scenario, api_base=f"{self.base}/v1", key=BENCH_KEY
        )

    async def read(self, scenario: str) -> Read:
        model = self.make(scenario)
        model.key = BENCH_KEY
        deltas = chars = 0
        ttfc = None
        start = FirstChunk()
        response = model.prompt("Say something.", stream=True, key=BENCH_KEY)
        async for piece in response:
            if piece:
                if ttfc is None:
                    ttfc = start.stop()
                deltas += 1
                chars += len(piece)
        return Read(deltas, chars, ttfc)


CONSUMERS: dict[str, type[Consumer]] = {
    "floor": Floor,
    "floor-anthropic": FloorAnthropic,
    "floor-gemini": FloorGemini,
    "bytes": RawBytes,
    "msgspec": Msgspec,
    "harness-openai": HarnessOpenAI,
    "harness-openai-3mw": HarnessOpenAI3,
    "harness-openai-3mw-abort": HarnessOpenAI3Abort,
    "harness-anthropic": HarnessAnthropic,
    "harness-anthropic-3mw": HarnessAnthropic3,
    "harness-gemini": HarnessGemini,
    "harness-gemini-3mw": HarnessGemini3,
    "floor-aiohttp": FloorAiohttp,
    "raw-sockets": RawSockets,
    "floor-raw-aiohttp": FloorRawAiohttp,
    "harness-openai-aiohttp": HarnessOpenAIAiohttp,
    "harness-openai-3mw-aiohttp": HarnessOpenAI3Aiohttp,
    "harness-anthropic-aiohttp": HarnessAnthropicAiohttp,
    "harness-gemini-aiohttp": HarnessGeminiAiohttp,
    "openai-sdk": OpenAISDK,
    "litellm": LiteLLM,
    "llm": Llm,
    "chain-0": _chain(0),
    "chain-1": _chain(1),
    "chain-5": _chain(5),
    "chain-10": _chain(10),
    "chain-full": ChainFull,
    "request-bare": _chain(0),
    "request-pass": _chain(1),
    "request-pool": RequestPool,
    **{f"chain-{name}": type(f"Chain_{name}", (ChainFull,), {"stack": (name,)}) for name in MIDDLEWARES},
}


def make(name: str, base: str, max_connections: int = 100) -> Consumer:
    """Build the consumer called ``name`` for the server at ``base`` (``http://127.0.0.1:PORT``)."""
    return CONSUMERS[name](base, max_connections)
