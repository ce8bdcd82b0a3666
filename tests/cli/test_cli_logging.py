"""CLI log output: one line per record; tracebacks only with -v."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from harness_core.cli._logging import configure_logging


@pytest.fixture
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def fail(logger_name: str) -> None:
    try:
        raise RuntimeError("plugin exploded")
    except RuntimeError as exc:
        logging.getLogger(logger_name).error("plugin 'x' failed", exc_info=exc)


@pytest.mark.usefixtures("restore_root_logger")
def test_default_shows_the_message_without_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(0)
    configure_logging(0)  # a second call replaces the handler: no duplicate lines
    fail("harness")
    logging.getLogger("harness").info("not shown")
    err = capsys.readouterr().err
    assert err == "harness: ERROR: plugin 'x' failed [harness] (run with -v for the traceback)\n"


@pytest.mark.usefixtures("restore_root_logger")
def test_verbose_shows_tracebacks_and_info(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(1)
    fail("harness_llm_openai.adapter")
    logging.getLogger("harness").info("shown")
    logging.getLogger("harness").debug("hidden")
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert "RuntimeError: plugin exploded" in err
    assert "harness: INFO: shown [harness]" in err
    assert "hidden" not in err
    configure_logging(2)
    logging.getLogger("harness").debug("now shown")
    assert "harness: DEBUG: now shown" in capsys.readouterr().err


@pytest.mark.usefixtures("restore_root_logger")
def test_redact_logs_scrubs_messages_and_tracebacks(capsys: pytest.CaptureFixture[str]) -> None:
    from harness_core.cli._logging import redact_logs

    configure_logging(1)
    redact_logs(lambda text: text.replace("plugin exploded", "[masked]").replace("'x'", "[masked]"))
    fail("harness")
    err = capsys.readouterr().err
    assert "plugin exploded" not in err
    assert "RuntimeError: [masked]" in err
    assert "harness: ERROR: plugin [masked] failed [harness]" in err
