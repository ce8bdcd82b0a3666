"""The secrets module: every representation a key can take is masked, in whole texts and streams."""

from __future__ import annotations

import base64
import json
import re
from typing import Any
from urllib.parse import quote, quote_plus

import msgspec
import pytest

from harness_core import (
    BlockEnd,
    BlockStart,
    ChunkScrubber,
    Failure,
    Finish,
    FinishReason,
    Redactor,
    Secret,
    StreamChunk,
    TextBlock,
    TextDelta,
)
from harness_core.secret import MASK, representations, secret_problem, secrets_of

# built at run time so no key-shaped literal is committed
KEY = "sk-" + "proj" + '-q"uo\\te' + "'" + "Zx9/+=é-" + "0123456789"


TRAILING = "sk-" + "trailing-secret-123"  # built at run time: no key-shaped literal committed


def masked(text: str) -> str:
    redactor = Redactor()
    redactor.add(KEY)
    return redactor(text)


@pytest.mark.parametrize(
    "shown",
    [
        KEY,
        repr(KEY),
        ascii(KEY),
        str([KEY]),
        repr(KEY.encode()),
        repr(("Bearer " + KEY).encode()),
        json.dumps(KEY),
        json.dumps(KEY, ensure_ascii=False),
        msgspec.json.encode(KEY).decode(),
        json.dumps({"m": repr(KEY)}),  # repr inside JSON: escaped twice
        repr(json.dumps(KEY)),
        quote(KEY, safe=""),
        quote(KEY),
        quote_plus(KEY),
        re.sub("%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(KEY, safe="")),
        "Basic " + base64.b64encode(b"user:" + KEY.encode()).decode(),
        "Basic " + base64.b64encode(b"me:" + KEY.encode()).decode(),
        "Basic " + base64.b64encode(b"x:" + KEY.encode()).decode(),
        base64.urlsafe_b64encode(b"ab:" + KEY.encode()).decode(),
        f"  {KEY}\r\n".strip(),
    ],
)
def test_every_representation_is_masked(shown: str) -> None:
    out = masked(f"before {shown} after")
    assert "0123456789" not in out
    assert MASK in out
    assert out.startswith("before ")


def test_a_key_with_surrounding_whitespace_is_masked_without_it() -> None:
    redactor = Redactor()
    redactor.add(TRAILING + "\r")
    assert redactor(f"got {TRAILING} back") == f"got {MASK} back"
    assert TRAILING + "\r" in representations(TRAILING + "\r")


def test_short_values_are_no_secrets_and_an_empty_redactor_changes_nothing() -> None:
    redactor = Redactor()
    redactor.add("ab")
    assert not redactor
    assert redactor("ab cd") == "ab cd"
    assert redactor.safe_end("ab") == 2
    assert redactor.mask("x") == "x"
    assert representations("ab") == set()


def test_update_copies_every_secret() -> None:
    first, second = Redactor(), Redactor()
    first.add("secret-one-value")
    second.update(first)
    assert "secret-one-value" in second
    assert second("a secret-one-value b") == f"a {MASK} b"
    assert repr(second) == "Redactor(1 secrets)"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("sk-abc\r", "the secret ends with whitespace '\\r' (a CRLF line ending, e.g. from a Windows .env file?)"),
        ("sk-abc\n", "the secret ends with whitespace '\\n'; remove it"),
        (" sk-abc", "the secret starts with whitespace ' ' (space); remove it"),
        ("sk-a\x1bc", "the secret holds the control character '\\x1b' at position 5; remove it"),
        ("sk-a\x7fc", "the secret holds the control character '\\x7f' at position 5"),
        ("sk-\u2019abc", "the secret holds the non-ASCII character U+2019 at position 4"),
    ],
)
def test_unsendable_secrets_are_named_by_character_never_shown(value: str, expected: str) -> None:
    problem = secret_problem(value)
    assert problem is not None
    assert expected in problem
    assert value.strip() not in problem


def test_sendable_values_have_no_problem() -> None:
    assert secret_problem("sk-abc_DEF-123") is None
    assert secret_problem("") is None
    assert (
        secret_problem("Bearer x\ty", "its value")
        == "its value holds the control character '\\t' at position 9; remove it"
    )


def test_secrets_of_walks_structs_lists_and_mappings() -> None:
    class Inner(msgspec.Struct):
        token: Secret

    class Config(msgspec.Struct):
        key: Secret | None
        inner: list[Inner]
        extra: dict[str, Secret]
        name: str = "plain-name"

    class Plugin:
        def __init__(self) -> None:
            self.config = Config(Secret("key-one-xyz"), [Inner(Secret("key-two-xyz"))], {"a": Secret("key-three")})
            self.self_ref = self

    found = secrets_of(Plugin())
    assert {"key-one-xyz", "key-two-xyz", "key-three"} <= {
        v for v in ("key-one-xyz", "key-two-xyz", "key-three") if v in found
    }
    assert "plain-name" not in found
    shared = [Secret("cycle-key")]
    assert "cycle-key" in secrets_of((shared, shared))


def _failure_finish(message: str) -> Finish:
    return Finish(FinishReason("error", failure=Failure(code="AUTH", message=message)))


def test_the_scrubber_masks_finish_failures_before_anyone_encodes_them() -> None:
    redactor = Redactor()
    redactor.add(KEY)
    scrubber = ChunkScrubber(redactor)
    [shown] = scrubber.feed(_failure_finish(f"proxy echoed {KEY}"))
    assert isinstance(shown, Finish)
    assert shown.reason.failure is not None
    assert shown.reason.failure.message == f"proxy echoed {MASK}"
    assert KEY not in msgspec.json.encode(shown).decode()
    clean = _failure_finish("no secret here")
    assert scrubber.feed(clean) == [clean]
    stop = Finish(FinishReason("stop"))
    assert scrubber.feed(stop) == [stop]


def test_blocks_the_predicate_skips_pass_unmasked() -> None:
    redactor = Redactor()
    redactor.add(KEY)
    scrubber = ChunkScrubber(redactor, masks=lambda start: start.block_type != "text")
    chunks: list[StreamChunk] = [BlockStart(0, "text"), TextDelta(0, KEY), BlockEnd(0, TextBlock(KEY))]
    assert [shown for chunk in chunks for shown in scrubber.feed(chunk)] == chunks


@pytest.mark.parametrize("form", [KEY, json.dumps(KEY)[1:-1], repr(KEY)[1:-1]])
def test_a_split_at_every_offset_is_masked(form: str) -> None:
    redactor = Redactor()
    redactor.add(KEY)
    text = f"echo: {form} done é"
    for cut in range(len(text) + 1):
        scrubber = ChunkScrubber(redactor)
        pieces = [text[:cut], text[cut:]]
        chunks: list[StreamChunk] = [
            BlockStart(0, "text"),
            *(TextDelta(0, p) for p in pieces if p),
            BlockEnd(0, TextBlock(text)),
        ]
        shown = [out for chunk in chunks for out in scrubber.feed(chunk)]
        streamed = "".join(c.text for c in shown if isinstance(c, TextDelta))
        assert streamed == f"echo: {MASK} done é"
        end = shown[-1]
        assert isinstance(end, BlockEnd)
        assert isinstance(end.block, TextBlock)
        assert end.block.text == streamed


def _key_chars_left(key: bytes, before: bytes, after: bytes, shown: str, encoded: str) -> list[int]:
    """Indexes of base64 characters of ``encoded`` (of ``before + key + after``) still in ``shown``
    that carry at least one bit of ``key``. Visible characters are found by aligning the
    unmasked start and end of ``encoded`` (the mask replaces one run in the middle)."""
    head = len(shown.split(MASK)[0]) if MASK in shown else len(encoded.rstrip("="))
    tail = len(shown.split(MASK)[-1]) if MASK in shown else 0
    data = encoded.rstrip("=")
    key_bits = (8 * len(before), 8 * (len(before) + len(key)))
    visible = [*range(head), *range(len(encoded) - tail, len(data))]
    return [i for i in visible if 6 * i < key_bits[1] and 6 * i + 6 > key_bits[0]]


@pytest.mark.parametrize("length", [9, 10, 11, 12, 13, 20, 33])
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
def test_base64_edges_of_a_key_are_masked_at_every_alignment(length: int, encode: Any) -> None:
    key = ("sk-" + "q~v?z" * 10)[:length]  # '~' and '?' put + and / (or - and _) in the encoding
    redactor = Redactor()
    redactor.add(key)
    for before in (b"", b"x", b"xy", b"user:", b"me:"):
        for after in (b"", b"!", b"!?", b"\nend"):
            encoded = encode(before + key.encode() + after).decode()
            shown = redactor(encoded)
            assert MASK in shown, (before, after)
            assert _key_chars_left(key.encode(), before, after, shown, encoded) == [], (before, after, shown)
            framed = redactor(f"B64[{encoded}]")
            assert framed.startswith("B64[")
            assert framed.endswith("]")


def test_base64_edges_are_masked_when_streamed_in_any_split() -> None:
    key = "sk-live-abcdefgh"
    redactor = Redactor()
    redactor.add(key)
    encoded = base64.b64encode(b"x" + key.encode() + b"y").decode()  # eHNr... as in the report
    text = f"B64[{encoded}] done"
    whole = redactor(text)
    for cut in range(len(text) + 1):
        stream = redactor.stream()
        shown = stream.feed(text[:cut]) + stream.feed(text[cut:]) + stream.flush()
        assert shown == whole, cut
    assert whole.startswith("B64[")
    assert whole.endswith("] done")
    assert _key_chars_left(key.encode(), b"x", b"y", whole[4:-6], encoded) == []


def test_a_secret_too_short_for_base64_forms_holds_back_nothing_extra() -> None:
    redactor = Redactor()
    redactor.add("abcd")  # its base64 forms would be shorter than 8 characters: none are masked
    assert redactor.safe_end("plain") == 5
    assert redactor.safe_end("plain ab") == 6


FRESH = "sk-" + "UcdsQhTrWxYzAbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGhIjKl"  # the fresh-user report's shape


@pytest.mark.parametrize(
    "shown",
    [
        "".join(f"%{b:02X}" for b in FRESH.encode()),  # every character percent-encoded
        "".join(f"%{b:02x}" for b in FRESH.encode()),  # lower-case hex
        FRESH.replace("-", "%2D"),  # only the unreserved `-` encoded
        FRESH.replace("-", "%2d"),
        "".join(f"\\u{ord(c):04x}" for c in FRESH),  # JSON \u escapes
        "".join(f"\\u{ord(c):04X}" for c in FRESH),
        json.dumps("".join(f"\\u{ord(c):04x}" for c in FRESH))[1:-1],  # and that inside JSON
        FRESH.lower(),  # a host name: lower-cased by the URL parser
        FRESH.upper(),  # a server echoing the key upper-cased (found by a fresh-user trial)
    ],
)
def test_every_character_encoded_and_the_lower_cased_key_are_masked(shown: str) -> None:
    redactor = Redactor()
    redactor.add(FRESH)
    text = f"error: cannot resolve http://{shown}.invalid/v1 (DNS)"
    assert redactor(text) == f"error: cannot resolve http://{MASK}.invalid/v1 (DNS)"
    assert shown in {form for form in representations(FRESH)}
