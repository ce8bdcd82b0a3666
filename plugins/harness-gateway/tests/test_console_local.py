"""``harness console``: the console over a local usage ledger and prompt log written by real streams."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from harness_core import GenerateOptions, Message, SyncHarness
from harness_core.errors import LlmError
from harness_core.types import ToolSpec
from harness_gateway.console.local import LocalRecords, _log_detail
from harness_middleware.promptlog import PromptLog

TOKEN = "local-console-token-0123456789"


def write_history(tmp_path: Path) -> tuple[Path, Path]:
    """Run three streams through the usage and prompt-log middleware (over the mock); the two files."""
    usage, log = tmp_path / "usage.sqlite", tmp_path / "logs.sqlite"
    config = tmp_path / "plugins.yaml"
    config.write_text(
        f"""\
plugins:
  prompt-log: {{path: '{log}'}}
  usage: {{path: '{usage}', prices: {{mock/echo: {{input: 1000, output: 2000}}}}}}
  mock: {{}}
  mock:broken: {{routes: [broken], error: OVERLOADED}}
""",
        encoding="utf-8",
    )
    echo = ToolSpec(name="echo", parameters={"type": "object", "properties": {"text": {"type": "string"}}})
    with SyncHarness.from_config(config) as harness:
        harness.generate(GenerateOptions(route="mock", model="echo", messages=[Message.user("hello local")]))
        harness.generate(
            GenerateOptions(route="mock", model="echo", messages=[Message.user("please echo")], tools=[echo])
        )
        with pytest.raises(LlmError, match="OVERLOADED"):
            harness.generate(GenerateOptions(route="broken", model="echo", messages=[Message.user("fail")]))
    return usage, log


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_harness_console_serves_the_local_ledger_and_log(tmp_path: Path) -> None:
    usage, log = write_history(tmp_path)
    port = free_port()
    env = {**os.environ, "HARNESS_CONSOLE_TOKEN": TOKEN}
    command = [sys.executable, "-m", "harness_core.cli", "console", "--usage", str(usage), "--log", str(log)]
    process = subprocess.Popen([*command, "--port", str(port)], env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        banner = process.stderr.readline()
        assert f"http://127.0.0.1:{port}/console" in banner
        assert TOKEN not in banner
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:  # uvicorn binds after the banner: connect until it accepts
            try:
                httpx.get(url + "/console/login", timeout=5)
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline, "harness console never listened"
                time.sleep(0.05)
        with httpx.Client(base_url=url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
            spend = http.get("/console/spend?by=route").text
            assert "Budgets" not in spend  # no keys without a gateway
            assert 'href="/console/keys"' not in spend
            assert 'href="/console/live"' not in spend
            assert re.search(r"<th scope=\"row\">mock</th><td class=\"n\">2</td>", spend)
            traffic = http.get("/console/traffic").text
            assert "OVERLOADED" in traffic
            listing = http.get("/console/requests").text
            ids = re.findall(r'href="/console/requests/([0-9a-f]+)"', listing)
            assert len(ids) == 3
            oldest = http.get(f"/console/requests/{ids[-1]}").text
            assert "hello local" in oldest
            tool = http.get(f"/console/requests/{ids[1]}").text
            assert 'id="tool-calls"' in tool
            failed = http.get(f"/console/requests/{ids[0]}").text
            assert "OVERLOADED" in failed
            assert http.get("/console/requests/unknown").status_code == 404
            only_errors = http.get("/console/requests?status=error").text
            assert re.findall(r'href="/console/requests/([0-9a-f]+)"', only_errors) == [ids[0]]
            assert http.get("/console/keys").status_code == 404
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(30)
        assert process.stderr is not None
        process.stderr.close()


def test_missing_files_read_as_empty_and_bad_paths_are_refused(tmp_path: Path) -> None:
    import anyio

    records = LocalRecords(tmp_path / "none.sqlite", tmp_path / "none-log.sqlite")
    assert anyio.run(records.since, 0.0) == []
    assert anyio.run(records.recent, 5) == []
    assert anyio.run(records.get, "x") is None
    result = subprocess.run(
        [sys.executable, "-m", "harness_core.cli", "console", "--usage", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "is a directory" in result.stderr  # click names the option


def test_a_logged_file_is_shown_as_the_request_json(tmp_path: Path) -> None:
    _, log = write_history(tmp_path)
    entry = PromptLog(log).entries(limit=1)[0]
    request = {
        **entry.request,
        "messages": [{"role": "user", "content": [{"type": "file", "media_type": "image/png", "data": "sha256:ab"}]}],
    }
    detail = _log_detail(
        type(entry)(**{**{f: getattr(entry, f) for f in entry.__struct_fields__}, "request": request, "message": None})
    )
    assert "sha256:ab" in detail["messages"][0]["content"][0]["text"]
    assert detail["timeline"][0]["event"] == "finish"
    assert detail["tool_calls"] == []


@pytest.mark.parametrize("host", ["0.0.0.0"])
def test_serving_beyond_loopback_warns(tmp_path: Path, host: str) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "harness_core.cli", "console", "--host", host, "--port", str(port),
         "--usage", str(tmp_path / "u.sqlite"), "--log", str(tmp_path / "l.sqlite")],
        env={k: v for k, v in os.environ.items() if k != "HARNESS_CONSOLE_TOKEN"},
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        lines = [process.stderr.readline() for _ in range(3)]
        assert lines[0].startswith("sign-in token (shown once): ")
        assert "beyond loopback" in lines[1]
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(30)
        assert process.stderr is not None
        process.stderr.close()


def test_local_spend_by_member_of_a_pool(tmp_path: Path) -> None:
    """The ledger records the pool asked for and the member that served: the local console's
    records carry both, so Spend groups by route (the pool) or by member."""
    import anyio

    from harness_gateway.console.stats import spend

    usage = tmp_path / "usage.sqlite"
    config = tmp_path / "plugins.yaml"
    config.write_text(
        f"""\
plugins:
  usage: {{path: '{usage}', prices: {{east/echo: {{input: 1000000, output: 0}}, west/echo: {{input: 0, output: 0}}}}}}
  balance:
    seed: 1
    pools: {{pool: [{{target: east/echo}}, {{target: west/echo}}]}}
  mock:east: {{routes: [east]}}
  mock:west: {{routes: [west]}}
""",
        encoding="utf-8",
    )
    with SyncHarness.from_config(config) as harness:
        for _ in range(8):
            harness.generate(GenerateOptions(route="pool", model="echo", messages=[Message.user("hi")]))
    rows = anyio.run(LocalRecords(usage, tmp_path / "none.sqlite").since, 0.0)
    assert {(r["route"], r["model"]) for r in rows} == {("pool", "echo")}
    assert {r["served_route"] for r in rows} == {"east", "west"}
    now = time.time()
    by_route = spend(rows, since=now - 3600, now=now, bucket="hour", by="route")["table"]
    assert [(t["group"], t["requests"]) for t in by_route] == [("pool", 8)]
    by_member = {t["group"]: t for t in spend(rows, since=now - 3600, now=now, bucket="hour", by="member")["table"]}
    assert set(by_member) == {"east/echo", "west/echo"}
    assert by_member["east/echo"]["cost"] == by_member["east/echo"]["input_tokens"]  # $1 per input token
    assert by_member["west/echo"]["cost"] == 0
