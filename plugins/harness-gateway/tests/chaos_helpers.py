"""Shared pieces of the chaos suite (``test_chaos_*.py``, docs/chaos.md): figures and a throwaway PostgreSQL.

Each chaos test records its figures (clients, requests, outcomes, recovery times) with
:func:`record_figures`: printed (``pytest -s`` shows them) and, when ``HARNESS_CHAOS_FIGURES``
names a folder, written there as ``<name>.json``, from which the table in docs/chaos.md is made.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gw_postgres import Cluster


def record_figures(name: str, figures: dict[str, Any]) -> None:
    """Print ``figures`` and write them to ``$HARNESS_CHAOS_FIGURES/<name>.json`` when that is set."""
    text = json.dumps(figures, indent=2, sort_keys=True)
    print(f"chaos figures {name}: {text}")
    folder = os.environ.get("HARNESS_CHAOS_FIGURES")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{name}.json").write_text(text + "\n", encoding="utf-8")


@contextlib.contextmanager
def throwaway_cluster() -> Iterator[Cluster]:
    """A started throwaway PostgreSQL cluster, stopped and removed when the block exits."""
    # a directory of its own under /tmp: the postgres user cannot enter pytest's root-only tmp_path
    root = Path(tempfile.mkdtemp(prefix="harness-chaos-pg-"))
    try:
        cluster = Cluster(root)
        cluster.start()
        try:
            yield cluster
        finally:
            pg_ctl(cluster, "stop", "-m", "immediate", check=False)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def pg_ctl(cluster: Cluster, *args: str, check: bool = True) -> None:
    """``pg_ctl -D <data> -w <args>`` as the cluster's user (``stop -m fast``: what an operator's restart does)."""
    subprocess.run(
        [*cluster.as_user, str(cluster.bin / "pg_ctl"), "-D", str(cluster.data), "-w", *args],
        check=check,
        capture_output=True,
    )
