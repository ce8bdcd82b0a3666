"""Per-file coverage gate: every measured file must be 100 % covered (lines and branches).

Usage: ``python tools/coverage_gate.py coverage.json`` (the output of ``coverage json``).
Files listed in ``tools/coverage_exemptions.txt`` (``path: reason``, one per line) are
reported but do not fail the gate. Exit status 1 lists every file below 100 %.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

EXEMPTIONS = Path(__file__).with_name("coverage_exemptions.txt")


def load_exemptions() -> dict[str, str]:
    exemptions: dict[str, str] = {}
    if EXEMPTIONS.exists():
        for line in EXEMPTIONS.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                path, _, reason = line.partition(":")
                exemptions[path.strip()] = reason.strip()
    return exemptions


def main(report_path: str) -> int:
    report = json.loads(Path(report_path).read_text())
    exemptions = load_exemptions()
    failing: list[str] = []
    for path, data in sorted(report["files"].items()):
        summary = data["summary"]
        missing = summary["missing_lines"] + summary.get("missing_branches", 0)
        if missing == 0:
            continue
        lines = ",".join(str(n) for n in data["missing_lines"][:20])
        branches = ",".join(f"{a}->{b}" for a, b in data.get("missing_branches", [])[:20])
        detail = f"{path}: {summary['percent_covered']:.1f}% (lines {lines or '-'}; branches {branches or '-'})"
        if path in exemptions:
            print(f"exempt   {detail} [{exemptions[path]}]")
        else:
            failing.append(detail)
    for detail in failing:
        print(f"FAIL     {detail}")
    print(f"coverage gate: {len(report['files'])} files measured, {len(failing)} below 100 %")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
