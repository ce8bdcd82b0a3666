"""The CLI with MCP servers: `harness tools`, `harness run --tool` with the real time server,
and no orphan process after SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from mcp_kit import TIME, text_reply, tool_call_reply, tool_messages, write_config, yaml_list

from harness_core.testing.server import Reply, ScriptedServer

TIME_SERVER = f"  mcp:time: {{command: {yaml_list(TIME)}}}\n"


def harness(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness_core.cli", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "HARNESS_CONFIG": str(tmp_path / "plugins.yaml"), "NO_COLOR": "1"},
        timeout=120,
    )


def test_harness_tools_lists_the_servers_tools(tmp_path: Path) -> None:
    write_config(tmp_path, "http://127.0.0.1:9", TIME_SERVER + "  mcp:gone: {command: [/nonexistent/mcp]}\n")
    result = harness(tmp_path, "tools", "--json")
    assert result.returncode == 1  # one source failed; the other's tools are listed
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["name"], r["plugin"]) for r in rows] == [
        ("time_get_current_time", "mcp:time"),
        ("time_convert_time", "mcp:time"),
    ]
    assert result.stderr.startswith("error: CONFIG: plugin 'mcp:gone': the MCP server failed to start: ")


def test_harness_run_round_trip_with_the_real_time_server(tmp_path: Path) -> None:
    with ScriptedServer(tool_call_reply("time_get_current_time", '{"timezone": "UTC"}'), text_reply("noon")) as api:
        write_config(tmp_path, api.url, TIME_SERVER)
        result = harness(tmp_path, "run", "--no-log", "--tool", "time_get_current_time", "what time is it")
        assert result.returncode == 0, result.stderr
        assert result.stdout == "noon\n"
        (message,) = tool_messages(api.requests[1].json())
    assert json.loads(message["content"])["timezone"] == "UTC"


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status


def test_no_server_process_is_left_after_sigterm(tmp_path: Path) -> None:
    with ScriptedServer(Reply(head_delay=0, end="stall", reads=[b": waiting\n\n"])) as api:
        write_config(tmp_path, api.url, TIME_SERVER)
        process = subprocess.Popen(
            [sys.executable, "-m", "harness_core.cli", "run", "--no-log", "--tool", "time_*", "what time is it"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env={**os.environ, "HARNESS_CONFIG": str(tmp_path / "plugins.yaml"), "NO_COLOR": "1"},
        )
        try:
            deadline = time.monotonic() + 60
            while not api.requests:  # the request is sent after the MCP server listed its tools
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.05)  # polling for the request, bounded by the deadline
            servers = children(process.pid)
            assert servers  # the MCP server runs as a child
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 143, stderr
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in servers):
        assert time.monotonic() < deadline, f"orphans left: {servers}"
        time.sleep(0.05)  # polling for the processes to go, bounded by the deadline
