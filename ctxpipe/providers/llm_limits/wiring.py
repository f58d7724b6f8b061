"""The limiter of the configured OpenAI-compatible provider: one per process and scope (base
URL + API key), on the settings' Redis, with the per-minute limits of the settings counted
over their window (`llm_rate_window_s`, 60 s unless set)."""

from __future__ import annotations

import threading

from ctxpipe.core.config import Settings, per_window
from ctxpipe.providers.llm_limits.port import LimiterSnapshot, LimitSpec, limiter_scope
from ctxpipe.providers.llm_limits.redis_limiter import RedisLLMLimiter

_LEASE_MARGIN_S = 30.0
_lock = threading.Lock()
_limiters: dict[tuple[str, str, LimitSpec], RedisLLMLimiter] = {}


def limit_spec(settings: Settings) -> LimitSpec:
    """The settings' limits, the per-minute ones scaled to the window they are counted over
    (`llm_rate_window_s`)."""
    window_s = settings.llm_rate_window_s
    rpm, tpm = settings.llm_requests_per_minute, settings.llm_tokens_per_minute
    return LimitSpec(
        requests=None if rpm is None else per_window(rpm, window_s),
        tokens=None if tpm is None else per_window(tpm, window_s),
        concurrency=settings.llm_max_concurrency,
        window_s=window_s,
        lease_s=settings.llm_timeout_s + _LEASE_MARGIN_S,
    )


def llm_limiter(settings: Settings) -> RedisLLMLimiter:
    """The process's limiter of `settings`' provider (made on first use, then shared)."""
    scope, label = limiter_scope(settings.llm_base_url, settings.llm_api_key.get_secret_value())
    spec = limit_spec(settings)
    key = (settings.redis_url, scope, spec)
    with _lock:
        limiter = _limiters.get(key)
        if limiter is None:
            limiter = RedisLLMLimiter.from_url(settings.redis_url, spec, scope=scope, label=label)
            _limiters[key] = limiter
        return limiter


def llm_throttling(settings: Settings) -> LimiterSnapshot | None:
    """The cluster-wide throttling reading of the configured provider (None: the `rules`
    provider, which sends nothing). Raises `redis.RedisError` when Redis cannot be read."""
    if settings.llm_provider != "openai":
        return None
    return llm_limiter(settings).snapshot()


__all__ = ["limit_spec", "llm_limiter", "llm_throttling"]
