"""Streamed function-call arguments written as JSON text piece by piece."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from harness_llm_gemini.partial_args import ArgumentsWriter, parse_path
from harness_llm_gemini.wire import WirePartialArg


def piece(path: str, **value: Any) -> WirePartialArg:
    return WirePartialArg(jsonPath=path, **value)


@pytest.mark.parametrize(
    ("path", "segments"),
    [
        ("$.a", ["a"]),
        ("$.a.b[0][2].c", ["a", "b", 0, 2, "c"]),
        ("$['a.b'].c", ["a.b", "c"]),
        ("x", ["x"]),
        ("$", []),
        ("", []),
    ],
)
def test_parse_path(path: str, segments: list[str | int]) -> None:
    assert parse_path(path) == segments


def test_nothing_written_closes_as_an_empty_object() -> None:
    writer = ArgumentsWriter()
    assert writer.add([piece("$"), piece("$.no_value")]) == ""
    assert writer.close() == "{}"
    assert writer.text == "{}"


def test_moving_back_up_the_path_closes_and_reopens_containers() -> None:
    writer = ArgumentsWriter()
    pieces = [
        piece("$.a.b", numberValue=1),
        piece("$.a.c", stringValue="x", willContinue=True),
        piece("$.d[0]", boolValue=True),
        piece("$.d[1]", stringValue="\u00e9\n"),
        piece("$.e[0][0]", numberValue=-2.5),
    ]
    deltas = [writer.add([p]) for p in pieces]
    deltas.append(writer.close())
    assert "".join(deltas) == writer.text
    assert json.loads(writer.text) == {"a": {"b": 1, "c": "x"}, "d": [True, "\u00e9\n"], "e": [[-2.5]]}


def test_an_open_string_is_closed_by_close() -> None:
    writer = ArgumentsWriter()
    writer.add([piece("$.q", stringValue='he said "', willContinue=True)])
    writer.add([piece("$.q", stringValue="hi", willContinue=True)])
    assert writer.close() == '"}'
    assert json.loads(writer.text) == {"q": 'he said "hi'}


def test_a_position_inside_an_object_is_written_as_a_key() -> None:
    writer = ArgumentsWriter()
    writer.add([piece("$.a.b", numberValue=1), piece("$.a[3]", nullValue=msgspec.Raw(b"null"))])
    writer.close()
    assert json.loads(writer.text) == {"a": {"b": 1, "3": None}}
