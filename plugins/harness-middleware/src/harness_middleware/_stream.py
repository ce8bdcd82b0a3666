"""Closing an inner stream, for the middleware: :func:`aclose` is the core's
:func:`harness_core.chain.close_stream` (shielded, bounded, its cleanup's exception re-raised),
so the middleware and the runtime close streams one way. Open-block tracking and the terminal
chunks come from :class:`harness_core.assembler.BlockAssembler`."""

from __future__ import annotations

from harness_core.chain import close_stream

__all__ = ["aclose"]

aclose = close_stream
