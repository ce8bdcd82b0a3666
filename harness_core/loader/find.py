"""Where the document comes from: the search for ``plugins.yaml``, reading it, the built-in default.

:func:`find_config` (``--config``, ``$HARNESS_CONFIG``, ``./plugins.yaml``, ``./config/plugins.yaml``,
the user config directory), :func:`read_document` (the text of the file found, or the problem
that stops the load), :data:`BUILTIN_DEFAULT` (used when no file is found) and
:func:`builtin_document` (that default already parsed: no YAML parser is imported for it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from harness_core.config import ConfigPath, ConfigProblem

__all__ = ["BUILTIN_DEFAULT", "BUILTIN_SOURCE", "CONFIG_ENV", "builtin_document", "find_config", "read_document"]

CONFIG_ENV: Final = "HARNESS_CONFIG"
"""Environment variable naming the config file (after ``--config``)."""

BUILTIN_DEFAULT: Final = """\
plugins:
  mock: {}
defaults:
  route: mock
  model: echo
"""
"""The configuration used when no ``plugins.yaml`` is found: the mock provider."""

BUILTIN_SOURCE: Final = "<built-in default>"
"""The source named in messages about :data:`BUILTIN_DEFAULT` (no file was read)."""


def find_config(
    explicit: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> Path | None:
    """Locate ``plugins.yaml``; ``None`` means "use :data:`BUILTIN_DEFAULT`".

    Order: ``explicit`` (``--config``), ``$HARNESS_CONFIG``, ``./plugins.yaml``,
    ``./config/plugins.yaml``, ``platformdirs.user_config_dir("harness")/plugins.yaml``. An
    explicit or environment path is returned even when missing (:func:`load_config` reports
    it); the other candidates only when they exist — a directory of that name counts (and
    :func:`load_config` reports it) rather than being skipped silently.
    """
    env = os.environ if environ is None else environ
    if explicit is not None:
        return Path(explicit)
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV])
    base = Path.cwd() if cwd is None else Path(cwd)
    import platformdirs

    for candidate in (
        base / "plugins.yaml",
        base / "config" / "plugins.yaml",
        Path(platformdirs.user_config_dir("harness")) / "plugins.yaml",
    ):
        if candidate.exists():
            return candidate
    return None


def read_document(path: Path | None, source: str) -> str | ConfigProblem:
    """The text of ``path`` (:data:`BUILTIN_DEFAULT` for ``None``), or the problem that stops the
    load (located at ``source``): ``path`` is a directory, or cannot be read or decoded as UTF-8."""
    if path is None:
        return BUILTIN_DEFAULT
    if path.is_dir():
        return ConfigProblem(message="the config path is a directory; expected a YAML file", source=source)
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return ConfigProblem(message=f"cannot read the config file: {type(exc).__name__}: {exc}", source=source)


def builtin_document() -> tuple[dict[str, Any], dict[ConfigPath, int], list[ConfigProblem]]:
    """:data:`BUILTIN_DEFAULT` as :func:`~harness_core.config.parse_yaml` reads it (data, line of
    every path, no problem), built fresh for every call (the loader may change it)."""
    data = {"plugins": {"mock": {}}, "defaults": {"route": "mock", "model": "echo"}}
    lines: dict[ConfigPath, int] = {(): 1, ("plugins",): 1, ("plugins", "mock"): 2, ("defaults",): 3}
    lines.update({("defaults", "route"): 4, ("defaults", "model"): 5})
    return data, lines, []
