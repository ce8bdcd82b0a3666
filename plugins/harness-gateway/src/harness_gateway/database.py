"""Which state store a ``database`` setting names: one function, above both backends.

It lives apart from :mod:`harness_gateway.store` (the SQL store and its SQLite backend) because
:mod:`harness_gateway.postgres` builds on that module; choosing between them here keeps the import
graph one-way.
"""

from __future__ import annotations

from pathlib import Path

from harness_gateway.sqlite import SQLiteStore
from harness_gateway.store import LEASE, SqlStore

__all__ = ["store_from_spec"]


def store_from_spec(spec: str | None, default: Path, *, timeout: float = 5.0, lease: float = LEASE) -> SqlStore:
    """The store for a ``database`` setting: ``postgresql://`` / ``postgres://`` URLs → PostgreSQL,
    anything else a SQLite path (``None`` → ``default``); ``timeout`` and ``lease`` in seconds."""
    if spec is not None and spec.startswith(("postgresql://", "postgres://")):
        from harness_gateway.postgres import PostgresStore

        return PostgresStore(spec, timeout=timeout, lease=lease)
    return SQLiteStore(Path(spec).expanduser() if spec else default, timeout=timeout, lease=lease)
