"""``harness run -p gemini-gw`` configured as the README shows, against a scripted server replaying a
recorded Gemini stream (the provider is mocked, never the harness)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gemini_fixtures import API_KEY
from test_gemini_recorded import CASES

from harness_core.testing.server import ScriptedServer

ENTRY = (
    "plugins:\n"
    "  gemini:gateway:\n"
    "    base_url: {url}/v1beta\n"
    "    api_key: ${{{{ env.GATEWAY_KEY }}}}\n"
    "    routes: [gemini-gw]\n"
)


def test_harness_run_streams_a_recorded_reply(tmp_path: Path) -> None:
    (case,) = [c for c in CASES if c.name == "vercel-google-google-text"]
    with ScriptedServer(case.reply()) as server:
        config = tmp_path / "plugins.yaml"
        config.write_text(ENTRY.format(url=server.url))
        env = {**os.environ, "GATEWAY_KEY": API_KEY, "HARNESS_CONFIG": str(config)}
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness_core.cli",
                "run",
                "-p",
                "gemini-gw",
                "-m",
                "gemini-3-pro-preview",
                "--system",
                "Be exact.",
                "How many r in strawberry?",
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == case.expect["text"]
        assert "finish: stop" in result.stderr
        assert API_KEY not in result.stdout + result.stderr
        (request,) = server.requests
    assert request.path == "/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse"
    assert request.headers["x-goog-api-key"] == API_KEY
    assert request.json() == {
        "contents": [{"role": "user", "parts": [{"text": "How many r in strawberry?"}]}],
        "systemInstruction": {"parts": [{"text": "Be exact."}]},
    }
