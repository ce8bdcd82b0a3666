"""``Content-Encoding`` decoding of a streamed body (RFC 9110 §8.4.1: ``gzip``, ``deflate``,
``identity``), done here rather than in httpx so every generator stays under our control.
"""

from __future__ import annotations

import zlib

from harness_core.errors import LlmError

__all__ = ["Inflater"]


class Inflater:
    """Content-Encoding decoding (RFC 9110 §8.4.1) of ``gzip`` / ``deflate`` / ``identity``.

    httpx decodes inside ``aiter_bytes()``, a generator whose failure would strand the
    generators below it; decoding here keeps every generator under our control. Stacked codings
    are undone last-applied first. Corrupt data raises ``LlmError("PROTOCOL")``.
    """

    __slots__ = ("_steps",)

    def __init__(self, codings: list[str]) -> None:
        self._steps = [_InflateStep(coding) for coding in reversed(codings)]

    @classmethod
    def for_encoding(cls, header: str) -> Inflater | None:
        """An inflater for a ``Content-Encoding`` header value, or ``None`` for identity."""
        codings = [c.strip().lower() for c in header.split(",") if c.strip().lower() not in ("", "identity")]
        if not codings:
            return None
        if any(c not in ("gzip", "x-gzip", "deflate") for c in codings):
            raise LlmError("PROTOCOL", f"unsupported content-encoding {header!r} (gzip and deflate are supported)")
        return cls(codings)

    def decode(self, data: bytes, *, final: bool = False) -> bytes:
        """Decode the next piece; ``final=True`` also flushes what the decompressors hold."""
        for step in self._steps:
            data = step.decode(data, final=final)
        return data


class _InflateStep:
    __slots__ = ("coding", "fresh", "state")

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self.state = zlib.decompressobj(zlib.MAX_WBITS | 16 if coding != "deflate" else zlib.MAX_WBITS)
        self.fresh = True

    def decode(self, data: bytes, *, final: bool) -> bytes:
        try:
            out = self.state.decompress(data)
            if final:
                out += self.state.flush()
        except zlib.error as exc:
            if self.fresh and self.coding == "deflate":
                # some servers send raw deflate without the zlib wrapper (httpx tolerates it too)
                self.state = zlib.decompressobj(-zlib.MAX_WBITS)
                self.fresh = False
                return self.decode(data, final=final)
            raise LlmError("PROTOCOL", f"corrupt {self.coding}-encoded response body: {exc}") from exc
        self.fresh = self.fresh and not data
        return out
