"""Developer and CI tasks. ``nox -s lint types tests`` is what CI runs (see README.md).

Sessions:
    lint      ruff check + ruff format --check over the whole tree
    types     mypy --strict over harness_core and every plugin's src, then over the tests
    build     every distribution (core and plugins) as a wheel in dist/
    wheels    the wheels installed (not editable) in a fresh venv: harness run and the
              conformance suites run from there
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

nox.options.sessions = ["lint", "types", "tests", "build", "wheels"]
nox.options.reuse_existing_virtualenvs = True

ROOT = Path(__file__).parent
PLUGINS = sorted(p.parent for p in ROOT.glob("plugins/*/pyproject.toml"))
TEST_FOLDERS = sorted(
    p for p in [*ROOT.glob("tests/*"), *ROOT.glob("plugins/*/tests")] if p.is_dir() and any(p.glob("*.py"))
)
LIGHTER = ["--allow-untyped-defs", "--allow-incomplete-defs", "--allow-untyped-decorators", "--no-warn-unused-ignores"]
"""mypy over the tests: strict, except that test functions, fixtures and decorators need no annotations."""
DIST = ROOT / "dist"
CONFORMANCE_TESTS = [
    "tests/kit/test_conformance.py",
    "plugins/harness-llm-openai/tests/test_openai_conformance.py",
    "plugins/harness-llm-openai/tests/test_responses_conformance.py",
    "plugins/harness-llm-deepseek/tests/test_deepseek_conformance.py",
    "plugins/harness-llm-anthropic/tests/test_anthropic_conformance.py",
]
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
    # The tests: strict too, one folder at a time (test folders are not packages, and several hold a
    # conftest.py), and without requiring annotations on every test function and fixture.
    for folder in TEST_FOLDERS:
        session.run("mypy", *LIGHTER, str(folder.relative_to(ROOT)))


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
