"""The prompt log's api-key masker imports the ``regex`` module only for a text that may hold a
key (one of the presets' literals: ``sk-``, ``AKIA`` …): a one-shot ``harness run`` whose record
holds none starts without it (issue 25: start-up with every first-party plugin installed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness_core.errors import LlmError
from harness_middleware.redact import PRESET_GROUPS, PRESETS, Masker

API_KEYS = {name: PRESETS[name] for name in PRESET_GROUPS["api-keys"]}
KEY = "sk-" + "a1B2" * 10


def in_fresh_interpreter(code: str) -> str:
    """stdout of ``code`` run by a new interpreter (no module of this test process loaded)."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return result.stdout.strip()


def test_a_lazy_masker_compiles_on_the_first_text_that_may_hold_a_match() -> None:
    masker = Masker(API_KEYS, "[REDACTED:{name}]", 256, lazy=True)
    assert masker.mask("Hello from the benchmark") == "Hello from the benchmark"
    assert "pattern" not in vars(masker)  # not compiled: no literal of a key in the text
    assert masker.mask(f"key {KEY} here") == "key [REDACTED:openai-key] here"
    assert masker.pattern is not None
    # a literal without a whole match: compiled, searched, unchanged
    assert masker.mask("ask-me") == "ask-me"


def test_a_lazy_masker_streams_like_an_eager_one() -> None:
    lazy, eager = Masker(API_KEYS, "[{name}]", 256, lazy=True), Masker(API_KEYS, "[{name}]", 256)
    assert "pattern" in vars(eager)  # redact's own maskers compile at config time
    pieces = ["one ", KEY[:5], KEY[5:], " two"]
    for masker in (lazy, eager):
        stream = masker.stream()
        assert "".join(stream.feed(piece) for piece in pieces) + stream.flush() == "one [openai-key] two"


def test_a_lazy_masker_still_checks_what_only_regex_reads() -> None:
    """A pattern CPython's parser does not read is compiled by ``regex`` at once: a bad one is a
    CONFIG error naming it, as without ``lazy``."""
    with pytest.raises(LlmError, match="pattern 'bad' is not a valid regular expression") as caught:
        Masker({"bad": "(unclosed"}, "[{name}]", lazy=True)
    assert caught.value.code == "CONFIG"
    masker = Masker({"letters": r"\p{Lu}{3}"}, "[{name}]", lazy=True)  # regex-only syntax: no literal filter
    assert masker.mask("say ABC") == "say [letters]"


def test_the_prompt_log_masks_a_keyless_record_without_importing_regex() -> None:
    code = (
        "import sys, tempfile, pathlib\n"
        "from harness_middleware.promptlog import PromptLogPlugin\n"
        "path = pathlib.Path(tempfile.mkdtemp()) / 'log.sqlite'\n"
        "plugin = PromptLogPlugin(PromptLogPlugin.Config(path=str(path)))\n"
        "print(plugin._mask({'prompt': 'Hello there', 'n': [1, 'two']}), 'regex' in sys.modules)\n"
        f"print(plugin._mask('a key {KEY}'), 'regex' in sys.modules)\n"
    )
    assert in_fresh_interpreter(code).splitlines() == [
        "{'prompt': 'Hello there', 'n': [1, 'two']} False",
        "a key [REDACTED:openai-key] True",
    ]
