"""`InProcessLLMLimiter`: the limiter of one process (unit tests, runs without Redis, and the
fallback of `RedisLLMLimiter` while Redis cannot be reached). Same rules as the Redis script:
a sliding log of requests and of tokens over `window_s` (a request counts from its grant until
a window after its call ended), leased concurrency slots, a cool-down."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from ctxpipe.providers.llm_limits.port import (
    COUNTERS,
    Decision,
    LimiterSnapshot,
    LimitSpec,
)


class InProcessLLMLimiter:
    def __init__(
        self,
        spec: LimitSpec,
        *,
        scope: str = "local",
        label: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec = spec
        self.scope = scope
        self.label = label or scope
        self._clock = clock
        self._lock = threading.Lock()
        self._requests: dict[str, float] = {}  # id -> end of its call (in flight: + lease)
        self._tokens: OrderedDict[str, tuple[float, int]] = OrderedDict()  # id -> (at, tokens)
        self._token_total = 0
        self._in_flight: dict[str, float] = {}  # id -> lease end
        self._cooldown_until = 0.0
        self._counters: dict[str, float] = dict.fromkeys(COUNTERS, 0.0)

    # ------------------------------------------------------------------ the port
    def acquire(self, permit_id: str, tokens: int) -> Decision:
        with self._lock:
            now = self._expire()
            spec = self.spec
            if self._cooldown_until > now:
                return Decision(False, self._cooldown_until - now, "retry-after")
            if spec.concurrency is not None and len(self._in_flight) >= spec.concurrency:
                return Decision(False, 0.0, "concurrency")
            if spec.requests is not None and len(self._requests) >= spec.requests:
                ends = sorted(self._requests.values())
                ended = ends[len(ends) - spec.requests]
                wait = spec.window_s if ended > now else ended + spec.window_s - now
                return Decision(False, wait, "requests")
            total = self._token_total
            if spec.tokens is not None and total > 0 and total + tokens > spec.tokens:
                return Decision(False, self._token_wait(tokens, now), "tokens")
            self._requests[permit_id] = now + spec.lease_s
            self._tokens[permit_id] = (now, tokens)
            self._token_total += tokens
            if spec.concurrency is not None:
                self._in_flight[permit_id] = now + spec.lease_s
            return Decision(True)

    def release(self, permit_id: str, used_tokens: int | None) -> None:
        with self._lock:
            now = self._expire()
            self._in_flight.pop(permit_id, None)
            if permit_id in self._requests:
                self._requests[permit_id] = now
            if used_tokens is None:
                return
            held = self._tokens.get(permit_id)
            if held is not None:
                self._tokens[permit_id] = (held[0], used_tokens)
                self._token_total += used_tokens - held[1]
            elif used_tokens > 0:
                self._tokens[permit_id + ":late"] = (now, used_tokens)
                self._token_total += used_tokens

    def cool_down(self, seconds: float) -> None:
        with self._lock:
            self._cooldown_until = max(self._cooldown_until, self._clock() + seconds)

    def count(self, **amounts: float) -> None:
        with self._lock:
            for name, amount in amounts.items():
                if name not in self._counters:
                    raise ValueError(f"unknown limiter counter {name!r}")
                self._counters[name] += amount

    def snapshot(self) -> LimiterSnapshot:
        with self._lock:
            now = self._expire()
            c = self._counters
            return LimiterSnapshot(
                backend="in-process",
                scope=self.scope,
                label=self.label,
                requests_per_window=self.spec.requests,
                tokens_per_window=self.spec.tokens,
                max_concurrency=self.spec.concurrency,
                window_s=self.spec.window_s,
                requests_in_window=len(self._requests),
                tokens_in_window=self._token_total,
                in_flight=len(self._in_flight),
                cooldown_s=max(0.0, self._cooldown_until - now),
                throttled=int(c["throttled"]),
                wait_seconds=c["wait_seconds"],
                http_429=int(c["http_429"]),
                retry_after_honoured=int(c["retry_after_honoured"]),
                deferred=int(c["deferred"]),
            )

    # ------------------------------------------------------------------ internals
    def _expire(self) -> float:
        """Drop what left the window and the expired leases; returns now."""
        now = self._clock()
        cutoff = now - self.spec.window_s
        for pid in [p for p, end in self._requests.items() if end <= cutoff]:
            del self._requests[pid]
        while self._tokens and next(iter(self._tokens.values()))[0] <= cutoff:
            _, (_, n) = self._tokens.popitem(last=False)
            self._token_total -= n
        for pid in [p for p, end in self._in_flight.items() if end <= now]:
            del self._in_flight[pid]
        return now

    def _token_wait(self, tokens: int, now: float) -> float:
        left = self._token_total
        for at, n in self._tokens.values():
            left -= n
            if left <= 0 or left + tokens <= (self.spec.tokens or 0):
                return at + self.spec.window_s - now
        return self.spec.window_s


__all__ = ["InProcessLLMLimiter"]
