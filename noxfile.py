"""Developer and CI tasks. ``nox -s lint types tests`` is what CI runs (see README.md).

Sessions:
    lint      ruff check + ruff format --check over the whole tree
    types     mypy --strict over harness_core
    tests     the whole test suite under coverage (subprocess CLI runs included), then the
              per-file gate: 100 % line+branch for harness_core and every plugin's src/
    bench     benchmarks (never part of the test run)
    e2e_local a real local model (llama.cpp server + SmolLM2) through harness-llm-openai
"""

from __future__ import annotations

import sys
from pathlib import Path

import nox

sys.path.insert(0, str(Path(__file__).parent))  # the bench package beside this file

nox.options.sessions = ["lint", "types", "tests"]
nox.options.reuse_existing_virtualenvs = True

ROOT = Path(__file__).parent
PLUGINS = sorted(p.parent for p in ROOT.glob("plugins/*/pyproject.toml"))
DEV = [
    "pytest>=8",
    "pytest-timeout>=2.3",
    "hypothesis>=6.100",
    "trio>=0.25",
    "coverage[toml]>=7.10",
    "mypy>=1.11",
    "ruff>=0.6",
    "types-PyYAML",
]


def install_project(session: nox.Session) -> None:
    """Core and every plugin, editable (entry points registered), with their test extras."""
    editables = ["-e", ".[test]"]
    for plugin in PLUGINS:
        editables += ["-e", f"{plugin.relative_to(ROOT)}[test]"]
    session.install(*DEV, *editables)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def types(session: nox.Session) -> None:
    install_project(session)
    session.run("mypy", "harness_core", *(str(p.relative_to(ROOT) / "src") for p in PLUGINS))


@nox.session
def tests(session: nox.Session) -> None:
    install_project(session)
    session.run("coverage", "erase")
    session.run("coverage", "run", "-m", "pytest", *session.posargs)
    session.run("coverage", "combine", "--quiet")
    session.run("coverage", "json", "-q", "-o", "coverage.json")
    session.run("python", "tools/coverage_gate.py", "coverage.json")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks of issue 7 (never part of the tests): ``nox -s bench [-- --peers --quick …]``."""
    from bench.nox_sessions import bench as run_bench

    run_bench(session, install_project)


@nox.session
def e2e_local(session: nox.Session) -> None:
    """A real local model (llama.cpp server + SmolLM2-135M) through harness-llm-openai."""
    from bench.nox_sessions import e2e_local as run_e2e

    run_e2e(session, install_project)
