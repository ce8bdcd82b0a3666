"""The SSE decoder against the WHATWG rules (PROTOCOLS §4.1/§4.2), at every split of its input."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness_core.errors import LlmError
from harness_core.sse import SSEDecoder, SSEEvent
from harness_core.testing.splits import every_split, split_every


def decode(reads: Sequence[bytes], **kwargs: object) -> tuple[list[SSEEvent], SSEEvent | None]:
    decoder = SSEDecoder(**kwargs)  # type: ignore[arg-type]
    events: list[SSEEvent] = []
    for read in reads:
        events.extend(decoder.feed(read))
    return events, decoder.close()


def ev(data: str, **kwargs: object) -> SSEEvent:
    return SSEEvent(data=data, **kwargs)  # type: ignore[arg-type]


# (input bytes, complete events, event reported by close()) — the §4.2 table and more.
TABLE: list[tuple[bytes, list[SSEEvent], SSEEvent | None]] = [
    (b"data:x\n\n", [ev("x")], None),
    (b"data: x\n\n", [ev("x")], None),
    (b"data:  x\n\n", [ev(" x")], None),
    (b"data: a\ndata: b\n\n", [ev("a\nb")], None),
    (b"data\n\n", [ev("")], None),
    (b"data:\n\n", [ev("")], None),
    (b"event: ping\n\n", [], None),
    (b"id: 1\ndata: a\n\n: ka\n\n\n", [ev("a", id="1")], None),
    (b"retry: +5\ndata: a\n\n", [ev("a")], None),
    (b"retry: 1_000\ndata: a\n\n", [ev("a")], None),
    (b"retry: 1000\ndata: a\n\n", [ev("a", retry=1000)], None),
    (b"retry: 1000\n\n", [], None),
    (b"retry: \xc2\xb2\ndata: a\n\n", [ev("a")], None),  # a non-ASCII digit is not ASCII digits
    (b"\xef\xbb\xbfdata: a\n\n", [ev("a")], None),
    # only one BOM is stripped: the field is "\ufeffdata", an unknown field
    (b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\n", [ev("", extra={"\ufeffdata": "a"})], None),
    (b"data: a\r\n\r\n", [ev("a")], None),
    (b"data: a\r\r", [ev("a")], None),
    (b"data: a\rdata: b\r\n\ndata: c\n\r\n", [ev("a\nb"), ev("c")], None),
    ("data: a\u2028b\n\n".encode(), [ev("a\u2028b")], None),
    ("data: a\u0085b\x0bc\x0cd\n\n".encode(), [ev("a\u0085b\x0bc\x0cd")], None),
    (b"data: a\xffb\n\n", [ev("a\ufffdb")], None),
    ("data: é€😀中\n\n".encode(), [ev("é€😀中")], None),
    (b"data: a\n\ndata: [DONE]", [ev("a")], ev("[DONE]", incomplete=True)),
    (b"data: a\n\ndata: [DONE]\n", [ev("a")], ev("[DONE]", incomplete=True)),
    (b"data: a\n\ndata: [DONE]\r", [ev("a")], ev("[DONE]", incomplete=True)),
    (b"data: a\n\n: trailing comment", [ev("a")], None),
    (b"data: a\n\nevent: x", [ev("a")], None),
    (b"data: a\xe2\x82", [], ev("a\ufffd", incomplete=True)),  # truncated character at EOF
    (b"Data: x\n\n", [ev("", extra={"Data": "x"})], None),
    (b'error: {"code":500}\n\n', [ev("", extra={"error": '{"code":500}'})], None),
    (b"foo\nfoo: 1\ndata: d\n\n", [ev("d", extra={"foo": "\n1"})], None),
    (b"event: delta\ndata: {}\n\n", [ev("{}", event="delta")], None),
    (b"event:\ndata: x\n\n", [ev("x")], None),
    (b"event: a\n\ndata: x\n\n", [ev("x")], None),  # the type is reset by an empty dispatch
    (b"id: 1\ndata: a\n\ndata: b\n\n", [ev("a", id="1"), ev("b", id="1")], None),  # sticky id
    (b"id: 1\ndata: a\n\nid\ndata: b\n\n", [ev("a", id="1"), ev("b", id="")], None),
    (b"id: 1\ndata: a\n\nid: x\x00y\ndata: b\n\n", [ev("a", id="1"), ev("b", id="1")], None),
    (b":\n: keep-alive\n\n\n", [], None),
    (b"", [], None),
    (b"\n\n\r\n\r", [], None),
    (b"data:a\n\ndata:b\n\n", [ev("a"), ev("b")], None),
]


@pytest.mark.parametrize(("body", "expected", "final"), TABLE)
def test_table_at_every_split(body: bytes, expected: list[SSEEvent], final: SSEEvent | None) -> None:
    for reads in every_split(body):
        events, tail = decode(reads)
        assert events == expected, reads
        assert tail == final, reads


def test_three_way_splits_of_crlf_and_bom() -> None:
    body = b"\xef\xbb\xbfdata: \xc3\xa9\r\n\r\ndata: b\r\r"
    for i in range(len(body) + 1):
        for j in range(i, len(body) + 1):
            events, tail = decode([body[:i], body[i:j], body[j:]])
            assert events == [ev("é"), ev("b")]
            assert tail is None


def test_empty_reads_are_harmless() -> None:
    events, tail = decode([b"", b"data: a", b"", b"\n", b"", b"\n", b""])
    assert events == [ev("a")]
    assert tail is None


def test_comments_reach_the_callback_in_order() -> None:
    seen: list[str] = []
    events, _ = decode([b": keep-alive\n", b":\ndata: a\n: OPENROUTER PROCESSING\n\n"], on_comment=seen.append)
    assert seen == [" keep-alive", "", " OPENROUTER PROCESSING"]
    assert events == [ev("a")]


def test_decoder_state_attributes() -> None:
    decoder = SSEDecoder()
    assert decoder.last_event_id is None
    assert decoder.retry is None
    assert decoder.feed(b"id: 7\nretry: 250\n\n") == []
    assert decoder.last_event_id == "7"
    assert decoder.retry == 250


def test_close_is_idempotent_and_feed_after_close_fails() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: x")
    assert decoder.close() == ev("x", incomplete=True)
    assert decoder.close() is None
    with pytest.raises(RuntimeError, match="after close"):
        decoder.feed(b"data: y\n\n")


def test_invalid_max_event_size() -> None:
    with pytest.raises(ValueError, match="positive"):
        SSEDecoder(max_event_size=0)


def test_sixteen_mib_line_in_1kib_reads() -> None:
    payload = b"x" * (16 * 1024 * 1024)
    body = b"data: " + payload + b"\n\n"
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for read in split_every(body, 1024):
        events.extend(decoder.feed(read))
    assert len(events) == 1
    assert len(events[0].data) == len(payload)
    assert decoder.close() is None


@pytest.mark.parametrize(
    "body",
    [
        b"data: " + b"x" * 200 + b"\n\n",  # one long line still being received
        b"data: " + b"x" * 60 + b"\n" + b"data: " + b"x" * 60 + b"\n\n",  # many lines add up
        b"data:" + b"x" * 60 + b"\n" + b"data:" + b"x" * 60 + b"\n\n",  # the same without the space
        b"error: " + b"x" * 200 + b"\n\n",  # unknown fields count too
    ],
)
@pytest.mark.parametrize("read_size", [7, 10_000])
def test_oversize_event_raises_protocol(body: bytes, read_size: int) -> None:
    decoder = SSEDecoder(max_event_size=100)

    def feed_all() -> None:
        for read in split_every(body, read_size):
            decoder.feed(read)

    with pytest.raises(LlmError) as info:
        feed_all()
    assert info.value.code == "PROTOCOL"
    assert "max_event_size" in info.value.message


def test_events_below_the_cap_pass_one_after_another() -> None:
    body = (b"data: " + b"y" * 80 + b"\n\n") * 5
    events, _ = decode(split_every(body, 13), max_event_size=100)
    assert [e.data for e in events] == ["y" * 80] * 5


def test_event_round_trips_through_msgspec() -> None:
    import msgspec

    event = ev("a", event="e", id="1", retry=3, extra={"k": "v"}, incomplete=True)
    assert msgspec.json.decode(msgspec.json.encode(event), type=SSEEvent) == event
    assert msgspec.json.encode(ev("a")) == b'{"data":"a"}'


# ---------------------------------------------------------------- property: split invariance

_LINES = st.sampled_from(
    [
        b"data: hello",
        b"data:x",
        b"data",
        b"data: \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
        b"data: bad \xff\xfe",
        b"event: delta",
        b"id: 42",
        b"id: a\x00b",
        b"retry: 15",
        b"retry: x1",
        b": keep-alive",
        b":",
        b"error: {}",
        b"",
    ]
)
_ENDS = st.sampled_from([b"\n", b"\r", b"\r\n"])


@st.composite
def _streams(draw: st.DrawFn) -> bytes:
    parts = [b"\xef\xbb\xbf"] if draw(st.booleans()) else []
    for line, end in draw(st.lists(st.tuples(_LINES, _ENDS), max_size=25)):
        parts.append(line + end)
    if draw(st.booleans()):
        parts.append(draw(_LINES))
    return b"".join(parts)


@settings(max_examples=300, deadline=None)
@given(body=_streams(), cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_any_split_yields_the_same_events(body: bytes, cuts: list[int]) -> None:
    whole = decode([body])
    offsets = sorted({c for c in cuts if c <= len(body)})
    pieces = [body[a:b] for a, b in zip([0, *offsets], [*offsets, len(body)], strict=True)]
    assert decode(pieces) == whole
    assert decode(split_every(body, 1) if body else []) == whole


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=200), cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8))
def test_arbitrary_bytes_never_crash_and_split_invariant(body: bytes, cuts: list[int]) -> None:
    whole = decode([body])
    offsets = sorted({c for c in cuts if c <= len(body)})
    pieces = [body[a:b] for a, b in zip([0, *offsets], [*offsets, len(body)], strict=True)]
    assert decode(pieces) == whole


_EOL = st.sampled_from([b"\n", b"\r\n"])


@settings(max_examples=300, deadline=None)
@given(blocks=st.lists(st.tuples(st.lists(st.tuples(_LINES, _EOL), max_size=4), _EOL), max_size=10))
def test_one_event_per_read_gives_the_events_of_byte_by_byte_reads(
    blocks: list[tuple[list[tuple[bytes, bytes]], bytes]],
) -> None:
    """The reads providers send, one whole event each (the decoder's fast path between events),
    decode exactly as the same bytes read one at a time (its general path)."""
    reads = [b"data: first\n\n"]  # after a first event the decoder is between events
    reads += [b"".join(line + end for line, end in lines) + blank for lines, blank in blocks]
    body = b"".join(reads)
    assert decode(reads) == decode(split_every(body, 1))


def test_the_fast_path_serves_whole_events_and_leaves_everything_else_to_the_general_path() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"\xef\xbb\xbfdata: a\n\n") == [ev("a")]  # the first read: BOM check
    assert decoder.feed(b"data: b\r\n\r\n") == [ev("b")]
    assert decoder.feed(b"event: delta\ndata: c\ndata: d\n\n") == [ev("c\nd", event="delta")]
    assert decoder.feed(b"event: ping\n\n") == []
    assert decoder.feed(b"data: e\rdata: f\r\n\r\n") == [ev("e\nf")]  # a lone CR: general path
    assert decoder.feed(b"data: g\n\ndata: h\n\n") == [ev("g"), ev("h")]  # two events in one read
    assert decoder.feed(b"data: g\n\ndata: h\n\ndata:\n\n") == [ev("g"), ev("h"), ev("")]  # "data:": general
    assert decoder.feed(b"data: g\n\n\ndata: h\n\n") == [ev("g"), ev("h")]  # an extra empty line: general
    assert decoder.feed(b"data: g\ndata: h\n\ndata: i\n\n") == [ev("g\nh"), ev("i")]  # two lines: general
    assert decoder.feed(b"id: 7\ndata: i\n\n") == [ev("i", id="7")]  # an id line: general path
    assert decoder.feed(b"data: j\n\n") == [ev("j", id="7")]  # the fast path keeps the sticky id
    assert decoder.feed(b"data: k") == []  # a read ending inside a line: nothing pending may be skipped
    assert decoder.feed(b"\n\n") == [ev("k", id="7")]
    small = SSEDecoder(max_event_size=8)
    assert small.feed(b"data: a\n\n") == [ev("a")]
    with pytest.raises(LlmError):
        small.feed(b"data: 0123456789\n\n")  # too large: the general path raises
    with pytest.raises(LlmError):
        SSEDecoder(max_event_size=8).feed(b"data: a\n\ndata: 0123456789")  # whole events then more: too


def test_a_read_of_whole_events_and_the_start_of_the_next_takes_the_fast_path_for_the_whole_ones() -> None:
    """What a busy upstream's reads look like (any number of events, cut anywhere): the whole
    events before the last blank line are split off at once, the rest goes to the general path."""
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\ndata: b\n\ndata: c") == [ev("a"), ev("b")]  # the first read too
    assert decoder.feed(b"\n\ndata: d\n\nda") == [ev("c"), ev("d")]  # a line was pending: general path
    assert decoder.feed(b"ta: e\n\n") == [ev("e")]
    assert decoder.feed("data: é\n\ndata: €".encode()[:-1]) == [ev("é")]  # a character cut by the read
    assert decoder.feed(b"\xac\n\n") == [ev("€")]
    assert decoder.feed(b"data: f\ndata: g\n\ndata: h") == [ev("f\ng")]  # two data lines: general path
    assert decoder.feed(b"\n\n") == [ev("h")]
    assert decoder.feed(b"data: i\n\nevent: x\ndata: j\n") == [ev("i")]
    assert decoder.feed(b"\n") == [ev("j", event="x")]
    assert decoder.close() is None


@settings(max_examples=300, deadline=None)
@given(
    blocks=st.lists(st.tuples(st.lists(st.tuples(_LINES, _EOL), max_size=4), _EOL), max_size=10),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6),
)
def test_reads_cut_anywhere_give_the_events_of_byte_by_byte_reads(
    blocks: list[tuple[list[tuple[bytes, bytes]], bytes]], cuts: list[int]
) -> None:
    """Whole events and pieces of the next in one read (the fast path, then the general path)
    decode exactly as the same bytes read one at a time."""
    body = b"data: first\n\n" + b"".join(b"".join(line + end for line, end in lines) + blank for lines, blank in blocks)
    offsets = sorted({min(cut, len(body)) for cut in cuts})
    reads = [body[a:b] for a, b in zip([0, *offsets], [*offsets, len(body)], strict=True)]
    assert decode(reads) == decode(split_every(body, 1))


# what providers send (one-line data events, UTF-8 of every length), and what must leave the
# fast path: a byte order mark, CRLF, a multi-line event, a comment, an id, an event type
_BODIES = [
    'data: {"d":"é"}\n\ndata: {"d":"€"}\n\ndata: {"d":"😀"}\n\ndata: [DONE]\n\n'.encode(),
    "\ufeffdata: é\n\ndata: b\n\n".encode(),
    "data: é\r\n\r\ndata: €\r\n\r\n".encode(),
    "event: x\ndata: 😀\n\ndata: a\ndata: b\n\n: ka\n\nid: 7\ndata: c\n\ndata: €".encode(),
]


@pytest.mark.parametrize("body", _BODIES, ids=["data", "bom", "crlf", "mixed"])
def test_every_pair_of_cuts_gives_the_events_of_byte_by_byte_reads(body: bytes) -> None:
    """Two cuts at every pair of byte offsets (inside every multi-byte character, CRLF, field
    name and blank line; the first read may be empty): the same events as one byte per read."""
    expected = decode(split_every(body, 1))
    assert expected[0]  # the body holds events
    for a in range(len(body) + 1):
        for b in range(a, len(body) + 1):
            assert decode([body[:a], body[a:b], body[b:]]) == expected, (a, b)
