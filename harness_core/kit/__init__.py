"""The adapter kit: what every HTTP/SSE provider adapter shares, written once.

- :class:`StreamTranslator`: the translator stage's contract (provider events in, stream chunks
  out); :data:`DEFAULT_ABORT_REASON` and :func:`abort_reason` (from :mod:`harness_core.abort`).
- :class:`BlockWriter` (with :class:`Block`): what every translator writes the same way (block
  numbering, open/delta/close, held usage, ``finish`` with ``replay_state``, abort);
  :func:`decode_event` and :func:`snippet`: decode one event or raise ``PROTOCOL`` quoting it.
- :func:`stream_sse`: the SSE-over-HTTP stream loop driving a translator (abort racing,
  shielded close, HTTP error mapping with a per-adapter classifier, ``Retry-After``, request id).
- :func:`request_json`: one JSON request with the same error mapping (``list_models``).
- :class:`HttpAdapter`: the adapter base (client, stream, ``list_models``, ``aclose``).
- :class:`HttpProviderConfig`, :class:`HttpTimeouts`, :func:`vendor_api_key`,
  :func:`client_options`: the shared plugin config; :func:`base_url_problem` and
  :func:`header_name_problem`: its checks of ``base_url`` and header names.
- :class:`HttpProviderPlugin`: the plugin class, written once.

How to write an adapter with it: ``docs/writing-an-adapter.md``. Names load on first use, so
importing the kit for the config or the plugin class does not import httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness_core._lazy import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only; at run time names load on first use
    from harness_core.abort import DEFAULT_ABORT_REASON, abort_reason
    from harness_core.kit.adapter import HttpAdapter
    from harness_core.kit.blocks import SNIPPET_CHARS, Block, BlockWriter, decode_event, snippet
    from harness_core.kit.config import (
        HttpProviderConfig,
        HttpTimeouts,
        base_url_problem,
        client_options,
        header_name_problem,
        vendor_api_key,
    )
    from harness_core.kit.plugin import HttpProviderPlugin
    from harness_core.kit.request import request_json
    from harness_core.kit.stream import DEFAULT_DRAIN_TIMEOUT, stream_sse
    from harness_core.kit.translator import StreamTranslator

__all__ = [
    "DEFAULT_ABORT_REASON",
    "DEFAULT_DRAIN_TIMEOUT",
    "SNIPPET_CHARS",
    "Block",
    "BlockWriter",
    "HttpAdapter",
    "HttpProviderConfig",
    "HttpProviderPlugin",
    "HttpTimeouts",
    "StreamTranslator",
    "abort_reason",
    "base_url_problem",
    "client_options",
    "decode_event",
    "header_name_problem",
    "request_json",
    "snippet",
    "stream_sse",
    "vendor_api_key",
]

_LAZY = {
    "DEFAULT_ABORT_REASON": "harness_core.abort",
    "DEFAULT_DRAIN_TIMEOUT": "harness_core.kit.stream",
    "SNIPPET_CHARS": "harness_core.kit.blocks",
    "Block": "harness_core.kit.blocks",
    "BlockWriter": "harness_core.kit.blocks",
    "HttpAdapter": "harness_core.kit.adapter",
    "HttpProviderConfig": "harness_core.kit.config",
    "HttpProviderPlugin": "harness_core.kit.plugin",
    "HttpTimeouts": "harness_core.kit.config",
    "StreamTranslator": "harness_core.kit.translator",
    "abort_reason": "harness_core.abort",
    "base_url_problem": "harness_core.kit.config",
    "client_options": "harness_core.kit.config",
    "decode_event": "harness_core.kit.blocks",
    "header_name_problem": "harness_core.kit.config",
    "request_json": "harness_core.kit.request",
    "snippet": "harness_core.kit.blocks",
    "stream_sse": "harness_core.kit.stream",
    "vendor_api_key": "harness_core.kit.config",
}


__getattr__ = lazy_exports(__name__, _LAZY)
