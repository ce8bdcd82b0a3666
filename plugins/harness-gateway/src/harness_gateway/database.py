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


def store_from_spec(
    spec: str | None, default: Path, *, timeout: float = 5.0, lease: float = LEASE, limits: str | None = None
) -> SqlStore:
    """The store for a ``database`` setting: ``postgresql://`` / ``postgres://`` URLs → PostgreSQL,
    anything else a SQLite path (``None`` → ``default``); ``timeout`` and ``lease`` in seconds.
    ``limits`` (a ``redis://…`` URL, the ``limits`` setting) keeps admission state in Redis
    (:mod:`harness_gateway.redis_limits`), keys and ledger in that SQL store."""
    postgres = spec if spec is not None and spec.startswith(("postgresql://", "postgres://")) else None
    if limits is not None:
        from harness_gateway.redis_limits import RedisLimits, RedisPostgresStore, RedisSQLiteStore

        engine = RedisLimits(limits, timeout=timeout)
        if postgres is not None:
            return RedisPostgresStore(postgres, timeout=timeout, lease=lease, limits=engine)
        path = Path(spec).expanduser() if spec else default
        return RedisSQLiteStore(path, timeout=timeout, lease=lease, limits=engine)
    if postgres is not None:
        from harness_gateway.postgres import PostgresStore

        return PostgresStore(postgres, timeout=timeout, lease=lease)
    return SQLiteStore(Path(spec).expanduser() if spec else default, timeout=timeout, lease=lease)
