"""Per-key request limits shared by every API process (the `limits` library on Redis).

A sliding-window counter per key id; the window's state lives in Redis, so two API workers (or
two hosts) count the same requests. When Redis cannot be read the limiter fails open (the
request is served, a counter records it): Redis being down must not take reads down with it.
"""

from __future__ import annotations

import logging
import math
import time

from limits import RateLimitItem, parse
from limits.storage import MemoryStorage, RedisStorage, Storage
from limits.strategies import SlidingWindowCounterRateLimiter

from ctxpipe.core.errors import Picklable

log = logging.getLogger("ctxpipe.api")


class RateLimited(Picklable):
    def __init__(self, limit: str, retry_after_s: int) -> None:
        super().__init__(f"rate limit {limit} exceeded; retry in {retry_after_s}s")
        self.limit = limit
        self.retry_after_s = retry_after_s


class KeyRateLimiter:
    def __init__(self, limit: str, redis_url: str | None) -> None:
        self.limit_text = limit.strip()
        self._item: RateLimitItem | None = parse(self.limit_text) if self.limit_text else None
        storage: Storage
        if redis_url:
            storage = RedisStorage(
                redis_url,
                key_prefix="ctxpipe:api:ratelimit",
                wrap_exceptions=True,
                socket_connect_timeout=1.0,
                socket_timeout=1.0,
            )
        else:
            storage = MemoryStorage()
        self._limiter = SlidingWindowCounterRateLimiter(storage)
        self.failures = 0  # readings that failed (the request was served)

    def hit(self, key_id: str) -> None:
        """Count one request of `key_id`; `RateLimited` when it is over the limit."""
        if self._item is None:
            return
        try:
            allowed = self._limiter.hit(self._item, "key", key_id)
            if allowed:
                return
            stats = self._limiter.get_window_stats(self._item, "key", key_id)
        except Exception as exc:  # noqa: BLE001 - fail open, see the module docstring
            self.failures += 1
            log.warning("rate limiter unavailable, request not limited: %s", exc)
            return
        retry = max(1, math.ceil(stats.reset_time - time.time()))
        raise RateLimited(self.limit_text, retry)


__all__ = ["KeyRateLimiter", "RateLimited"]
