"""One mypy run over the sources and every test folder, with one incremental cache (``nox -s types``).

Usage: ``python tools/typecheck.py [MYPY OPTION …]`` from the repository root; the options go to
mypy before the targets (e.g. ``--no-incremental``, ``--cache-dir DIR``). Exit status as mypy's: 0
clean, 1 type errors, 2 a blocking error (a syntax error, a bad option).

What is checked, and how strictly:

- the sources, ``harness_core``, every ``plugins/*/src`` and ``tools/``: pyproject's ``[tool.mypy]``
  (``strict``);
- the tests, every ``tests/*`` and ``plugins/*/tests`` folder and the root ``conftest.py``: strict
  too, except for :data:`LIGHTER` (test functions, fixtures and decorators need no annotations,
  and an unneeded ``# type: ignore`` is not an error), set per module.

Test folders are not packages: pytest (``prepend`` import mode) puts each on ``sys.path`` and their
files import each other as top-level modules (``from gw_helpers import …``), which is how mypy
names them too. The ``conftest.py`` files would all be the module ``conftest``, which mypy refuses
twice in one run ("Duplicate module named 'conftest'"); nobody imports them, so each one outside
the root is checked under a name of its own, ``conftest__<folder>`` (``tests/cli`` →
``conftest__tests_cli``), while messages still name its real path. Before this, ``nox -s types``
ran mypy once per test folder: dozens of runs, each re-checking the sources under other options
and so invalidating the cache of the others.

The build goes through mypy's own entry points (``mypy.main.process_options`` for the command line
and pyproject's configuration, ``mypy.build.build`` for the run), as ``mypy.main.main`` does.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

from mypy import build
from mypy.errors import CompileError
from mypy.fscache import FileSystemCache
from mypy.main import process_options
from mypy.modulefinder import BuildSource

ROOT = Path(__file__).resolve().parent.parent

LIGHTER: dict[str, object] = {
    "disallow_untyped_defs": False,
    "disallow_incomplete_defs": False,
    "disallow_untyped_decorators": False,
    "warn_unused_ignores": False,
}
"""The per-module options of test modules (the command line's ``--allow-untyped-defs
--allow-incomplete-defs --allow-untyped-decorators --no-warn-unused-ignores``)."""


def checked_sources(root: Path = ROOT) -> list[Path]:
    """``harness_core``, every ``plugins/*/src`` folder and ``tools/`` (when there): checked with
    pyproject's strict options."""
    plugins = sorted(p.parent / "src" for p in root.glob("plugins/*/pyproject.toml"))
    tools = [root / "tools"] if (root / "tools").is_dir() else []
    return [root / "harness_core", *plugins, *tools]


def checked_tests(root: Path = ROOT) -> list[Path]:
    """Every test folder holding Python files (``tests/*``, ``plugins/*/tests``) and the root ``conftest.py``."""
    folders = [*root.glob("tests/*"), *root.glob("plugins/*/tests")]
    found = sorted(p for p in folders if p.is_dir() and any(p.glob("*.py")))
    conftest = root / "conftest.py"
    return [*found, conftest] if conftest.is_file() else found


def conftest_name(path: Path, root: Path = ROOT) -> str:
    """The module name a ``conftest.py`` outside the root is checked under: ``conftest__`` and its
    folder relative to ``root``, every character that cannot be in a name an underscore
    (``plugins/harness-llm-gemini/tests/conftest.py`` → ``conftest__plugins_harness_llm_gemini_tests``)."""
    folder = path.resolve().parent.relative_to(root.resolve()).as_posix()
    return "conftest__" + re.sub(r"\W", "_", folder)


def lighten(sources: Sequence[BuildSource], tests: Sequence[Path], root: Path = ROOT) -> set[str]:
    """Rename each ``conftest`` below ``root`` (see :func:`conftest_name`) among ``sources``, in place,
    and return the module names of the sources found under ``tests`` (folders or files)."""
    inside = [t.resolve() for t in tests]
    names: set[str] = set()
    for source in sources:
        if source.path is None:  # a program given with -c
            continue
        path = Path(source.path).resolve()
        if path.name == "conftest.py" and path.parent != root.resolve():
            source.module = conftest_name(path, root)
        if any(path == t or t in path.parents for t in inside):
            names.add(source.module)
    return names


def main(argv: Sequence[str], root: Path = ROOT) -> int:
    """Run mypy once over :func:`checked_sources` and :func:`checked_tests` of ``root`` with the mypy
    options ``argv``; print mypy's messages and a summary; return mypy's exit status."""
    tests = checked_tests(root)
    targets = [str(p.relative_to(root)) for p in [*checked_sources(root), *tests]]
    fscache = FileSystemCache()
    sources, options = process_options([*argv, *targets], fscache=fscache)
    for module in lighten(sources, tests, root):
        options.per_module_options.setdefault(module, {}).update(LIGHTER)
    options.build_per_module_cache()  # the per-module options above take effect

    messages: list[str] = []

    def flush(_path: str | None, new: list[str], serious: bool) -> None:
        messages.extend(new)
        for line in new:
            print(line, file=sys.stderr if serious else sys.stdout)

    try:
        result = build.build(sources, options, flush_errors=flush, fscache=fscache)
    except CompileError:  # a blocker (syntax error, duplicate module): its messages went through flush
        print(f"mypy: blocking error; {len(sources)} source files not checked", file=sys.stderr)
        return 2
    result.manager.metastore.close()
    errors = [m for m in messages if ": error:" in m]
    if errors:
        files = {m.split(":", 1)[0] for m in errors}
        print(f"Found {len(errors)} errors in {len(files)} files (checked {len(sources)} source files)")
        return 1
    print(f"Success: no issues found in {len(sources)} source files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
