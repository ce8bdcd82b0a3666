"""``python -m harness_core.cli`` — the same as the ``harness`` console script."""

from harness_core.cli import main

main()
