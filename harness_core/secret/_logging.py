"""The logging filter: :class:`RedactFilter` scrubs secrets from log records,
:func:`redacted_logging` puts one on every root handler for a block, :data:`HTTP_LOGGERS` names
the HTTP stack's loggers that quote headers."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Final

__all__ = ["HTTP_LOGGERS", "RedactFilter", "redacted_logging"]


HTTP_LOGGERS: Final = (
    "httpx",
    "httpcore",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
)
"""The loggers of the HTTP stack (httpx and httpcore's per-module loggers) whose DEBUG records
quote request and response headers."""


class RedactFilter(logging.Filter):
    """A :class:`logging.Filter` that scrubs secrets from every record it sees; it drops nothing.

    Attach it to a *handler* (``handler.addFilter(RedactFilter(loaded.redact))``): filters on a
    logger do not see records propagated from child loggers. It replaces the record's message
    (arguments merged in), its formatted traceback (``exc_text``; ``exc_info`` is kept so a
    formatter still knows there is one) and ``stack_info`` by their redacted text. ``redact`` is
    any ``str -> str`` scrubber, e.g. :meth:`harness_core.loader.LoadedConfig.redact`.
    """

    def __init__(self, redact: Callable[[str], str]) -> None:
        super().__init__()
        self.redact = redact
        self._loggers: list[logging.Logger] = []

    def attach(self, names: Iterable[str] = HTTP_LOGGERS) -> None:
        """Also scrub the records of the loggers ``names`` themselves (a filter on a logger sees
        the records logged on it, not those of its children, hence the full names). The
        :class:`~harness_core.runtime.Harness` does this for :data:`HTTP_LOGGERS` while it runs:
        a library caller's own DEBUG handlers then never see a key in httpcore's header dumps
        (a redirect's ``Location`` holding the key). Undo with :meth:`detach`."""
        for name in names:
            named = logging.getLogger(name)
            named.addFilter(self)
            self._loggers.append(named)

    def detach(self) -> None:
        """Remove this filter from the loggers :meth:`attach` added it to."""
        for named in self._loggers:
            named.removeFilter(self)
        self._loggers.clear()

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self.redact(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True


@contextmanager
def redacted_logging(redact: Callable[[str], str]) -> Iterator[RedactFilter]:
    """Within the block, every handler of the root logger scrubs secrets (a :class:`RedactFilter`).

    Handlers added inside the block are not covered; the filter is removed on exit.
    """
    handlers = list(logging.getLogger().handlers)
    redact_filter = RedactFilter(redact)
    for handler in handlers:
        handler.addFilter(redact_filter)
    try:
        yield redact_filter
    finally:
        for handler in handlers:
            handler.removeFilter(redact_filter)
