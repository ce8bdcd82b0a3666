"""What a configured but unused openai instance costs at start-up: its adapter is built (header
checks included) without importing httpx or aiohttp; the HTTP client comes on first send."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

KEY = "-".join(("sk", "startup", "k" * 40))  # built at run time: no key-shaped literal committed

RUN = (
    "import sys\n"
    "from harness_core.cli import main\n"
    "try:\n    main(sys.argv[1:])\nexcept SystemExit as exc:\n    code = exc.code\n"
    "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('httpx', 'httpcore', 'aiohttp', 'httpx_aiohttp'))\n"
    "print('LOADED', ' '.join(loaded), file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def run(tmp_path: Path, config: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``harness run --no-log *args`` in a fresh interpreter with ``config`` as plugins.yaml; its
    stderr ends with ``LOADED`` and the HTTP modules it imported."""
    (tmp_path / "plugins.yaml").write_text(config, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_CONFIG", "OPENAI_API_KEY")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    env["NO_COLOR"] = "1"
    return subprocess.run(
        [sys.executable, "-c", RUN, "run", "--no-log", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )


def loaded(result: subprocess.CompletedProcess[str]) -> list[str]:
    line = [line for line in result.stderr.splitlines() if line.startswith("LOADED")][-1]
    return line.split()[1:]


def config(headers: str = "") -> str:
    return (
        "plugins:\n"
        "  mock: {}\n"
        "  openai:\n"
        f"    api_key: {KEY}\n"
        "    base_url: http://127.0.0.1:9/v1\n"
        "    routes: [openai]\n"
        f"{headers}"
        "defaults:\n"
        "  route: mock\n"
        "  model: echo\n"
    )


def test_a_run_on_the_mock_does_not_import_httpx_for_a_configured_openai_instance(tmp_path: Path) -> None:
    result = run(tmp_path, config(), "hello there")
    assert result.returncode == 0, result.stderr
    assert "hello there" in result.stdout
    assert loaded(result) == []


@pytest.mark.parametrize(
    ("headers", "problem"),
    [
        ('    headers: {x-team: "caf\\u00e9"}\n', "non-ASCII character U+00E9 at position 4"),
        ('    headers: {x-team: "a\\tb"}\n', "control character '\\t' at position 2"),
    ],
)
def test_a_bad_header_still_fails_the_openai_route_when_the_adapter_is_built(
    tmp_path: Path, headers: str, problem: str
) -> None:
    mock = run(tmp_path, config(headers), "hello")
    assert mock.returncode == 0, mock.stderr  # the mock route is unaffected
    result = run(tmp_path, config(headers), "-r", "openai", "-m", "gpt-4o", "hello")
    assert result.returncode != 0
    assert "CONFIG" in result.stderr or "config" in result.stderr
    assert problem in result.stderr
    assert KEY not in result.stderr + result.stdout
    assert loaded(result) == []  # refused before any client existed: nothing was sent


def test_a_bad_header_name_is_a_config_problem_located_at_its_field(tmp_path: Path) -> None:
    result = run(tmp_path, config('    headers: {"x team": "a"}\n'), "hello")
    assert result.returncode == 2
    assert "plugins.yaml:7, plugin 'openai', field 'headers': a header name holds ' ' at position 2" in result.stderr
    assert "x team" not in result.stderr  # the name itself is never shown
    assert KEY not in result.stderr + result.stdout
    assert loaded(result) == []
