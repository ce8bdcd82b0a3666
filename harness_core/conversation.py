"""Multi-turn conversations with the tool-call round trip: :class:`Conversation`.

A stream is one turn; a conversation carries the history from turn to turn. Every assistant
message keeps the ``route``, ``source`` and ``replay_state`` it was produced with
(docs/stream-obligations.md#9-replay-state), so provider state such as thinking signatures
reaches the next request when, and only when, the runtime allows it (the message's ``source``
owns the target route). Every step goes through ``harness.stream``, so every middleware applies.

With tools, :meth:`Conversation.send` executes the tool calls of a ``tool-calls`` finish
(arguments parsed only now, by :meth:`harness_core.tools.Tool.run`), runs parallel calls
concurrently with results kept in call order (one ``role="tool"`` message per result; each
execution goes through :meth:`Harness.run_tool <harness_core.runtime.Harness.run_tool>`, so every
``llm_tool_call`` middleware sees it: ``otel``'s ``execute_tool`` spans), sends the
results back, and continues until the model stops or ``max_steps`` generations were made.

A conversation saves to JSON (:meth:`Conversation.save`, msgspec) and loads back
(:meth:`Conversation.load`) with replay state, routes and sources intact.
"""

from __future__ import annotations

import inspect
import os
import warnings
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from harness_core.abort import ABORTED, AbortSignal, race
from harness_core.assembler import BlockAssembler
from harness_core.errors import Failure, LlmError
from harness_core.tools import Tool
from harness_core.types import (
    CacheMark,
    FinishReason,
    GenerateOptions,
    Message,
    StreamChunk,
    TokenUsage,
    ToolCallBlock,
    ToolResultBlock,
    _deprecated_provider,
    _fold_provider,
    _RouteKeyword,
)

if TYPE_CHECKING:
    from harness_core.runtime import Harness

__all__ = ["ApproveCallback", "Conversation", "ConversationState", "MaxStepsExceeded", "Reply"]

DECLINED = "the user declined this tool call; it was not executed"
"""The result text of a call the ``approve`` callback refused."""

ChunkCallback = Callable[[StreamChunk], Awaitable[None] | None]
"""Called with every chunk of every step, as it arrives (sync or async)."""
ToolResultCallback = Callable[[ToolCallBlock, ToolResultBlock], Awaitable[None] | None]
"""Called with each tool call and its result, in call order, once a step's calls are done."""
ApproveCallback = Callable[[ToolCallBlock], Awaitable[bool] | bool]
"""Asked before each tool call runs (one at a time): ``True`` runs it, ``False`` answers the
model with an ``is_error`` result saying the call was declined."""

STATE_VERSION = 2
"""The ``version`` written by :meth:`Conversation.save` (2: the route is saved as ``route``;
version 1 files, which saved it as ``provider``, still load)."""


class Reply(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of :meth:`Conversation.send`.

    ``message`` is the last assistant message (partial when aborted); ``finish`` why the send
    ended (``stop``, ``length``, ``content-filter``, ``other``, or ``aborted``, also when the abort
    came while tools ran); ``usage`` the token usage summed over every step (a field is ``None``
    when some step did not report it; ``usage`` is ``None`` when no step reported any); ``steps``
    the number of generations the send took.
    """

    message: Message
    finish: FinishReason
    usage: TokenUsage | None
    steps: int

    @property
    def text(self) -> str:
        """The text of :attr:`message` (reasoning excluded)."""
        return self.message.text


class MaxStepsExceeded(RuntimeError):
    """The model still called tools in the last of the ``max_steps`` generations of one send.

    The history is kept (so the conversation can go on): the calls of that last step are
    answered with ``is_error`` results saying they were not executed. ``reply`` is the reply of
    the last step, ``max_steps`` the limit.
    """

    def __init__(self, max_steps: int, reply: Reply) -> None:
        super().__init__(
            f"the model still called tools after {max_steps} generation steps (max_steps={max_steps}); "
            "its last calls were not executed"
        )
        self.max_steps = max_steps
        self.reply = reply


class ConversationState(msgspec.Struct, kw_only=True, metaclass=_RouteKeyword):
    """The saved form of a conversation (JSON): its settings and the whole history.

    ``messages`` keep ``route``, ``source`` and ``replay_state``, so a loaded conversation hands
    provider state back exactly as the original would have. ``route`` is the plugins.yaml entry;
    ``provider=`` / ``.provider`` are its deprecated old names (a ``DeprecationWarning``).
    """

    version: int = STATE_VERSION
    route: str | None = None
    model: str | None = None
    system: str | None = None
    messages: list[Message] = msgspec.field(default_factory=list)

    @property
    def provider(self) -> str | None:
        """Deprecated: the old name of :attr:`route`. Reading it warns (``DeprecationWarning``)."""
        return _deprecated_provider(self)


class _Version1(msgspec.Struct):
    """What a version 1 file holds beyond :class:`ConversationState`: the route, as ``provider``."""

    provider: str | None = None


def _add_usage(total: TokenUsage | None, step: TokenUsage | None) -> TokenUsage | None:
    if step is None:
        return total
    if total is None:
        return step

    def add(a: int | None, b: int | None) -> int | None:
        return None if a is None or b is None else a + b

    return TokenUsage(
        input_tokens=add(total.input_tokens, step.input_tokens),
        output_tokens=add(total.output_tokens, step.output_tokens),
        cache_read_tokens=add(total.cache_read_tokens, step.cache_read_tokens),
        cache_write_tokens=add(total.cache_write_tokens, step.cache_write_tokens),
        cache_write_1h_tokens=add(total.cache_write_1h_tokens, step.cache_write_1h_tokens),
        reasoning_tokens=add(total.reasoning_tokens, step.reasoning_tokens),
    )


async def _maybe_await(value: Awaitable[None] | None) -> None:
    if inspect.isawaitable(value):
        await value


class Conversation:
    """A conversation with one harness: history, settings and tools.

    Args:
        harness: an entered :class:`~harness_core.runtime.Harness`.
        route / model / system: the route, model and system prompt of every step (``None``:
            the template's value, else the harness defaults). They are plain attributes: change
            them between sends (``/route`` in ``harness chat``). ``provider=`` and the
            ``provider`` attribute are the deprecated old names of ``route`` (they warn).
        tools: the tools the model may call (their specs are offered on every step); empty = no
            tools offered.
        max_steps: the most generations one :meth:`send` may take (each tool round trip is one
            more); at least 1.
        options: a template for every other :class:`~harness_core.types.GenerateOptions` field
            (``max_tokens``, ``temperature``, ``tool_choice`` …); its ``messages``, ``tools`` and
            ``abort`` are replaced on every step.
        approve: asked before each tool call runs, one call at a time (sync or async,
            :data:`ApproveCallback`; ``harness run --approve`` asks on the terminal); a refused
            call is answered with an ``is_error`` result (:data:`DECLINED`). ``None``: every
            call of an offered tool runs. An exception it raises ends the send like a tool-loop
            failure (the history is rolled back).
        cache: a rolling prompt-cache policy, what agent loops do (docs/vocabulary.md#prompt-caching):
            every step marks the end of the system prompt (when there is one), the last tool spec
            (when tools are offered) and the latest message with this :class:`CacheMark` (three
            breakpoints, within Anthropic's four), so each turn reads the previous turn's prefix
            from the cache. The marks go only on what is sent: :attr:`messages` stays unmarked,
            and the breakpoint moves to the newest message every step. Marks already set on
            earlier messages are kept. ``None``: no marks are added. A mark with a TTL is refused
            ``UNSUPPORTED`` by wires that cache implicitly (OpenAI, Gemini): give ``CacheMark()``
            there.

    Attributes:
        messages: the history, oldest first (``user``, ``assistant`` and ``tool`` messages).

    Raises:
        ValueError: ``max_steps`` below 1, or two tools with the same name.
    """

    def __init__(
        self,
        harness: Harness,
        *,
        route: str | None = None,
        model: str | None = None,
        system: str | None = None,
        tools: Sequence[Tool] = (),
        max_steps: int = 8,
        options: GenerateOptions | None = None,
        approve: ApproveCallback | None = None,
        cache: CacheMark | None = None,
        **deprecated: str | None,
    ) -> None:
        if route is not None:
            deprecated["route"] = route
        _fold_provider("Conversation", deprecated)  # provider= warns; with route= it is a TypeError
        route = deprecated.pop("route", None)
        if deprecated:
            raise TypeError(f"Conversation() got an unexpected keyword argument {next(iter(deprecated))!r}")
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, not {max_steps}")
        template = options if options is not None else GenerateOptions()
        self.harness = harness
        self.route = route if route is not None else template.route
        self.model = model if model is not None else template.model
        self.system = system if system is not None else template.system
        self.tools = list(tools)
        names = [t.name for t in self.tools]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"tool names must be unique; offered more than once: {', '.join(duplicates)}")
        self.max_steps = max_steps
        self.options = template
        self.approve = approve
        if cache is not None and not isinstance(cache, CacheMark):
            raise TypeError(f"cache must be a CacheMark or None, got {type(cache).__name__}")
        self.cache = cache
        self.messages: list[Message] = []

    def clear(self) -> None:
        """Forget the history (settings and tools stay)."""
        self.messages.clear()

    # ------------------------------------------------------------------ sending

    async def send(
        self,
        content: str | Message,
        *,
        abort: AbortSignal | None = None,
        on_chunk: ChunkCallback | None = None,
        on_tool_result: ToolResultCallback | None = None,
    ) -> Reply:
        """Add a user message and run generations (and tools) until the model answers.

        Args:
            content: the user's text, or a ready :class:`~harness_core.types.Message`.
            abort: fires to stop the send: a running generation ends with ``finish{aborted}``
                (its partial text is kept in the history, its incomplete tool calls are not:
                tool calls are kept and executed only on a ``tool-calls`` finish);
                running tools are cancelled (a sync tool's thread is abandoned) and every call
                without a result gets an ``is_error`` result, so the history stays valid.
            on_chunk: sees every chunk of every step as it arrives.
            on_tool_result: sees each call with its result, in call order (also calls answered
                with an error: aborted, or not executed at the step limit).

        Returns:
            the :class:`Reply`; its ``finish.kind`` is ``aborted`` after an abort.

        Raises:
            LlmError: a step finished with ``error`` (the failure as an ``LlmError``; a broken
                middleware chain arrives as ``PROTOCOL``). The history is rolled
                back to before this send (also on cancellation or any other exception), so the
                same send can simply be retried; tools that already ran are not undone.
            MaxStepsExceeded: the model still called tools in step ``max_steps`` (history kept).
        """
        message = Message.user(content) if isinstance(content, str) else content
        checkpoint = len(self.messages)
        self.messages.append(message)
        total: TokenUsage | None = None
        step = 0
        try:
            while True:
                step += 1
                reply = await self._step(step, abort, on_chunk)
                total = _add_usage(total, reply.usage)
                reply = msgspec.structs.replace(reply, usage=total)
                calls = reply.message.tool_calls
                if reply.finish.kind != "tool-calls" or not calls:
                    return reply
                if step == self.max_steps:
                    note = f"not executed: the limit of {self.max_steps} generation steps was reached"
                    declined = [ToolResultBlock(c.id, note, is_error=True) for c in calls]
                    await self._record(declined, calls, on_tool_result)
                    raise MaxStepsExceeded(self.max_steps, reply)
                if not await self._run_tools(calls, abort, on_tool_result):
                    reason = abort.reason if abort is not None else None
                    failure = Failure("ABORTED", reason or "aborted while tools ran")
                    return msgspec.structs.replace(reply, finish=FinishReason("aborted", failure=failure))
        except MaxStepsExceeded:
            raise
        except BaseException:
            del self.messages[checkpoint:]
            raise

    async def _step(self, step: int, abort: AbortSignal | None, on_chunk: ChunkCallback | None) -> Reply:
        """One generation through ``harness.stream``; appends the assistant message (if any)."""
        messages = list(self.messages)
        tools = [t.spec for t in self.tools]
        system_cache = self.options.system_cache
        if self.cache is not None:
            messages[-1] = messages[-1].cached(self.cache.ttl)
            if tools:
                tools[-1] = msgspec.structs.replace(tools[-1], cache=self.cache)
            if self.system:
                system_cache = self.cache
        options = msgspec.structs.replace(
            self.options,
            route=self.route,
            model=self.model,
            system=self.system,
            system_cache=system_cache,
            messages=messages,
            tools=tools,
            abort=abort,
        )
        assembler = BlockAssembler()
        stream = self.harness.stream(options)
        async with stream as chunks:
            async for chunk in chunks:
                assembler.feed(chunk)
                if on_chunk is not None:
                    await _maybe_await(on_chunk(chunk))
        finish = assembler.finish
        assert finish is not None, "harness.stream always ends with exactly one finish"
        if finish.kind == "error":
            raise LlmError.from_failure(finish.failure or Failure("INTERNAL", "error finish without a failure"))
        message = assembler.message(route=stream.route, source=stream.source, model=stream.model)
        if finish.kind != "tool-calls" and message.tool_calls:
            # Calls cut short (aborted, length …) are never executed; kept, they would be calls
            # without results (which providers reject) holding incomplete JSON.
            kept = [b for b in message.content if not isinstance(b, ToolCallBlock)]
            message = msgspec.structs.replace(message, content=kept)
        if message.content:
            self.messages.append(message)
        return Reply(message=message, finish=finish, usage=assembler.usage, steps=step)

    async def _run_tools(
        self, calls: list[ToolCallBlock], abort: AbortSignal | None, on_tool_result: ToolResultCallback | None
    ) -> bool:
        """Run ``calls`` concurrently; record their results in call order. ``False`` when aborted."""
        by_name = {t.name: t for t in self.tools}
        results: list[ToolResultBlock | None] = [None] * len(calls)
        asking = anyio.Lock()  # one question at a time (a terminal cannot ask two at once)

        async def allowed(call: ToolCallBlock) -> bool:
            if self.approve is None:
                return True
            async with asking:
                answer = self.approve(call)
                return bool(await answer) if inspect.isawaitable(answer) else bool(answer)

        async def run_one(position: int, call: ToolCallBlock) -> None:
            found = by_name.get(call.name)
            if found is None:
                known = ", ".join(sorted(by_name)) or "none"
                results[position] = ToolResultBlock(
                    call.id, f"unknown tool {call.name!r}; available tools: {known}", is_error=True
                )
            elif not await allowed(call):
                results[position] = ToolResultBlock(call.id, DECLINED, is_error=True)
            else:
                results[position] = await self.harness.run_tool(found, call)

        async def run_all() -> None:
            async with anyio.create_task_group() as group:
                for position, call in enumerate(calls):
                    group.start_soon(run_one, position, call)

        outcome = await race(abort, run_all)
        done = [
            result
            if result is not None
            else ToolResultBlock(call.id, "aborted before the tool finished", is_error=True)
            for call, result in zip(calls, results, strict=True)
        ]
        await self._record(done, calls, on_tool_result)
        return outcome is not ABORTED

    async def _record(
        self, results: list[ToolResultBlock], calls: list[ToolCallBlock], on_tool_result: ToolResultCallback | None
    ) -> None:
        """Append one ``role="tool"`` message per result, in call order."""
        for call, result in zip(calls, results, strict=True):
            self.messages.append(Message(role="tool", content=[result]))
            if on_tool_result is not None:
                await _maybe_await(on_tool_result(call, result))

    @property
    def provider(self) -> str | None:
        """Deprecated: the old name of :attr:`route`. Reading or setting it warns."""
        warnings.warn("Conversation.provider is deprecated: use Conversation.route", DeprecationWarning, stacklevel=2)
        return self.route

    @provider.setter
    def provider(self, value: str | None) -> None:
        warnings.warn("Conversation.provider is deprecated: use Conversation.route", DeprecationWarning, stacklevel=2)
        self.route = value

    # ------------------------------------------------------------------ persistence

    def to_state(self) -> ConversationState:
        """The conversation as a :class:`ConversationState` (replay state preserved)."""
        return ConversationState(route=self.route, model=self.model, system=self.system, messages=list(self.messages))

    def save(self, path: str | os.PathLike[str], *, redact: Callable[[str], str] | None = None) -> None:
        """Write the conversation to ``path`` as pretty-printed JSON (replaced atomically).

        ``redact`` (e.g. ``LoadedConfig.redact``) masks the config's secrets in the file, should a
        reply have echoed one. ``~`` in ``path`` is expanded.

        Raises:
            OSError: the file cannot be written.
        """
        target = Path(path).expanduser()
        temporary = target.with_name(target.name + ".tmp")
        text = msgspec.json.format(msgspec.json.encode(self.to_state())).decode() + "\n"
        temporary.write_text(redact(text) if redact is not None else text, encoding="utf-8")
        try:
            os.replace(temporary, target)
        except OSError:
            temporary.unlink(missing_ok=True)
            raise

    @classmethod
    def from_state(cls, state: ConversationState, harness: Harness, **kwargs: Any) -> Conversation:
        """A conversation holding ``state``'s history; ``kwargs`` as for the constructor
        (``tools``, ``max_steps``, ``options`` …); the saved route, model and system apply
        unless given (``provider=`` is the deprecated old name of ``route=``)."""
        _fold_provider("Conversation.from_state", kwargs)
        for key in ("route", "model", "system"):
            if kwargs.get(key) is None:
                kwargs[key] = getattr(state, key)
        conversation = cls(harness, **kwargs)
        conversation.messages = list(state.messages)
        return conversation

    @classmethod
    def load(cls, path: str | os.PathLike[str], harness: Harness, **kwargs: Any) -> Conversation:
        """Read a conversation written by :meth:`save` (see :meth:`from_state` for ``kwargs``).

        Raises:
            LlmError: ``CONFIG`` when the file cannot be read or is not a saved conversation of
                a known version (naming the path and the problem).
        """
        try:
            raw = Path(path).read_bytes()
            state = msgspec.json.decode(raw, type=ConversationState)
            if state.version == 1:  # version 1 saved the route as `provider`
                state.route, state.version = msgspec.json.decode(raw, type=_Version1).provider, STATE_VERSION
        except (OSError, msgspec.DecodeError) as exc:
            raise LlmError("CONFIG", f"cannot load a conversation from {os.fspath(path)}: {exc}") from exc
        if state.version != STATE_VERSION:
            raise LlmError(
                "CONFIG",
                f"{os.fspath(path)}: unsupported conversation version {state.version} (known: {STATE_VERSION})",
            )
        return cls.from_state(state, harness, **kwargs)
