"""The offline, deterministic `rules` LLM provider (see `llm.RulesLLM`)."""

from ctxpipe.providers.rules.llm import HANDLERS, RulesLLM

__all__ = ["HANDLERS", "RulesLLM"]
