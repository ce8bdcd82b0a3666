"""Middleware for harness: ``retry``, ``timeout``, ``usage``, ``redact``, ``cache`` and ``otel``.

Each middleware is a plugin class in its own module, registered in the entry-point group
``harness.plugins`` under the name above; list them in plugins.yaml to use them (first listed =
outermost). See the README of this distribution for the cookbook. Importing this package imports
nothing heavy: each module is imported when its plugin is named in plugins.yaml.
"""

from __future__ import annotations

__all__: list[str] = []

__version__ = "0.1.0"
"""The distribution's version (the single source: ``pyproject.toml`` reads it)."""
