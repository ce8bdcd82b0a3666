"""A test-only embedding plugin: POSTs OpenAI's ``/v1/embeddings`` wire to a ScriptedServer via httpx.

Installed for a test by :func:`install` (a metadata folder with its entry point, on ``sys.path``),
so a real ``harness serve`` loads it from plugins.yaml like any plugin
(``scripted-embed: {base_url: ..., routes: [...]}``). It asks for ``encoding_format: base64``
and decodes the vectors straight into the float32 buffer (``float32_from_base64``); ``max_batch``
is 2, so three inputs take two upstream requests. A transport failure is ``NETWORK`` starting
with the httpx exception's name (as the adapter kit reports it); a 429 is ``RATE_LIMITED`` with
the upstream's ``retry-after``; any other non-200 is ``SERVER``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from harness_core import LlmError, TokenUsage, hookimpl
from harness_core.embedding import EmbeddingAdapter, Embeddings, EmbedOptions, float32_from_base64
from harness_core.hookspecs import RegisterEmbedder

ENTRY_POINT = "scripted-embed"


class ScriptedEmbedConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    base_url: str
    routes: list[str] = msgspec.field(default_factory=lambda: ["scripted"])


class ScriptedEmbedder(EmbeddingAdapter):
    max_batch = 2

    def __init__(self, config: ScriptedEmbedConfig) -> None:
        self.config = config
        self.client = httpx.AsyncClient(base_url=config.base_url, timeout=120)

    async def embed(self, options: EmbedOptions) -> Embeddings:
        body: dict[str, Any] = {"model": options.model, "input": options.inputs, "encoding_format": "base64"}
        if options.dimensions is not None:
            body["dimensions"] = options.dimensions
        try:
            reply = await self.client.post("/v1/embeddings", json=body)
        except httpx.TransportError as exc:
            raise LlmError("NETWORK", f"{type(exc).__name__}: {exc} ({self.config.base_url}/v1/embeddings)") from None
        if reply.status_code == 429:
            retry = float(reply.headers.get("retry-after", "1"))
            raise LlmError("RATE_LIMITED", reply.json()["error"]["message"], status=429, retry_after=retry)
        if reply.status_code != 200:
            raise LlmError("SERVER", f"upstream answered {reply.status_code}", status=reply.status_code)
        answer = reply.json()
        data = [float32_from_base64(item["embedding"]) for item in sorted(answer["data"], key=lambda d: d["index"])]
        dimensions = len(data[0])
        joined = data[0]
        for row in data[1:]:
            joined.extend(row)
        usage = answer.get("usage")
        tokens = TokenUsage(usage["prompt_tokens"], None) if usage is not None else None
        return Embeddings(joined, dimensions, model=answer["model"], usage=tokens)

    async def aclose(self) -> None:
        await self.client.aclose()


class ScriptedEmbedPlugin:
    Config = ScriptedEmbedConfig

    def __init__(self, config: ScriptedEmbedConfig) -> None:
        self.config = config
        self.adapter = ScriptedEmbedder(config)

    @hookimpl
    def register_embedder(self, register: RegisterEmbedder) -> None:
        register(self.config.routes, self.adapter)


def install(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make this module a plugin (entry point ``scripted-embed``) for the rest of the test."""
    info = folder / "scripted_embed-0.0.dist-info"
    info.mkdir(parents=True)
    (info / "entry_points.txt").write_text(f"[harness.plugins]\n{ENTRY_POINT} = {__name__}:ScriptedEmbedPlugin\n")
    (info / "METADATA").write_text("Name: scripted-embed\nVersion: 0.0\n")
    monkeypatch.syspath_prepend(str(folder))
