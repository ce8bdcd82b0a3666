"""Configuration building blocks, one concept per module:

- :mod:`~harness_core.config.problems`: :class:`ConfigProblem`, :class:`ConfigError` and where a
  problem is (:data:`ConfigPath`, :func:`format_path`, :func:`line_for`);
- :mod:`~harness_core.config.marked_yaml`: :func:`parse_yaml` (safe loader, every value's line,
  bounded aliases);
- :mod:`~harness_core.config.env`: :class:`EnvFallback`, :func:`substitute_env` and its
  :class:`EnvProblem`.

Secret masking (:class:`Redactor`, :class:`RedactFilter`, :func:`redacted_logging`, :data:`MASK`)
lives in :mod:`harness_core.secret` and is re-exported here. The loader
(:mod:`harness_core.loader`) puts these pieces together.
"""

from __future__ import annotations

from harness_core.config.env import EnvFallback, EnvProblem, substitute_env
from harness_core.config.marked_yaml import MAX_ALIAS_NODES, parse_yaml
from harness_core.config.problems import ConfigError, ConfigPath, ConfigProblem, format_path, line_for
from harness_core.secret import MASK, RedactFilter, Redactor, redacted_logging

__all__ = [
    "MASK",
    "MAX_ALIAS_NODES",
    "ConfigError",
    "ConfigPath",
    "ConfigProblem",
    "EnvFallback",
    "EnvProblem",
    "RedactFilter",
    "Redactor",
    "format_path",
    "line_for",
    "parse_yaml",
    "redacted_logging",
    "substitute_env",
]
