"""Cluster-wide limits of the LLM calls: requests and tokens per rate window (the per-minute
settings scaled to `llm_rate_window_s`, `wiring`), a cap on calls in flight and the servers'
`Retry-After`, per provider base URL and API key (`port`), on Redis (`redis_limiter`) or in one
process (`memory`); `gate` waits for them within a bound."""

from ctxpipe.providers.llm_limits.gate import CallBudget, LLMGate, estimate_tokens
from ctxpipe.providers.llm_limits.memory import InProcessLLMLimiter
from ctxpipe.providers.llm_limits.port import (
    Decision,
    LimiterSnapshot,
    LimitSpec,
    LLMLimiter,
    limiter_scope,
)
from ctxpipe.providers.llm_limits.retry_after import parse_retry_after

__all__ = [
    "CallBudget",
    "Decision",
    "InProcessLLMLimiter",
    "LLMGate",
    "LLMLimiter",
    "LimitSpec",
    "LimiterSnapshot",
    "estimate_tokens",
    "limiter_scope",
    "parse_retry_after",
]
