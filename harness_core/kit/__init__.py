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
- what an adapter plugin uses beside the kit, re-exported from its owner so adapters import only
  the faces: :class:`SSEEvent` (:mod:`harness_core.sse`); :func:`base64_data`, :func:`check_file`,
  :func:`check_detail`, :func:`data_url`, :func:`unsupported_file`, :func:`refusal_reason`
  (:mod:`harness_core.media`); :func:`check_cache_ttls` (:mod:`harness_core.types`);
  :data:`DEFAULT_MAX_BATCH`, :func:`float32_from_base64` (:mod:`harness_core.embedding`);
  :data:`RegisterAdapter`, :data:`RegisterEmbedder` (:mod:`harness_core.hookspecs`); :func:`race`,
  :data:`ABORTED` (:mod:`harness_core.abort`); :func:`aclose_all` (:mod:`harness_core.chain`). The
  vocabulary (options, chunks, errors, :class:`~harness_core.Secret`) comes from :mod:`harness_core`.

How to write an adapter with it: ``docs/writing-an-adapter.md``. Names load on first use, so
importing the kit for the config or the plugin class does not import httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness_core._lazy import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only; at run time names load on first use
    from harness_core.abort import ABORTED, DEFAULT_ABORT_REASON, abort_reason, race
    from harness_core.chain import aclose_all
    from harness_core.embedding import DEFAULT_MAX_BATCH, float32_from_base64
    from harness_core.errors import SNIPPET_CHARS, snippet
    from harness_core.hookspecs import RegisterAdapter, RegisterEmbedder
    from harness_core.kit.adapter import HttpAdapter
    from harness_core.kit.blocks import Block, BlockWriter, decode_event
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
    from harness_core.media import base64_data, check_detail, check_file, data_url, refusal_reason, unsupported_file
    from harness_core.sse import SSEEvent
    from harness_core.types import check_cache_ttls

__all__ = [
    "ABORTED",
    "DEFAULT_ABORT_REASON",
    "DEFAULT_DRAIN_TIMEOUT",
    "DEFAULT_MAX_BATCH",
    "SNIPPET_CHARS",
    "Block",
    "BlockWriter",
    "HttpAdapter",
    "HttpProviderConfig",
    "HttpProviderPlugin",
    "HttpTimeouts",
    "RegisterAdapter",
    "RegisterEmbedder",
    "SSEEvent",
    "StreamTranslator",
    "abort_reason",
    "aclose_all",
    "base64_data",
    "base_url_problem",
    "check_cache_ttls",
    "check_detail",
    "check_file",
    "client_options",
    "data_url",
    "decode_event",
    "float32_from_base64",
    "header_name_problem",
    "race",
    "refusal_reason",
    "request_json",
    "snippet",
    "stream_sse",
    "unsupported_file",
    "vendor_api_key",
]

_LAZY = {
    "DEFAULT_ABORT_REASON": "harness_core.abort",
    "DEFAULT_DRAIN_TIMEOUT": "harness_core.kit.stream",
    "SNIPPET_CHARS": "harness_core.errors",
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
    "snippet": "harness_core.errors",
    "stream_sse": "harness_core.kit.stream",
    "vendor_api_key": "harness_core.kit.config",
    "ABORTED": "harness_core.abort",
    "race": "harness_core.abort",
    "aclose_all": "harness_core.chain",
    "DEFAULT_MAX_BATCH": "harness_core.embedding",
    "float32_from_base64": "harness_core.embedding",
    "RegisterAdapter": "harness_core.hookspecs",
    "RegisterEmbedder": "harness_core.hookspecs",
    "base64_data": "harness_core.media",
    "check_detail": "harness_core.media",
    "check_file": "harness_core.media",
    "data_url": "harness_core.media",
    "refusal_reason": "harness_core.media",
    "unsupported_file": "harness_core.media",
    "SSEEvent": "harness_core.sse",
    "check_cache_ttls": "harness_core.types",
}


__getattr__ = lazy_exports(__name__, _LAZY)
