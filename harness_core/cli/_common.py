"""Helpers shared by the subcommands: exit codes, an output sink, loading with reporting."""

from __future__ import annotations

from typing import Final, TextIO

from harness_core.config import ConfigError
from harness_core.loader import LoadedConfig, load_config

__all__ = ["EXIT_ABORTED", "EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "Sink", "load_for_start"]

EXIT_OK: Final = 0
EXIT_ERROR: Final = 1
EXIT_USAGE: Final = 2
EXIT_ABORTED: Final = 130


class Sink:
    """A text stream that remembers whether its output ends a line; every write is flushed."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.at_line_start = True

    def write(self, text: str) -> None:
        if text:
            self.stream.write(text)
            self.stream.flush()
            self.at_line_start = text.endswith("\n")

    def end_line(self) -> None:
        """Finish the current line, if one is open."""
        if not self.at_line_start:
            self.write("\n")


def load_for_start(config: str | None, err: Sink) -> LoadedConfig | None:
    """Load ``config`` for a command that starts the harness (``run``, ``chain``).

    Reports problems and plugin failures on ``err``. Returns ``None`` (exit 2) on a config
    problem or when a middleware failed (SPEC §6: a failed middleware stops the run, silently
    dropping a redaction layer would leak data); adapter plugins that failed are warned about.
    """
    try:
        loaded = load_config(config)
    except ConfigError as exc:
        err.write(f"error: {exc}\n")
        return None
    stop = False
    for failure in loaded.failures:
        if failure.is_middleware:
            err.write(f"error: {failure.message}\n  a middleware that fails stops harness (fail closed)\n")
            stop = True
        else:
            err.write(f"warning: {failure.message}; its routes are unavailable\n")
    return None if stop else loaded
