"""Configuration building blocks, one concept per module:

- :mod:`~harness_core.config.problems`: :class:`ConfigProblem`, :class:`ConfigError` and where a
  problem is (:data:`ConfigPath`, :func:`format_path`, :func:`line_for`), and the ``field '…': ``
  messages of a config's own checks (:func:`field_message`, :func:`named_field`);
- :mod:`~harness_core.config.marked_yaml`: :func:`parse_yaml` (safe loader, every value's line,
  bounded aliases);
- :mod:`~harness_core.config.env`: :class:`EnvFallback`, :func:`substitute_env` and its
  :class:`EnvProblem`.

Secret masking (:class:`~harness_core.secret.Redactor`, :class:`~harness_core.secret.RedactFilter`,
:func:`~harness_core.secret.redacted_logging`, :data:`~harness_core.secret.MASK`) lives in
:mod:`harness_core.secret`; importing those names from here still works but warns
(a ``DeprecationWarning``; CHANGELOG.md lists the move). The loader
(:mod:`harness_core.loader`) puts these pieces together.
"""

from __future__ import annotations

from harness_core._lazy import moved_names
from harness_core.config.env import EnvFallback, EnvProblem, substitute_env
from harness_core.config.marked_yaml import MAX_ALIAS_NODES, parse_yaml
from harness_core.config.problems import (
    ConfigError,
    ConfigPath,
    ConfigProblem,
    field_message,
    format_path,
    line_for,
    named_field,
)

__all__ = [
    "MAX_ALIAS_NODES",
    "ConfigError",
    "ConfigPath",
    "ConfigProblem",
    "EnvFallback",
    "EnvProblem",
    "field_message",
    "format_path",
    "line_for",
    "named_field",
    "parse_yaml",
    "substitute_env",
]

__getattr__ = moved_names(
    __name__, dict.fromkeys(["MASK", "RedactFilter", "Redactor", "redacted_logging"], "harness_core.secret")
)
"""The secret-masking names once re-exported here warn and resolve from :mod:`harness_core.secret`."""
