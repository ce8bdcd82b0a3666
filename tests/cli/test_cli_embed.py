"""`harness embed`, `embed-multi` and `similar`, and the embedding marks of `harness models`: the
commands run in process against the mock (offline) and the test-only embedding plugins of
tests/cli/embedplugins (a counting/failing `llm_embed` middleware, an embed-only route)."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import os
import sqlite3
import sys
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from harness_core import Harness
from harness_core.cli._app import cli
from harness_core.cli._collection import Collection, CollectionError, Store, cosine, from_blob
from harness_llm_mock import MockConfig, MockPlugin

HERE = Path(__file__).parent
EMBED_PLUGINS = HERE / "embedplugins"
FAKE_PLUGINS = HERE.parent / "loader" / "fakeplugins"


class Result(NamedTuple):
    code: int
    out: str
    err: str


Run = Callable[..., Result]


class Terminal(io.StringIO):
    """An in-memory stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _root_logger() -> Iterator[None]:
    """The CLI installs its log handler on the root logger: put the root back after each test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def harness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]) -> Run:
    """``harness(*args, stdin=b"")`` runs the command line in process in tmp_path (plugins.yaml
    found there; the test plugins importable) and returns its exit code, stdout and stderr."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HARNESS_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.syspath_prepend(str(FAKE_PLUGINS))
    monkeypatch.syspath_prepend(str(EMBED_PLUGINS))

    def run(*args: str, stdin: bytes | io.TextIOBase | None = b"") -> Result:
        if isinstance(stdin, bytes):
            stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
        monkeypatch.setattr(sys, "stdin", stdin)
        try:
            cli.main(args=list(args), prog_name="harness")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        else:  # pragma: no cover - click always exits in standalone mode
            code = 0
        captured = capsysbinary.readouterr()
        return Result(code, captured.out.decode(), captured.err.decode())

    return run


@pytest.fixture
def config(tmp_path: Path) -> Callable[[str], Path]:
    def write(text: str) -> Path:
        path = tmp_path / "plugins.yaml"
        path.write_text(text, encoding="utf-8")
        return path

    return write


def mock_vector(text: str, dimensions: int = 8) -> list[float]:
    """The vector the mock gives ``text``, through the library (what the CLI must print)."""
    import anyio

    async def embed() -> list[float]:
        async with Harness([("mock", MockPlugin(MockConfig()))]) as running:
            result = await running.embed([text], route="mock", dimensions=dimensions)
        return result.tolist()[0]

    return anyio.run(embed)


def rows(database: Path, collection: str = "docs") -> dict[str, tuple[str, bytes, str | None]]:
    with sqlite3.connect(database) as conn:
        found = conn.execute(
            "SELECT id, content_hash, embedding, content FROM embeddings WHERE collection = ?", (collection,)
        ).fetchall()
    conn.close()
    return {id_: (digest, blob, content) for id_, digest, blob, content in found}


def logged(log: Path) -> list[list[str]]:
    """The inputs of every embedding call the counting middleware saw (one list per call)."""
    if not log.exists():
        return []
    return [json.loads(line)["inputs"] for line in log.read_text().splitlines()]


# ------------------------------------------------------------------ harness embed


def test_embed_prints_the_vector_as_a_json_array(harness: Run) -> None:
    result = harness("embed", "hello world")
    assert result.code == 0, result.err
    vector = json.loads(result.out)
    assert vector == pytest.approx(mock_vector("hello world"), abs=1e-6)
    assert len(vector) == 8
    assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-5)
    assert json.loads(harness("embed", "hello there").out) != vector
    assert len(json.loads(harness("embed", "--dimensions", "16", "hello world").out)) == 16


def test_embed_json_names_model_route_and_usage(harness: Run) -> None:
    result = harness("embed", "--json", "--input-type", "query", "two words")
    assert result.code == 0, result.err
    document = json.loads(result.out)
    assert set(document) == {"model", "route", "usage", "embedding"}
    assert document["model"] == "hash"
    assert document["route"] == "mock"
    assert document["usage"] == {"input_tokens": 2}
    assert document["embedding"] == pytest.approx(mock_vector("two words"), abs=1e-6)


def test_embed_reads_stdin(harness: Run) -> None:
    piped = harness("embed", stdin=b"from stdin")
    assert piped.code == 0, piped.err
    assert json.loads(piped.out) == pytest.approx(mock_vector("from stdin"), abs=1e-6)
    assert harness("embed", "-", stdin=b"from stdin").out == piped.out
    garbled = harness("embed", stdin=b"caf\xff")
    assert garbled.code == 0
    assert "warning: the input is not valid UTF-8" in garbled.err
    assert json.loads(garbled.out) == pytest.approx(mock_vector("caf\ufffd"), abs=1e-6)


def test_embed_without_text_is_a_usage_error(harness: Run) -> None:
    at_terminal = harness("embed", stdin=Terminal())
    assert at_terminal.code == 2
    assert at_terminal.err == "error: no text to embed: pass TEXT or pipe it on stdin\n"
    empty = harness("embed", stdin=b"  \n")
    assert empty.code == 2
    assert "error: empty text" in empty.err
    assert harness("embed", stdin=None).code == 2  # stdin closed: nothing to read


def test_embed_on_a_route_that_does_not_embed_names_it(harness: Run, config: Callable[[str], Path]) -> None:
    config("plugins:\n  mock: {}\n  stubborn: {}\n")
    result = harness("embed", "-r", "stubborn", "text")
    assert result.code == 2
    assert result.out == ""
    assert result.err.startswith("error: UNSUPPORTED")
    assert "route 'stubborn' does not serve embeddings; embedding routes: 'mock'" in result.err
    unknown = harness("embed", "-r", "nowhere", "text")
    assert unknown.code == 2
    assert "NO_ADAPTER" in unknown.err
    assert "'nowhere'" in unknown.err


def test_embed_provider_failure_names_route_and_plugin(
    harness: Run, config: Callable[[str], Path], tmp_path: Path
) -> None:
    config(f"plugins:\n  embedcount: {{log: {tmp_path / 'calls.jsonl'}, fail_on_call: 1}}\n  mock: {{}}\n")
    result = harness("embed", "text")
    assert result.code == 1
    assert result.err == "error: SERVER (HTTP 503) from route 'mock' (mock): the embedder is overloaded\n"


def test_embed_resolves_model_aliases(harness: Run, config: Callable[[str], Path]) -> None:
    config("plugins:\n  mock: {}\n  vectors: {}\naliases: {lengths: vec/len}\n")
    result = harness("embed", "-m", "lengths", "--json", "four")
    assert result.code == 0, result.err
    assert json.loads(result.out) == {"model": "len", "route": "vec", "usage": None, "embedding": [4.0, 1.0]}


def test_commands_report_config_problems(harness: Run, config: Callable[[str], Path], tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_text("id,content\na,text\n")
    config("plugins: [\n")
    for args in (("embed", "x"), ("embed-multi", "docs", "in.csv"), ("similar", "docs", "x")):
        if args[0] == "similar":  # the database is opened first: make one
            config("plugins:\n  mock: {}\n")
            assert harness("embed-multi", "docs", "in.csv").code == 0
            config("plugins: [\n")
        result = harness(*args)
        assert result.code == 2, args
        assert result.err.startswith("error: "), args


def test_a_middleware_that_fails_to_start_is_reported(
    harness: Run, config: Callable[[str], Path], tmp_path: Path
) -> None:
    config("plugins:\n  startfail: {}\n  mock: {}\n")
    result = harness("embed", "text")
    assert result.code == 2
    assert "error: " in result.err
    assert "cannot start" in result.err
    (tmp_path / "in.csv").write_text("id,content\na,one\n")
    multi = harness("embed-multi", "docs", "in.csv", "-d", str(tmp_path / "db.sqlite"))
    assert multi.code == 2
    assert "cannot start" in multi.err
    assert multi.err.endswith("collection 'docs': 0 embedded, 0 unchanged, 1 not embedded; run it again to resume\n")


# ------------------------------------------------------------------ harness embed-multi


def test_embed_multi_from_csv_stores_hashes_and_float32_vectors(harness: Run, tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_text("id,content\na,the cat sat\nb,dogs bark\n\nc,the cat ran\n")
    database = tmp_path / "db.sqlite"
    result = harness("embed-multi", "docs", "in.csv", "-d", str(database))
    assert result.code == 0, result.err
    assert result.err == (
        "collection 'docs': 3 embedded, 0 unchanged (route 'mock', model 'hash', 8 dimensions; 8 input tokens)\n"
    )
    stored = rows(database)
    assert sorted(stored) == ["a", "b", "c"]
    digest, blob, content = stored["a"]
    assert digest == hashlib.sha256(b"the cat sat").hexdigest()
    assert content is None  # without --store
    assert len(blob) == 8 * 4
    assert array("f", blob).tolist() == pytest.approx(mock_vector("the cat sat"), abs=1e-6)
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT name, route, model, dimensions, requested FROM collections").fetchall() == [
            ("docs", "mock", "hash", 8, 0)
        ]
    conn.close()
    again = harness("embed-multi", "docs", "in.csv", "-d", str(database), "--store")
    assert again.err == "collection 'docs': 0 embedded, 3 unchanged (route 'mock', model 'hash', 8 dimensions)\n"


def test_embed_multi_no_header_keeps_the_first_line_as_a_row(harness: Run, tmp_path: Path) -> None:
    (tmp_path / "in.tsv").write_text("a\tthe cat sat\nb\tdogs bark\n")
    database = tmp_path / "db.sqlite"
    result = harness("embed-multi", "docs", "in.tsv", "--no-header", "-d", str(database))
    assert result.code == 0, result.err
    assert result.err.startswith("collection 'docs': 2 embedded, 0 unchanged")
    assert sorted(rows(database)) == ["a", "b"]


def test_embed_multi_warns_when_a_header_names_neither_id_nor_content(harness: Run, tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_text("a,the cat sat\nb,dogs bark\n")
    database = tmp_path / "db.sqlite"
    result = harness("embed-multi", "docs", "in.csv", "-d", str(database))
    assert result.code == 0, result.err
    assert result.err.startswith(
        "warning: in.csv:1 is taken as the header (a, the cat sat): pass --no-header if it is a row\n"
        "collection 'docs': 1 embedded"
    )
    assert sorted(rows(database)) == ["b"]


def test_embed_multi_default_database_is_in_the_user_data_dir(harness: Run, tmp_path: Path) -> None:
    import platformdirs

    (tmp_path / "in.tsv").write_text("name\ttext\textra\nx\thello\tthere\n")
    assert harness("embed-multi", "docs", "in.tsv", "--store").code == 0
    database = platformdirs.user_data_path("harness") / "embeddings.sqlite"
    assert database.is_file()
    assert database.stat().st_mode & 0o777 == 0o600
    assert rows(database)["x"][2] == "hello there"  # no `content` column: the other columns, joined


def test_embed_multi_reads_json_and_jsonl(harness: Run, tmp_path: Path) -> None:
    database = str(tmp_path / "db.sqlite")
    (tmp_path / "in.json").write_text(json.dumps([{"id": 1, "content": "one"}, {"title": "t", "body": "two", "n": 2}]))
    (tmp_path / "in.jsonl").write_text('{"id": "j1", "content": "first"}\n\n{"content": "second", "id": 2.5}\n')
    (tmp_path / "rows.txt").write_text('{"id": "t", "content": "third"}\n')
    assert harness("embed-multi", "j", "in.json", "--store", "-d", database).code == 0
    assert harness("embed-multi", "l", "in.jsonl", "--store", "-d", database).code == 0
    assert harness("embed-multi", "t", "rows.txt", "--format", "jsonl", "--store", "-d", database).code == 0
    assert {id_: row[2] for id_, row in rows(Path(database), "j").items()} == {"1": "one", "t": "two 2"}
    assert {id_: row[2] for id_, row in rows(Path(database), "l").items()} == {"j1": "first", "2.5": "second"}
    assert {id_: row[2] for id_, row in rows(Path(database), "t").items()} == {"t": "third"}


def test_embed_multi_from_a_directory(harness: Run, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.md").write_text("alpha")
    (docs / "sub" / "b.md").write_text("beta")
    (docs / "skip.txt").write_text("not matched")
    (docs / "empty.md").write_text("\n")
    database = tmp_path / "db.sqlite"
    result = harness("embed-multi", "docs", "--files", str(docs), "**/*.md", "--store", "-d", str(database))
    assert result.code == 0, result.err
    assert "warning: skipped 1 row with empty content: 'empty.md'\n" in result.err
    assert {id_: row[2] for id_, row in rows(database).items()} == {"a.md": "alpha", "sub/b.md": "beta"}


def test_embed_multi_resumes_without_re_embedding_what_it_stored(
    harness: Run, config: Callable[[str], Path], tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    (tmp_path / "in.csv").write_text("id,content\n" + "".join(f"r{i},text number {i}\n" for i in range(5)))
    database = str(tmp_path / "db.sqlite")
    config(f"plugins:\n  embedcount: {{log: {log}, fail_on_call: 2}}\n  mock: {{}}\n")
    failed = harness("embed-multi", "docs", "in.csv", "--batch-size", "2", "-d", database)
    assert failed.code == 1
    assert failed.err.splitlines() == [
        "error: SERVER (HTTP 503) from route 'mock' (mock): the embedder is overloaded",
        "collection 'docs': 2 embedded, 0 unchanged, 3 not embedded (route 'mock', model 'hash', 8 dimensions; "
        "6 input tokens); run it again to resume",
    ]
    assert logged(log) == [["text number 0", "text number 1"]]
    assert sorted(rows(Path(database))) == ["r0", "r1"]  # the first batch was committed

    config(f"plugins:\n  embedcount: {{log: {log}}}\n  mock: {{}}\n")
    resumed = harness("embed-multi", "docs", "in.csv", "--batch-size", "2", "-d", database)
    assert resumed.code == 0, resumed.err
    assert "3 embedded, 2 unchanged" in resumed.err
    assert logged(log)[1:] == [["text number 2", "text number 3"], ["text number 4"]]  # r0, r1 not again
    assert sorted(rows(Path(database))) == ["r0", "r1", "r2", "r3", "r4"]

    (tmp_path / "in.csv").write_text("id,content\n" + "".join(f"r{i},text number {i}\n" for i in range(4)) + "r4,new\n")
    changed = harness("embed-multi", "docs", "in.csv", "-d", database)
    assert "1 embedded, 4 unchanged" in changed.err
    assert logged(log)[3:] == [["new"]]
    assert rows(Path(database))["r4"][0] == hashlib.sha256(b"new").hexdigest()


def test_embed_multi_interrupted_keeps_the_batches_stored(
    harness: Run, config: Callable[[str], Path], tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    (tmp_path / "in.csv").write_text("id,content\na,one\nb,two\nc,three\n")
    database = str(tmp_path / "db.sqlite")
    config(f"plugins:\n  embedcount: {{log: {log}, interrupt_on_call: 2}}\n  mock: {{}}\n")
    result = harness("embed-multi", "docs", "in.csv", "--batch-size", "1", "-d", database)
    assert result.code == 130
    assert result.err.endswith(
        "interrupted: collection 'docs': 1 embedded, 0 unchanged, 2 not embedded "
        "(route 'mock', model 'hash', 8 dimensions; 1 input tokens); run it again to resume\n"
    )
    assert sorted(rows(Path(database))) == ["a"]


def test_embed_multi_first_batch_failing_creates_no_collection(
    harness: Run, config: Callable[[str], Path], tmp_path: Path
) -> None:
    (tmp_path / "in.csv").write_text("id,content\na,one\n")
    database = tmp_path / "db.sqlite"
    config(f"plugins:\n  embedcount: {{log: {tmp_path / 'log'}, fail_on_call: 1}}\n  mock: {{}}\n")
    result = harness("embed-multi", "docs", "in.csv", "-d", str(database))
    assert result.code == 1
    assert (
        result.err.splitlines()[-1]
        == "collection 'docs': 0 embedded, 0 unchanged, 1 not embedded; run it again to resume"
    )
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT count(*) FROM collections").fetchone() == (0,)
    conn.close()


def test_embed_multi_without_usage_or_model(harness: Run, config: Callable[[str], Path], tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_text("id,content\na,one\nb,two\nc,three\n")
    config("plugins:\n  vectors: {model: null}\n")
    result = harness("embed-multi", "docs", "in.csv", "--batch-size", "2", "-d", str(tmp_path / "db.sqlite"))
    assert result.code == 0, result.err
    assert result.err == "collection 'docs': 3 embedded, 0 unchanged (route 'vec', 2 dimensions)\n"


def test_embed_multi_refuses_another_route_model_or_dimensions(
    harness: Run, config: Callable[[str], Path], tmp_path: Path
) -> None:
    (tmp_path / "in.csv").write_text("id,content\na,one\n")
    database = str(tmp_path / "db.sqlite")
    config("plugins:\n  mock: {}\n  vectors: {}\n")
    assert harness("embed-multi", "docs", "in.csv", "-d", database, "-r", "mock", "--dimensions", "8").code == 0
    for args, named in (
        (("-r", "vec"), "route 'vec' (it holds 'mock')"),
        (("-m", "other"), "model 'other' (it holds 'hash')"),
        (("--dimensions", "4"), "dimensions 4 (it holds 8)"),
    ):
        result = harness("embed-multi", "docs", "in.csv", "-d", database, *args)
        assert result.code == 2, args
        assert result.err.startswith(
            f"error: collection 'docs' of {database} was embedded with route 'mock', model 'hash', 8 dimensions; "
            f"this run asks for {named}"
        )
    (tmp_path / "in.csv").write_text("id,content\na,changed\n")
    kept = harness("embed-multi", "docs", "in.csv", "-d", database, "-r", "mock", "-m", "hash")
    assert kept.code == 0, kept.err  # the same route and model; --dimensions 8 sent again (requested)
    assert "1 embedded" in kept.err


def test_embed_multi_refuses_vectors_of_another_size(
    harness: Run, config: Callable[[str], Path], tmp_path: Path
) -> None:
    (tmp_path / "in.csv").write_text("id,content\na,one\n")
    database = str(tmp_path / "db.sqlite")
    assert harness("embed-multi", "docs", "in.csv", "-d", database).code == 0
    config("plugins:\n  mock: {embedding_dimensions: 4}\n")
    (tmp_path / "in.csv").write_text("id,content\na,changed\n")
    result = harness("embed-multi", "docs", "in.csv", "-d", database)
    assert result.code == 2
    assert result.err.startswith(
        "error: route 'mock' returned vectors of 4 dimensions, collection 'docs' holds 8; collection 'docs': 0 embedded"
    )
    query = harness("similar", "docs", "one", "-d", database)
    assert query.code == 2
    assert query.err == "error: the query vector has 4 dimensions, collection 'docs' holds 8\n"


@pytest.mark.parametrize(
    ("name", "text", "args", "message"),
    [
        ("in.csv", None, (), "error: cannot read in.csv: No such file or directory\n"),
        ("in.csv", 'id,content\na,"unclosed\n', (), "error: in.csv:2: not valid CSV: unexpected end of data\n"),
        ("in.csv", 'id,content\na,"b"c\n', (), "error: in.csv:2: not valid CSV: ',' expected after '\"'\n"),
        ("in.csv", "id,content\na,b,c\n", (), "error: in.csv:2: 3 columns, the header has 2\n"),
        (
            "in.csv",
            "only\na\n",
            (),
            "error: in.csv:1: a header of at least two columns is needed (id, content), got ['only']\n",
        ),
        ("in.csv", "", (), "error: no rows to embed\n"),
        (
            "in.csv",
            "only\n",
            ("--no-header",),
            "error: in.csv:1: a row of at least two columns is needed (id, content), got 1\n",
        ),
        ("in.csv", "a,b\nc,d,e\n", ("--no-header",), "error: in.csv:2: 3 columns, the first row has 2\n"),
        ("in.csv", "id,content\na,x\na,y\n", (), "error: in.csv: id 'a' is given twice (rows 1 and 2)\n"),
        (
            "in.json",
            '[{"id": "a", "content": "x"}]',
            ("--no-header",),
            "error: --no-header applies to a CSV/TSV FILE: in.json is JSON, which has no header row\n",
        ),
        (
            "in.jsonl",
            '{"id": "a", "content": "x"}\n',
            ("--no-header",),
            "error: --no-header applies to a CSV/TSV FILE: in.jsonl is JSONL, which has no header row\n",
        ),
        (
            "in.csv",
            b"id,content\na,caf\xe9\n",
            (),
            "error: in.csv is not UTF-8 text (byte 16: invalid continuation byte)\n",
        ),
        ("in.json", "{", (), "error: in.json is not JSON: Input data was truncated\n"),
        ("in.json", '{"id": 1}', (), "error: in.json: expected a JSON array of objects, got an object\n"),
        (
            "in.json",
            '["text"]',
            (),
            "error: in.json: item 1: expected an object with `id` and `content`, got a string\n",
        ),
        ("in.json", "[3]", (), "error: in.json: item 1: expected an object with `id` and `content`, got a number\n"),
        (
            "in.json",
            "[{}]",
            (),
            "error: in.json: item 1: an object needs `id` and `content` (or at least two keys), got []\n",
        ),
        (
            "in.json",
            '[{"id": 1}]',
            (),
            "error: in.json: item 1: an object needs `id` and `content` (or at least two keys), got ['id']\n",
        ),
        (
            "in.json",
            '[{"id": true, "content": "x"}]',
            (),
            "error: in.json: item 1: `id` must be a string or a number, got a boolean\n",
        ),
        (
            "in.json",
            '[{"id": 1, "content": null}]',
            (),
            "error: in.json: item 1: `content` must be a string or a number, got null\n",
        ),
        (
            "in.json",
            '[{"id": 1, "content": [1]}]',
            (),
            "error: in.json: item 1: `content` must be a string or a number, got an array\n",
        ),
        (
            "in.json",
            '[{"id": 1, "content": {}}]',
            (),
            "error: in.json: item 1: `content` must be a string or a number, got an object\n",
        ),
        (
            "in.jsonl",
            '{"id": 1, "content": "x"}\nnot json\n',
            (),
            "error: in.jsonl:2: not JSON: JSON is malformed: invalid character (byte 4)\n",
        ),
        (
            "in.txt",
            "x",
            (),
            "error: in.txt: cannot tell the format from the suffix '.txt': pass --format csv|tsv|json|jsonl\n",
        ),
        (
            "in.csv",
            "id,content\na,x\n",
            ("--files", ".", "*.csv"),
            "error: give one source: FILE (.csv, .tsv, .json, .jsonl) or --files DIR GLOB\n",
        ),
    ],
)
def test_embed_multi_bad_input_is_a_clear_error(
    harness: Run, tmp_path: Path, name: str, text: str | bytes | None, args: tuple[str, ...], message: str
) -> None:
    if isinstance(text, bytes):
        (tmp_path / name).write_bytes(text)
    elif text is not None:
        (tmp_path / name).write_text(text)
    result = harness("embed-multi", "docs", name, *args, "-d", str(tmp_path / "db.sqlite"))
    assert result.code == 2
    assert result.err == message
    assert not (tmp_path / "db.sqlite").exists()  # nothing was opened for bad input


def test_embed_multi_bad_sources(harness: Run, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "bad.txt").write_bytes(b"\xff")
    for folder in ("one", "two"):  # the same relative path under two folders: the same id
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "a.md").write_text("x")
    cases = [
        ((), "error: give one source: FILE (.csv, .tsv, .json, .jsonl) or --files DIR GLOB\n"),
        (("--files", "file", "*"), "error: --files: file is not a directory\n"),
        (("--files", "dir", "*.md"), "error: --files: no file under dir matches '*.md'\n"),
        (
            ("--files", "dir", "/abs/*"),
            "error: --files: cannot use the pattern '/abs/*': Non-relative patterns are unsupported\n",
        ),
        (("--files", "dir", ""), "error: --files: cannot use the pattern '': Unacceptable pattern: ''\n"),
        (("--files", "dir", "*.txt"), "error: dir/bad.txt is not UTF-8 text (byte 0: invalid start byte)\n"),
        (
            ("--files", "one", "*", "--no-header"),
            "error: --no-header applies to a CSV/TSV FILE, not to --files (a file is one row)\n",
        ),
        (
            ("--files", "one", "*", "--files", "two", "*"),
            "error: --files: id 'a.md' is given twice (files one/a.md and two/a.md)\n",
        ),
    ]
    for args, message in cases:
        result = harness("embed-multi", "docs", *args)
        assert (result.code, result.err) == (2, message), args
    for pattern in ("/abs/*", ""):  # pathlib refuses them (its wording varies by Python version)
        result = harness("embed-multi", "docs", "--files", "dir", pattern)
        assert result.code == 2
        assert result.err.startswith(f"error: --files: cannot use the pattern {pattern!r}: ")


def test_embed_multi_names_the_skipped_empty_rows(harness: Run, tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_text("id,content\n" + "".join(f"e{i}, \n" for i in range(7)))
    result = harness("embed-multi", "docs", "in.csv", "-d", str(tmp_path / "db.sqlite"))
    assert result.code == 2
    assert result.err == (
        "warning: skipped 7 rows with empty content: 'e0', 'e1', 'e2', 'e3', 'e4' and 2 more\nerror: no rows to embed\n"
    )


def test_embed_multi_refuses_a_database_that_is_not_a_collection_database(harness: Run, tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_text("id,content\na,x\n")
    other = tmp_path / "logs.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE log (id INTEGER)")
    conn.close()
    (tmp_path / "text.sqlite").write_text("not a database at all, just text" * 40)
    (tmp_path / "blocker").write_text("a file where a folder should be")
    cases = [
        (other, f"error: {other} is not a collection database (it has no `collections` table)\n"),
        (
            tmp_path / "text.sqlite",
            f"error: {tmp_path / 'text.sqlite'} is not a collection database: file is not a database\n",
        ),
    ]
    for database, message in cases:
        result = harness("embed-multi", "docs", "in.csv", "-d", str(database))
        assert (result.code, result.err) == (2, message)
    blocked = harness("embed-multi", "docs", "in.csv", "-d", str(tmp_path / "blocker" / "db.sqlite"))
    assert blocked.code == 2
    assert blocked.err.startswith(f"error: cannot open the collection database {tmp_path / 'blocker' / 'db.sqlite'}: ")


def test_embed_multi_shows_progress_on_a_terminal(
    harness: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "in.csv").write_text("id,content\na,one\nb,two\nc,three\n")
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    result = harness("embed-multi", "docs", "in.csv", "--batch-size", "2", "-d", str(tmp_path / "db.sqlite"))
    assert result.code == 0
    shown = terminal.getvalue()
    assert "embedding into 'docs'" in shown
    assert "2/3" in shown
    assert "3/3" in shown
    assert shown.endswith(
        "collection 'docs': 3 embedded, 0 unchanged (route 'mock', model 'hash', 8 dimensions; 3 input tokens)\n"
    )


# ------------------------------------------------------------------ harness similar


def test_similar_orders_by_cosine_similarity(harness: Run, tmp_path: Path) -> None:
    texts = {"a": "the cat sat", "b": "dogs bark", "c": "the cat ran", "d": "birds sing"}
    (tmp_path / "in.json").write_text(json.dumps([{"id": k, "content": v} for k, v in texts.items()]))
    database = str(tmp_path / "db.sqlite")
    assert harness("embed-multi", "docs", "in.json", "--store", "-d", database).code == 0
    result = harness("similar", "docs", "dogs bark", "-d", database, "--json")
    assert result.code == 0, result.err
    matches = [json.loads(line) for line in result.out.splitlines()]
    query = mock_vector("dogs bark")
    expected = sorted(
        ((sum(a * b for a, b in zip(query, mock_vector(text), strict=True)), id_) for id_, text in texts.items()),
        reverse=True,
    )
    assert [m["id"] for m in matches] == [id_ for _, id_ in expected]
    assert matches[0] == {"id": "b", "score": pytest.approx(1.0, abs=1e-6), "content": "dogs bark"}
    assert [m["score"] for m in matches] == pytest.approx([score for score, _ in expected], abs=1e-5)
    two = harness("similar", "docs", "dogs bark", "-d", database, "-n", "2")
    assert two.out.splitlines()[0] == f"{matches[0]['score']:.4f}  b  dogs bark"
    assert len(two.out.splitlines()) == 2


def test_similar_without_stored_content_and_on_a_terminal(
    harness: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "in.csv").write_text('id,content\n"a\x1b[31m",one\nb,"two\nlines"\n')
    database = str(tmp_path / "db.sqlite")
    assert harness("embed-multi", "docs", "in.csv", "-d", database).code == 0
    as_json = harness("similar", "docs", "one", "-d", database, "--json")
    assert json.loads(as_json.out.splitlines()[0]) == {"id": "a\x1b[31m", "score": pytest.approx(1.0), "content": None}
    assert harness("embed-multi", "docs", "in.csv", "-d", database, "--store").code == 0  # unchanged: still none
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert harness("similar", "docs", "one", "-d", database).code == 0
    assert terminal.getvalue().splitlines()[0] == "1.0000  a^[[31m"


def test_similar_bad_input(harness: Run, config: Callable[[str], Path], tmp_path: Path) -> None:
    database = tmp_path / "db.sqlite"
    missing = harness("similar", "docs", "x", "-d", str(database))
    assert (missing.code, missing.err) == (
        2,
        f"error: no collection database at {database} (create one with `harness embed-multi`)\n",
    )
    (tmp_path / "in.csv").write_text("id,content\na,one\n")
    assert harness("embed-multi", "docs", "in.csv", "-d", str(database)).code == 0
    unknown = harness("similar", "nope", "x", "-d", str(database))
    assert (unknown.code, unknown.err) == (2, f"error: no collection 'nope' in {database} (collections: 'docs')\n")
    empty = harness("similar", "docs", " ", "-d", str(database))
    assert (empty.code, empty.err) == (2, "error: empty text (nothing to compare with)\n")
    garbled = harness("similar", "docs", "x\udcff", "-d", str(database))
    assert garbled.code == 0
    assert garbled.err.startswith("warning: the input is not valid UTF-8")
    empty_file = tmp_path / "empty.sqlite"
    empty_file.write_bytes(b"")
    not_ours = harness("similar", "docs", "x", "-d", str(empty_file))
    assert not_ours.err == f"error: {empty_file} is not a collection database (it has no `collections` table)\n"
    config(f"plugins:\n  embedcount: {{log: {tmp_path / 'log'}, fail_on_call: 1}}\n  mock: {{}}\n")
    failed = harness("similar", "docs", "x", "-d", str(database))
    assert (failed.code, failed.err) == (
        1,
        "error: SERVER (HTTP 503) from route 'mock' (mock): the embedder is overloaded\n",
    )


def test_similar_refuses_a_stored_vector_of_the_wrong_size(harness: Run, tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_text("id,content\na,one\n")
    database = tmp_path / "db.sqlite"
    assert harness("embed-multi", "docs", "in.csv", "-d", str(database)).code == 0
    with sqlite3.connect(database) as conn:
        conn.execute("UPDATE embeddings SET embedding = ?", (b"\0" * 12,))
    conn.close()
    result = harness("similar", "docs", "one", "-d", str(database))
    assert (result.code, result.err) == (2, "error: row 'a' of collection 'docs' holds 12 bytes, not 8 float32\n")


def test_collection_store_and_cosine(tmp_path: Path) -> None:
    assert cosine([0.0, 0.0], 0.0, [1.0, 0.0]) == 0.0
    assert cosine([1.0, 0.0], 1.0, [0.0, 0.0]) == 0.0
    assert cosine([1.0, 0.0], 1.0, [2.0, 0.0]) == pytest.approx(1.0)
    store = Store(tmp_path / "new" / "db.sqlite", create=True)
    try:
        assert store.names() == []
        assert store.collection("x") is None
        found = Collection("x", "r", None, 2, False)
        store.store(found, [("a", "h", bytes(array("f", [3.0, 4.0])), None)], new=True)
        assert store.require("x") == found
        assert from_blob(bytes(array("f", [3.0, 4.0]))).tolist() == [3.0, 4.0]
        with pytest.raises(CollectionError, match=r"no collection 'y' in .* \(collections: 'x'\)"):
            store.require("y")
        # another run created it meanwhile (both looked before either stored): the same route,
        # model and dimensions join it, keeping its row; others are refused, nothing stored
        other = Store(tmp_path / "new" / "db.sqlite", create=True)
        try:
            joined = other.store(found._replace(requested=True), [("b", "h", bytes(8), None)], new=True)
            assert joined == found  # the stored row wins, its requested flag too
            with pytest.raises(
                CollectionError,
                match=r"collection 'x' of .* was created meanwhile by another run with route 'r', model None, "
                r"2 dimensions; this run embedded with route 'r', model None, 3 dimensions",
            ):
                other.store(found._replace(dimensions=3), [("c", "h", bytes(12), None)], new=True)
            assert sorted(other.hashes("x")) == ["a", "b"]
        finally:
            other.close()
        store._conn.execute("DROP TABLE embeddings")  # a database that refuses the write
        with pytest.raises(CollectionError, match=r"cannot store collection 'x' in .*: no such table: embeddings"):
            store.store(found, [("a", "h", bytes(8), None)], new=False)
    finally:
        store.close()
    assert (tmp_path / "new").stat().st_mode & 0o777 == 0o700


# ------------------------------------------------------------------ harness models


def test_models_marks_embedding_models(harness: Run, config: Callable[[str], Path]) -> None:
    config(
        "plugins:\n  mock: {}\n  vectors: {}\n  vectors:quiet: {routes: [quiet], lists: false}\n"
        "  vectors:down: {routes: [down], list_error: true}\n"
    )
    result = harness("models")
    assert result.code == 1
    assert result.out.splitlines() == [
        "mock/echo  context 1000000  max output 100000  efforts off,low,medium,high",
        "mock/hash  embeddings",
        "vec/len  embeddings",
        "quiet  embeddings: no model list (its embedder lists none): pass -m MODEL to `harness embed`",
    ]
    assert result.err == "error: route 'down' (embeddings): NETWORK: cannot reach the embedder\n"
    only = harness("models", "-r", "vec", "--json")
    assert (only.code, json.loads(only.out)) == (0, [{"model": "len", "route": "vec", "embeddings": True}])
    quiet = harness("models", "-r", "quiet", "--json")
    assert (quiet.code, quiet.out, quiet.err) == (
        0,
        "[]\n",
        "note: route 'quiet': embeddings: no model list (its embedder lists none): pass -m MODEL to `harness embed`\n",
    )
    mock = harness("models", "-r", "mock", "--json")
    assert [row.get("embeddings", False) for row in json.loads(mock.out)] == [False, True]


def test_input_errors_mask_the_config_secrets(harness: Run, config: Callable[[str], Path], tmp_path: Path) -> None:
    secret = "sk-" + "csv" * 8  # built at run time: no key-shaped literal
    config("plugins:\n  mock: {}\n  openai: {api_key: " + secret + ", routes: [oai]}\n")
    (tmp_path / "in.csv").write_text(f"{secret}\n")
    result = harness("embed-multi", "docs", "in.csv", "-d", str(tmp_path / "db.sqlite"))
    assert result.code == 2
    assert "a header of at least two columns is needed" in result.err
    assert secret not in result.err


def test_embed_multi_reads_long_csv_fields(harness: Run, tmp_path: Path) -> None:
    long = "word " * 60_000  # 300,000 characters: over the csv module's default field limit
    (tmp_path / "in.csv").write_text(f"id,content\nlong,{long}\n")
    database = tmp_path / "db.sqlite"
    result = harness("embed-multi", "docs", "in.csv", "--store", "-d", str(database))
    assert result.code == 0, result.err
    assert rows(database)["long"][2] == long


def test_embed_multi_keeps_unicode_line_separators_inside_rows(harness: Run, tmp_path: Path) -> None:
    text = "one\u2028two\x0cthree"
    (tmp_path / "in.csv").write_text(f"id,content\r\nc,{text}\r\n", newline="")
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "j", "content": text}, ensure_ascii=False) + "\r\n")
    database = tmp_path / "db.sqlite"
    assert harness("embed-multi", "c", "in.csv", "--store", "-d", str(database)).code == 0
    assert harness("embed-multi", "j", "in.jsonl", "--store", "-d", str(database)).code == 0
    assert rows(database, "c")["c"][2] == text
    assert rows(database, "j")["j"][2] == text


@pytest.mark.parametrize(
    ("name", "code", "reason"), [("SIGTERM", 143, "terminated by SIGTERM"), ("SIGINT", 130, "interrupted by Ctrl-C")]
)
def test_embed_multi_stopped_by_a_signal_keeps_the_batches_stored(
    harness: Run, config: Callable[[str], Path], tmp_path: Path, name: str, code: int, reason: str
) -> None:
    log = tmp_path / "calls.jsonl"
    (tmp_path / "in.csv").write_text("id,content\na,one\nb,two\nc,three\n")
    database = str(tmp_path / "db.sqlite")
    config(f"plugins:\n  embedcount: {{log: {log}, signal_on_call: 2, signal_name: {name}}}\n  mock: {{}}\n")
    result = harness("embed-multi", "docs", "in.csv", "--batch-size", "1", "-d", database)
    assert result.code == code
    assert result.err == (
        f"{reason}: collection 'docs': 1 embedded, 0 unchanged, 2 not embedded (route 'mock', model 'hash', "
        "8 dimensions; 1 input tokens); run it again to resume\n"
    )
    assert sorted(rows(Path(database))) == ["a"]  # the call in flight was cancelled, nothing half-stored
    config(f"plugins:\n  embedcount: {{log: {log}}}\n  mock: {{}}\n")
    assert harness("embed-multi", "docs", "in.csv", "-d", database).code == 0
    assert logged(log) == [["one"], ["two", "three"]]


# ------------------------------------------------------------------ real wires against scripted servers


def _openai_embeddings(*vectors: tuple[float, ...]) -> bytes:
    import base64
    import struct

    data = [
        {"object": "embedding", "index": i, "embedding": base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode()}
        for i, v in enumerate(vectors)
    ]
    return json.dumps({"object": "list", "data": data, "model": "m", "usage": {"prompt_tokens": 2}}).encode()


def test_embed_multi_and_similar_on_the_openai_wire(
    harness: Run, config: Callable[[str], Path], tmp_path: Path
) -> None:
    from harness_core.testing import Reply, ScriptedServer

    json_headers = {"content-type": "application/json"}
    replies = [
        Reply(headers=json_headers, reads=[_openai_embeddings((1.0, 0.0), (0.0, 1.0))]),  # the two rows
        Reply(headers=json_headers, reads=[_openai_embeddings((0.9, 0.1))]),  # the query
        Reply(headers=json_headers, reads=[_openai_embeddings((0.5, 0.5))]),  # harness embed
    ]
    with ScriptedServer(*replies) as server:
        config(f"plugins:\n  openai: {{base_url: '{server.url}/v1', api_key: provider-test-credential}}\n")
        source = tmp_path / "rows.csv"
        source.write_text("id,content\na,first text\nb,second text\n", encoding="utf-8")
        database = tmp_path / "vectors.sqlite"
        stored = harness("embed-multi", "docs", str(source), "-r", "openai", "-m", "text-embedding-3-small",
                         "--database", str(database))  # fmt: skip
        found = harness("similar", "docs", "first-like", "--database", str(database), "--json")
        single = harness("embed", "-r", "openai", "-m", "text-embedding-3-small", "hello")
        bodies = [request.json() for request in server.requests]
    assert stored.code == 0, stored.err
    assert found.code == 0, found.err
    assert [json.loads(line)["id"] for line in found.out.splitlines()] == ["a", "b"]  # nearest first
    assert (single.code, json.loads(single.out)) == (0, [0.5, 0.5])
    assert [body["input"] for body in bodies] == [["first text", "second text"], ["first-like"], ["hello"]]
    assert {body["encoding_format"] for body in bodies} == {"base64"}


def test_embed_on_the_gemini_wire(harness: Run, config: Callable[[str], Path]) -> None:
    from harness_core.testing import Reply, ScriptedServer

    with ScriptedServer() as server:
        path = "/v1beta/models/gemini-embedding-001:batchEmbedContents"
        server.route("POST", path, lambda request: Reply.json(200, {"embeddings": [{"values": [0.75, -0.25]}]}))
        config(f"plugins:\n  gemini: {{base_url: '{server.url}/v1beta', api_key: provider-test-credential}}\n")
        result = harness("embed", "-r", "gemini", "--input-type", "query", "--json", "what is it?")
        (request,) = server.requests
    assert result.code == 0, result.err
    shown = json.loads(result.out)
    assert (shown["embedding"], shown["route"], shown["model"]) == ([0.75, -0.25], "gemini", "gemini-embedding-001")
    assert request.json()["requests"][0]["taskType"] == "RETRIEVAL_QUERY"


def test_a_collection_embedded_through_a_balance_pool_keeps_the_pool(
    harness: Run, config: Callable[[str], Path], tmp_path: Path
) -> None:
    """Found by a fresh-user trial: the collection recorded the member, so a rerun naming the pool
    was refused and `similar` went around the pool."""
    config(
        "plugins:\n  balance: {pools: {ep: [{target: mock}, {target: two}]}}\n  mock: {}\n  mock:two: {routes: [two]}\n"
    )
    source = tmp_path / "rows.csv"
    source.write_text("id,content\na,first\n", encoding="utf-8")
    database = str(tmp_path / "pool.sqlite")
    first = harness("embed-multi", "pc", str(source), "-r", "ep", "--database", database)
    source.write_text("id,content\na,first\nb,second\n", encoding="utf-8")
    again = harness("embed-multi", "pc", str(source), "-r", "ep", "--database", database)
    assert (first.code, again.code) == (0, 0), again.err
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT route FROM collections WHERE name = 'pc'").fetchall() == [("ep",)]
    conn.close()


def test_names_that_are_not_utf8_are_refused_naming_the_bytes(harness: Run, tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_text("id,content\na,one\n")
    database = str(tmp_path / "db.sqlite")
    for args in (("embed-multi", "d\udcffx", "in.csv"), ("similar", "d\udcffx", "one")):
        result = harness(*args, "-d", database)
        assert (result.code, result.err) == (2, "error: the collection name d\\xffx is not UTF-8 text\n")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "fine.md").write_text("kept")
    (tmp_path / os.fsdecode(b"notes/n\xffm.md")).write_text("named in Latin-1")
    result = harness("embed-multi", "docs", "--files", "notes", "*.md", "-d", database)
    assert result.code == 2
    assert (
        result.err == "error: --files: the file name notes/n\\xffm.md is not UTF-8: rename it (nothing was embedded)\n"
    )
    assert rows(Path(database)) == {}
