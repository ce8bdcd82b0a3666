"""Streamed function-call arguments (Vertex AI ``partialArgs``) → JSON text, piece by piece.

With ``streamFunctionCallArguments`` Vertex AI sends a call as a part with ``name`` and
``willContinue: true``, then parts whose ``functionCall.partialArgs`` each set one leaf named by
a JSON path (``$.location``, ``$.stops[1].city``) to a ``stringValue`` / ``numberValue`` /
``boolValue`` / ``nullValue``; a string leaf with ``willContinue: true`` continues in the next
piece for the same path (https://cloud.google.com/vertex-ai/generative-ai/docs/reference/rest/v1/Content#PartialArg).

:class:`ArgumentsWriter` turns those pieces into the text of one JSON object as they arrive, so a
tool-call block streams its ``arguments_delta`` like any other provider's: the concatenation of
everything :meth:`~ArgumentsWriter.add` and :meth:`~ArgumentsWriter.close` return is the
arguments text. Values are written with ``json.dumps(ensure_ascii=False)``; leaves are written in
arrival order (containers are closed and reopened when the path moves back, as the provider
sent them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Final

from harness_llm_gemini.wire import WirePartialArg

__all__ = ["ArgumentsWriter", "parse_path"]

_SEGMENT: Final = re.compile(r"([^.\[\]]+)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]")


def parse_path(path: str) -> list[str | int]:
    """Split a JSON path into keys (``str``) and array positions (``int``).

    ``"$.stops[1].city"`` → ``["stops", 1, "city"]``; ``"$['a.b']"`` → ``["a.b"]``. The leading
    ``$`` is optional. An empty path gives ``[]``.
    """
    text = path[1:] if path.startswith("$") else path
    segments: list[str | int] = []
    for match in _SEGMENT.finditer(text):
        key, position, quoted = match.groups()
        if position is not None:
            segments.append(int(position))
        else:
            segments.append(key if key is not None else quoted)
    return segments


class _Container:
    __slots__ = ("array", "children", "segment")

    def __init__(self, segment: str | int | None, array: bool) -> None:
        self.segment = segment
        self.array = array
        self.children = 0


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


class ArgumentsWriter:
    """Writes one function call's arguments as JSON text from its ``partialArgs`` pieces.

    ``add(pieces)`` returns the text the pieces append (possibly ``""``); ``close()`` returns the
    text that completes the object (an open string's quote and every open container, or ``"{}"``
    when nothing was written). :attr:`text` is everything written so far.
    """

    __slots__ = ("_open_path", "_parts", "_stack")

    def __init__(self) -> None:
        self._stack: list[_Container] = []
        self._open_path: list[str | int] | None = None  # leaf whose string value is still open
        self._parts: list[str] = []

    @property
    def text(self) -> str:
        """The JSON text written so far."""
        return "".join(self._parts)

    def add(self, pieces: Iterable[WirePartialArg]) -> str:
        """Append ``pieces``; returns the JSON text they add."""
        out: list[str] = []
        for piece in pieces:
            segments = parse_path(piece.jsonPath)
            if not segments:
                continue  # the root itself: nothing to set
            if piece.stringValue is not None and self._open_path == segments:
                out.append(_dump(piece.stringValue)[1:-1])
                if not piece.willContinue:
                    out.append('"')
                    self._open_path = None
                continue
            value = self._value(piece)
            if value is None:
                continue  # a piece without a value
            out.append(self._navigate(segments))
            if piece.stringValue is not None and piece.willContinue:
                out.append(value[:-1])  # leave the string open for its continuation
                self._open_path = segments
            else:
                out.append(value)
        written = "".join(out)
        if written:
            self._parts.append(written)
        return written

    def close(self) -> str:
        """The text that completes the object; the writer is finished afterwards."""
        if not self._stack:
            closing = "{}"
        else:
            closing = '"' if self._open_path is not None else ""
            closing += "".join("]" if entry.array else "}" for entry in reversed(self._stack))
        self._stack.clear()
        self._open_path = None
        self._parts.append(closing)
        return closing

    @staticmethod
    def _value(piece: WirePartialArg) -> str | None:
        if piece.stringValue is not None:
            return _dump(piece.stringValue)
        if piece.numberValue is not None:
            return _dump(piece.numberValue)
        if piece.boolValue is not None:
            return "true" if piece.boolValue else "false"
        if piece.nullValue:
            return "null"
        return None

    def _navigate(self, segments: list[str | int]) -> str:
        """Text moving from the current position to a new leaf ``segments``: closes an open
        string and the containers not on the new path, opens the missing ones, writes the key."""
        out: list[str] = []
        if self._open_path is not None:
            out.append('"')
            self._open_path = None
        stack = self._stack
        if not stack:
            stack.append(_Container(None, False))
            out.append("{")
        parents = segments[:-1]
        depth = 0  # how many containers below the root stay open
        while depth < min(len(stack) - 1, len(parents)) and stack[depth + 1].segment == parents[depth]:
            depth += 1
        while len(stack) > depth + 1:
            out.append("]" if stack.pop().array else "}")
        for position in range(depth, len(segments)):
            segment = segments[position]
            parent = stack[-1]
            if parent.children:
                out.append(",")
            parent.children += 1
            if not parent.array:
                out.append(_dump(str(segment)) + ":")
            if position < len(parents):  # a container on the way to the leaf
                array = isinstance(segments[position + 1], int)
                out.append("[" if array else "{")
                stack.append(_Container(segment, array))
        return "".join(out)
