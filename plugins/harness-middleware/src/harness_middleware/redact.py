"""``redact``: mask secrets and personal data in requests and in streamed replies.

Patterns: built-in presets (API-key shapes, bearer tokens, e-mail addresses) and custom regular
expressions, combined into one alternation. A match is replaced by ``replacement`` formatted with
the pattern's name (default ``[REDACTED:openai-key]``).

- **Requests**: text blocks, tool results, unsigned reasoning and the system prompt of the
  outgoing ``options`` are masked before ``call_next``.
- **Replies**: text deltas (and unsigned reasoning deltas) are masked as they stream, exactly as
  the whole text would be (``Masker.mask``), for every split into deltas. Text is passed on up
  to the first position where a match starts or may start once more text follows
  (:meth:`MatchStarts.first <harness_middleware._starts.MatchStarts.first>`: complete and
  partial matches of the ``regex`` module); from there it is held. A match there is released
  once no match attempt from its start reads to the end of the text received (more text can
  neither extend nor change it); everything held is masked and released at the block's
  ``block-end``, whose block then holds exactly the concatenated masked deltas. A delta where
  no match can start is passed on without partial matching (:mod:`harness_middleware._starts`).
- Reasoning that carries a provider signature (``BlockStart.signed``/``ReasoningBlock.signed``)
  is never altered: the provider rejects modified signed thinking (docs/hooks.md).
- Tool-call arguments are JSON the tool needs: left alone unless ``tool_arguments: true``.
- **Embedding inputs** (``llm_embed``, docs/embeddings.md) are text sent to a provider like a
  prompt: with ``requests`` each input is masked the same way before ``call_next`` (so the vector
  is that of the masked text, and a ``cache`` inside this layer keys on the masked inputs). The
  vectors that come back hold no text: ``responses`` does not apply to them.
- **Counted requests** (``llm_count_tokens``, ``Harness.count_tokens``) are masked as a stream's
  request is (with ``requests``), so the count is that of the text the provider would receive.

Where patterns overlap, the leftmost match wins, then the pattern listed first. Look-behind in
a stream sees as far back as the pattern can read (:func:`~harness_middleware._starts.behind`),
and at least 64 characters when that is not known (syntax only ``regex`` reads).
``max_match_length`` (optional) is a bound on every pattern's match length checked at config
time (:func:`match_length_problem`); what is held never exceeds about the longest match.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Annotated, Final, Literal

import msgspec

from harness_core.middleware import (
    BlockStart,
    CallNext,
    ChunkScrubber,
    ContentBlock,
    CountCallNext,
    EmbedCallNext,
    Embeddings,
    EmbedOptions,
    GenerateOptions,
    LlmError,
    ReasoningBlock,
    StreamChunk,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    hookimpl,
)
from harness_middleware._starts import MatchStarts, behind, literal_filter, longest, may_be_empty, plain

if TYPE_CHECKING:  # pragma: no cover - typing only; ``regex`` is imported where a pattern is compiled
    import regex
from harness_middleware._stream import aclose

__all__ = ["PRESETS", "PRESET_GROUPS", "Masker", "RedactPlugin", "StreamMasker", "match_length_problem"]

PRESETS: Final[dict[str, str]] = {
    # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-api03-) and other sk- keys.
    "openai-key": r"\bsk-[A-Za-z0-9_-]{20,200}",
    # AWS access key ids (long-term AKIA, temporary ASIA).
    "aws-access-key": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    # GitHub personal/OAuth/app tokens.
    "github-token": r"\bgh[pousr]_[A-Za-z0-9]{36,200}",
    # Google API keys.
    "google-api-key": r"\bAIza[0-9A-Za-z_-]{35}",
    # Slack tokens.
    "slack-token": r"\bxox[abposr]-[A-Za-z0-9-]{10,200}",
    # HTTP bearer credentials (RFC 6750 §2.1 b64token).
    "bearer": r"\b[Bb]earer[ \t]{1,4}[A-Za-z0-9._~+/-]{16,200}={0,2}",
    # E-mail addresses (a practical subset of RFC 5322 addr-spec).
    "email": r"\b[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9-]{1,40}\.){1,3}[A-Za-z]{2,24}\b",
}
"""Built-in patterns by name; every match is at most 256 characters long."""

PRESET_GROUPS: Final[dict[str, list[str]]] = {
    "api-keys": ["openai-key", "aws-access-key", "github-token", "google-api-key", "slack-token", "bearer"],
    "emails": ["email"],
}
"""Names that stand for several presets."""

PresetName = Literal[
    "api-keys",
    "emails",
    "openai-key",
    "aws-access-key",
    "github-token",
    "google-api-key",
    "slack-token",
    "bearer",
    "email",
]


def match_length_problem(patterns: dict[str, str], max_match_length: int | None) -> str | None:
    """Why ``max_match_length`` does not bound the matches of ``patterns`` (name -> regular
    expression), naming the field, the pattern and the least value that would; ``None`` when it
    does (or is ``None``: no bound asked for)."""
    if max_match_length is None:
        return None
    lengths = {name: longest(source) for name, source in patterns.items()}
    for name, length in lengths.items():
        if length is None:
            return (
                f"max_match_length {max_match_length}: pattern {name!r} has no longest match"
                " (an unbounded repeat such as + or *, or syntax only the regex module reads);"
                " bound its repeats ({1,200}) or remove max_match_length"
            )
    name, length = max(lengths.items(), key=lambda item: item[1] or 0, default=("", 0))
    if length is not None and length > max_match_length:
        return (
            f"max_match_length {max_match_length} is below the longest match of pattern {name!r}"
            f" ({length} characters): it must be at least {length}"
        )
    return None


_CONTEXT: Final = 64  # characters of already emitted text kept for look-behind (\b …), at least


class Masker:
    """Masks the matches of named patterns.

    Args:
        patterns: name -> regular expression (``regex`` module syntax, compatible with ``re``).
        replacement: a ``str.format`` template with ``{name}``.
        max_match_length: ``None``, or the most characters a match of any pattern may span (so
            the most text a stream masker holds back from where a match may start).

    Raises :class:`~harness_core.errors.LlmError` ``CONFIG`` for an invalid pattern, one that
    can match the empty string, or one whose matches may be longer than ``max_match_length``
    (see :func:`match_length_problem`).

    Where several patterns match, the whole-text scan takes the leftmost match, and among the
    matches starting there the first pattern's (in the order given).
    """

    def __init__(
        self, patterns: dict[str, str], replacement: str, max_match_length: int | None = None, *, lazy: bool = False
    ) -> None:
        self.names: dict[str, str] = {}
        parts: list[str] = []
        for i, (name, source) in enumerate(patterns.items()):
            if not (lazy and plain(source)):  # plain ``re`` syntax is ``regex`` syntax read the same way
                _compile(name, source)
            if may_be_empty(source):
                raise LlmError("CONFIG", f"redact: pattern {name!r} matches the empty string")
            self.names[f"_p{i}"] = name
            parts.append(f"(?P<_p{i}>{source})")
        problem = match_length_problem(patterns, max_match_length)
        if problem is not None:
            raise LlmError("CONFIG", f"redact: {problem}")
        self._sources = list(patterns.values())
        self._combined = "|".join(parts)
        self._filter = literal_filter(self._sources, self._combined) if parts else None
        """Texts one of which every match contains (plain ``re``): a text without them is passed on
        without the ``regex`` pattern, which ``lazy`` compiles on the first text that has them."""
        self.replacement = replacement
        self.max_match_length = max_match_length
        self.context = max([_CONTEXT, *filter(None, map(behind, patterns.values()))])
        """Characters of emitted text a stream masker keeps for look-behind: what the patterns
        read before a match (64 when that is less or not known)."""
        if not lazy:
            _ = self.starts  # compiled now: ``redact``'s own patterns, at config time

    @functools.cached_property
    def pattern(self) -> regex.Pattern[str] | None:
        """Every pattern as one alternation (``regex`` module), each in a group ``_p<i>``;
        ``None`` without patterns."""
        if not self._combined:
            return None
        import regex

        return regex.compile(self._combined)

    @functools.cached_property
    def starts(self) -> MatchStarts | None:
        """Where the stream masker's next match may start (:meth:`MatchStarts.first`)."""
        return MatchStarts(self._sources, self.pattern) if self.pattern is not None else None

    def _replace(self, match: regex.Match[str]) -> str:
        group = match.lastgroup
        name = self.names[group] if group is not None else "secret"
        return self.replacement.format(name=name)

    def mask(self, text: str) -> str:
        """``text`` with every match replaced."""
        if self._filter is not None and self._filter.search(text) is None:
            return text  # no match can lie in it (and ``regex`` need not be compiled)
        if self.pattern is None or self.starts is None or not self.starts.may_match(text):
            return text
        return self.pattern.sub(self._replace, text)

    def stream(self) -> StreamMasker:
        """A masker for one block of streamed text."""
        return StreamMasker(self)


def _compile(name: str, source: str) -> None:
    """Check that ``source`` compiles (``regex`` module).

    Raises:
        LlmError: ``CONFIG`` naming pattern ``name`` and the compiler's message.
    """
    import regex

    try:
        regex.compile(source)
    except regex.error as exc:
        raise LlmError("CONFIG", f"redact: pattern {name!r} is not a valid regular expression: {exc}") from exc


class StreamMasker:
    """Masks one block's text arriving in pieces (see :meth:`feed` and :meth:`flush`)."""

    def __init__(self, masker: Masker) -> None:
        self._masker = masker
        self._context = ""
        self._pending = ""
        self.fed = False
        self._out: list[str] = []

    @property
    def emitted(self) -> str:
        """Everything returned so far, concatenated (the masked block)."""
        return "".join(self._out)

    def feed(self, text: str) -> str:
        """Add ``text``; return the masked text that is decided now (possibly empty)."""
        self.fed = True
        self._pending += text
        return self._drain(final=False)

    def flush(self) -> str:
        """The block ended: mask and return everything held back."""
        return self._drain(final=True)

    def _drain(self, *, final: bool) -> str:
        masker = self._masker
        starts = masker.starts
        pattern = masker.pattern
        pending = self._pending
        buf = self._context + pending
        start = len(self._context)
        end = len(buf)
        if starts is None or pattern is None:  # no patterns
            return self._emit(pending, buf, end)
        if final:  # the text is complete: mask it as a whole
            return self._emit(self._mask_rest(pattern, buf, start), buf, end)
        first = starts.first(buf, start)
        if first == end:  # the common case: nothing matches or can start a match
            self._pending = ""
            self._context = buf[-masker.context :]
            self._out.append(pending)
            return pending
        pieces: list[str] = []
        pos = start
        while first < end:
            # the whole-text scan's next match starts at ``first`` if anywhere: commit it only when
            # no attempt from there reads up to the end (more text could change or extend it)
            match = pattern.match(buf, first)
            if match is None or match.end() == first or pattern.fullmatch(buf, first, partial=True) is not None:
                break  # held from ``first``
            pieces += (buf[pos:first], masker._replace(match))
            pos = match.end()
            first = starts.first(buf, pos)
        pieces.append(buf[pos:first])
        return self._emit("".join(pieces), buf, first)

    def _mask_rest(self, pattern: regex.Pattern[str], buf: str, start: int) -> str:
        """``buf`` from ``start`` on with every match replaced (``buf`` before ``start``: context)."""
        pieces: list[str] = []
        pos = start
        for match in pattern.finditer(buf, start):
            pieces += (buf[pos : match.start()], self._masker._replace(match))
            pos = match.end()
        pieces.append(buf[pos:])
        return "".join(pieces)

    def _emit(self, out: str, buf: str, cut: int) -> str:
        """Emit ``out`` (the masked text of ``buf`` up to ``cut``); hold ``buf`` from ``cut`` on."""
        self._pending = buf[cut:]
        self._context = buf[max(0, cut - self._masker.context) : cut]
        self._out.append(out)
        return out


class RedactPlugin:
    """Middleware masking secrets in requests and streamed replies (see module doc)."""

    class Config(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
        """``redact:`` in plugins.yaml.

        Fields:
            presets: built-in patterns or groups (``api-keys``, ``emails``, or single names).
            patterns: custom patterns, name -> regular expression.
            replacement: what a match becomes; ``{name}`` is the pattern's name.
            max_match_length: ``null``, or a bound on the characters a match spans, checked
                against every pattern (so the stream masker never holds back more text).
            requests: mask the outgoing messages and system prompt.
            responses: mask the streamed reply.
            reasoning: also mask reasoning text (never reasoning signed by the provider).
            tool_arguments: also mask tool-call arguments (JSON the tool parses).
        """

        presets: list[PresetName] = msgspec.field(default_factory=lambda: ["api-keys", "emails"])
        patterns: dict[str, str] = msgspec.field(default_factory=dict)
        replacement: str = "[REDACTED:{name}]"
        max_match_length: Annotated[int, msgspec.Meta(ge=1)] | None = None
        requests: bool = True
        responses: bool = True
        reasoning: bool = True
        tool_arguments: bool = False

        def patterns_by_name(self) -> dict[str, str]:
            """The presets (groups expanded) and the custom patterns, name -> regular expression."""
            patterns: dict[str, str] = {}
            for preset in self.presets:
                for name in PRESET_GROUPS.get(preset, [preset]):
                    patterns[name] = PRESETS[name]
            patterns.update(self.patterns)
            return patterns

        def __post_init__(self) -> None:
            """Check ``max_match_length`` against the patterns, so ``config check`` reports it (``ValueError``)."""
            problem = match_length_problem(self.patterns_by_name(), self.max_match_length)
            if problem is not None:
                raise ValueError(problem)

    def __init__(self, config: Config | None = None) -> None:
        self.config = config if config is not None else self.Config()
        patterns = self.config.patterns_by_name()
        try:
            self.config.replacement.format(name="x")
        except (KeyError, IndexError, ValueError) as exc:
            raise LlmError("CONFIG", f"redact: replacement {self.config.replacement!r} is not valid: {exc!r}") from exc
        self.masker = Masker(patterns, self.config.replacement, self.config.max_match_length)

    # ------------------------------------------------------------------ requests

    def _mask_block(self, block: ContentBlock) -> ContentBlock:
        mask = self.masker.mask
        if isinstance(block, TextBlock):
            return TextBlock(mask(block.text))
        if isinstance(block, ToolResultBlock):
            return msgspec.structs.replace(block, content=mask(block.content))
        if isinstance(block, ReasoningBlock):
            if block.signed or not self.config.reasoning:
                return block
            return msgspec.structs.replace(block, text=mask(block.text))
        if isinstance(block, ToolCallBlock) and self.config.tool_arguments:
            return msgspec.structs.replace(block, arguments=mask(block.arguments))
        return block  # tool calls without tool_arguments; files (bytes are not text to mask)

    def mask_request(self, options: GenerateOptions) -> GenerateOptions:
        """``options`` with the messages' text, tool results, unsigned reasoning and the system
        prompt masked (tool-call arguments only with ``tool_arguments``)."""
        messages = [
            msgspec.structs.replace(message, content=[self._mask_block(b) for b in message.content])
            for message in options.messages
        ]
        system = self.masker.mask(options.system) if options.system is not None else None
        return msgspec.structs.replace(options, messages=messages, system=system)

    @hookimpl
    async def llm_embed(self, options: EmbedOptions, call_next: EmbedCallNext) -> Embeddings:
        """Mask every input (with ``requests``), then ``await call_next``; the vectors pass unchanged."""
        if self.config.requests:
            options = msgspec.structs.replace(options, inputs=[self.masker.mask(text) for text in options.inputs])
        return await call_next(options)

    @hookimpl
    async def llm_count_tokens(self, options: GenerateOptions, call_next: CountCallNext) -> int:
        """Mask the request as a stream's (with ``requests``), then count it: the count is that
        of the text the provider would receive."""
        if self.config.requests:
            options = self.mask_request(options)
        return await call_next(options)

    # ------------------------------------------------------------------ replies

    def _masks(self, start: BlockStart) -> bool:
        if start.block_type == "text":
            return True
        if start.block_type == "reasoning":
            return self.config.reasoning and not start.signed
        return self.config.tool_arguments

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        """Mask the request, then the streamed reply (see module doc)."""
        if self.config.requests:
            options = self.mask_request(options)
        stream = call_next(options)
        feed = ChunkScrubber(self.masker, self._masks).feed
        try:
            if not self.config.responses:
                async for chunk in stream:
                    yield chunk
                return
            async for chunk in stream:
                for out in feed(chunk):
                    yield out
        finally:
            await aclose(stream)
