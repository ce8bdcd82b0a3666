"""The prompt log in the CLI: on by default, like ``llm logs``; continuing a logged conversation.

The log itself is the ``prompt-log`` middleware of ``harness-middleware`` (found through the
``harness.plugins`` entry points, so the core does not depend on it). ``harness run`` adds it as
the outermost middleware unless plugins.yaml lists it (then that entry's config is used) or
disables it (``~prompt-log:``), or ``--no-log`` is given; either way it masks the config's
secrets. Without ``harness-middleware`` installed nothing is logged.

Flags: ``--continue`` / ``-C`` continues the newest logged conversation and ``--cid ID`` a given
one (``-c`` stays the ``--config`` flag of every command).
"""

from __future__ import annotations

from typing import Any, Protocol

from harness_core.loader import LoadedConfig, installed_plugins
from harness_core.plugininfo import LoadedPlugin
from harness_core.types import GenerateOptions, Message

__all__ = ["CONVERSATION_KEY", "PROMPT_LOG", "Continuation", "PromptLogger", "attach_prompt_log", "why_no_prompt_log"]

PROMPT_LOG = "prompt-log"
"""The entry-point name of the prompt log middleware."""

CONVERSATION_KEY = "harness.conversation_id"
"""``options.metadata`` key naming the logged conversation a request continues (the middleware
reads the same key)."""


class Continuation(Protocol):
    """What continuing a conversation needs (see :meth:`PromptLogger.continuation`)."""

    options: GenerateOptions
    history: list[Message]
    conversation_id: str


class PromptLogger(Protocol):
    """The part of the ``prompt-log`` plugin the CLI uses."""

    def continuation(self, conversation_id: str | None) -> Continuation | None:
        """The last turn of ``conversation_id`` (the newest conversation when ``None``)."""


def attach_prompt_log(loaded: LoadedConfig, *, enabled: bool) -> PromptLogger | None:
    """The prompt log for this run: the plugins.yaml entry when listed, else (``enabled`` and
    installed, not disabled with ``~prompt-log:``) a default instance added as the outermost
    middleware of ``loaded``. ``None`` when there is none. The config's secrets are masked by the
    harness that starts it (the ``use_redactor`` hook: `harness run` and `harness chat` build theirs
    with ``loaded.redactor``).
    """
    listed = [plugin for plugin in loaded.plugins if plugin.name == PROMPT_LOG]
    if listed:
        instance: Any = listed[0].instance
    elif not enabled or any(entry.name == PROMPT_LOG and entry.state != "installed" for entry in loaded.entries):
        return None
    else:
        entry_point = installed_plugins().get(PROMPT_LOG)
        if entry_point is None:
            return None
        instance = entry_point.load()()
        loaded.plugins.insert(0, LoadedPlugin(key=PROMPT_LOG, name=PROMPT_LOG, instance=instance))
    logger: PromptLogger = instance
    return logger


def why_no_prompt_log(loaded: LoadedConfig, *, enabled: bool) -> str:
    """Why :func:`attach_prompt_log` found no prompt log: ``--no-log`` (``enabled`` false), the
    ``~prompt-log:`` entry of plugins.yaml (file and line), else harness-middleware is missing."""
    if not enabled:
        return "--no-log was given"
    for entry in loaded.entries:
        if entry.name == PROMPT_LOG and entry.state == "disabled":
            return f"`~{PROMPT_LOG}:` at {loaded.source}:{entry.line} disables it"
    return "it comes with harness-middleware: pip install harness-middleware"
