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

__all__ = [
    "OWNED_OPTIONS",
    "first_code_block",
    "owner_name",
    "parse_options",
    "parse_tool_choice",
    "served_routes",
    "unoffered_tool_choice",
]

OWNED_OPTIONS: dict[str, str] = {
    "model": "use -m/--model",
    "messages": "use PROMPT (and -C/--continue or --cid for a logged conversation)",
    "input": "use PROMPT",
    "contents": "use PROMPT",
    "prompt": "use PROMPT",
    "system": "use --system",
    "instructions": "use --system",
    "system_instruction": "use --system",
    "max_tokens": "use --max-tokens",
    "max_completion_tokens": "use --max-tokens",
    "max_output_tokens": "use --max-tokens",
    "temperature": "use --temperature",
    "top_p": "use --top-p",
    "seed": "use --seed",
    "stop": "use --stop",
    "tools": "use -t/--tool",
    "tool_choice": "use --tool-choice",
    "reasoning_effort": "use --reasoning-effort",
    "response_format": "use --schema",
    "stream": "use --no-stream (the request itself always streams)",
    "stream_options": "the adapter sets it (usage is always asked for)",
    "n": "a stream carries one choice",
}
"""Request fields the harness sets from its own flags (or always), mapped to what to use instead:
``-o`` refuses them, so the logged, priced and masked request is the one sent."""


def parse_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``["top_k=5", "user=me"]`` → ``{"top_k": 5, "user": "me"}``.

    Raises:
        ValueError: a pair without ``=`` or with an empty key, or a key the harness sets itself
            (:data:`OWNED_OPTIONS`: ``-o model=…``), naming it and the flag to use.
    """
    parsed: dict[str, Any] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise ValueError(f"-o {pair!r} must be key=value")
        instead = OWNED_OPTIONS.get(key.strip())
        if instead is not None:
            raise ValueError(f"-o {key.strip()}: the harness sets `{key.strip()}` itself; {instead}")
        try:
            parsed[key.strip()] = json.loads(value)
        except ValueError:
            parsed[key.strip()] = value
    return parsed


def served_routes(loaded: LoadedConfig) -> list[str]:
    """The routes of the enabled plugins of ``loaded``, in plugins.yaml order (before the start)."""
    return [route for entry in loaded.entries if entry.state == "enabled" for route in entry.routes or ()]


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


def unoffered_tool_choice(choice: ToolChoice | None, offered: Sequence[str]) -> str | None:
    """Why ``choice`` (from ``--tool-choice``) cannot be honoured with the tools ``offered`` (their
    names): a named tool that is not among them, or ``required`` with no tool offered (the model
    must call a tool it is not given); ``None`` when it can (``auto``, ``none``, ``required`` with
    tools, an offered name). The message names the choice and the tools offered."""
    how = "offer tools with -t/--tool NAME; see `harness tools`"
    if choice == "required" and not offered:
        return f"--tool-choice required: the model must call a tool, but no tool is offered ({how})"
    if not isinstance(choice, NamedToolChoice) or choice.name in offered:
        return None
    names = ", ".join(repr(name) for name in offered) or f"none ({how})"
    return f"--tool-choice {choice.name!r}: no tool of that name is offered (tools offered: {names})"


_FENCE = re.compile(
    r"^ {0,3}(?P<fence>`{3,}|~{3,})[^\n]*\n(?P<body>.*?)(?:^ {0,3}(?P=fence)[`~]*[ \t]*$|\Z)", re.M | re.S
)


def first_code_block(text: str) -> str:
    """The content of the first fenced code block of ``text`` (an unclosed block runs to the
    end), or ``text`` itself when it has none."""
    match = _FENCE.search(text)
    return match.group("body") if match is not None else text
