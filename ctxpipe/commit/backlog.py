"""BacklogGate: back-pressure at submit time.

Producers that submit faster than the workers drain would make the broker grow without bound.
The gate reads the depth of the commit-path queues (a Redis ``LLEN`` per queue, cached for a
fraction of a second) and refuses a submit while the depth is above the configured cap, with a
retry-after estimated from how fast the queues drained since the previous reading.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from ctxpipe.core.config import Settings
from ctxpipe.core.errors import CtxError
from ctxpipe.storage.broker_queues import COMMIT_PATH_QUEUES, queue_depths

log = logging.getLogger(__name__)
DEFAULT_RETRY_AFTER_S = 5.0
MAX_RETRY_AFTER_S = 300.0


class BacklogFullError(CtxError):
    """The commit backlog is over its cap: retry after `retry_after_s` seconds."""

    def __init__(self, depth: int, cap: int, retry_after_s: float) -> None:
        self.depth = depth
        self.cap = cap
        self.retry_after_s = retry_after_s
        super().__init__(
            f"commit backlog full: {depth} messages waiting in the commit queues (cap {cap}); "
            f"nothing was recorded, submit again in {retry_after_s:.0f}s"
        )


class BacklogGate:
    """Refuses submits while `depth()` exceeds `cap` (`cap` 0: never refuses)."""

    def __init__(
        self,
        cap: int,
        depth: Callable[[], int],
        *,
        cache_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cap = cap
        self._depth = depth
        self._cache_s = cache_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last: tuple[float, int] | None = None  # (when, depth) of the last reading
        self._prev: tuple[float, int] | None = None  # the reading before it

    def reading(self) -> int:
        """The current depth (a cached reading when the last one is fresh); 0 when the broker
        cannot be read: the gate fails open and the enqueue itself reports the outage."""
        now = self._clock()
        with self._lock:
            if self._last is not None and now - self._last[0] < self._cache_s:
                return self._last[1]
        try:
            depth = int(self._depth())
        except Exception as exc:  # noqa: BLE001 - the enqueue that follows reports the outage
            log.debug("commit backlog unknown (%s): submit not gated", exc)
            return 0
        with self._lock:
            self._prev, self._last = self._last, (now, depth)
        return depth

    def retry_after_s(self, depth: int) -> float:
        """Seconds until the backlog is expected back under the cap, from the drain rate
        between the last two readings (a default when it did not drain)."""
        with self._lock:
            prev, last = self._prev, self._last
        if prev is None or last is None or last[0] <= prev[0] or last[1] >= prev[1]:
            return DEFAULT_RETRY_AFTER_S
        rate = (prev[1] - last[1]) / (last[0] - prev[0])
        return float(min(MAX_RETRY_AFTER_S, max(1.0, math.ceil((depth - self.cap) / rate))))

    def check(self) -> None:
        """Raise `BacklogFullError` when the backlog is over the cap."""
        if self.cap <= 0:
            return
        depth = self.reading()
        if depth > self.cap:
            raise BacklogFullError(depth, self.cap, self.retry_after_s(depth))


def broker_backlog_gate(settings: Settings, client: Any = None) -> BacklogGate:
    """A gate over the commit-path queues (`commit`, `extract`) of the settings' broker.
    `client`: a Redis client to reuse for the readings."""
    if client is None:
        import redis

        client = redis.Redis.from_url(
            settings.redis_url, socket_connect_timeout=3, socket_timeout=3
        )

    def depth() -> int:
        return sum(queue_depths(settings.redis_url, COMMIT_PATH_QUEUES, client).values())

    return BacklogGate(settings.commit.max_backlog, depth)


__all__ = ["BacklogFullError", "BacklogGate", "broker_backlog_gate"]
