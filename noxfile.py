"""Developer and CI tasks. ``nox -s lint types tests`` is what CI runs (see README.md).

Sessions:
    lint      ruff check + ruff format --check over the whole tree
    types     one mypy run (tools/typecheck.py, cache in .mypy_cache): --strict over harness_core
              and every plugin's src, the tests with the lighter flags
    build     every distribution (core and plugins) as a wheel in dist/
    wheels    the wheels installed (not editable) in a fresh venv: harness run and the
              conformance suites run from there
    tests     the whole test suite under coverage (subprocess CLI runs included), in parallel
              (pytest-xdist, one worker per core; `nox -s tests -- -n 0` runs it in one process),
              then the per-file gate: 100 % line+branch for harness_core and every plugin's src/

A session's virtualenv is reused and only reinstalled when what it installs changed (the DEV list
or any pyproject.toml): see install_project.
    bench     benchmarks (never part of the test run)
    e2e_local a real local model (llama.cpp server + SmolLM2) through harness-llm-openai
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import nox

sys.path.insert(0, str(Path(__file__).parent))  # the bench package beside this file

nox.options.sessions = ["lint", "types", "tests", "build", "wheels"]
nox.options.reuse_existing_virtualenvs = True

ROOT = Path(__file__).parent
PLUGINS = sorted(p.parent for p in ROOT.glob("plugins/*/pyproject.toml"))
DIST = ROOT / "dist"
CONFORMANCE_TESTS = [
    "tests/kit/test_conformance.py",
    "plugins/harness-llm-openai/tests/test_openai_conformance.py",
    "plugins/harness-llm-openai/tests/test_responses_conformance.py",
    "plugins/harness-llm-deepseek/tests/test_deepseek_conformance.py",
    "plugins/harness-llm-anthropic/tests/test_anthropic_conformance.py",
    "plugins/harness-llm-gemini/tests/test_gemini_conformance.py",
]
DEV = [
    "pytest>=8",
    "pytest-timeout>=2.3",
    "pytest-xdist>=3.6",
    "hypothesis>=6.100",
    "trio>=0.25",
    "coverage[toml]>=7.10",
    "mypy>=1.11",
    "ruff>=0.6",
    "types-PyYAML",
]


def install_project(session: nox.Session) -> None:
    """Core and every plugin, editable (entry points registered), with their test extras and DEV.

    Skipped when the session's reused virtualenv already holds exactly this: the SHA-256 of the
    requirements and of every pyproject.toml is kept in ``<venv>/harness-install.sha256`` after a
    successful install (pip takes over a minute to find nothing to do for eleven editable projects;
    an editable install needs no reinstall for a change of code, only of a pyproject.toml). A new
    or changed pyproject.toml, a changed DEV list or a new venv (``nox -N``) installs again; under
    ``nox --no-install``/``-R`` nox itself skips the install, and no stamp is written."""
    editables = ["-e", ".[test]"]
    for plugin in PLUGINS:
        editables += ["-e", f"{plugin.relative_to(ROOT)}[test]"]
    requirements = [*DEV, *editables]
    digest = hashlib.sha256("\0".join(requirements).encode())
    for project in [ROOT, *PLUGINS]:
        digest.update(b"\0" + (project / "pyproject.toml").read_bytes())
    location = getattr(session.virtualenv, "location", None)
    stamp = Path(location) / "harness-install.sha256" if location else None
    if stamp is not None and stamp.is_file() and stamp.read_text() == digest.hexdigest():
        session.log(f"install skipped: {stamp} matches the requirements and every pyproject.toml")
        return
    session.install(*requirements)
    if stamp is not None and not {"--no-install", "-R"} & set(sys.argv):
        stamp.write_text(digest.hexdigest())


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def types(session: nox.Session) -> None:
    """One mypy run over the sources (strict) and every test folder (strict but for annotations on
    tests and fixtures), with its cache in ``.mypy_cache``: ``tools/typecheck.py``; ``nox -s types
    -- OPTION …`` passes mypy options (e.g. ``--no-incremental``)."""
    install_project(session)
    session.run("python", "tools/typecheck.py", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The whole suite under coverage, one pytest-xdist worker per core, then the per-file gate.

    ``--dist loadfile``: the tests of one file run in one worker, in order, so a module-scoped
    fixture runs once (the browser tests' screenshots folder is emptied once, not while the other
    worker writes into it) and one file's PostgreSQL clusters and gateway processes never overlap.
    (``--dist loadgroup`` with ``xdist_group`` marks would be finer, but on pytest 9.2 it silently
    groups nothing: pytest-xdist issue 1386.) Each worker's coverage data is saved by coverage's
    own subprocess patch (pyproject ``[tool.coverage.run] patch``) and combined with the rest.
    ``nox -s tests -- ARGS`` adds pytest arguments: a folder, ``-x``, ``-n 0`` (one process)."""
    install_project(session)
    session.run("coverage", "erase")
    session.run("coverage", "run", "-m", "pytest", "-n", "auto", "--dist", "loadfile", *session.posargs)
    session.run("coverage", "combine", "--quiet")
    session.run("coverage", "json", "-q", "-o", "coverage.json")
    session.run("python", "tools/coverage_gate.py", "coverage.json")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks of issues 7 and 17 (never part of the tests): ``nox -s bench [-- --peers --quick …]``."""
    from bench.nox_sessions import bench as run_bench

    run_bench(session, install_project)


@nox.session
def e2e_local(session: nox.Session) -> None:
    """A real local model (llama.cpp server + SmolLM2-135M) through harness-llm-openai."""
    from bench.nox_sessions import e2e_local as run_e2e

    run_e2e(session, install_project)


@nox.session
def build(session: nox.Session) -> None:
    """Every distribution as a wheel in ``dist/`` (emptied first): ``nox -s build``."""
    import shutil

    session.install("pip>=24")
    shutil.rmtree(DIST, ignore_errors=True)
    for project in [ROOT, *PLUGINS]:
        session.run("pip", "wheel", "--no-deps", "--wheel-dir", str(DIST), str(project))


@nox.session
def wheels(session: nox.Session) -> None:
    """Install the wheels of ``nox -s build`` (not editable) into a fresh virtual environment and
    run from there, outside the repository: ``harness run`` on the built-in mock, and the
    conformance suites (the test files are read from the checkout, the code from site-packages)."""
    import shutil

    built = sorted(DIST.glob("*.whl"))
    if not built:
        session.error("no wheels in dist/: run `nox -s build` first")
    work = Path(session.create_tmp()).resolve()
    venv = work / "fresh"
    shutil.rmtree(venv, ignore_errors=True)
    session.run(sys.executable, "-m", "venv", str(venv), external=True)
    python = str(venv / "bin" / "python")
    with_tests = [f"{wheel}[test]" for wheel in built]
    # --find-links: a plugin's requirement on another of these distributions (deepseek needs
    # harness-llm-openai) resolves to the wheel built here, not to the package index.
    pip = [python, "-m", "pip", "install", "--quiet", "--find-links", str(DIST)]
    session.run(*pip, *with_tests, "pytest-timeout>=2.3", external=True)
    outside = work / "elsewhere"
    outside.mkdir(exist_ok=True)
    with session.chdir(outside):
        session.run(
            python,
            "-c",
            "import harness_core, harness_llm_openai, sys; "
            "assert 'site-packages' in harness_core.__file__, harness_core.__file__; "
            "assert 'site-packages' in harness_llm_openai.__file__, harness_llm_openai.__file__; "
            "print('harness-core', harness_core.__version__, 'from', harness_core.__file__)",
            external=True,
        )
        env = {"HARNESS_CONFIG": "", "XDG_CONFIG_HOME": str(work / "xdg")}
        output = session.run(
            str(venv / "bin" / "harness"), "run", "Hello, harness", external=True, env=env, silent=True
        )
        if not output or "Hello, harness" not in output:
            session.error(f"harness run on the mock did not echo the prompt: {output!r}")
        session.run(
            python,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:randomly",
            f"--basetemp={work / 'pytest'}",
            *(str(ROOT / test) for test in CONFORMANCE_TESTS),
            external=True,
        )
