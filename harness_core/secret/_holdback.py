"""Stream hold-back: a block's text arriving in pieces (:class:`TextStream`), a masking rule
usable on whole texts and on streamed blocks (:class:`Redaction`), and :class:`_HoldBack`, which
shows the prefix of the text received so far that can no longer begin a secret."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = ["Redaction", "TextStream"]


class TextStream(Protocol):
    """One block's text arriving in pieces: ``feed`` returns what can be shown now, ``flush`` the rest."""

    fed: bool
    """Whether :meth:`feed` was called at least once."""

    @property
    def emitted(self) -> str:
        """Everything returned so far, concatenated (the masked block)."""

    def feed(self, text: str) -> str:
        """Add ``text``; return the masked text that is decided now (possibly empty)."""

    def flush(self) -> str:
        """The block ended: mask and return everything held back."""


@runtime_checkable
class Redaction(Protocol):
    """A masking rule usable on whole texts (``mask``) and on streamed blocks (``stream``)."""

    def mask(self, text: str) -> str:
        """``text`` with every match masked."""

    def stream(self) -> TextStream:
        """A fresh masker for one block of streamed text."""


class _HoldBack:
    """A :class:`TextStream` over a literal masker: shows the prefix ``cut`` allows.

    ``cut(text)`` is ``(safe end, whether text may hold something to mask)``: a shown part
    without any occurrence is passed as it is, without running the masker over it again.
    """

    __slots__ = ("_cut", "_mask", "_out", "_pending", "fed")

    def __init__(self, mask: Callable[[str], str], cut: Callable[[str], tuple[int, bool]]) -> None:
        self._mask = mask
        self._cut = cut
        self._pending = ""
        self._out: list[str] = []
        self.fed = False

    @property
    def emitted(self) -> str:
        return "".join(self._out)

    def feed(self, text: str) -> str:
        self.fed = True
        buffer = self._pending + text
        cut, found = self._cut(buffer)
        self._pending = buffer[cut:]
        shown = self._mask(buffer[:cut]) if found else buffer[:cut]  # a full slice is the same str
        self._out.append(shown)
        return shown

    def flush(self) -> str:
        rest, self._pending = self._pending, ""
        return self._emit(rest)

    def _emit(self, text: str) -> str:
        out = self._mask(text)
        self._out.append(out)
        return out
