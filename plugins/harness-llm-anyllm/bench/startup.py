"""Measure what the anyllm plugin costs at start-up and on first use (wall-clock medians).

Run from a directory holding a plugins.yaml that enables ``anyllm`` (or pass none: the script
writes one to a temporary directory)::

    python plugins/harness-llm-anyllm/bench/startup.py [runs]

Prints the median of ``runs`` (default 15) fresh interpreter runs of: ``harness --help``,
``harness plugins`` with ``anyllm`` enabled, ``import any_llm``, and the first-request set-up
(``AnyLLM.create``) of the openai, anthropic and mistral providers.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIG = "plugins:\n  mock: {}\n  anyllm:\n    provider: mistral\n    api_key: unused-key\n"

CASES = {
    "harness --help": ["-m", "harness_core.cli", "--help"],
    "harness plugins (anyllm enabled)": ["-m", "harness_core.cli", "plugins"],
    "import any_llm": ["-c", "import any_llm"],
    "AnyLLM.create('openai')": ["-c", "from any_llm import AnyLLM; AnyLLM.create('openai', api_key='k')"],
    "AnyLLM.create('anthropic')": ["-c", "from any_llm import AnyLLM; AnyLLM.create('anthropic', api_key='k')"],
    "AnyLLM.create('mistral')": ["-c", "from any_llm import AnyLLM; AnyLLM.create('mistral', api_key='k')"],
}


def median_seconds(args: list[str], runs: int, cwd: str) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, *args], cwd=cwd, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "plugins.yaml").write_text(CONFIG)
        baseline = median_seconds(["-c", "pass"], runs, folder)
        print(f"python -c pass: {baseline * 1000:.0f} ms (subtracted below)")
        for label, args in CASES.items():
            print(f"{label}: {(median_seconds(args, runs, folder) - baseline) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
