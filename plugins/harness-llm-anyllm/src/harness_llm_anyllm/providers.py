"""What this plugin knows about any-llm's providers without importing any-llm.

The table mirrors any-llm-sdk 1.40 (``AnyLLM.get_supported_providers()`` and each provider
class's ``ENV_API_KEY_NAME`` / ``SUPPORTS_COMPLETION_*`` flags, https://github.com/mozilla-ai/any-llm,
``src/any_llm/providers/``); a test compares it with the installed library so a release that
adds, drops or renames a provider fails the suite instead of drifting. Importing this module is
free: plugins.yaml is validated against it before any-llm (hundreds of milliseconds of imports)
is loaded.
"""

from __future__ import annotations

from typing import Final, NamedTuple

__all__ = ["GEN_AI_PROVIDERS", "PROVIDERS", "ProviderFacts", "gen_ai_provider"]


class ProviderFacts(NamedTuple):
    """One any-llm provider.

    Fields:
        env_var: the environment variable the provider's SDK documents for its key (``None``:
            the provider takes no single key, e.g. cloud credentials or a local server).
        streaming: any-llm can stream chat completions from it (required by this plugin).
        reasoning: any-llm surfaces its reasoning (``delta.reasoning``).
        images: any-llm accepts image input for it (``FileBlock`` images).
        pdf: any-llm accepts PDF input for it (``FileBlock`` PDFs).
        signed_reasoning: its reasoning is signed (Anthropic thinking): harness marks the
            blocks ``signed`` and keeps the signature as replay state.
        embeddings: any-llm can embed with it (``aembedding``): the plugin registers its routes
            as embedding routes too.
    """

    env_var: str | None
    streaming: bool = True
    reasoning: bool = False
    images: bool = False
    pdf: bool = False
    signed_reasoning: bool = False
    embeddings: bool = False


PROVIDERS: Final[dict[str, ProviderFacts]] = {
    "anthropic": ProviderFacts("ANTHROPIC_API_KEY", reasoning=True, images=True, signed_reasoning=True, pdf=True),
    "atlascloud": ProviderFacts("ATLASCLOUD_API_KEY", reasoning=True),
    "azure": ProviderFacts("AZURE_API_KEY", embeddings=True),
    "azureanthropic": ProviderFacts(
        "AZURE_ANTHROPIC_API_KEY", reasoning=True, images=True, signed_reasoning=True, pdf=True
    ),
    "azureopenai": ProviderFacts("AZURE_OPENAI_API_KEY", images=True, embeddings=True),
    "bedrock": ProviderFacts("AWS_BEARER_TOKEN_BEDROCK", reasoning=True, images=True, embeddings=True),
    "cascadia": ProviderFacts("CASCADIA_API_KEY", reasoning=True),
    "cerebras": ProviderFacts("CEREBRAS_API_KEY", reasoning=True),
    "cohere": ProviderFacts("COHERE_API_KEY", reasoning=True, images=True, embeddings=True),
    "dashscope": ProviderFacts("DASHSCOPE_API_KEY", images=True, pdf=True, embeddings=True),
    "databricks": ProviderFacts("DATABRICKS_TOKEN", reasoning=True, embeddings=True),
    "deepinfra": ProviderFacts("DEEPINFRA_API_KEY", reasoning=True, images=True, embeddings=True),
    "deepseek": ProviderFacts("DEEPSEEK_API_KEY", reasoning=True, images=True),
    "edenai": ProviderFacts("EDENAI_API_KEY", images=True, pdf=True, embeddings=True),
    "fireworks": ProviderFacts("FIREWORKS_API_KEY", reasoning=True, images=True),
    "gemini": ProviderFacts("GEMINI_API_KEY", reasoning=True, images=True, pdf=True, embeddings=True),
    "github": ProviderFacts("GITHUB_TOKEN", embeddings=True),
    "gmi": ProviderFacts("GMI_API_KEY", reasoning=True),
    "groq": ProviderFacts("GROQ_API_KEY", reasoning=True),
    "huggingface": ProviderFacts("HF_TOKEN"),
    "inception": ProviderFacts("INCEPTION_API_KEY"),
    "kenari": ProviderFacts("KENARI_API_KEY", reasoning=True),
    "liner": ProviderFacts("LINER_API_KEY"),
    "llama": ProviderFacts("LLAMA_API_KEY"),
    "llamacpp": ProviderFacts("LLAMACPP_API_KEY", reasoning=True, images=True, embeddings=True),
    "llamafile": ProviderFacts(None, streaming=False, reasoning=True),
    "lmstudio": ProviderFacts("LM_STUDIO_API_KEY", reasoning=True, embeddings=True),
    "meta": ProviderFacts("MODEL_API_KEY", images=True, pdf=True),
    "minimax": ProviderFacts("MINIMAX_API_KEY", reasoning=True),
    "mistral": ProviderFacts("MISTRAL_API_KEY", reasoning=True, embeddings=True),
    "moonshot": ProviderFacts("MOONSHOT_API_KEY", reasoning=True),
    "mzai": ProviderFacts("ANY_LLM_KEY", reasoning=True, images=True, embeddings=True),
    "nebius": ProviderFacts("NEBIUS_API_KEY", reasoning=True, images=True, embeddings=True),
    "neosantara": ProviderFacts("NEOSANTARA_API_KEY", reasoning=True, images=True, pdf=True, embeddings=True),
    "ollama": ProviderFacts(None, reasoning=True, images=True, pdf=True, embeddings=True),
    "openai": ProviderFacts("OPENAI_API_KEY", images=True, pdf=True, embeddings=True),
    "openrouter": ProviderFacts("OPENROUTER_API_KEY", reasoning=True, images=True, pdf=True, embeddings=True),
    "otari": ProviderFacts("OTARI_API_KEY", reasoning=True, images=True, pdf=True, embeddings=True),
    "ovhcloud": ProviderFacts("OVHCLOUD_API_KEY"),
    "perplexity": ProviderFacts("PERPLEXITY_API_KEY", images=True),
    "portkey": ProviderFacts("PORTKEY_API_KEY", reasoning=True, images=True, pdf=True),
    "qiniu": ProviderFacts("QINIU_API_KEY", reasoning=True, images=True, embeddings=True),
    "requesty": ProviderFacts("REQUESTY_API_KEY", reasoning=True, images=True, pdf=True, embeddings=True),
    "sagemaker": ProviderFacts(None, images=True, pdf=True, embeddings=True),
    "sambanova": ProviderFacts("SAMBANOVA_API_KEY", reasoning=True, images=True, embeddings=True),
    "telnyx": ProviderFacts("TELNYX_API_KEY", reasoning=True, images=True),
    "together": ProviderFacts("TOGETHER_API_KEY", reasoning=True, images=True, embeddings=True),
    "typesafe": ProviderFacts("TYPESAFE_API_KEY", streaming=False),
    "vertexai": ProviderFacts(None, reasoning=True, images=True, pdf=True, embeddings=True),
    "vertexaianthropic": ProviderFacts(None, reasoning=True, images=True, signed_reasoning=True, pdf=True),
    "vllm": ProviderFacts("VLLM_API_KEY", reasoning=True, images=True, embeddings=True),
    "voyage": ProviderFacts("VOYAGE_API_KEY", streaming=False, embeddings=True),
    "watsonx": ProviderFacts("WATSONX_API_KEY", images=True),
    "xai": ProviderFacts("XAI_API_KEY", reasoning=True),
    "zai": ProviderFacts("ZAI_API_KEY", reasoning=True),
}
"""any-llm's provider names (the ``provider`` config field) and their facts."""


GEN_AI_PROVIDERS: Final[dict[str, str]] = {
    "anthropic": "anthropic",
    "azure": "azure.ai.inference",
    "azureopenai": "azure.ai.openai",
    "bedrock": "aws.bedrock",
    "cohere": "cohere",
    "deepseek": "deepseek",
    "gemini": "gcp.gemini",
    "groq": "groq",
    "mistral": "mistral_ai",
    "openai": "openai",
    "perplexity": "perplexity",
    "vertexai": "gcp.vertex_ai",
    "vertexaianthropic": "gcp.vertex_ai",
    "watsonx": "ibm.watsonx.ai",
    "xai": "x_ai",
}
"""any-llm provider name → its well-known ``gen_ai.provider.name`` in the OpenTelemetry GenAI
conventions (https://opentelemetry.io/docs/specs/semconv/registry/attributes/gen-ai/), for the
providers the conventions list; Anthropic on Vertex AI is named by the platform called
(``gcp.vertex_ai``), as the conventions name Vertex AI's endpoints."""


def gen_ai_provider(provider: str) -> str:
    """The ``gen_ai.provider.name`` of the any-llm ``provider``: its well-known value
    (:data:`GEN_AI_PROVIDERS`), else the any-llm name itself (``together``, ``ollama`` …), a
    custom value, as the conventions allow where none of theirs applies."""
    return GEN_AI_PROVIDERS.get(provider, provider)
