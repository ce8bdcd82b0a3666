"""Entry points of installed distributions, read without :mod:`importlib.metadata`.

The loader finds plugins (group ``harness.plugins``) and the CLI finds plugin subcommands (group
``harness.commands``) through entry points. :mod:`importlib.metadata` costs ~10 ms to import (it
pulls in :mod:`email`, :mod:`zipfile`, :mod:`csv` …) and ~15 ms more to parse the metadata of
every distribution with the :mod:`email` parser, so this module reads the files itself:
``entry_points.txt`` of every ``*.dist-info`` / ``*.egg-info`` folder on :data:`sys.path` (the
INI-like format of the PyPA entry points specification,
https://packaging.python.org/en/latest/specifications/entry-points/), and a distribution's name
and version from the headers of its ``METADATA`` / ``PKG-INFO`` file (core metadata,
https://packaging.python.org/en/latest/specifications/core-metadata/) only when asked for.

As with :mod:`importlib.metadata`, the first distribution of a given (normalised) name on
``sys.path`` wins, and the first entry point of a name in a group wins. A ``sys.path`` entry that
is a file (a zip archive) is read through :mod:`importlib.metadata`, which knows archives.
"""

from __future__ import annotations

import importlib
import os
import re
import stat
import sys
from typing import Any, NamedTuple

__all__ = ["Distribution", "EntryPoint", "entry_points"]

_SUFFIXES = (".dist-info", ".egg-info")
_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")
"""An entry point's value, ``module:attr.sub [extra]`` (the pattern of :mod:`importlib.metadata`)."""


class Distribution:
    """An installed distribution, found as the metadata folder ``path``.

    ``key`` is its normalised name as the folder spells it (``harness-llm-mock``); :attr:`name`
    and :attr:`version` come from its metadata file, read on first use (``None`` when the file
    or the header is missing).
    """

    def __init__(self, path: str, key: str, *, headers: dict[str, str] | None = None) -> None:
        self.path = path
        self.key = key
        self._headers = headers

    def __repr__(self) -> str:
        return f"Distribution({self.path!r})"

    @property
    def name(self) -> str | None:
        """The ``Name`` of the core metadata (``harness-llm-mock``), or ``None``."""
        return self._metadata().get("name")

    @property
    def version(self) -> str | None:
        """The ``Version`` of the core metadata (``0.1.0``), or ``None``."""
        return self._metadata().get("version")

    def _metadata(self) -> dict[str, str]:
        if self._headers is None:
            self._headers = _read_headers(self.path)
        return self._headers


class EntryPoint(NamedTuple):
    """One entry point: ``name = value`` in ``group`` of distribution ``dist``.

    ``value`` is ``module`` or ``module:attr`` (dotted attributes allowed, an ``[extras]`` suffix
    ignored).
    """

    name: str
    value: str
    group: str
    dist: Distribution

    def load(self) -> Any:
        """Import the module of :attr:`value` and return the attribute it names (the module itself
        when it names none).

        Raises:
            ValueError: the value is no ``module[:attr]`` reference.
            Exception: whatever importing the module or reading the attribute raises
                (``ImportError``, ``AttributeError`` …).
        """
        match = _VALUE.match(self.value)
        if match is None:
            raise ValueError(
                f"entry point {self.name!r} of {self.dist.key} is no `module:attr` reference: {self.value!r}"
            )
        target: Any = importlib.import_module(match.group("module"))
        for part in (match.group("attr") or "").split("."):
            if part:
                target = getattr(target, part)
        return target


def entry_points(group: str) -> dict[str, EntryPoint]:
    """The entry points of ``group`` by name, from every distribution on :data:`sys.path`.

    Nothing is imported; only ``entry_points.txt`` files are read (metadata files on first use
    of :attr:`Distribution.name` / :attr:`Distribution.version`), once per folder of ``sys.path``
    while the folder's listing and modification time stay the same. The first distribution of
    a name on ``sys.path`` wins, then the first entry point of a name.
    """
    found: dict[str, EntryPoint] = {}
    seen: set[str] = set()
    for folder in sys.path:
        for dist, groups in _distributions(folder or "."):
            if dist.key in seen:
                continue
            seen.add(dist.key)
            for name, value in groups.get(group, ()):
                found.setdefault(name, EntryPoint(name, value, group, dist))
    return found


_Groups = dict[str, list[tuple[str, str]]]
"""The entry points of one distribution: group -> ``(name, value)`` pairs, in file order."""

_SCANNED: dict[str, tuple[tuple[int, list[str]], list[tuple[Distribution, _Groups]]]] = {}
"""Folder -> ((modification time in ns, metadata folder names), what :func:`_distributions` found).
Installing or removing a distribution changes both, so a scan is reused only while neither changed."""


def _distributions(folder: str) -> list[tuple[Distribution, _Groups]]:
    """``(distribution, its entry points by group)`` of every distribution in ``folder``, sorted
    by metadata folder name (an unreadable ``entry_points.txt`` reads as empty)."""
    try:
        info = os.stat(folder)
        if stat.S_ISREG(info.st_mode):
            return _archive_distributions(folder)
        stamp = (info.st_mtime_ns, sorted(entry for entry in os.listdir(folder) if entry.endswith(_SUFFIXES)))
    except OSError:  # missing, or unreadable: nothing installed there
        return []
    cached = _SCANNED.get(folder)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    found = []
    for entry in stamp[1]:
        path = os.path.join(folder, entry)
        try:
            with open(path + os.sep + "entry_points.txt", encoding="utf-8") as file:
                text = file.read()
        except OSError:  # no entry points (or an egg-info file, not a folder)
            text = ""
        found.append((Distribution(path, _normalise(entry.rsplit(".", 1)[0].split("-", 1)[0])), _parse(text)))
    _SCANNED[folder] = (stamp, found)
    return found


def _archive_distributions(archive: str) -> list[tuple[Distribution, _Groups]]:
    """The distributions of a zip archive on ``sys.path``, through :mod:`importlib.metadata`."""
    import importlib.metadata

    found = []
    for dist in importlib.metadata.distributions(path=[archive]):
        name = dist.metadata["Name"] or ""
        headers = {"name": name, "version": dist.version}
        groups = _parse(dist.read_text("entry_points.txt") or "")
        found.append((Distribution(archive, _normalise(name), headers=headers), groups))
    return found


def _normalise(name: str) -> str:
    """A project name in its normalised form (PEP 503: runs of ``-_.`` become ``-``, lower case)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _parse(text: str) -> _Groups:
    """The ``name = value`` pairs of every ``[group]`` section of an ``entry_points.txt``."""
    groups: _Groups = {}
    pairs: list[tuple[str, str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            pairs = groups.setdefault(line[1:-1].strip(), [])
        elif "=" in line:  # a pair before any section belongs to none: dropped with ``pairs``
            name, _, value = line.partition("=")
            pairs.append((name.strip(), value.strip()))
    return groups


def _read_headers(path: str) -> dict[str, str]:
    """``name`` and ``version`` from the header block of the metadata file in the folder ``path``
    (``METADATA`` of a dist-info, ``PKG-INFO`` of an egg-info); empty when there is none."""
    for file_name in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(path, file_name), encoding="utf-8", errors="replace") as file:
                text = file.read()
        except OSError:
            continue
        headers: dict[str, str] = {}
        for line in text.splitlines():
            if not line:  # the headers end at the first empty line (the description follows)
                break
            key, colon, value = line.partition(":")
            if colon and key.lower() in ("name", "version"):
                headers.setdefault(key.lower(), value.strip())
        return headers
    return {}
