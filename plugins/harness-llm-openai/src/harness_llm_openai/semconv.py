"""The GenAI provider an OpenAI-compatible ``base_url`` reaches, for telemetry: :func:`provider_for_url`.

``gen_ai.provider.name`` (OpenTelemetry GenAI conventions,
https://opentelemetry.io/docs/specs/semconv/registry/attributes/gen-ai/) names the provider "as
identified by the client", and trace backends group and price by it. Many servers speak the
OpenAI wire, so the wire alone says nothing: ``openai`` is named only for OpenAI's own host;
the hosts of vendors the conventions list are named by their value; any other host (a local
vLLM or Ollama, a company gateway) is :data:`OPENAI_COMPATIBLE`, a custom value that claims no
vendor, until the config's ``gen_ai_provider`` says which it is.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

__all__ = ["OPENAI_COMPATIBLE", "provider_for_url"]

OPENAI_COMPATIBLE: Final = "harness.openai_compatible"
"""The value for a host the table does not know (in the harness namespace: no vendor's name)."""

_HOSTS: Final[dict[str, str]] = {
    "api.openai.com": "openai",
    "api.deepseek.com": "deepseek",
    "api.groq.com": "groq",
    "api.x.ai": "x_ai",
    "api.mistral.ai": "mistral_ai",
    "api.perplexity.ai": "perplexity",
    "generativelanguage.googleapis.com": "gcp.gemini",
}
"""Exact hosts of the vendors whose OpenAI-compatible endpoints the conventions name."""

_SUFFIXES: Final[tuple[tuple[str, str], ...]] = (
    (".openai.azure.com", "azure.ai.openai"),  # {resource}.openai.azure.com
    ("aiplatform.googleapis.com", "gcp.vertex_ai"),  # {region}-aiplatform.googleapis.com
)
"""Host suffixes of per-resource or per-region endpoints."""


def provider_for_url(base_url: str) -> str:
    """The ``gen_ai.provider.name`` of the server at ``base_url`` (see the module doc): a
    well-known value for a host the table knows, else :data:`OPENAI_COMPATIBLE`. The host is
    compared case-insensitively; the path, port and credentials play no part."""
    host = (urlsplit(base_url).hostname or "").lower()
    known = _HOSTS.get(host)
    if known is not None:
        return known
    return next((value for suffix, value in _SUFFIXES if host.endswith(suffix)), OPENAI_COMPATIBLE)
