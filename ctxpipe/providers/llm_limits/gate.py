"""`LLMGate`: waits, in the calling coroutine, for a permit of an `LLMLimiter`, within a
per-call bound. A call that would wait longer raises `LLMThrottledError` with the wait the
limiter suggests, so a Celery task gives its worker slot back and retries after it."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ctxpipe.core.errors import LLMThrottledError
from ctxpipe.providers.llm_limits.port import LLMLimiter

_POLL_S = 0.05  # how often a call waiting for a concurrency slot asks again
_MIN_COOLDOWN_S = 0.1  # `Retry-After: 0` still spaces the retries a little


@dataclass
class CallBudget:
    """What one LLM call (all its attempts) has waited so far."""

    waited_s: float = 0.0


def estimate_tokens(text: str) -> int:
    """A prompt's tokens before it is sent: about four characters a token (the reply's usage
    corrects it afterwards)."""
    return len(text) // 4 + 1


class LLMGate:
    def __init__(
        self,
        limiter: LLMLimiter,
        *,
        max_wait_s: float,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limiter = limiter
        self.max_wait_s = max_wait_s
        self._sleep = sleep
        self._clock = clock

    async def acquire(self, tokens: int, budget: CallBudget) -> str:
        """A permit id for one request of about `tokens` tokens, after waiting as long as the
        limiter says (within what is left of `max_wait_s` for this call)."""
        permit = uuid.uuid4().hex
        waited = 0.0
        while True:
            decision = self.limiter.acquire(permit, tokens)
            if decision.granted:
                if waited > 0:
                    self.limiter.count(throttled=1, wait_seconds=waited)
                return permit
            wait = decision.wait_s if decision.wait_s > 0 else _POLL_S
            if budget.waited_s + wait > self.max_wait_s:
                suggested = decision.wait_s if decision.wait_s > 0 else max(1.0, self.max_wait_s)
                counts = {"deferred": 1.0}
                if waited > 0:
                    counts |= {"throttled": 1.0, "wait_seconds": waited}
                self.limiter.count(**counts)
                raise LLMThrottledError(suggested, _why(decision.reason, self.limiter))
            started = self._clock()
            await self._sleep(wait + random.uniform(0, min(0.25, wait * 0.1)))
            spent = self._clock() - started
            waited += spent
            budget.waited_s += spent

    def release(self, permit: str, used_tokens: int | None) -> None:
        self.limiter.release(permit, used_tokens)

    def server_throttled(self, status: int, retry_after_s: float | None) -> None:
        """The server answered 429 (or 503) with or without `Retry-After`: count it, and make
        every caller of this scope wait the time it asked for."""
        if status == 429:
            self.limiter.count(http_429=1)
        if retry_after_s is not None:
            self.limiter.cool_down(max(retry_after_s, _MIN_COOLDOWN_S))
            self.limiter.count(retry_after_honoured=1)


def _why(reason: str, limiter: LLMLimiter) -> str:
    spec = limiter.spec
    window = f"{spec.window_s:g} s"
    return {
        "retry-after": "the server asked to wait (Retry-After)",
        "concurrency": f"{spec.concurrency} LLM calls already in flight",
        "requests": f"{spec.requests} requests per {window} reached",
        "tokens": f"{spec.tokens} tokens per {window} reached",
    }.get(reason, reason or "rate limit")


__all__ = ["CallBudget", "LLMGate", "estimate_tokens"]
