"""``harness embed``, ``harness embed-multi`` and ``harness similar``: embeddings from the command
line, in the habits of ``llm embed`` / ``embed-multi`` / ``similar`` (docs/embeddings.md#the-cli).

Every command loads plugins.yaml as ``harness run`` does (:func:`~harness_core.cli._common.load_for_start`:
config problems and plugins that fail closed stop it), resolves ``-m`` through ``aliases:``
(:meth:`LoadedConfig.resolve_alias`) and embeds through :meth:`Harness.embed
<harness_core.runtime.Harness.embed>` (the ``llm_embed`` middleware, the route's embedder and its
batching). Errors are the usual ``error: …`` lines (:func:`~harness_core.cli._common.report_error`:
code, HTTP status, route and plugin; ``-v`` adds a traceback); everything printed passes through the
config's secret masker. Exit codes: 0 done; 1 the provider failed (the rows embedded before it are
kept) or output that cannot be written; 2 a usage or config error: bad input (a missing or
malformed file, an empty text), an unknown route (``NO_ADAPTER``), a route that does not embed
(``UNSUPPORTED``), an unknown collection or one embedded with another route, model or dimensions;
130 interrupted (Ctrl-C; 143 SIGTERM, 129 SIGHUP: the call in flight is cancelled, the batches
stored so far are kept, a rerun resumes); 141 stdout closed by its reader.

The collection database is :mod:`harness_core.cli._collection`.
"""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar

import anyio
import anyio.abc
import anyio.lowlevel
import click
import msgspec

from harness_core.cli._collection import Collection, CollectionError, Store, content_hash, to_blob
from harness_core.cli._common import (
    ABORT_SIGNALS,
    EXIT_ABORTED,
    EXIT_OK,
    EXIT_USAGE,
    Sink,
    isatty,
    load_for_start,
    output_failure_code,
    report_error,
    resolve_flags,
)
from harness_core.cli._hints import typo_hint
from harness_core.cli._text import UNDECODABLE_WARNING, clean_argument, for_terminal, read_stdin, undecoded
from harness_core.embedding import Embeddings, InputType
from harness_core.loader import LoadedConfig

if TYPE_CHECKING:
    from harness_core.runtime import Harness

__all__ = ["InputError", "Row", "embed_multi", "embed_text", "read_rows", "similar"]

T = TypeVar("T")

_FIELD_LIMIT: Final = 2**31 - 1
"""Longest CSV field read (characters): the csv module's default of 131,072 would refuse a long document."""

_SUFFIXES: Final = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl"}
"""The format of ``embed-multi FILE`` by its suffix, without ``--format``."""


class InputError(Exception):
    """Input that cannot be embedded; the message names the file, the line or row, and the field."""


class Row(NamedTuple):
    """One input row of ``embed-multi``: its ``id`` in the collection and the ``content`` embedded."""

    id: str
    content: str


# ------------------------------------------------------------------ harness embed


def embed_text(
    text: str | None,
    *,
    route: str | None,
    model: str | None,
    dimensions: int | None,
    input_type: InputType | None,
    as_json: bool,
    config: str | None,
    verbose: int = 0,
) -> int:
    """``harness embed``: embed ``text`` (standard input when ``None`` or ``-``) and print its vector
    as one JSON array, or with ``as_json`` one object ``{"model", "route", "usage", "embedding"}``
    (``usage`` ``{"input_tokens": N}`` or ``null``). Returns the exit code (module docstring)."""
    out, err = Sink(sys.stdout, name="stdout"), Sink(sys.stderr, name="stderr")
    if text is None or text == "-":
        if text is None and isatty(sys.stdin):
            err.write("error: no text to embed: pass TEXT or pipe it on stdin\n")
            return EXIT_USAGE
        text, replaced = read_stdin(sys.stdin) if sys.stdin is not None else ("", False)
    else:
        text, replaced = clean_argument(text)
    if replaced:
        err.write(UNDECODABLE_WARNING + "\n")
    if not text.strip():
        err.write("error: empty text (nothing to embed: pass TEXT or pipe it on stdin)\n")
        return EXIT_USAGE
    loaded = load_for_start(config, err)
    if loaded is None:
        return EXIT_USAGE
    out.redact = loaded.redact
    typo = _typo(loaded, route, model)
    target = resolve_flags(loaded, route, model)
    route, model = target
    request = _Request(route, model, dimensions, input_type)
    try:
        result = _run(_embed_one, loaded, request, text)
    except _Failed as failed:
        return failed.report(err, verbose, typo=typo)
    if as_json:
        usage = None if result.usage is None else {"input_tokens": result.usage.input_tokens}
        document = {"model": result.model, "route": result.route, "usage": usage, "embedding": result[0].tolist()}
        out.write(msgspec.json.encode(document).decode() + "\n")
    else:
        out.write(msgspec.json.encode(result[0].tolist()).decode() + "\n")
    return output_failure_code(out, err)


def _typo(loaded: LoadedConfig, route: str | None, model: str | None) -> tuple[str, str | None]:
    """``(what, typo)`` for :func:`~harness_core.cli._hints.typo_hint`: ``-m``'s model id and
    what :meth:`LoadedConfig.mistyped_route <harness_core.loader.LoadedConfig.mistyped_route>`
    says of it with ``-r``'s route."""
    return f"-m {model!r}", loaded.mistyped_route(route, model)


class _Request(NamedTuple):
    route: str | None
    model: str | None
    dimensions: int | None
    input_type: InputType | None


class _Failed(Exception):
    """An embedding call (or the harness around it) failed: reported as ``harness run`` reports
    errors, naming the route and its plugin."""

    def __init__(self, error: BaseException, route: str | None, source: str | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.route = route
        self.source = source

    def report(self, err: Sink, verbose: int, *, after: str = "", typo: tuple[str, str | None] = ("", None)) -> int:
        """Write the error (then the hint of ``typo``, a mistyped ``-m route/model``:
        :func:`~harness_core.cli._hints.typo_hint`, exit 2; then ``after``); the exit code."""
        code = report_error(
            lambda line: err.write(line + "\n"), self.error, route=self.route, source=self.source, verbose=verbose
        )
        hint = typo_hint(self.error, *typo)
        if hint is not None:
            err.write(f"  {hint}\n")
            code = EXIT_USAGE
        if after:
            err.write(after + "\n")
        return code


async def _embed_one(loaded: LoadedConfig, request: _Request, text: str) -> Embeddings:
    async with _running(loaded) as harness:
        return await _embed(harness, request, [text])


@contextlib.asynccontextmanager
async def _running(loaded: LoadedConfig) -> AsyncIterator[Harness]:
    """The harness of ``loaded``, started; adapter plugins that failed to start are warned about
    (their routes are unavailable), as ``harness run`` does."""
    from harness_core.cli._run import warn_start_failures
    from harness_core.runtime import Harness

    err = Sink(sys.stderr, redact=loaded.redact)
    async with Harness.from_loaded(loaded) as harness:
        warn_start_failures(lambda line: err.write(line + "\n"), loaded.failures, harness.failures)
        yield harness


def _run(function: Callable[..., Awaitable[T]], *args: object) -> T:
    """``anyio.run(function, *args)``; an exception other than :class:`_Failed` and
    :class:`CollectionError` (the harness could not start or stop: a middleware failed) is raised
    as a :class:`_Failed` naming no route."""
    try:
        return anyio.run(function, *args)
    except (_Failed, CollectionError):
        raise
    except Exception as exc:
        raise _Failed(exc, None, None) from exc


async def _embed(harness: Harness, request: _Request, inputs: list[str]) -> Embeddings:
    """``inputs`` embedded as ``request`` asks; a failure raised as :class:`_Failed` naming the route."""
    route = request.route if request.route is not None else harness.default_embed_route()
    try:
        result = await harness.embed(
            inputs,
            route=route,
            model=request.model,
            dimensions=request.dimensions,
            input_type=request.input_type,
        )
    except Exception as exc:
        raise _Failed(exc, route, harness.embed_routes().get(route) if route is not None else None) from exc
    result.route = result.route or route  # a middleware's own result (a cache hit) may name none
    return result


# ------------------------------------------------------------------ reading rows


def read_rows(
    file: str | None,
    files: Sequence[tuple[str, str]],
    fmt: str | None,
    *,
    header: bool = True,
    warn: Callable[[str], None] | None = None,
) -> list[Row]:
    """The rows of ``embed-multi``: from ``file`` (CSV/TSV with a header, a JSON array of objects,
    or JSON lines; ``fmt`` or the file's suffix says which) or from ``files`` (``(DIR, GLOB)``
    pairs: each matching file is a row, its id the path relative to DIR, its content the text).

    A CSV/TSV takes the columns ``id`` and ``content`` when the header names them; else the first
    column is the id and the other columns, joined by a space, the content (``llm embed-multi``'s
    rule). ``header=False``: the CSV/TSV has no header row, its first line is data (the first
    column the id, the others the content); a header naming neither ``id`` nor ``content`` is
    taken as one all the same, and ``warn`` (when given) is told so, for the user to pass
    ``--no-header`` if it was data. A JSON object likewise, by its keys. Ids that are numbers
    become text.

    Raises:
        InputError: no source or two of them, a file that cannot be read or is not UTF-8, a
            malformed CSV or JSON (file and line named), a row without content, an id given twice
            (the file and both rows named; for ``--files`` both paths), ``header=False`` for a
            source that has no header row (JSON, JSON lines, ``--files``: ``--no-header`` would
            be ignored).
    """
    if (file is None) == (not files):
        raise InputError("give one source: FILE (.csv, .tsv, .json, .jsonl) or --files DIR GLOB")
    if file is None:
        if not header:
            raise InputError("--no-header applies to a CSV/TSV FILE, not to --files (a file is one row)")
        return _read_files(files)
    rows = _read_file(file, fmt, header, warn)
    seen: dict[str, int] = {}
    for number, row in enumerate(rows, 1):
        first = seen.setdefault(row.id, number)
        if first != number:
            raise InputError(f"{file}: id {row.id!r} is given twice (rows {first} and {number})")
    return rows


def _read_file(file: str, fmt: str | None, header: bool, warn: Callable[[str], None] | None) -> list[Row]:
    path = Path(file)
    if fmt is None:
        fmt = _SUFFIXES.get(path.suffix.lower())
        if fmt is None:
            raise InputError(
                f"{file}: cannot tell the format from the suffix {path.suffix!r}: pass --format csv|tsv|json|jsonl"
            )
    if not header and fmt not in ("csv", "tsv"):
        raise InputError(f"--no-header applies to a CSV/TSV FILE: {file} is {fmt.upper()}, which has no header row")
    text = _read_text(path, "utf-8-sig")
    if fmt in ("csv", "tsv"):
        return _read_csv(file, text, "," if fmt == "csv" else "\t", header, warn)
    if fmt == "json":
        try:
            items = msgspec.json.decode(text)
        except msgspec.DecodeError as exc:
            raise InputError(f"{file} is not JSON: {exc}") from None
        if not isinstance(items, list):
            raise InputError(f"{file}: expected a JSON array of objects, got {_kind(items)}")
        return [_from_object(f"{file}: item {number}", item) for number, item in enumerate(items, 1)]
    rows = []
    for number, line in enumerate(text.split("\n"), 1):  # not splitlines: JSON text may hold U+2028
        if not line.strip():
            continue
        try:
            item = msgspec.json.decode(line)
        except msgspec.DecodeError as exc:
            raise InputError(f"{file}:{number}: not JSON: {exc}") from None
        rows.append(_from_object(f"{file}:{number}", item))
    return rows


def _read_text(path: Path, encoding: str) -> str:
    """The text of ``path`` (``utf-8-sig`` drops a byte order mark).

    Raises:
        InputError: the file cannot be read, or is not UTF-8 (the byte named).
    """
    try:
        return path.read_bytes().decode(encoding)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not UTF-8 text (byte {exc.start}: {exc.reason})") from None


def _read_csv(file: str, text: str, delimiter: str, has_header: bool, warn: Callable[[str], None] | None) -> list[Row]:
    csv.field_size_limit(_FIELD_LIMIT)  # a document is often longer than the module's 128 KiB default
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)  # as csv wants
    try:
        header = next(reader, None)
        if header is None:
            return []
        lines: Iterable[list[str]] = reader
        if not has_header:  # the first line is data: the id its first column, the content the others
            lines, header = itertools.chain([header], reader), [""] * len(header)
            if len(header) < 2:
                raise InputError(f"{file}:1: a row of at least two columns is needed (id, content), got {len(header)}")
        if "id" in header and "content" in header:
            id_at, content_at = header.index("id"), [header.index("content")]
        elif len(header) < 2:
            raise InputError(f"{file}:1: a header of at least two columns is needed (id, content), got {header}")
        else:
            id_at = header.index("id") if "id" in header else 0
            content_at = [i for i in range(len(header)) if i != id_at]
            if has_header and "id" not in header and "content" not in header and warn is not None:
                warn(f"{file}:1 is taken as the header ({', '.join(header)}): pass --no-header if it is a row")
        rows = []
        for values in lines:
            line = reader.line_num
            if not values:
                continue
            if len(values) != len(header):
                first = "the header" if has_header else "the first row"
                raise InputError(f"{file}:{line}: {len(values)} columns, {first} has {len(header)}")
            rows.append(Row(values[id_at], " ".join(values[i] for i in content_at)))
        return rows
    except csv.Error as exc:
        raise InputError(f"{file}:{reader.line_num}: not valid CSV: {exc}") from None


def _kind(value: object) -> str:
    """How an error names the JSON type of ``value``."""
    if isinstance(value, bool):
        return "a boolean"
    names = {dict: "an object", list: "an array", str: "a string", type(None): "null"}
    return names.get(type(value), "a number")


def _text_of(where: str, field: str, value: object) -> str:
    """A JSON id or content value as text: a string, or a number written as JSON writes it."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise InputError(f"{where}: {field} must be a string or a number, got {_kind(value)}")


def _from_object(where: str, item: object) -> Row:
    """The row of one JSON object: ``id`` and ``content`` keys, else the first key is the id and
    the other values, joined by a space, the content."""
    if not isinstance(item, dict):
        raise InputError(f"{where}: expected an object with `id` and `content`, got {_kind(item)}")
    keys = list(item)
    id_key = "id" if "id" in item else keys[0] if keys else None
    content_keys = ["content"] if "content" in item else [key for key in keys if key != id_key]
    if id_key is None or not content_keys:
        raise InputError(f"{where}: an object needs `id` and `content` (or at least two keys), got {keys}")
    id_ = _text_of(where, f"`{id_key}`", item[id_key])
    content = " ".join(_text_of(where, f"`{key}`", item[key]) for key in content_keys)
    return Row(id_, content)


def _read_files(files: Sequence[tuple[str, str]]) -> list[Row]:
    rows = []
    paths: dict[str, Path] = {}  # id -> the file it came from
    for folder, pattern in files:
        base = Path(folder)
        if not base.is_dir():
            raise InputError(f"--files: {folder} is not a directory")
        try:
            matched = sorted(path for path in base.glob(pattern) if path.is_file())
        except (NotImplementedError, ValueError) as exc:  # an absolute or empty pattern
            raise InputError(f"--files: cannot use the pattern {pattern!r}: {exc}") from None
        if not matched:
            raise InputError(f"--files: no file under {folder} matches {pattern!r}")
        for path in matched:
            name = path.relative_to(base).as_posix()
            shown = undecoded(str(path))  # the id must be text SQLite and a provider can take
            if shown is not None:
                raise InputError(f"--files: the file name {shown} is not UTF-8: rename it (nothing was embedded)")
            first = paths.setdefault(name, path)
            if first != path:
                raise InputError(f"--files: id {name!r} is given twice (files {first} and {path})")
            rows.append(Row(name, _read_text(path, "utf-8")))
    return rows


# ------------------------------------------------------------------ harness embed-multi


def embed_multi(
    collection: str,
    file: str | None,
    *,
    files: Sequence[tuple[str, str]],
    fmt: str | None,
    route: str | None,
    model: str | None,
    dimensions: int | None,
    batch_size: int,
    header: bool = True,
    store: bool,
    database: str | None,
    config: str | None,
    verbose: int = 0,
) -> int:
    """``harness embed-multi``: embed the rows of :func:`read_rows` into ``collection`` of the
    database at ``database`` (default :func:`~harness_core.cli._collection.default_database_path`),
    ``batch_size`` rows per call and per commit, skipping rows whose content hash is stored
    already; ``store`` keeps the content. Progress goes to stderr on a terminal, and a summary line
    at the end. Returns the exit code (module docstring)."""
    from harness_core.cli._collection import default_database_path

    err = Sink(sys.stderr, name="stderr")
    loaded = load_for_start(config, err)  # first: errors quoting the input are masked from then on
    if loaded is None:
        return EXIT_USAGE
    try:
        rows = read_rows(file, files, fmt, header=header, warn=lambda text: err.write(f"warning: {text}\n"))
    except InputError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_USAGE
    empty = [row.id for row in rows if not row.content.strip()]
    if empty:
        shown = ", ".join(repr(name) for name in empty[:5]) + (f" and {len(empty) - 5} more" if len(empty) > 5 else "")
        err.write(f"warning: skipped {len(empty)} row{'s' if len(empty) != 1 else ''} with empty content: {shown}\n")
        rows = [row for row in rows if row.content.strip()]
    if not rows:
        err.write("error: no rows to embed\n")
        return EXIT_USAGE
    typo = _typo(loaded, route, model)
    target = resolve_flags(loaded, route, model)
    route, model = target
    path = Path(database) if database is not None else default_database_path()
    try:
        db = Store(path, create=True)
    except CollectionError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_USAGE
    with _closing(db):
        try:
            existing = db.collection(collection)
            request = _collection_request(existing, collection, route, model, dimensions, path)
        except CollectionError as exc:
            err.write(f"error: {exc}\n")
            return EXIT_USAGE
        stored = db.hashes(collection)
        pending = [(row, content_hash(row.content)) for row in rows]
        pending = [(row, digest) for row, digest in pending if stored.get(row.id) != digest]
        job = _Job(db, collection, existing, request, store, batch_size, err)
        job.typo = typo
        return job.outcome(_stopped_by(job, loaded, pending), len(rows), verbose)


class _closing:
    def __init__(self, db: Store) -> None:
        self.db = db

    def __enter__(self) -> Store:
        return self.db

    def __exit__(self, *exc_info: object) -> None:
        self.db.close()


def _collection_request(
    existing: Collection | None,
    name: str,
    route: str | None,
    model: str | None,
    dimensions: int | None,
    path: Path,
) -> _Request:
    """The request for rows of collection ``name``: as given for a new collection; for an existing
    one its route, model and dimensions (what the command line leaves out is taken from it).

    Raises:
        CollectionError: the command line asks for another route, model or dimensions than the
            collection was embedded with (each difference named).
    """
    if existing is None:
        return _Request(route, model, dimensions, "document")
    differences = [
        f"{what} {asked!r} (it holds {held!r})"
        for what, asked, held in (
            ("route", route, existing.route),
            ("model", model, existing.model),
            ("dimensions", dimensions, existing.dimensions),
        )
        if asked is not None and asked != held
    ]
    if differences:
        raise CollectionError(
            f"collection {name!r} of {path} was embedded with route {existing.route!r}, model {existing.model!r}, "
            f"{existing.dimensions} dimensions; this run asks for {', '.join(differences)}: vectors of another "
            "route, model or size cannot be compared with them (use another collection name)"
        )
    return _existing_request(existing, "document")


def _existing_request(existing: Collection, input_type: InputType) -> _Request:
    return _Request(existing.route, existing.model, existing.dimensions if existing.requested else None, input_type)


def _stopped_by(job: _Job, loaded: LoadedConfig, pending: list[tuple[Row, str]]) -> BaseException | None:
    """What stopped ``job`` early (``KeyboardInterrupt``, :class:`CollectionError`, :class:`_Failed`:
    raised, or kept in :attr:`_Job.failure`), or ``None`` when it ran to its end (or a signal stopped it)."""
    try:
        _run(job.run, loaded, pending)
    except (KeyboardInterrupt, CollectionError, _Failed) as exc:
        return exc
    return job.failure


class _Job:
    """One ``embed-multi`` run: embeds the pending rows batch by batch and commits each batch."""

    def __init__(
        self,
        db: Store,
        name: str,
        existing: Collection | None,
        request: _Request,
        store: bool,
        batch_size: int,
        err: Sink,
    ) -> None:
        self.db = db
        self.name = name
        self.collection = existing
        self.request = request
        self.store = store
        self.batch_size = batch_size
        self.err = err
        self.embedded = 0
        self.pending = 0
        self.tokens: int | None = 0
        self.signum: signal.Signals | None = None
        self.typo: tuple[str, str | None] = ("", None)
        """What a mistyped ``-m route/model`` is (:func:`_typo`), said after a failed call."""
        self.failure: BaseException | None = None
        """What stopped the batches (an embedding call, the store, Ctrl-C), else ``None``."""
        """The signal that stopped the run (``None``: none did)."""

    def outcome(self, stopped: BaseException | None, total: int, verbose: int) -> int:
        """Report how the run of ``total`` rows ended (``stopped`` by a failure, else done or
        stopped by a signal) and return the exit code. (A function of its own: on CPython 3.11
        the lines after an event loop that cancelled tasks may go untraced, cpython#106749.)"""
        err = self.err
        err.end_line()
        if isinstance(stopped, KeyboardInterrupt):
            err.write(f"interrupted: {self.summary(total)}{self.resume}\n")
            return EXIT_ABORTED
        if isinstance(stopped, CollectionError):
            err.write(f"error: {stopped}; {self.summary(total)}\n")
            return EXIT_USAGE
        if isinstance(stopped, _Failed):
            return stopped.report(err, verbose, after=f"{self.summary(total)}{self.resume}", typo=self.typo)
        if self.signum is not None:
            err.write(f"{ABORT_SIGNALS[self.signum]}: {self.summary(total)}{self.resume}\n")
            return 128 + self.signum
        err.write(self.summary(total) + "\n")
        return EXIT_OK

    @property
    def resume(self) -> str:
        """``; run it again to resume`` while rows are left to embed, else nothing."""
        return "; run it again to resume" if self.pending > self.embedded else ""

    def summary(self, total: int) -> str:
        """``collection 'docs': 3 embedded, 2 unchanged, 1 not embedded (route …)``."""
        unchanged = total - self.pending
        left = self.pending - self.embedded
        parts = [f"{self.embedded} embedded", f"{unchanged} unchanged"]
        if left:
            parts.append(f"{left} not embedded")
        text = f"collection {self.name!r}: {', '.join(parts)}"
        found = self.collection
        if found is not None:
            model = f", model {found.model!r}" if found.model is not None else ""
            text += f" (route {found.route!r}{model}, {found.dimensions} dimensions"
            text += f"; {self.tokens} input tokens)" if self.tokens is not None and self.embedded else ")"
        return text

    async def run(self, loaded: LoadedConfig, pending: list[tuple[Row, str]]) -> None:
        """Embed ``pending`` (rows with their content hash) into the collection.

        What stops it early is kept in :attr:`failure` (an embedding call failed: :class:`_Failed`;
        vectors of another size or a database fault: :class:`CollectionError`; Ctrl-C), or in
        :attr:`signum`; the batches before are stored.

        Raises:
            _Failed: the harness could not start.
        """
        self.pending = len(pending)
        if not pending:
            return
        progress = click.progressbar(
            length=len(pending),
            label=f"embedding into {self.name!r}",
            file=self.err.stream,
            show_pos=True,
            hidden=not self.err.isatty(),
        )
        async with _running(loaded) as harness, anyio.create_task_group() as group:
            await group.start(self._watch, group.cancel_scope)
            self.failure = await self._batches(harness, pending, progress, group.cancel_scope)
        # nothing more here: on CPython 3.11 the lines after a cancelled task group may go untraced

    async def _batches(
        self,
        harness: Harness,
        pending: list[tuple[Row, str]],
        progress: Any,
        scope: anyio.CancelScope,
    ) -> BaseException | None:
        """Embed and store ``pending`` batch by batch; then stop the signal watcher (``scope``).
        Returns what stopped it (caught here: raised through the task group it would become an
        ExceptionGroup; ``KeyboardInterrupt`` is Ctrl-C, as the watcher's signals are), else ``None``."""
        try:
            with progress:
                for start in range(0, len(pending), self.batch_size):
                    batch = pending[start : start + self.batch_size]
                    result = await _embed(harness, self.request, [row.content for row, _ in batch])
                    self._store(batch, result)
                    progress.update(len(batch))
                    await anyio.lowlevel.checkpoint()  # a signal is seen between batches
        except (_Failed, CollectionError, KeyboardInterrupt) as exc:
            scope.cancel()
            return exc
        scope.cancel()
        return None

    async def _watch(self, scope: anyio.CancelScope, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Wait for Ctrl-C, SIGTERM or SIGHUP (:data:`~harness_core.cli._common.ABORT_SIGNALS`) and
        stop the run (``scope`` cancelled): the batches committed stay, :attr:`signum` says which."""
        with anyio.open_signal_receiver(*ABORT_SIGNALS) as signals:
            task_status.started()
            self.signum = await anext(signals)
            scope.cancel()

    def _store(self, batch: list[tuple[Row, str]], result: Embeddings) -> None:
        found = self.collection
        new = found is None
        if found is None:
            requested = self.request.dimensions is not None
            # the route asked for (a balance pool stays the pool, so a rerun asking for it resumes)
            route = self.request.route or result.route
            found = Collection(self.name, str(route), result.model, result.dimensions, requested)
        elif result.dimensions != found.dimensions:
            raise CollectionError(
                f"route {found.route!r} returned vectors of {result.dimensions} dimensions, collection "
                f"{self.name!r} holds {found.dimensions}"
            )
        self.collection = self.db.store(
            found,
            [
                (row.id, digest, to_blob(vector), row.content if self.store else None)
                for (row, digest), vector in zip(batch, result, strict=True)
            ],
            new=new,
        )
        self.embedded += len(batch)
        if self.tokens is not None:
            self.tokens = (
                None
                if result.usage is None or result.usage.input_tokens is None
                else (self.tokens + result.usage.input_tokens)
            )


# ------------------------------------------------------------------ harness similar


def similar(
    collection: str,
    text: str,
    *,
    limit: int,
    database: str | None,
    as_json: bool,
    config: str | None,
    verbose: int = 0,
) -> int:
    """``harness similar``: the ``limit`` rows of ``collection`` closest to ``text`` (embedded with
    the collection's route, model and dimensions, as a query), best first: one line
    ``score  id  content`` each, or with ``as_json`` one JSON object per line
    (``{"id", "score", "content"}``, ``content`` ``null`` when not stored). Returns the exit code."""
    from harness_core.cli._collection import default_database_path

    out, err = Sink(sys.stdout, name="stdout"), Sink(sys.stderr, name="stderr")
    text, replaced = clean_argument(text)
    if replaced:
        err.write(UNDECODABLE_WARNING + "\n")
    if not text.strip():
        err.write("error: empty text (nothing to compare with)\n")
        return EXIT_USAGE
    path = Path(database) if database is not None else default_database_path()
    try:
        db = Store(path, create=False)
    except CollectionError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_USAGE
    with _closing(db):
        try:
            found = db.require(collection)
        except CollectionError as exc:
            err.write(f"error: {exc}\n")
            return EXIT_USAGE
        loaded = load_for_start(config, err)
        if loaded is None:
            return EXIT_USAGE
        out.redact = loaded.redact
        try:
            result = _run(_embed_one, loaded, _existing_request(found, "query"), text)
            matches = db.similar(found, result[0], limit)
        except _Failed as failed:
            return failed.report(err, verbose)
        except CollectionError as exc:
            err.write(f"error: {exc}\n")
            return EXIT_USAGE
    tty = out.isatty()
    for match in matches:
        if as_json:
            out.write(
                msgspec.json.encode({"id": match.id, "score": match.score, "content": match.content}).decode() + "\n"
            )
        else:
            shown = f"  {' '.join(match.content.split())}" if match.content is not None else ""  # one line a match
            line = f"{match.score:.4f}  {match.id}{shown}"
            out.write((for_terminal(line) if tty else line) + "\n")
    return output_failure_code(out, err)
