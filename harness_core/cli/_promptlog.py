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
from harness_core.plugininfo import LoadedPlugin, PluginFailure
from harness_core.types import GenerateOptions, Message

__all__ = [
    "BY_DEFAULT",
    "CONVERSATION_KEY",
    "PROMPT_LOG",
    "Continuation",
    "PromptLogger",
    "attach_default_prompt_log",
    "attach_prompt_log",
    "why_no_prompt_log",
]

PROMPT_LOG = "prompt-log"
"""The entry-point name of the prompt log middleware."""

BY_DEFAULT = (
    "on by default: `harness run` and `harness chat` log every prompt and reply "
    f"(`~{PROMPT_LOG}:` in plugins.yaml or `--no-log` turns it off; `harness logs` shows it)"
)
"""How ``harness plugins`` and ``harness chain`` describe the prompt log they did not find in plugins.yaml."""

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

    A default instance that cannot be built (its folder cannot be made) is recorded in
    ``loaded.failures`` as a failed middleware, and ``None`` returned: a command that logs calls
    :meth:`LoadedConfig.require_complete` next, which then stops it (fail closed).
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
        try:
            instance = entry_point.load()()
        except Exception as exc:
            message = (
                f"plugin {PROMPT_LOG!r} (on by default; `--no-log` or `~{PROMPT_LOG}:` turns it off) "
                f"failed to start: {type(exc).__name__}: {exc}"
            )
            failure = PluginFailure(
                key=PROMPT_LOG, name=PROMPT_LOG, message=loaded.redact(message), stage="init", is_middleware=True
            )
            loaded.failures.append(failure)
            return None
        loaded.plugins.insert(0, LoadedPlugin(key=PROMPT_LOG, name=PROMPT_LOG, instance=instance))
    logger: PromptLogger = instance
    return logger


def attach_default_prompt_log(loaded: LoadedConfig) -> bool:
    """Attach the prompt log as ``harness run`` does (:func:`attach_prompt_log`, logging on), so
    ``harness plugins`` and ``harness chain`` show what a run goes through; whether it is the
    default one (on although plugins.yaml does not list it). A default one that failed to start
    is in ``loaded.failures``."""
    listed = any(plugin.name == PROMPT_LOG for plugin in loaded.plugins)
    return attach_prompt_log(loaded, enabled=True) is not None and not listed


def why_no_prompt_log(loaded: LoadedConfig, *, enabled: bool) -> str:
    """Why :func:`attach_prompt_log` found no prompt log: ``--no-log`` (``enabled`` false), the
    ``~prompt-log:`` entry of plugins.yaml (file and line), else harness-middleware is missing."""
    if not enabled:
        return "--no-log was given"
    for entry in loaded.entries:
        if entry.name == PROMPT_LOG and entry.state == "disabled":
            return f"`~{PROMPT_LOG}:` at {loaded.source}:{entry.line} disables it"
    return "it comes with harness-middleware: pip install harness-middleware"
