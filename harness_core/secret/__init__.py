"""Everything about secrets in one place: :class:`Secret`, :class:`Redactor`, streaming
hold-back (:class:`ChunkScrubber`) and the logging filter (:class:`RedactFilter`).

Config fields holding keys or tokens are typed ``Secret``: its ``repr``, ``str`` and format
output are a fixed mask, and the value is read explicitly with :meth:`Secret.get_secret_value`
at the one place it is sent (an HTTP header).

A :class:`Redactor` knows every secret value of a configuration and masks it in text — not only
the value as written, but every representation output paths produce from it (see
:func:`representations`): Python ``repr``/``ascii`` and bytes-``repr`` escaping (an exception
message quoting a header), JSON escaping (``--json`` lines, trace files, cache rows), URL
percent-encoding (a query string: as encoders do, every character, or every character but
letters and digits), every character a JSON ``\\uXXXX`` escape, base64 (``Authorization:
Basic`` of ``user:key``, at any alignment), the value without surrounding whitespace and
lower-cased (a host name), and each of those escaped once more (``repr`` of a JSON text). Mask
text *before* encoding it; a redactor also catches what was encoded first, but only in the
encodings listed here.

Text that arrives in pieces (a streamed reply echoing a key across two deltas) is masked by
:class:`ChunkScrubber`: per content block it holds back the tail that could still begin a secret
until the next delta or the block's end decides. The same scrubber runs the ``redact``
middleware's regular-expression masking (any object with ``mask(text)`` and ``stream()``, see
:class:`Redaction`).

One concept per module (the package re-exports every public name; import from here):
:mod:`~harness_core.secret._value` (:class:`Secret`, :class:`ConnectionString`, :data:`MASK`,
:func:`secret_problem`), :mod:`~harness_core.secret._forms` (:func:`representations`),
:mod:`~harness_core.secret._redactor` (:class:`Redactor`, :func:`secrets_of`),
:mod:`~harness_core.secret._holdback` (:class:`TextStream`, :class:`Redaction`),
:mod:`~harness_core.secret._scrubber` (:class:`ChunkScrubber`),
:mod:`~harness_core.secret._masking` (:class:`SecretMasking`, :func:`mask_strings`) and
:mod:`~harness_core.secret._logging` (:class:`RedactFilter`, :func:`redacted_logging`,
:data:`HTTP_LOGGERS`).
"""

from __future__ import annotations

from harness_core.secret._forms import representations
from harness_core.secret._holdback import Redaction, TextStream
from harness_core.secret._logging import HTTP_LOGGERS, RedactFilter, redacted_logging
from harness_core.secret._masking import SecretMasking, mask_strings
from harness_core.secret._redactor import Redactor, secrets_of
from harness_core.secret._scrubber import ChunkScrubber
from harness_core.secret._value import MASK, MIN_SECRET, ConnectionString, Secret, connection_secrets, secret_problem

__all__ = [
    "HTTP_LOGGERS",
    "MASK",
    "MIN_SECRET",
    "ChunkScrubber",
    "ConnectionString",
    "RedactFilter",
    "Redaction",
    "Redactor",
    "Secret",
    "SecretMasking",
    "TextStream",
    "connection_secrets",
    "mask_strings",
    "redacted_logging",
    "representations",
    "secret_problem",
    "secrets_of",
]
