"""Command-line habits users bring from ``llm``: ``-o key=value``, ``--tool-choice``, ``-x``.

``-o key=value`` (repeatable) becomes ``GenerateOptions.provider_options`` for the plugin that
owns the route (keyed by its entry-point name, e.g. ``openai``): the value is parsed as JSON when
it is valid JSON (``-o top_k=5``, ``-o logprobs=true``) and kept as text otherwise.
``-x`` / ``--extract`` prints only the first fenced code block of the reply (CommonMark fenced
code blocks: https://spec.commonmark.org/0.31.2/#fenced-code-blocks), or the whole reply when it
has none.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from harness_core.loader import LoadedConfig
from harness_core.types import NamedToolChoice, ToolChoice

__all__ = ["first_code_block", "owner_name", "parse_options", "parse_tool_choice"]


def parse_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``["top_k=5", "user=me"]`` → ``{"top_k": 5, "user": "me"}``.

    Raises:
        ValueError: a pair without ``=`` or with an empty key, naming it.
    """
    parsed: dict[str, Any] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise ValueError(f"-o {pair!r} must be key=value")
        try:
            parsed[key.strip()] = json.loads(value)
        except ValueError:
            parsed[key.strip()] = value
    return parsed


def owner_name(loaded: LoadedConfig, route: str | None) -> str | None:
    """The entry-point name of the enabled plugin whose routes include ``route`` (``None`` if none)."""
    for entry in loaded.entries:
        if entry.state == "enabled" and route is not None and route in (entry.routes or ()):
            return entry.name
    return None


def parse_tool_choice(text: str | None) -> ToolChoice | None:
    """``auto``, ``none``, ``required``, or the name of the one tool the model must call."""
    if text is None:
        return None
    if text in ("auto", "none", "required"):
        return text  # type: ignore[return-value]  # narrowed by the membership test
    return NamedToolChoice(text)


_FENCE = re.compile(
    r"^ {0,3}(?P<fence>`{3,}|~{3,})[^\n]*\n(?P<body>.*?)(?:^ {0,3}(?P=fence)[`~]*[ \t]*$|\Z)", re.M | re.S
)


def first_code_block(text: str) -> str:
    """The content of the first fenced code block of ``text`` (an unclosed block runs to the
    end), or ``text`` itself when it has none."""
    match = _FENCE.search(text)
    return match.group("body") if match is not None else text
