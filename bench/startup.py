"""Start-up of the ``harness`` CLI: whole-process wall time, import-time summary, import hygiene.

Every command runs as a fresh process in the same environment: a temporary working directory
without ``plugins.yaml``, ``XDG_CONFIG_HOME`` pointing into it (so no user config is found),
``HARNESS_CONFIG`` unset, and ``PYTHONPATH`` holding ten throwaway plugin distributions
(``*.dist-info`` with a ``harness.plugins`` entry point each, plus their tiny modules), so
``harness plugins`` lists ten more installed plugins. The reference ``python -c "import httpx"``
runs in that same environment. Commands are interleaved round by round; medians are reported.
"""

from __future__ import annotations

import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["FORBIDDEN", "forbidden_imports", "import_summary", "make_plugins", "measure"]

FORBIDDEN = re.compile(r"^(httpx|httpcore|h11|openai|anthropic|litellm|harness_llm_\w+|harness_middleware)(\.|$)")
"""Modules the help/plugins path must not import (HTTP stack and providers)."""

_PLUGIN = '''"""Throwaway benchmark plugin {i}."""
from __future__ import annotations

import msgspec
from harness_core import hookimpl


class Plugin:
    class Config(msgspec.Struct, forbid_unknown_fields=True):
        routes: list[str] = ["benchplug{i}"]

    def __init__(self, config: Config) -> None:
        self.config = config

    @hookimpl
    def register_adapter(self, register) -> None:
        return None
'''


def make_plugins(site: Path, count: int = 10) -> None:
    """Write ``count`` throwaway plugin distributions into ``site`` (a PYTHONPATH entry)."""
    for i in range(count):
        name = f"harness_benchplug{i}"
        (site / name).mkdir(parents=True, exist_ok=True)
        (site / name / "__init__.py").write_text(_PLUGIN.format(i=i))
        info = site / f"harness_benchplug{i}-0.1.0.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: harness-benchplug{i}\nVersion: 0.1.0\n")
        (info / "entry_points.txt").write_text(f"[harness.plugins]\nbenchplug{i} = {name}:Plugin\n")
        (info / "top_level.txt").write_text(f"{name}\n")
        (info / "RECORD").write_text("")


def _env(tmp: Path) -> dict[str, str]:
    # PYTHONDONTWRITEBYTECODE dropped: the warm-up run writes the .pyc files an installed package has,
    # else every measured run compiles harness_core (an editable install) from source (~40 ms)
    dropped = ("HARNESS_CONFIG", "PYTHONPATH", "COVERAGE_PROCESS_START", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env["PYTHONPATH"] = str(tmp / "site")
    env["XDG_CONFIG_HOME"] = str(tmp / "xdg")
    env["HOME"] = str(tmp / "home")
    env["NO_COLOR"] = "1"
    return env


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _time(argv: Sequence[str], env: dict[str, str], cwd: Path, cpu: list[float] | None = None) -> float:
    """Wall seconds of one run of ``argv``; its CPU seconds (user + system) appended to ``cpu``."""
    c0, t0 = _cpu_children(), time.perf_counter()
    done = subprocess.run(
        argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )  # stdin: `harness run` reads piped stdin
    elapsed = time.perf_counter() - t0
    if cpu is not None:
        cpu.append(_cpu_children() - c0)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return elapsed


INSTANCES = (1, 30)
"""Sizes of the ``harness run (mock, N openai instances)`` rows: start-up must not grow with them."""


def write_instances(folder: Path) -> None:
    """``instances-N.yaml`` in ``folder``: the mock and N harness-llm-openai instances (unused
    routes on a closed port), for each N of :data:`INSTANCES`."""
    for count in INSTANCES:
        lines = ["plugins:", "  mock: {}"]
        lines += [
            f"  openai:i{i}: {{base_url: 'http://127.0.0.1:9/v1', api_key: null, routes: [r{i}]}}" for i in range(count)
        ]
        (folder / f"instances-{count}.yaml").write_text("\n".join(lines) + "\n")


def commands(python: str) -> dict[str, list[str]]:
    """The measured commands, by label (``harness`` is the console script beside ``python``;
    the ``instances-N.yaml`` files are in the working directory, see :func:`write_instances`)."""
    harness = str(Path(python).parent / "harness")
    many = {
        f"harness run (mock, {n} openai instances)": [harness, "-c", f"instances-{n}.yaml", "run", "-r", "mock", "Hi"]
        for n in INSTANCES
    }
    return {
        "python -c pass": [python, "-c", "pass"],
        'python -c "import httpx"': [python, "-c", "import httpx"],
        "harness --help": [harness, "--help"],
        "harness plugins (10 extra installed)": [harness, "plugins"],
        "harness run (mock)": [harness, "run", "-r", "mock", "Hello from the benchmark"],
        **many,
    }


def measure(python: str = sys.executable, rounds: int = 15) -> dict[str, Any]:
    """Median whole-process wall time of each command over ``rounds`` interleaved rounds, and
    each as a ratio to ``python -c "import httpx"`` (medians of per-round ratios)."""
    with tempfile.TemporaryDirectory(prefix="harness-bench-startup-") as name:
        tmp = Path(name)
        for sub in ("site", "xdg", "home", "cwd"):
            (tmp / sub).mkdir()
        make_plugins(tmp / "site")
        env, cwd = _env(tmp), tmp / "cwd"
        write_instances(cwd)
        cmds = commands(python)
        for argv in cmds.values():  # warm the OS file cache and .pyc files
            _time(argv, env, cwd)
        samples: dict[str, list[float]] = {label: [] for label in cmds}
        ratios: dict[str, list[float]] = {label: [] for label in cmds}
        cpu: dict[str, list[float]] = {label: [] for label in cmds}
        cpu_ratios: dict[str, list[float]] = {label: [] for label in cmds}
        reference = 'python -c "import httpx"'
        for r in range(rounds):
            labels = list(cmds)
            labels = labels[r % len(labels) :] + labels[: r % len(labels)]
            this = {label: _time(cmds[label], env, cwd, cpu[label]) for label in labels}
            for label, value in this.items():
                samples[label].append(value)
                ratios[label].append(value / this[reference])
                cpu_ratios[label].append(cpu[label][-1] / cpu[reference][-1])
        imports = {label: forbidden_imports(cmds[label], env, cwd) for label in list(cmds)[2:4]}
        summary = import_summary(python, env, cwd)
    return {
        "median_s": {label: statistics.median(v) for label, v in samples.items()},
        "ratio": {label: statistics.median(v) for label, v in ratios.items()},
        "median_cpu_s": {label: statistics.median(v) for label, v in cpu.items()},
        "cpu_ratio": {label: statistics.median(v) for label, v in cpu_ratios.items()},
        "forbidden": imports,
        "importtime": summary,
    }


def _importtime(argv: Sequence[str], env: dict[str, str], cwd: Path) -> list[tuple[str, int, int]]:
    """(module, self µs, cumulative µs) for every import of ``argv`` run under ``-X importtime``."""
    run_env = dict(env, PYTHONPROFILEIMPORTTIME="1")
    done = subprocess.run(
        argv, env=run_env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False
    )
    rows = []
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if match:
            rows.append((match.group(4), int(match.group(1)), int(match.group(2))))
    return rows


def forbidden_imports(argv: Sequence[str], env: dict[str, str], cwd: Path) -> list[str]:
    """Modules matching :data:`FORBIDDEN` imported by running ``argv`` (empty = clean)."""
    return sorted({name for name, _, _ in _importtime(argv, env, cwd) if FORBIDDEN.match(name)})


def import_summary(python: str, env: dict[str, str], cwd: Path, top: int = 12) -> dict[str, Any]:
    """``python -X importtime`` of ``harness_core``, the CLI app (``--help``), the loader (``plugins``)
    and the runtime (``run``), each without the
    interpreter's own start-up imports (those of ``python -c pass``): total self-time, module
    count, and the top-level packages costing the most (sum of their modules' self-time, ms)."""
    out: dict[str, Any] = {}
    startup = {name for name, _, _ in _importtime([python, "-c", "pass"], env, cwd)}  # site, encodings …
    for module in ("harness_core", "harness_core.cli._app", "harness_core.loader", "harness_core.runtime"):
        label, code = f"import {module}", f"import {module}"
        rows = [row for row in _importtime([python, "-c", code], env, cwd) if row[0] not in startup]
        packages: dict[str, int] = {}
        for name, self_us, _ in rows:
            root = name.split(".")[0]
            packages[root] = packages.get(root, 0) + self_us
        total = sum(self_us for _, self_us, _ in rows)
        out[label] = {
            "total_ms": total / 1000,
            "modules": len(rows),
            "by_package_ms": dict(sorted(((k, v / 1000) for k, v in packages.items()), key=lambda kv: -kv[1])[:top]),
        }
    return out
