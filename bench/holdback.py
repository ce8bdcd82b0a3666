"""The secret hold-back in isolation: build cost and CPU per delta of a :class:`Redactor`.

``python -m bench.holdback`` prints, for the 56-character key of
``tests/vocab/test_secret_holdback.py``: the number of masked forms and hold-back prefixes, the
time to build the masking expression (one key, ten keys), the best of five CPU times per delta
over 20,000 one-word deltas drawn from README.md and docs/runtime.md, and the share of deltas
held back (with one key and with twenty); then the same for deltas ending in digits, in ``%`` and
in ``\\u00``. Times are ``time.process_time`` (CPU), in milliseconds or microseconds.
"""

from __future__ import annotations

import random
import re
import string
import time
from pathlib import Path

from harness_core.secret import Redactor, representations

_ROOT = Path(__file__).resolve().parents[1]
_KEY_ALPHABET = string.ascii_letters + string.digits + "_-"


def _redactor(keys: list[str]) -> tuple[Redactor, float]:
    """A redactor of ``keys`` and the seconds (CPU) its first use took (the build)."""
    redactor = Redactor()
    for key in keys:
        redactor.add(key)
    started = time.process_time()
    redactor("x")
    return redactor, time.process_time() - started


def _per_delta(redactor: Redactor, deltas: list[str], *, flush: bool) -> float:
    """Best of five CPU seconds per delta fed to one stream (each delta flushed when ``flush``)."""
    best = float("inf")
    for _ in range(5):
        stream = redactor.stream()
        started = time.process_time()
        for delta in deltas:
            stream.feed(delta)
            if flush:
                stream.flush()
        best = min(best, (time.process_time() - started) / len(deltas))
    return best


def _held(redactor: Redactor, deltas: list[str]) -> float:
    """Percent of ``deltas`` of which the hold-back keeps something back."""
    return 100 * sum(redactor.safe_end(d) != len(d) for d in deltas) / len(deltas)


def main() -> None:
    """Print the measurements (see the module doc)."""
    key = "sk-" + "proj-" + "".join(random.Random(17).choices(_KEY_ALPHABET, k=48))
    text = (_ROOT / "README.md").read_text(encoding="utf-8") + (_ROOT / "docs" / "runtime.md").read_text(
        encoding="utf-8"
    )
    vocabulary = re.findall(r"[A-Za-z']+[.,]?", text)
    rng = random.Random(3)
    words = [" " + rng.choice(vocabulary) for _ in range(20_000)]
    redactor, build = _redactor([key])
    print(f"forms {len(representations(key))}, prefixes {len(redactor._prefixes)}, build {build * 1000:.1f} ms")
    ten = ["sk-" + "".join(random.Random(i).choices(string.ascii_letters + string.digits, k=53)) for i in range(10)]
    print(f"build, ten keys: {_redactor(ten)[1] * 1000:.1f} ms")
    print(f"per delta: {_per_delta(redactor, words, flush=False) * 1e6:.3f} us, held {_held(redactor, words):.1f} %")
    twenty = ["sk-" + "".join(random.Random(100 + i).choices(_KEY_ALPHABET, k=53)) for i in range(20)]
    print(f"held with twenty keys: {_held(_redactor(twenty)[0], words):.1f} %")
    endings = {
        "digits": [f" {rng.randrange(10**6)}" for _ in range(20_000)],
        "percent": [f" {rng.randrange(100)}%" for _ in range(20_000)],
        "backslash-u": [" \\u00"] * 20_000,
    }
    for label, deltas in endings.items():
        cost = _per_delta(redactor, deltas, flush=True) * 1e6
        print(f"{label}: {cost:.3f} us per delta + flush, held {_held(redactor, deltas):.1f} %")


if __name__ == "__main__":
    main()
