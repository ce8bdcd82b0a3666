"""Output files of middleware: the start-up check leaves nothing behind and catches what
``os.access`` misses; run-time write failures are logged once, never raised."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest

from harness_core.outfile import WriteFailureLog, check_output_file, write_in_thread


def test_an_existing_file_or_a_creatable_path_passes(tmp_path: Path) -> None:
    existing = tmp_path / "log.jsonl"
    existing.write_bytes(b"kept")
    assert check_output_file(existing, "trace path") == existing
    assert existing.read_bytes() == b"kept"
    deep = tmp_path / "a" / "b" / "c.sqlite"
    assert check_output_file(deep, "usage path") == deep
    assert os.listdir(tmp_path) == ["log.jsonl"]  # the probe folder is gone, nothing was created


def test_relative_paths_are_checked_in_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert check_output_file(Path("x.jsonl"), "trace path") == Path("x.jsonl")


def test_unusable_paths_name_the_path_and_the_reason(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^usage path '.*' is a directory; expected a file such as usage\.sqlite$"):
        check_output_file(tmp_path, "usage path", example="usage.sqlite")
    with pytest.raises(ValueError, match=r"^trace path '.*' is a directory; expected a file$"):
        check_output_file(tmp_path, "trace path")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ValueError, match=r"cannot be created: '.*file' is not a folder"):
        check_output_file(blocker / "sub" / "x.sqlite", "usage path")
    # root passes os.access on /proc; creating in it still fails
    proc = r"^usage path '/proc/nope/u\.sqlite' cannot be created: cannot write in '/proc' \("
    with pytest.raises(ValueError, match=proc):
        check_output_file(Path("/proc/nope/u.sqlite"), "usage path")


@pytest.mark.skipif(not Path("/proc/version").exists(), reason="needs /proc")
def test_an_existing_file_that_cannot_be_appended_to() -> None:
    with pytest.raises(ValueError, match=r"^trace path '/proc/version' cannot be written: "):
        check_output_file(Path("/proc/version"), "trace path")


def test_failures_are_logged_once_then_at_debug_and_recovery_is_said(caplog: pytest.LogCaptureFixture) -> None:
    log = WriteFailureLog(logging.getLogger("harness.test.outfile"), "trace: appending to t.jsonl")
    with caplog.at_level(logging.DEBUG, logger="harness.test.outfile"):
        log.succeeded()  # nothing to say
        log.failed(OSError(28, "No space left on device"))
        log.failed(OSError(28, "No space left on device"))
        log.succeeded()
        log.failed(PermissionError(13, "Permission denied"))
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        (
            "ERROR",
            "trace: appending to t.jsonl failed: OSError: [Errno 28] No space left on device "
            "(the data is not written; further failures are logged at DEBUG)",
        ),
        ("DEBUG", "trace: appending to t.jsonl failed again"),
        ("WARNING", "trace: appending to t.jsonl works again after 2 failed writes"),
        (
            "ERROR",
            "trace: appending to t.jsonl failed: PermissionError: [Errno 13] Permission denied "
            "(the data is not written; further failures are logged at DEBUG)",
        ),
    ]


@pytest.mark.anyio
async def test_write_in_thread_reports_errors_and_timeouts(caplog: pytest.LogCaptureFixture) -> None:
    log = WriteFailureLog(logging.getLogger("harness.test.outfile"), "w")
    written: list[int] = []

    def fails() -> None:
        raise IsADirectoryError(21, "Is a directory")

    def other() -> None:
        raise KeyError("not a write failure")

    with caplog.at_level(logging.DEBUG, logger="harness.test.outfile"):
        await write_in_thread(fails, bound=5, failures=log)
        assert log.failures == 1
        await write_in_thread(lambda: written.append(1), bound=5, failures=log)
        assert (written, log.failures) == ([1], 0)
        with pytest.raises(KeyError):
            await write_in_thread(other, bound=5, failures=log)
        gate = threading.Event()  # the worker waits until the test has seen the bound pass
        await write_in_thread(gate.wait, bound=0.01, failures=log)
        gate.set()
    assert log.failures == 1
    assert "w failed: TimeoutError: the write took over 0.01s" in caplog.text


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_private_files_and_their_new_folders_are_the_users_only(tmp_path: Path) -> None:
    from harness_core import private_dir, private_file

    previous = os.umask(0o022)  # the usual umask, which makes files world-readable
    try:
        path = private_file(tmp_path / "a" / "b" / "log.sqlite")
        assert path.read_bytes() == b""
        assert (_mode(tmp_path / "a"), _mode(tmp_path / "a" / "b"), _mode(path)) == (0o700, 0o700, 0o600)
        path.write_bytes(b"kept")
        path.chmod(0o640)  # an existing file (and folder) is left as the user set it
        assert private_file(path).read_bytes() == b"kept"
        assert _mode(path) == 0o640
        (tmp_path / "open").mkdir(mode=0o755)
        assert private_dir(tmp_path / "open") == tmp_path / "open"
        assert _mode(tmp_path / "open") == 0o755
    finally:
        os.umask(previous)


def test_a_private_folder_behind_a_file_is_an_error(tmp_path: Path) -> None:
    from harness_core.outfile import private_dir

    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError):
        private_dir(tmp_path / "file")
    with pytest.raises(FileExistsError, match="file"):
        private_dir(tmp_path / "file" / "below")
