"""pytest-harness: pytest fixtures wrapping :mod:`harness_core.testing`.

Installed, it registers the ``pytest11`` plugin :mod:`pytest_harness.plugin`, which only adds
fixtures whose names start with ``harness_``; it defines no hooks and no ``anyio_backend``.
"""

from __future__ import annotations

__all__: list[str] = []
