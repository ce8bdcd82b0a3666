"""The SQLite collection database of ``harness embed-multi`` and ``harness similar`` (docs/embeddings.md).

One database holds any number of collections. Schema (:data:`SCHEMA`):

- ``collections``: ``name`` (primary key), ``route`` and ``model`` that embedded it, ``dimensions``
  (the length of every vector), ``requested`` (1 when ``--dimensions`` was sent: later requests
  send it again, so a model that shortens its vectors keeps doing so);
- ``embeddings``: ``collection``, ``id`` (primary key together), ``content_hash`` (SHA-256 of
  the UTF-8 content, hex), ``embedding`` (the vector as little-endian float32 bytes, 4 per
  dimension), ``content`` (only with ``--store``, else ``NULL``), ``updated`` (unix seconds).

A row whose content hash is unchanged is not embedded again, so a run that was interrupted
resumes where it stopped (each batch is committed on its own). The default database is
``<user data dir>/harness/embeddings.sqlite`` (``platformdirs.user_data_path("harness")``, where
the usage ledger and the prompt log live), created private to the user
(:func:`harness_core.outfile.private_file`). Similarity is cosine similarity computed in pure
Python over the float32 blobs (:func:`cosine`; numpy is no dependency of harness-core).
"""

from __future__ import annotations

import hashlib
import heapq
import math
import operator
import sqlite3
import sys
import time
from array import array
from collections.abc import Iterable, Sequence
from contextlib import closing
from pathlib import Path
from typing import Final, NamedTuple

import platformdirs

from harness_core.cli._text import undecoded
from harness_core.outfile import private_file

__all__ = [
    "SCHEMA",
    "Collection",
    "CollectionError",
    "Match",
    "Store",
    "content_hash",
    "cosine",
    "default_database_path",
    "from_blob",
    "to_blob",
]

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS collections (
    name TEXT PRIMARY KEY,
    route TEXT NOT NULL,
    model TEXT,
    dimensions INTEGER NOT NULL,
    requested INTEGER NOT NULL DEFAULT 0   -- 1: --dimensions was sent, and is sent again
);
CREATE TABLE IF NOT EXISTS embeddings (
    collection TEXT NOT NULL REFERENCES collections (name),
    id TEXT NOT NULL,
    content_hash TEXT NOT NULL,            -- sha256 of the UTF-8 content, hex
    embedding BLOB NOT NULL,               -- little-endian float32, 4 bytes per dimension
    content TEXT,                          -- NULL unless --store
    updated REAL NOT NULL,                 -- unix seconds
    PRIMARY KEY (collection, id)
);
"""

_BUSY_TIMEOUT: Final = 10.0
"""Seconds SQLite waits for another writer's lock."""


def default_database_path() -> Path:
    """The collection database used without ``--database``: ``<user data dir>/harness/embeddings.sqlite``."""
    return platformdirs.user_data_path("harness") / "embeddings.sqlite"


class CollectionError(Exception):
    """A collection database or collection that cannot be used as asked; the message names the
    database path, the collection and what differs (the CLI prints it as one ``error:`` line, exit 2)."""


class Collection(NamedTuple):
    """One row of ``collections``: what embedded it (``route``, ``model``: ``None`` when the
    embedder named none), the vectors' length, and whether ``dimensions`` was requested."""

    name: str
    route: str
    model: str | None
    dimensions: int
    requested: bool


class Match(NamedTuple):
    """One result of :meth:`Store.similar`: the row's ``id``, cosine ``score`` (-1…1) and stored
    ``content`` (``None`` when it was embedded without ``--store``)."""

    id: str
    score: float
    content: str | None


def content_hash(content: str) -> str:
    """SHA-256 of ``content`` encoded as UTF-8, as 64 hex digits (the ``content_hash`` column)."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def to_blob(vector: memoryview | array[float]) -> bytes:
    """A float32 vector (an :class:`~harness_core.embedding.Embeddings` row) as little-endian bytes."""
    if sys.byteorder == "big":  # pragma: no cover - the stored format is little-endian; CI hosts are too
        swapped = array("f", vector)
        swapped.byteswap()
        return swapped.tobytes()
    return bytes(vector)


def from_blob(blob: bytes) -> array[float]:
    """The float32 vector stored by :func:`to_blob`."""
    vector = array("f")
    vector.frombytes(blob)
    if sys.byteorder == "big":  # pragma: no cover - see to_blob
        vector.byteswap()
    return vector


def cosine(query: Sequence[float], norm: float, vector: Sequence[float]) -> float:
    """Cosine similarity of ``query`` (whose Euclidean norm is ``norm``) and ``vector``; 0.0 when
    either has length zero."""
    length = math.sqrt(sum(map(operator.mul, vector, vector)))
    if not norm or not length:
        return 0.0
    dot: float = sum(map(operator.mul, query, vector))
    return dot / (norm * length)


class Store:
    """An open collection database at ``path``.

    With ``create`` the file (and its folders) is created private to the user when missing and
    the schema added; a database that holds other tables but no ``collections`` is refused (it
    is some other store, such as the prompt log). Without ``create`` the file is opened
    read-only and must exist and hold the schema.

    Raises:
        CollectionError: the file cannot be created or opened, is not SQLite, or is not a
            collection database (the message names the path).
    """

    def __init__(self, path: Path, *, create: bool) -> None:
        self.path = path
        try:
            if create:
                private_file(path)
                conn = sqlite3.connect(path, timeout=_BUSY_TIMEOUT)
            else:
                if not path.is_file():
                    raise CollectionError(f"no collection database at {path} (create one with `harness embed-multi`)")
                uri = f"{path.expanduser().resolve().as_uri()}?mode=ro"  # https://www.sqlite.org/uri.html
                conn = sqlite3.connect(uri, uri=True, timeout=_BUSY_TIMEOUT)
        except (OSError, sqlite3.Error) as exc:
            raise CollectionError(f"cannot open the collection database {path}: {exc}") from None
        self._conn = conn
        try:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "collections" not in tables and (tables or not create):
                raise CollectionError(f"{path} is not a collection database (it has no `collections` table)")
            if create:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(SCHEMA)
        except sqlite3.Error as exc:
            conn.close()
            raise CollectionError(f"{path} is not a collection database: {exc}") from None
        except CollectionError:
            conn.close()
            raise

    def close(self) -> None:
        """Close the connection (every batch was committed already)."""
        self._conn.close()

    def names(self) -> list[str]:
        """The collections of this database, by name."""
        return [row[0] for row in self._conn.execute("SELECT name FROM collections ORDER BY name")]

    def collection(self, name: str) -> Collection | None:
        """The collection ``name``, or ``None`` when the database has none of that name.

        Raises:
            CollectionError: ``name`` holds bytes that were not UTF-8 on the command line (PEP 383
                surrogates: no SQLite text can hold them); the message shows them escaped.
        """
        shown = undecoded(name)
        if shown is not None:
            raise CollectionError(f"the collection name {shown} is not UTF-8 text")
        row = self._conn.execute(
            "SELECT name, route, model, dimensions, requested FROM collections WHERE name = ?", (name,)
        ).fetchone()
        return None if row is None else Collection(row[0], row[1], row[2], row[3], bool(row[4]))

    def require(self, name: str) -> Collection:
        """The collection ``name``.

        Raises:
            CollectionError: there is none of that name (the message lists those there are).
        """
        found = self.collection(name)
        if found is None:
            known = ", ".join(repr(n) for n in self.names()) or "none"
            raise CollectionError(f"no collection {name!r} in {self.path} (collections: {known})")
        return found

    def hashes(self, name: str) -> dict[str, str]:
        """``id`` → ``content_hash`` of every row stored in collection ``name``."""
        rows = self._conn.execute("SELECT id, content_hash FROM embeddings WHERE collection = ?", (name,))
        return dict(rows.fetchall())

    def store(
        self,
        collection: Collection,
        rows: Iterable[tuple[str, str, bytes, str | None]],
        *,
        new: bool,
    ) -> Collection:
        """Write one batch of ``(id, content_hash, embedding blob, content or None)`` rows into
        ``collection`` (inserted, or replacing the row of the same id) and commit; with ``new``
        the collection row is created in the same transaction, unless another run created it
        meanwhile with the same route, model and dimensions (then its row is kept: its
        ``requested`` flag too). Returns the collection as stored.

        Raises:
            CollectionError: the database refused the write, or another run created the
                collection meanwhile with another route, model or dimensions (both named); the
                batch is rolled back.
        """
        now = time.time()
        try:
            return self._write(collection, rows, new=new, now=now)
        except sqlite3.Error as exc:  # a full disk, a locked or read-only database
            raise CollectionError(f"cannot store collection {collection.name!r} in {self.path}: {exc}") from None

    def _write(
        self, collection: Collection, rows: Iterable[tuple[str, str, bytes, str | None]], *, new: bool, now: float
    ) -> Collection:
        with self._conn:
            if new:  # another run may have created it since this one looked (two embed-multi at once)
                self._conn.execute(
                    "INSERT INTO collections (name, route, model, dimensions, requested) VALUES (?, ?, ?, ?, ?)"
                    " ON CONFLICT (name) DO NOTHING",
                    (collection.name, collection.route, collection.model, collection.dimensions, collection.requested),
                )
                stored = self.collection(collection.name)
                assert stored is not None  # inserted, or there already: in this transaction
                if stored[1:4] != collection[1:4]:
                    raise CollectionError(
                        f"collection {collection.name!r} of {self.path} was created meanwhile by another run with "
                        f"route {stored.route!r}, model {stored.model!r}, {stored.dimensions} dimensions; this run "
                        f"embedded with route {collection.route!r}, model {collection.model!r}, "
                        f"{collection.dimensions} dimensions (nothing of this run was stored: use another name)"
                    )
                collection = stored
            self._conn.executemany(
                "INSERT OR REPLACE INTO embeddings (collection, id, content_hash, embedding, content, updated) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(collection.name, id_, digest, blob, content, now) for id_, digest, blob, content in rows],
            )
        return collection

    def similar(self, collection: Collection, query: Sequence[float], limit: int) -> list[Match]:
        """The ``limit`` rows of ``collection`` most similar to ``query`` (cosine, best first; ties
        in id order).

        Raises:
            CollectionError: ``query`` or a stored vector does not have the collection's dimensions.
        """
        if len(query) != collection.dimensions:
            raise CollectionError(
                f"the query vector has {len(query)} dimensions, collection {collection.name!r} holds "
                f"{collection.dimensions}"
            )
        norm = math.sqrt(sum(map(operator.mul, query, query)))
        size = collection.dimensions * 4
        rows = self._conn.execute(
            "SELECT id, embedding, content FROM embeddings WHERE collection = ? ORDER BY id", (collection.name,)
        )

        def scored() -> Iterable[Match]:
            with closing(rows):
                for id_, blob, content in rows:
                    if len(blob) != size:
                        raise CollectionError(
                            f"row {id_!r} of collection {collection.name!r} holds {len(blob)} bytes, "
                            f"not {collection.dimensions} float32"
                        )
                    yield Match(id_, cosine(query, norm, from_blob(blob)), content)

        return heapq.nlargest(limit, scored(), key=operator.attrgetter("score"))
