"""The LLM limiter port: what a provider asks before each request it sends, and the scope the
limits are counted in (one per server base URL and API key).

A limiter counts, for one scope, the requests and the tokens sent in the last `window_s`
seconds (a sliding log: never more than the limit in any window), the requests in flight (the
concurrency cap) and the cool-down a server asked for with `Retry-After`. `acquire` grants a
permit at once or says how long to wait and why; the caller (`LLMGate`) does the waiting.
Implementations: `RedisLLMLimiter` (shared by every process and machine) and
`InProcessLLMLimiter` (one process: tests, runs without Redis)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel

ThrottleReason = Literal["", "retry-after", "concurrency", "requests", "tokens"]

COUNTERS = ("throttled", "wait_seconds", "http_429", "retry_after_honoured", "deferred")


@dataclass(frozen=True)
class LimitSpec:
    """The limits of one scope. None: no limit. `window_s`: the window the request and token
    limits are counted over (`llm_rate_window_s`, the per-minute settings scaled to it).
    `lease_s`: how long a permit holds its concurrency slot when its holder dies."""

    requests: int | None = None
    tokens: int | None = None
    concurrency: int | None = None
    window_s: float = 60.0
    lease_s: float = 120.0

    def __post_init__(self) -> None:
        for name in ("requests", "tokens", "concurrency"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"LLM limit {name} must be at least 1 (or unset), not {value}")
        if self.window_s <= 0 or self.lease_s <= 0:
            raise ValueError("LLM limiter window_s and lease_s must be positive")


@dataclass(frozen=True)
class Decision:
    """`granted`, or how long to wait (`wait_s`; 0: poll again soon) and why (`reason`)."""

    granted: bool
    wait_s: float = 0.0
    reason: ThrottleReason = ""


class LimiterSnapshot(BaseModel):
    """One reading of a scope's limiter: its limits, what the window holds now, and the
    throttling counters since the counters' store started (Redis: cluster-wide)."""

    backend: Literal["redis", "in-process"]
    scope: str
    label: str
    requests_per_window: int | None = None
    tokens_per_window: int | None = None
    max_concurrency: int | None = None
    window_s: float = 60.0
    requests_in_window: int = 0
    tokens_in_window: int = 0
    in_flight: int = 0
    cooldown_s: float = 0.0
    throttled: int = 0  # attempts that had to wait at least once
    wait_seconds: float = 0.0  # time spent waiting, all attempts together
    http_429: int = 0  # HTTP 429 answers seen
    retry_after_honoured: int = 0  # 429/503 answers whose Retry-After was waited out
    deferred: int = 0  # calls handed back to the task queue (wait over the bound)

    @property
    def requests_per_minute(self) -> float | None:
        """The request limit as the rate per minute it enforces (None: no limit)."""
        return self._per_minute(self.requests_per_window)

    @property
    def tokens_per_minute(self) -> float | None:
        """The token limit as the rate per minute it enforces (None: no limit)."""
        return self._per_minute(self.tokens_per_window)

    def _per_minute(self, per_window: int | None) -> float | None:
        # the per-minute setting, or a little less where scaling it to the window rounded down
        return None if per_window is None else per_window * 60.0 / self.window_s


@runtime_checkable
class LLMLimiter(Protocol):
    """The limits of one scope. Every method is a short blocking call (one Redis round trip
    at most); none of them sleeps."""

    spec: LimitSpec

    def acquire(self, permit_id: str, tokens: int) -> Decision:
        """Take a permit for one request of about `tokens` tokens, or say how long to wait."""
        ...

    def release(self, permit_id: str, used_tokens: int | None) -> None:
        """The request ended: free its concurrency slot and charge the tokens it really used
        (None: keep the reservation)."""
        ...

    def cool_down(self, seconds: float) -> None:
        """A server said `Retry-After: seconds`: no permit for anyone until then."""
        ...

    def count(self, **amounts: float) -> None:
        """Add to the throttling counters (`COUNTERS`)."""
        ...

    def snapshot(self) -> LimiterSnapshot: ...


def _clean_url(base_url: str) -> str:
    """The base URL without credentials, query or fragment; scheme and host lower-cased."""
    parts = urlsplit(base_url.strip())
    host = (parts.hostname or "").lower()
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme.lower(), host, parts.path.rstrip("/"), "", ""))


def key_fingerprint(api_key: str) -> str:
    """A short, one-way fingerprint of an API key (the key itself is never stored)."""
    return hashlib.sha256(api_key.encode()).hexdigest()[:12] if api_key else "none"


def limiter_scope(base_url: str, api_key: str) -> tuple[str, str]:
    """The scope id of a provider (hash of its base URL and of its key's hash) and a label
    that is safe to show (the URL without credentials, the key's fingerprint)."""
    url = _clean_url(base_url)
    fingerprint = key_fingerprint(api_key)
    scope = hashlib.sha256(f"{url}\n{fingerprint}".encode()).hexdigest()[:24]
    return scope, f"{url} (key {fingerprint})"


__all__ = [
    "COUNTERS",
    "Decision",
    "LLMLimiter",
    "LimitSpec",
    "LimiterSnapshot",
    "ThrottleReason",
    "key_fingerprint",
    "limiter_scope",
]
