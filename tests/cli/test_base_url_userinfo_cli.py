"""``harness -v run`` against a ``base_url`` with ``user:password@``: the request carries Basic
auth and the password shows in no output (the ``-vv`` request line used to print it)."""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
from collections.abc import Callable
from pathlib import Path

from harness_core.testing.server import Reply, ScriptedServer

Harness = Callable[..., "subprocess.CompletedProcess[str]"]


def test_verbose_run_masks_the_password(tmp_path: Path, harness: Harness) -> None:
    password = "pw" + secrets.token_hex(10)
    chunk = {"id": "c", "object": "chat.completion.chunk", "model": "m"}
    reads: list[bytes | float] = [
        f"data: {json.dumps({**chunk, 'choices': [{'index': 0, 'delta': {'content': 'hello'}}]})}\n\n".encode(),
        f"data: {json.dumps({**chunk, 'choices': [{'index': 0, 'delta': {}, 'finish_reason': 'stop'}]})}\n\n".encode(),
        b"data: [DONE]\n\n",
    ]
    with ScriptedServer(Reply(reads=reads), Reply(status=500, reads=[b"no"], chunked=False)) as server:
        base_url = server.url.replace("http://", f"http://alice:{password}@") + "/v1"
        (tmp_path / "plugins.yaml").write_text(f"plugins:\n  openai:\n    base_url: {base_url}\n    api_key: null\n")
        result = harness("-vv", "run", "-r", "openai", "-m", "gpt-x", "hi")
        listed = harness("-v", "plugins")
    assert result.returncode == 0, result.stderr
    assert "hello" in result.stdout
    sent = server.requests[0].headers["authorization"]
    assert sent == "Basic " + base64.b64encode(f"alice:{password}".encode()).decode()
    assert "HTTP Request: POST" in result.stderr  # the -vv line that used to show the URL with its password
    for output in (result.stdout, result.stderr, listed.stdout, listed.stderr):
        assert password not in output
