"""Fast lookup of the ``harness.commands`` entry points, without :mod:`importlib.metadata`.

``harness --help`` lists plugin subcommands. :mod:`importlib.metadata` costs more to import than
the whole rest of ``--help``, so this module reads ``entry_points.txt`` of every
``*.dist-info`` / ``*.egg-info`` folder on ``sys.path`` directly (the format is the INI-like file
of the PyPA entry points specification,
https://packaging.python.org/en/latest/specifications/entry-points/). As with
:mod:`importlib.metadata`, the first distribution of a given name on ``sys.path`` wins.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Final, NamedTuple

__all__ = ["COMMAND_GROUP", "CommandEntryPoint", "command_entry_points"]

COMMAND_GROUP: Final = "harness.commands"
"""Entry-point group of plugin subcommands: ``usage = "harness_usage.cli:usage"`` (a click command)."""

_SUFFIXES: Final = (".dist-info", ".egg-info")


class CommandEntryPoint(NamedTuple):
    """A plugin subcommand: its ``name``, ``value`` (``module:attr``) and distribution name."""

    name: str
    value: str
    dist: str


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _parse(text: str, group: str) -> list[tuple[str, str]]:
    """The ``name = value`` pairs of section ``[group]`` in an ``entry_points.txt``."""
    pairs: list[tuple[str, str]] = []
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif section == group and "=" in line:
            name, _, value = line.partition("=")
            pairs.append((name.strip(), value.strip()))
    return pairs


def command_entry_points(group: str = COMMAND_GROUP) -> dict[str, CommandEntryPoint]:
    """Entry points of ``group`` by name, read from the metadata of every distribution on ``sys.path``.

    Nothing is imported. The first entry point of a name wins.
    """
    found: dict[str, CommandEntryPoint] = {}
    seen: set[str] = set()
    for folder in sys.path:
        try:
            names = sorted(os.listdir(folder or "."))
        except OSError:
            continue
        for entry in names:
            if not entry.endswith(_SUFFIXES):
                continue
            dist = _normalise(entry.rsplit(".", 1)[0].split("-", 1)[0])
            if dist in seen:
                continue
            seen.add(dist)
            try:
                with open(os.path.join(folder or ".", entry, "entry_points.txt"), encoding="utf-8") as file:
                    text = file.read()
            except OSError:
                continue
            for name, value in _parse(text, group):
                found.setdefault(name, CommandEntryPoint(name, value, dist))
    return found
