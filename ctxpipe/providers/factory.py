"""Build the configured providers from `Settings` (nothing heavy is loaded here)."""

from __future__ import annotations

from ctxpipe.core.config import Settings
from ctxpipe.providers.base import LLM
from ctxpipe.providers.embedder import SentenceTransformerEmbedder
from ctxpipe.providers.prompts import PromptRegistry, default_registry


def make_llm(settings: Settings, registry: PromptRegistry | None = None) -> LLM:
    """`settings.llm_provider`: "rules" (offline, deterministic) or "openai" (HTTP)."""
    provider = settings.llm_provider
    if provider == "openai":
        from ctxpipe.providers.openai_llm import OpenAICompatibleLLM

        return OpenAICompatibleLLM(
            settings, registry if registry is not None else default_registry()
        )
    if provider == "rules":
        from ctxpipe.providers.rules import RulesLLM

        llm: LLM = RulesLLM()
        return llm
    raise ValueError(f"unknown LLM provider {provider!r} (expected 'rules' or 'openai')")


def make_embedder(settings: Settings) -> SentenceTransformerEmbedder:
    """The sentence-transformers embedder (the model itself loads on first use)."""
    return SentenceTransformerEmbedder(
        settings.embedding_model,
        device=settings.embedding_device,
        batch_size=settings.embedding_batch_size,
        batch_tokens=settings.embedding_batch_tokens,
        precision=settings.embedding_precision,
    )
