"""The plugin's config through the real loader: env fallback only for OpenAI's own host."""

from __future__ import annotations

from pathlib import Path

import pytest
from openai_fixtures import chunk, sse
from openai_harness import options

from harness_core.loader import load_config
from harness_core.secret import Secret
from harness_core.testing.server import Reply, ScriptedServer
from harness_llm_openai import OpenAIPlugin

pytestmark = pytest.mark.anyio


def _load(tmp_path: Path, yaml_text: str, environ: dict[str, str]) -> OpenAIPlugin:
    path = tmp_path / "plugins.yaml"
    path.write_text(yaml_text)
    loaded = load_config(path, environ=environ)
    assert not loaded.failures
    plugin = loaded.plugins[0].instance
    assert isinstance(plugin, OpenAIPlugin)
    return plugin


def test_env_fallback_for_openai_host(tmp_path: Path) -> None:
    plugin = _load(tmp_path, "plugins:\n  openai: {}\n", {"OPENAI_API_KEY": "sk-env"})
    assert plugin.config.api_key == Secret("sk-env")
    assert "sk-env" not in repr(plugin.config)


async def test_env_key_never_sent_to_another_host(tmp_path: Path) -> None:
    with ScriptedServer(Reply(reads=[sse(chunk({}, finish="stop"))])) as server:
        yaml_text = f"plugins:\n  openai:local:\n    base_url: {server.url}/v1\n    routes: [local]\n"
        plugin = _load(tmp_path, yaml_text, {"OPENAI_API_KEY": "sk-env"})
        assert plugin.config.api_key is None
        adapter = plugin.make_adapter()
        try:
            _ = [c async for c in adapter.stream(options())]
        finally:
            await adapter.aclose()
        headers = server.requests[0].headers
    assert "authorization" not in headers
    assert all("sk-env" not in value for value in headers.values())


async def test_explicit_key_for_another_host(tmp_path: Path) -> None:
    with ScriptedServer(Reply(reads=[sse(chunk({}, finish="stop"))])) as server:
        yaml_text = (
            "plugins:\n  openai:groq:\n"
            f"    base_url: {server.url}/v1\n    api_key: ${{{{ env.GROQ_API_KEY }}}}\n    routes: [groq]\n"
        )
        plugin = _load(tmp_path, yaml_text, {"GROQ_API_KEY": "gsk-1", "OPENAI_API_KEY": "sk-env"})
        adapter = plugin.make_adapter()
        try:
            _ = [c async for c in adapter.stream(options())]
        finally:
            await adapter.aclose()
        assert server.requests[0].headers["authorization"] == "Bearer gsk-1"
