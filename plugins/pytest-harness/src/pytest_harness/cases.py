"""The shared fault cases for a test module, or a reasoned skip when a clone has none.

:func:`harness_core.testing.load_cases` raises ``FileNotFoundError`` when the cases folder
(``HARNESS_CASES_DIR``, default ``../shared/cases`` beside the repository) is missing, so a module
that loads cases at import would fail to *collect* on a plain clone. :func:`load_cases_or_skip`
turns that into a module-level skip naming the folder and how to point at it, except on a CI
machine (``CI`` set to anything but ``""``/``0``/``false``), where a missing folder stays an error:
a CI run never passes on zero cases.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_core.testing import Case

__all__ = ["load_cases_or_skip"]


def _on_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def load_cases_or_skip(provider_format: str | None = None, *, directory: Path | None = None) -> list[Case]:
    """:func:`harness_core.testing.load_cases` (same arguments, same result), called at a test
    module's import.

    Raises:
        pytest.skip.Exception: the folder does not exist and this is not CI (the whole module is
            skipped, with the loader's message as the reason).
        FileNotFoundError: the folder does not exist on CI (``CI`` is set).
    """
    from harness_core.testing import load_cases

    try:
        return load_cases(provider_format, directory=directory)
    except FileNotFoundError as exc:
        if _on_ci():
            raise
        pytest.skip(str(exc), allow_module_level=True)
