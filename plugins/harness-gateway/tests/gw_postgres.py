"""A throwaway PostgreSQL cluster for tests: initdb in a temp dir, 127.0.0.1 on a free port, trust auth.

Found at ``/usr/lib/postgresql/*/bin`` (Debian's ``postgresql`` package, which ``.ci/run``
installs). When it is absent the tests skip with the reason, except under ``CI=true`` where they
fail: CI must run them. As root, the server runs as the ``postgres`` user (it refuses root).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from gw_servers import free_port, missing


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


class Cluster:
    """One PostgreSQL server: :meth:`start`, :meth:`stop`, ``dsn``."""

    def __init__(self, root: Path) -> None:
        bin_dir = _bin_dir()
        if bin_dir is None:
            missing("PostgreSQL is not installed (/usr/lib/postgresql/*/bin/initdb); apt-get install postgresql")
        self.bin = bin_dir
        self.root = root
        self.data = root / "data"
        self.port = free_port()
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(root, "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]
        subprocess.run(
            [
                *self.as_user,
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
            ],
            check=True,
            capture_output=True,
        )

    def start(self) -> None:
        """Start the server and wait until it accepts connections (``pg_ctl -w``). A port taken
        since :func:`free_port` chose it (another test's server bound it meanwhile) is retried
        on a new port, up to 5 times.

        Raises:
            RuntimeError: it did not start (its log in the message).
        """
        for _ in range(5):
            options = f"-h 127.0.0.1 -p {self.port} -k {self.root} -c fsync=off"
            log = self.root / "log"
            done = subprocess.run(
                [
                    *self.as_user,
                    str(self.bin / "pg_ctl"),
                    "-D",
                    str(self.data),
                    "-o",
                    options,
                    "-l",
                    str(log),
                    "-w",
                    "start",
                ],
                check=False,
                capture_output=True,
            )
            if done.returncode == 0:
                return
            text = log.read_text(errors="replace") if log.exists() else ""
            if "could not bind" not in text and "already in use" not in text:
                break
            self.port = free_port()
            self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        raise RuntimeError(f"PostgreSQL on port {self.port} did not start: {done.stderr!r} {text[-2000:]}")

    def stop(self) -> None:
        subprocess.run(
            [*self.as_user, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"],
            check=True,
            capture_output=True,
        )


@contextlib.contextmanager
def running_postgres(prefix: str = "harness-pg-") -> Iterator[str]:
    """A throwaway cluster in a directory of its own under /tmp (the ``postgres`` user cannot
    enter pytest's ``tmp_path``) for the ``with`` block: yields its DSN; stopped and its
    directory removed after."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        cluster = Cluster(root)
        cluster.start()
        try:
            yield cluster.dsn
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
