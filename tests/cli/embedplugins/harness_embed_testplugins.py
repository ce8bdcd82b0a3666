"""Test-only embedding plugins for tests/cli/test_cli_embed.py (entry points next to this file).

- ``embedcount``: an ``llm_embed`` middleware that appends every call's inputs to the JSON-lines
  file ``log`` (so a test counts what reached the embedder, across runs) and, on call number
  ``fail_on_call`` (1-based, per run), fails the call as a provider would (``SERVER``, HTTP 503)
  or, on ``interrupt_on_call``, raises ``KeyboardInterrupt`` (Ctrl-C in the middle of a run), or on
  ``signal_on_call`` sends this process ``signal_name`` (SIGTERM or SIGINT) and waits for ever (a
  provider still answering when the signal comes).
- ``vectors``: an embedder only (its routes do not stream): ``[len(text), 1.0]`` per input;
  ``model`` is the model it names (``len``; ``null``: none), ``lists`` whether it lists it, ``list_error``
  makes the listing fail.
"""

from __future__ import annotations

import json
import os
import signal
from array import array

import anyio
import msgspec

from harness_core import LlmError, ModelInfo, hookimpl
from harness_core.embedding import EmbedCallNext, EmbeddingAdapter, Embeddings, EmbedOptions
from harness_core.hookspecs import RegisterEmbedder


class CountingConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    log: str
    fail_on_call: int | None = None
    interrupt_on_call: int | None = None
    signal_on_call: int | None = None
    signal_name: str = "SIGTERM"


class CountingMiddleware:
    Config = CountingConfig

    def __init__(self, config: CountingConfig) -> None:
        self.config = config
        self.calls = 0

    @hookimpl
    async def llm_embed(self, options: EmbedOptions, call_next: EmbedCallNext) -> Embeddings:
        self.calls += 1
        if self.calls == self.config.interrupt_on_call:
            raise KeyboardInterrupt
        if self.calls == self.config.signal_on_call:  # a signal while the provider is still answering
            os.kill(os.getpid(), signal.SIGTERM if self.config.signal_name == "SIGTERM" else signal.SIGINT)
            await anyio.sleep_forever()
        if self.calls == self.config.fail_on_call:
            raise LlmError("SERVER", "the embedder is overloaded", status=503)
        result = await call_next(options)
        _append(self.config.log, json.dumps({"route": options.route, "inputs": options.inputs}))
        return result


def _append(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as log:
        log.write(line + "\n")


class VectorsConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    routes: list[str] = msgspec.field(default_factory=lambda: ["vec"])
    lists: bool = True
    list_error: bool = False
    model: str | None = "len"


class LengthEmbedder(EmbeddingAdapter):
    def __init__(self, config: VectorsConfig) -> None:
        self.config = config

    async def embed(self, options: EmbedOptions) -> Embeddings:
        data = array("f")
        for text in options.inputs:
            data.extend([float(len(text)), 1.0])
        return Embeddings(data, 2, model=options.model or self.config.model, usage=None)

    async def list_embedding_models(self) -> list[ModelInfo]:
        if self.config.list_error:
            raise LlmError("NETWORK", "cannot reach the embedder")
        return [ModelInfo(model="len")] if self.config.lists else []


class VectorsPlugin:
    Config = VectorsConfig

    def __init__(self, config: VectorsConfig) -> None:
        self.config = config

    @hookimpl
    def register_embedder(self, register: RegisterEmbedder) -> None:
        register(self.config.routes, LengthEmbedder(self.config))
