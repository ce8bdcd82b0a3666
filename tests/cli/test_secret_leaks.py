"""The end-to-end promise: a key never shows in any output, file or stored database.

``harness run`` (a subprocess) talks to a hostile provider on 127.0.0.1 that echoes the
``Authorization`` header back — in a 400 JSON body, a 500 plain-text body, an in-band stream
error and in streamed text split across deltas — with the trace plugin (content included), the
cache and the usage ledger enabled, in plain, ``--json`` and ``-v`` modes. Keys that cannot go
into a header (CR, LF, non-ASCII) are refused at config time, without showing them either.

Every key has a random alphanumeric core: escaping (repr, JSON, percent-encoding) leaves it
intact, so its absence proves that no escaped form leaked; base64 forms are checked apart.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from harness_core.secret import representations
from harness_core.testing.server import RecordedRequest, Reply, ScriptedServer


def _key(shape: str) -> tuple[str, str]:
    core = secrets.token_hex(12)
    return shape.format(core=core), core


def _sse(*payloads: object) -> list[bytes | float]:
    return [f"data: {json.dumps(p)}\n\n".encode() for p in payloads]


def _chunk(content: str) -> dict[str, object]:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": content}}],
    }


def hostile(request: RecordedRequest) -> Reply:
    """Answers by the scenario named in the prompt, always echoing the Authorization header."""
    echoed = request.headers.get("authorization", "<none>")
    prompt = request.body.decode()
    if "scenario-400" in prompt:
        return Reply.json(400, {"error": {"message": f"invalid header: {echoed!r} / {echoed}", "type": "invalid"}})
    if "scenario-500" in prompt:
        body = f"proxy failed for Authorization={echoed}; {echoed.encode()!r}".encode()
        return Reply(status=500, headers={"content-type": "text/plain"}, reads=[body], chunked=False)
    if "scenario-inband" in prompt:
        return Reply(
            reads=_sse(_chunk("partial "), {"error": {"message": f"upstream said {echoed}", "type": "server_error"}})
        )
    cut = len(echoed) // 2  # the key split across two deltas
    return Reply(
        reads=[
            *_sse(_chunk("you sent " + echoed[:cut]), _chunk(echoed[cut:] + " ok")),
            *_sse(
                {
                    "id": "c",
                    "object": "chat.completion.chunk",
                    "model": "m",
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                }
            ),
            b"data: [DONE]\n\n",
        ]
    )


def _config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "plugins.yaml"
    path.write_text(
        "plugins:\n"
        f"  trace: {{path: {tmp_path / 'trace.jsonl'}, include_content: true}}\n"
        f"  usage: {{path: {tmp_path / 'usage.sqlite'}}}\n"
        f"  cache: {{path: {tmp_path / 'cache.sqlite'}}}\n"
        "  openai:\n"
        f"    base_url: {url}/v1\n"
        "    api_key: ${{ env.HOSTILE_KEY }}\n"
        "defaults: {route: openai, model: m}\n",
        encoding="utf-8",
    )
    return path


MODES = [((), ()), ((), ("--json",)), (("-v",), ())]
"""Plain, ``--json`` and verbose (tracebacks on stderr): (group options, command options)."""


def _run(
    tmp_path: Path, config: Path, key: str, command: str, *args: str, verbose: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
        "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
        "NO_COLOR": "1",
        "HOSTILE_KEY": key,
    }
    for name in ("COVERAGE_PROCESS_START", "COV_CORE_SOURCE", "COV_CORE_CONFIG", "COV_CORE_DATAFILE", "PYTHONPATH"):
        if name in os.environ:
            env[name] = os.environ[name]
    return subprocess.run(
        [sys.executable, "-m", "harness_core.cli", *verbose, command, *args, "-c", str(config)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="backslashreplace",
        env=env,
        cwd=tmp_path,
        timeout=120,
    )


def _forbidden(key: str, core: str) -> set[str]:
    raw = key.encode("utf-8")
    forms = {core, key}
    forms |= {f for f in representations(key) if len(f) >= 8}
    for prefix in (b"", b"u:", b"user:"):
        forms.add(base64.b64encode(prefix + raw).decode()[len(prefix) * 4 // 3 + 4 : -4])
    return {f for f in forms if len(f) >= 8}


def _stored(tmp_path: Path) -> str:
    """Every file harness wrote (trace, databases: their rows as text and their raw bytes)."""
    texts: list[str] = []
    for path in sorted(tmp_path.rglob("*")):
        if not path.is_file() or path.name == "plugins.yaml":
            continue
        data = path.read_bytes()
        texts.append(data.decode("latin-1"))
        if path.suffix == ".sqlite":
            with sqlite3.connect(path) as db:
                for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
                    texts.extend(repr(row) for row in db.execute(f'SELECT * FROM "{table}"'))
    return "\n".join(texts)


HEADER_SAFE = ['sk-proj-"q{core}\\bs', "sk-ant-{core}\\\\x'\"", "gsk_{core}%2F+/="]


@pytest.mark.parametrize("shape", HEADER_SAFE)
def test_a_hostile_echo_of_the_key_shows_nowhere(tmp_path: Path, shape: str) -> None:
    key, core = _key(shape)
    with ScriptedServer(routes={("POST", "/v1/chat/completions"): hostile}) as server:
        config = _config(tmp_path, server.url)
        outputs: list[str] = []
        for scenario in ("scenario-400", "scenario-500", "scenario-inband", "scenario-echo"):
            for verbose, mode in MODES:
                result = _run(tmp_path, config, key, "run", *mode, f"{scenario} {mode}", verbose=verbose)
                assert "No such option" not in result.stderr
                if scenario == "scenario-echo":
                    assert result.returncode == 0, result.stderr
                    assert "you sent Bearer **********" in result.stdout or "**********" in result.stdout
                else:
                    assert result.returncode != 0
                outputs += [result.stdout, result.stderr]
        check = _run(tmp_path, config, key, "config", "check")
        outputs += [check.stdout, check.stderr]
        echoed = [r.headers.get("authorization") for r in server.requests]
    assert echoed  # the key went out, and came back
    assert all(value == f"Bearer {key}" for value in echoed)
    shown = "\n".join(outputs)
    assert "**********" in shown  # masked, not merely absent
    everything = shown + _stored(tmp_path)
    assert (tmp_path / "trace.jsonl").exists()
    leaked = {form for form in _forbidden(key, core) if form in everything}
    assert not leaked


UNSENDABLE = [
    "sk-proj-{core}\r",
    "sk-proj-{core}\n",
    " sk-{core}",
    "sk-{core}\x1b[31m",
    "sk-{core}é",
    'sk-"{core}\\\r\n',
]


@pytest.mark.parametrize("shape", UNSENDABLE)
def test_a_key_that_cannot_be_sent_is_a_located_config_error(tmp_path: Path, shape: str) -> None:
    key, core = _key(shape)
    with ScriptedServer(routes={("POST", "/v1/chat/completions"): hostile}) as server:
        config = _config(tmp_path, server.url)
        runs = [_run(tmp_path, config, key, "run", *mode, "hi", verbose=verbose) for verbose, mode in MODES]
        check = _run(tmp_path, config, key, "config", "check")
        assert not server.requests  # refused before sending
    assert check.returncode == 2
    assert f"{config}:7, field 'api_key'" in check.stdout
    assert "[adapter, stage config]" in check.stdout
    for result in runs:
        assert result.returncode != 0
        assert "route 'openai' is unavailable: plugin 'openai' cannot be used: the secret" in result.stderr
        assert "CONFIG" in result.stdout + result.stderr  # not a retryable NETWORK error
        assert "NETWORK" not in result.stderr
    everything = "\n".join([check.stdout, check.stderr, *(r.stdout + r.stderr for r in runs)]) + _stored(tmp_path)
    assert not {form for form in _forbidden(key, core) if form in everything}


def _env_config(tmp_path: Path, url: str) -> Path:
    """Every sink on, the key of $HOSTILE_KEY used as a model name and as a mock route name."""
    path = tmp_path / "plugins.yaml"
    path.write_text(
        "plugins:\n"
        f"  prompt-log: {{path: {tmp_path / 'logs.sqlite'}}}\n"
        f"  trace: {{path: {tmp_path / 'trace.jsonl'}, include_content: true}}\n"
        f"  usage: {{path: {tmp_path / 'usage.sqlite'}}}\n"
        "  mock:\n"
        '    routes: ["${{ env.HOSTILE_KEY }}"]\n'
        "  openai:\n"
        f"    base_url: {url}/v1\n"
        "    api_key: not-the-secret\n"
        'defaults: {route: openai, model: "${{ env.HOSTILE_KEY }}"}\n',
        encoding="utf-8",
    )
    return path


def test_a_value_from_the_environment_used_as_a_model_or_route_is_stored_and_shown_masked(tmp_path: Path) -> None:
    key, core = _key("model-{core}")  # no api-key pattern matches it: only the masker does
    with ScriptedServer(routes={("POST", "/v1/chat/completions"): hostile}) as server:
        config = _env_config(tmp_path, server.url)
        runs = [
            _run(tmp_path, config, key, "run", f"scenario-echo {key}"),  # default route: the model is the key
            _run(tmp_path, config, key, "run", "-r", key, "-m", "echo", "hi"),  # the mock route named by the key
            _run(tmp_path, config, key, "run", "--json", "scenario-500"),  # a failure, logged with its error
        ]
        sent = [json.loads(r.body)["model"] for r in server.requests]
    assert sent == [key, key]  # the provider gets the model asked for
    assert [r.returncode for r in runs[:2]] == [0, 0], [r.stderr for r in runs]
    assert runs[2].returncode != 0
    shown = [
        _run(tmp_path, config, key, *command)
        for command in (("usage",), ("usage", "--json"), ("usage", "--by", "route"), ("logs",), ("logs", "--json"))
    ]
    assert all(result.returncode == 0 for result in shown), [r.stderr for r in shown]
    rows = json.loads(shown[4].stdout)
    assert [(row["requested_model"], row["route"]) for row in rows] == [
        ("**********", "openai"),
        ("echo", "**********"),
        ("**********", "openai"),
    ]
    assert "**********" in shown[0].stdout
    trace = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert {(line["route"], line["model"]) for line in trace} == {
        ("openai", "**********"),
        ("**********", "echo"),
    }
    everything = "\n".join(r.stdout + r.stderr for r in [*runs, *shown]) + _stored(tmp_path)
    assert not {form for form in _forbidden(key, core) if form in everything}
