"""The gateway's SQLite store (keys' hashes, spend, request records) is created private to the
user: the database and its -wal / -shm files 0600, new folders 0700 (issue 21)."""

from __future__ import annotations

import os
from pathlib import Path

import anyio

from harness_gateway.keys import KeySpec
from harness_gateway.sqlite import SQLiteStore


def test_the_sqlite_store_is_private(tmp_path: Path) -> None:
    path = tmp_path / "state" / "gateway" / "gw.sqlite"
    previous = os.umask(0o022)
    try:

        async def main() -> dict[str, int]:
            store = SQLiteStore(path)
            try:
                await store.migrate()
                await store.create_key(KeySpec(name="team"))
                # while open: the -wal and -shm files exist
                return {f.name: f.stat().st_mode & 0o777 for f in path.parent.iterdir()}
            finally:
                await store.aclose()

        modes = anyio.run(main)
    finally:
        os.umask(previous)
    assert modes == {"gw.sqlite": 0o600, "gw.sqlite-shm": 0o600, "gw.sqlite-wal": 0o600}
    assert [(p.stat().st_mode & 0o777) for p in (tmp_path / "state", path.parent)] == [0o700, 0o700]
