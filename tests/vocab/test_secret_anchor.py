"""The redactor's quick test (its literal anchors) never lets an occurrence through: text it
passes unchanged holds no match of the masking expression, in any representation of a secret of
any length, whole or split across streamed pieces at every pair of offsets."""

from __future__ import annotations

import base64
import itertools
import json
import random
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness_core import Redactor
from harness_core.secret import MASK, representations
from harness_core.secret._forms import _base64_forms

# built at run time from a fixed seed: no key-shaped literal is committed
_RNG = random.Random(25)
KEYS = [
    "".join(_RNG.choices(string.ascii_letters, k=3)),  # MIN_SECRET: anchors shorter than 8
    "sk-" + "".join(_RNG.choices(string.ascii_letters + string.digits, k=4)),
    "sk-" + "proj-" + "".join(_RNG.choices(string.ascii_letters + string.digits + "_-/+='\"\\é", k=48)),
]


def _redactor(key: str) -> Redactor:
    redactor = Redactor()
    redactor.add(key)
    redactor("")  # build the expression and the anchors
    return redactor


def _forms(key: str) -> list[str]:
    """Every literal the redactor masks and every text a base64 occurrence can start with."""
    starts = {start for form in _base64_forms(key) for start in form.starts()}
    return sorted(representations(key) | starts)


def _check(redactor: Redactor, text: str) -> None:
    matcher = redactor._matcher
    assert matcher is not None
    if not matcher.may_occur(text):  # skipped: the expression must agree there is nothing
        assert matcher.pattern.search(text) is None, text
    assert redactor(text) == matcher.pattern.sub(MASK, text)


@pytest.mark.parametrize("key", KEYS, ids=["3-chars", "7-chars", "56-chars"])
def test_every_form_whole_or_cut_short_at_either_end_is_judged_as_the_expression_judges_it(key: str) -> None:
    redactor = _redactor(key)
    matcher = redactor._matcher
    assert matcher is not None
    assert matcher.size == min(8, len(key))
    for form in _forms(key):
        text = f"echo: {form} done"
        assert matcher.may_occur(text)
        assert redactor(text) != text
        for cut in range(len(form) + 1):  # near misses: the form without its head or its tail
            _check(redactor, form[cut:])
            _check(redactor, form[:cut])
            _check(redactor, f"x{form[cut:]}y")


def test_text_shorter_than_the_anchors_and_ordinary_replies_pass_unchanged() -> None:
    redactor = _redactor(KEYS[2])
    matcher = redactor._matcher
    assert matcher is not None
    assert not matcher.may_occur(KEYS[2][:7])  # shorter than an anchor
    reply = "The quick brown fox jumps over the lazy dog. " * 20
    assert not matcher.may_occur(reply)
    assert redactor(reply) is reply


_KEY = KEYS[2]
_PIECES = [*_forms(_KEY)[:40], _KEY, base64.b64encode(b"u:" + _KEY.encode()).decode(), "sk-", "proj", " ", "é"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(
        st.one_of(
            st.sampled_from(_PIECES).flatmap(
                lambda p: st.tuples(st.integers(0, len(p)), st.integers(0, len(p))).map(lambda ab: p[ab[0] : ab[1]])
            ),
            st.text(string.ascii_letters + string.digits + "-_%\\'\" é", max_size=6),
        ),
        max_size=8,
    )
)
def test_text_made_of_pieces_of_forms_is_judged_as_the_expression_judges_it(parts: list[str]) -> None:
    _check(_REDACTOR, "".join(parts))


_REDACTOR = _redactor(_KEY)


@pytest.mark.parametrize("key", KEYS[1:], ids=["7-chars", "56-chars"])
@pytest.mark.parametrize("kind", ["plain", "json", "basic", "urlsafe"])
def test_a_secret_split_at_every_pair_of_offsets_is_masked_as_the_whole_text_is(key: str, kind: str) -> None:
    redactor = _redactor(key)
    shown = {
        "plain": key,
        "json": json.dumps(key)[1:-1],
        "basic": base64.b64encode(b"me:" + key.encode()).decode(),
        "urlsafe": base64.urlsafe_b64encode(b"ab:" + key.encode()).decode(),
    }[kind]
    text = f"say {shown} ok"
    whole = redactor(text)
    assert MASK in whole
    secret_parts = [f.fragment for f in _base64_forms(key) if f.fragment in shown] or [key]
    step = 1 if len(text) < 40 else 3  # every pair for the short key, every third for the long one
    for a, b in itertools.combinations_with_replacement(range(0, len(text) + 1, step), 2):
        stream = redactor.stream()
        out = stream.feed(text[:a]) + stream.feed(text[a:b]) + stream.feed(text[b:]) + stream.flush()
        assert out == whole, (a, b)
        for part in secret_parts:
            assert part not in out
