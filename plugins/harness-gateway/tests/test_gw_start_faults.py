"""What a fresh user's trial found at start-up (docs/loader.md's failure policy under ``serve``):
a broken route is warned about at start, located, and answers the error ``harness run`` gives."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from gw_helpers import Process, gateway_yaml, serve_gateway
from gw_servers import free_port
from test_gw_units import lifespan

from harness_core import ConfigError
from harness_core.config import ConfigProblem
from harness_gateway.server import GatewayServer
from harness_gateway.start_failure import EXIT_CONFIG, EXIT_START, StartFailure, read_reports, write_report
from harness_gateway.workers import start_failure

BROKEN = """\
  openai: {}
  openai:groq:
    api_key: ${{ env.GROQ_API_KEY }}
    base_url: http://127.0.0.1:9/v1
"""


@pytest.fixture
def broken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("GROQ_API_KEY", raising=False)


def _line(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.mark.usefixtures("broken")
def test_a_broken_route_is_warned_at_start_and_answers_its_cause(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    text = gateway_yaml(db=tmp_path / "gw.sqlite", extra=BROKEN)
    with caplog.at_level(logging.WARNING, logger="harness_gateway"), serve_gateway(tmp_path, text) as running:
        warnings = [r.getMessage() for r in caplog.records if r.name.startswith("harness_gateway")]
        openai_line = next(w for w in warnings if w.startswith("plugin 'openai' "))
        assert "OPENAI_API_KEY" in openai_line
        assert f"plugins.yaml:{_line(text, 'openai: {}')}, field 'api_key'" in openai_line
        assert openai_line.endswith("its routes ('openai') are unavailable")
        groq_line = next(w for w in warnings if w.startswith("plugin 'openai:groq' "))
        assert "GROQ_API_KEY is not set" in groq_line
        assert f"plugins.yaml:{_line(text, 'GROQ_API_KEY')}" in groq_line
        with httpx.Client(base_url=running.url) as client:
            body = {"model": "openai/gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
            chat = client.post("/v1/chat/completions", json=body)
            assert chat.status_code == 500, chat.text
            error = chat.json()["error"]
            assert error["code"] == "CONFIG"
            assert error["param"] == "model"
            assert error["message"].startswith("route 'openai' is unavailable: plugin 'openai' cannot be used")
            messages = client.post("/v1/messages", json={**body, "max_tokens": 5})
            assert messages.status_code == 500
            assert "route 'openai' is unavailable" in messages.json()["error"]["message"]
            unknown = client.post("/v1/chat/completions", json={**body, "model": "groq/llama"})
            assert unknown.status_code == 404
            found = unknown.json()["error"]["message"]
            assert "adapter plugins that failed (one may own it)" in found
            assert "GROQ_API_KEY is not set" in found
            listed = [m["id"] for m in client.get("/v1/models").json()["data"]]
            assert listed
            assert all(not m.startswith(("openai/", "groq/")) for m in listed)


def test_without_failures_an_unknown_route_is_a_plain_404(tmp_path: Path) -> None:
    yaml_text = gateway_yaml(db=tmp_path / "gw.sqlite")
    with serve_gateway(tmp_path, yaml_text) as running, httpx.Client(base_url=running.url) as client:
        body = {"model": "nowhere/x", "messages": [{"role": "user", "content": "hi"}]}
        answer = client.post("/v1/chat/completions", json=body)
        typo = client.post("/v1/chat/completions", json={**body, "model": "mokc/echo"})
        anthropic = client.post("/v1/messages", json={**body, "model": "mokc/echo", "max_tokens": 5})
    assert answer.status_code == 404
    assert answer.json()["error"]["message"].endswith("(GET /v1/models lists them)")
    assert "did you mean" not in answer.json()["error"]["message"]  # 'nowhere' is close to no route
    assert (typo.status_code, anthropic.status_code) == (404, 404)
    expected = "model 'mokc/echo' is not served here (did you mean 'mock/echo'?): use `route/model` (routes: "
    assert typo.json()["error"]["message"].startswith(expected)
    assert anthropic.json()["error"]["message"].startswith(expected)


@pytest.mark.usefixtures("broken")
def test_a_reload_warns_about_its_broken_routes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with serve_gateway(tmp_path, gateway_yaml(db=tmp_path / "gw.sqlite")) as running:
        running.config.write_text(gateway_yaml(db=tmp_path / "gw.sqlite", extra=BROKEN))
        with caplog.at_level(logging.WARNING, logger="harness_gateway"):
            assert anyio.run(running.gateway.holder.reload, str(running.config))
        assert any(r.getMessage().startswith("plugin 'openai' cannot be used") for r in caplog.records)


def test_an_unreachable_redis_is_a_warning_at_start_not_ready(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()  # nothing listens there
    password = "pw-" + "z" * 20
    settings = f"    limits: redis://:{password}@127.0.0.1:{port}/0\n    db_timeout: 0.5"
    config = tmp_path / "plugins.yaml"
    config.write_text(gateway_yaml(settings, db=tmp_path / "gw.sqlite"))
    with caplog.at_level(logging.INFO, "harness_gateway"):
        sent = anyio.run(lifespan, GatewayServer(str(config), "127.0.0.1"))
    assert sent[0]["type"] == "lifespan.startup.complete"  # docs/gateway.md: it serves 503 and recovers
    warned = [r for r in caplog.records if "gateway started WITHOUT its state store" in r.getMessage()]
    assert [r.levelno for r in warned] == [logging.WARNING]
    assert f"limits at 127.0.0.1:{port}" in warned[0].getMessage()
    assert "gateway ready" not in caplog.text
    assert password not in caplog.text


def test_ready_is_logged_only_once_the_socket_is_bound(tmp_path: Path) -> None:
    config = tmp_path / "plugins.yaml"
    config.write_text(gateway_yaml(db=tmp_path / "gw.sqlite"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "harness_core.cli", "serve", "-c", str(config), "--port", str(port)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 3, done.stderr
    assert "address already in use" in done.stderr
    assert "gateway ready" not in done.stderr
    process = Process(config)  # --port 0: a free one
    try:
        process.wait_for("gateway ready")
        lines = process.seen
        assert next(i for i, line in enumerate(lines) if "running on" in line) < next(
            i for i, line in enumerate(lines) if "gateway ready" in line
        )
    finally:
        process.stop()


# ------------------------------------------- a start that fails: exit 2 (config) or 1, shown once

UNKNOWN_TARGET = "  fallback: {targets: {mock: [nowhere]}, cooldown: 0}\n"
PROBLEM = "fallback target 'nowhere' (in the list of 'mock') names route 'nowhere', which no plugin serves"


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_config_problem_found_by_the_start_exits_2_shown_once(tmp_path: Path, workers: str) -> None:
    text = gateway_yaml(db=tmp_path / "gw.sqlite", extra=UNKNOWN_TARGET)
    config = tmp_path / "plugins.yaml"
    config.write_text(text)
    scratch = tmp_path / "tmp"  # where --workers makes its metrics and report directories
    scratch.mkdir()
    command = [sys.executable, "-m", "harness_core.cli", "serve", "-c", str(config), "--port", "0"]
    done = subprocess.run(
        [*command, "--workers", workers],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    assert done.returncode == 2, done.stderr  # as the check of the file before the start exits
    assert done.stderr.count(PROBLEM) == 1, done.stderr  # not by each worker, nor by uvicorn again
    located = f"{config}:{_line(text, 'fallback:')}, plugin 'fallback', field 'targets.mock[0]': {PROBLEM}"
    assert f"error: CONFIG: invalid configuration (1 problem):\n  - {located}" in done.stderr
    assert "Traceback" not in done.stderr
    assert "gateway ready" not in done.stderr
    assert list(scratch.iterdir()) == []  # the run's directories are removed


def test_another_fault_of_the_start_is_exit_1_named_with_its_type(tmp_path: Path) -> None:
    config = tmp_path / "plugins.yaml"
    config.write_text(gateway_yaml(db=tmp_path / "gw.sqlite"))
    failures: list[StartFailure] = []
    # a metrics directory in a process whose prometheus-client was imported without one: a real fault
    app = GatewayServer(str(config), "127.0.0.1", metrics_dir=str(tmp_path), on_start_failure=failures.append)
    sent = anyio.run(lifespan, app)
    assert sent == [{"type": "lifespan.startup.failed", "message": ""}]  # shown by the caller, once
    [failure] = failures
    assert failure is app.start_failure
    assert failure.exit_code == EXIT_START == 1
    assert failure.message.startswith("the gateway cannot start: RuntimeError: gateway metrics: ")
    assert failure.message.endswith("(--log-level debug shows the traceback)")
    assert app.gateway is None


def test_the_debug_level_shows_the_traceback_of_a_fault(tmp_path: Path) -> None:
    config = tmp_path / "plugins.yaml"
    config.write_text(gateway_yaml(db=tmp_path / "gw.sqlite"))
    app = GatewayServer(str(config), "127.0.0.1", metrics_dir=str(tmp_path), log_level="debug")
    try:
        sent = anyio.run(lifespan, app)
    finally:
        logging.getLogger("harness_gateway").handlers.clear()  # configure_logging's, for this test only
        logging.getLogger("harness_gateway").propagate = True
    assert sent[0]["type"] == "lifespan.startup.failed"
    assert "Traceback (most recent call last)" in sent[0]["message"]  # an embedding: the ASGI server logs it
    assert app.start_failure is not None
    assert app.start_failure.exit_code == 1


def test_a_group_is_a_config_problem_only_when_all_of_it_is() -> None:
    def config_error(line: int) -> ConfigError:
        return ConfigError([ConfigProblem(message=f"problem {line}", source="p.yaml", line=line)])

    third, fourth = config_error(3), config_error(4)
    alike = StartFailure.of(ExceptionGroup("start", [third, fourth]))
    assert (alike.exit_code, alike.message) == (EXIT_CONFIG, f"{third}\n{fourth}")
    assert "  - p.yaml:3: problem 3" in alike.message.splitlines()
    mixed = StartFailure.of(ExceptionGroup("start", [config_error(3), OSError("no room")]))
    assert mixed.exit_code == EXIT_START
    assert "p.yaml:3: problem 3" in mixed.message
    assert "the gateway cannot start: OSError: no room (--log-level debug" in mixed.message


def test_reports_of_workers_read_once_per_problem(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert start_failure(tmp_path, 7).exit_code == 3  # no report: uvicorn's STARTUP_FAILURE, its log says why
    (tmp_path / "9.json").write_text('{"exit_code": 1, "message": "other"}')
    (tmp_path / "12.json").write_text('{"exit_code": 2, "message": "same"}')
    (tmp_path / "8.json").write_text('{"exit_code": 2, "message": "same"}')
    found = read_reports(tmp_path, 12)
    assert [(f.exit_code, f.message) for f in found] == [(2, "same"), (1, "other")]  # 12 first, then by pid
    combined = start_failure(tmp_path, 9)
    assert (combined.exit_code, combined.message) == (1, "other\nsame")
    with caplog.at_level(logging.ERROR, "harness_gateway"):
        write_report(tmp_path / "missing", StartFailure(2, "CONFIG: the located problem"))
    assert "CONFIG: the located problem" in caplog.text  # never lost: logged by the worker instead
    assert "could not be written" in caplog.text
