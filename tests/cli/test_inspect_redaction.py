"""`harness plugins`, `config check` and `chain` in-process: redaction, defaults checks, start failures."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from harness_core.cli._inspect import check_config, show_chain, show_plugins
from harness_core.secret import MASK

FAKE_PLUGINS = Path(__file__).parents[1] / "loader" / "fakeplugins"
SECRET = "sk-SECRETVALUE-4242"
LITERAL = "sk-literal-secret-31337"

Write = Callable[[str], str]


@pytest.fixture
def write(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Write:
    """Test-only plugins importable, no config around, ``$X`` set to a secret; writes plugins.yaml."""
    monkeypatch.syspath_prepend(str(FAKE_PLUGINS))
    monkeypatch.delenv("HARNESS_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("X", SECRET)
    monkeypatch.chdir(tmp_path)

    def write_config(text: str) -> str:
        path = tmp_path / "plugins.yaml"
        path.write_text(text, encoding="utf-8")
        return str(path)

    return write_config


DUPLICATE_ENV_ROUTE = (
    "plugins:\n"
    "  mock: {}\n"
    "  mock:x: {routes: ['${{ env.X }}']}\n"
    "  mock:y: {routes: ['${{ env.X }}']}\n"
    f"  failinit: {{name: a, token: {LITERAL}}}\n"
    "defaults:\n"
    "  route: nope\n"  # line 7
)


def test_config_check_redacts_start_failures_and_their_logs(
    write: Write, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    path = write(DUPLICATE_ENV_ROUTE)
    with caplog.at_level(logging.ERROR):
        assert check_config(path) == 2
    out = capsys.readouterr().out
    assert out.splitlines() == [
        f"{path}: 3 problems",
        f"  - {path}:7, field 'defaults.route': no enabled plugin serves the default route 'nope' "
        f"(routes: 'mock', '{MASK}')",
        f"  - plugin 'failinit' failed to start: RuntimeError: cannot connect with token {MASK} [adapter, stage init]",
        f"  - plugin 'mock:y' failed to start: DUPLICATE_ROUTE: route '{MASK}' of plugin 'mock:y' is already "
        f"registered by plugin 'mock:x' (declared again at {path}:4, plugin 'mock:y', field 'routes[0]'; "
        f"first at {path}:3, plugin 'mock:x', field 'routes[0]') [adapter, stage register]",
    ]
    (record,) = [r for r in caplog.records if "failed to start" in r.getMessage()]
    assert record.exc_text is not None
    assert f"route '{MASK}'" in record.exc_text  # the logged traceback is redacted too
    assert SECRET not in caplog.text + out
    assert LITERAL not in caplog.text + out


def test_config_check_reports_defaults_that_cannot_work(write: Write, capsys: pytest.CaptureFixture[str]) -> None:
    path = write("plugins:\n  mock: {}\ndefaults:\n  route: mock\n  model: nope\n")
    assert check_config(path) == 2
    assert capsys.readouterr().out.splitlines()[1] == (
        f"  - {path}:5, field 'defaults.model': the default model 'nope' of route 'mock': "
        "NOT_FOUND: the mock has no model 'nope'; it serves 'echo'"
    )
    path = write("plugins: {}\ndefaults: {route: '${{ env.X }}'}\n")
    assert check_config(path) == 2
    assert capsys.readouterr().out.splitlines()[1] == (
        f"  - {path}:2, field 'defaults.route': no enabled plugin serves the default route '{MASK}' (routes: none)"
    )
    # a route without a default model is fine, and so is an env-substituted default (shown masked)
    path = write("plugins:\n  mock: {routes: ['${{ env.X }}']}\ndefaults: {route: '${{ env.X }}'}\n")
    assert check_config(path) == 0
    assert capsys.readouterr().out == f"{path}: ok; plugins: mock; defaults: route={MASK}, model=-\n"
    path = write("plugins:\n  mock: {}\ndefaults: {route: mock, model: echo}\n")
    assert check_config(path) == 0
    capsys.readouterr()
    path = write("plugins:\n  mock: {}\ndefaults:\n  provider: nope\n")  # the deprecated old name: its own line
    with pytest.warns(FutureWarning, match=r"line 4: `defaults.provider` is deprecated"):
        assert check_config(path) == 2
    assert capsys.readouterr().out.splitlines()[1] == (
        f"  - {path}:4, field 'defaults.provider': no enabled plugin serves the default route 'nope' (routes: 'mock')"
    )


def test_config_check_start_errors_are_reported_once(write: Write, capsys: pytest.CaptureFixture[str]) -> None:
    path = write("plugins:\n  notgen: {}\n  mock: {}\n")  # refused by the runtime, no plugin failure
    assert check_config(path) == 2
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert "CONFIG: plugin 'notgen': llm_stream must be an async generator function" in lines[1]
    path = write("plugins:\n  startfail: {}\n  mock: {}\n")  # the failure says it all: no second line
    assert check_config(path) == 2
    assert capsys.readouterr().out.splitlines()[1:] == [
        "  - plugin 'startfail' failed to start: RuntimeError: cannot start [middleware, stage register]"
    ]


def test_second_mock_instance_starts(write: Write, capsys: pytest.CaptureFixture[str]) -> None:
    path = write("plugins:\n  mock: {}\n  mock:two: {routes: [two]}\ndefaults: {route: two, model: echo}\n")
    assert check_config(path) == 0
    assert capsys.readouterr().out == f"{path}: ok; plugins: mock, mock:two; defaults: route=two, model=echo\n"


def test_plugins_prints_each_problem_once_and_redacts(write: Write, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(
        "plugins:\n"
        "  mock: {delay: soon}\n"
        f"  strict: {{name: a, token: {LITERAL}, routes: [{LITERAL}]}}\n"
        "  broken: {}\n"
        "  mock:env: {routes: ['${{ env.X }}']}\n"
        "defaults: {route: '${{ env.X }}'}\n"
    )
    assert show_plugins(path, as_json=False) == 0
    out = capsys.readouterr().out
    notes = [line for line in out.splitlines() if line.startswith("!")]
    assert notes[0].startswith("! broken: plugin 'broken' cannot be imported")
    assert notes[1:] == [f"! {path}:2, plugin 'mock', field 'delay': expected a number, got a string"]
    table = {line.split()[0]: line for line in out.splitlines()[1:] if not line.startswith("!")}
    assert table["strict"].endswith(MASK)
    assert table["mock:env"].endswith(MASK)
    assert LITERAL not in out
    assert SECRET not in out
    assert show_plugins(path, as_json=True) == 0
    text = capsys.readouterr().out
    document = json.loads(text)
    assert document["defaults"] == {"route": MASK, "model": None}
    entries = {entry["key"]: entry for entry in document["plugins"]}
    assert entries["strict"]["routes"] == [MASK]
    assert entries["mock:env"]["routes"] == [MASK]
    assert len(document["problems"]) == 1
    assert LITERAL not in text
    assert SECRET not in text


def test_chain_redacts_output_and_logs(
    write: Write, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    path = write(DUPLICATE_ENV_ROUTE.replace("route: nope", "route: '${{ env.X }}'"))
    with caplog.at_level(logging.ERROR):
        assert show_chain(None, path, as_json=False) == 0
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert [out[0], out[2]] == [f"route: {MASK} (outermost first)", "2. mock:x (adapter)"]
    assert out[1].startswith("1. prompt-log (normal): on by default")  # the prompt log a run writes
    assert show_chain(None, path, as_json=True) == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["route"], document["chain"][1]) == (MASK, {"key": "mock:x", "tier": "adapter"})
    assert show_chain("elsewhere", path, as_json=False) == 2
    err = capsys.readouterr().err
    assert "NO_ADAPTER" in err
    assert any("failed to start" in r.getMessage() for r in caplog.records)
    for text in (captured.out, captured.err, err, caplog.text):
        assert SECRET not in text
        assert LITERAL not in text
