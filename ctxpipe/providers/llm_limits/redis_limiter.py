"""`RedisLLMLimiter`: the limiter shared by every worker process and machine, one atomic Lua
script (`limiter.lua`) per operation on the keys of the scope, timed by the Redis server's
clock. Why not the `limits` library the API's per-key limit uses: a call must take a request,
its tokens and a concurrency slot together or none of them, and be charged its real token use
after the reply; `limits` takes one limit per call and cannot charge after the fact.

While Redis cannot be reached the limiter falls back to an `InProcessLLMLimiter` of the same
limits (logged; each process then limits itself alone) rather than stopping every LLM call."""

from __future__ import annotations

import logging
import time
from importlib.resources import files
from typing import Any

import redis

from ctxpipe.providers.llm_limits.memory import InProcessLLMLimiter
from ctxpipe.providers.llm_limits.port import COUNTERS, Decision, LimiterSnapshot, LimitSpec

log = logging.getLogger(__name__)

_SCRIPT = files("ctxpipe.providers.llm_limits").joinpath("limiter.lua").read_text("utf-8")
_KEY_PARTS = ("requests", "tokens", "token_costs", "token_total", "in_flight", "cooldown")
_WARN_EVERY_S = 30.0
_RETRY_REDIS_S = 5.0  # after a failure, the local limiter alone for this long


def _ms(seconds: float) -> int:
    return max(0, int(round(seconds * 1000)))


class RedisLLMLimiter:
    def __init__(
        self,
        client: redis.Redis,
        spec: LimitSpec,
        *,
        scope: str,
        label: str = "",
        prefix: str = "ctxpipe:llm",
    ) -> None:
        self.spec = spec
        self.scope = scope
        self.label = label or scope
        self._redis = client
        self._script = client.register_script(_SCRIPT)
        base = f"{prefix}:{{{scope}}}"  # one hash slot: the script's keys stay together
        self._keys = [f"{base}:{part}" for part in _KEY_PARTS]
        self._stats = f"{base}:stats"
        self._times = [_ms(spec.window_s), _ms(spec.lease_s)]
        self._local = InProcessLLMLimiter(spec, scope=scope, label=self.label)
        self._local_permits: set[str] = set()
        self._warned_at = 0.0
        self._down_until = 0.0

    @classmethod
    def from_url(cls, url: str, spec: LimitSpec, *, scope: str, label: str = "") -> RedisLLMLimiter:
        client = redis.Redis.from_url(url, socket_connect_timeout=1.0, socket_timeout=2.0)
        return cls(client, spec, scope=scope, label=label)

    # ------------------------------------------------------------------ the port
    def acquire(self, permit_id: str, tokens: int) -> Decision:
        s = self.spec
        args = [
            "acquire",
            *self._times,
            permit_id,
            max(0, tokens),
            s.requests or 0,
            s.tokens or 0,
            s.concurrency or 0,
        ]
        try:
            granted, wait_ms, reason = self._run(args)
        except redis.RedisError as exc:
            self._unavailable(exc)
            decision = self._local.acquire(permit_id, tokens)
            if decision.granted:
                self._local_permits.add(permit_id)
            return decision
        why = reason.decode() if isinstance(reason, bytes) else str(reason)
        return Decision(bool(granted), int(wait_ms) / 1000, why)  # type: ignore[arg-type]

    def release(self, permit_id: str, used_tokens: int | None) -> None:
        if permit_id in self._local_permits:
            self._local_permits.discard(permit_id)
            self._local.release(permit_id, used_tokens)
            return
        used = -1 if used_tokens is None else max(0, used_tokens)
        try:
            self._run(["release", *self._times, permit_id, used])
        except redis.RedisError as exc:  # the lease frees the slot; the estimate stays charged
            self._unavailable(exc)

    def cool_down(self, seconds: float) -> None:
        self._local.cool_down(seconds)
        try:
            self._run(["cooldown", *self._times, _ms(seconds)])
        except redis.RedisError as exc:
            self._unavailable(exc)

    def count(self, **amounts: float) -> None:
        unknown = set(amounts) - set(COUNTERS)
        if unknown:
            raise ValueError(f"unknown limiter counter(s) {sorted(unknown)}")
        try:
            if time.monotonic() < self._down_until:
                raise redis.ConnectionError("Redis failed a moment ago")
            pipe = self._redis.pipeline(transaction=False)
            for name, amount in amounts.items():
                if name == "wait_seconds":
                    pipe.hincrbyfloat(self._stats, name, float(amount))
                else:
                    pipe.hincrby(self._stats, name, int(amount))
            pipe.execute()
        except redis.RedisError as exc:
            self._unavailable(exc)
            self._local.count(**amounts)

    def snapshot(self) -> LimiterSnapshot:
        """The cluster-wide reading (raises `redis.RedisError` when Redis cannot be read)."""
        requests, tokens, in_flight, cool_ms = self._run(["snapshot", *self._times])
        raw = self._redis.hgetall(self._stats)
        stats = {k.decode(): v.decode() for k, v in raw.items()}  # type: ignore[union-attr]
        s = self.spec
        return LimiterSnapshot(
            backend="redis",
            scope=self.scope,
            label=self.label,
            requests_per_window=s.requests,
            tokens_per_window=s.tokens,
            max_concurrency=s.concurrency,
            window_s=s.window_s,
            requests_in_window=int(requests),
            tokens_in_window=int(tokens),
            in_flight=int(in_flight),
            cooldown_s=int(cool_ms) / 1000,
            throttled=int(stats.get("throttled", 0)),
            wait_seconds=float(stats.get("wait_seconds", 0.0)),
            http_429=int(stats.get("http_429", 0)),
            retry_after_honoured=int(stats.get("retry_after_honoured", 0)),
            deferred=int(stats.get("deferred", 0)),
        )

    def close(self) -> None:
        self._redis.close()

    # ------------------------------------------------------------------ internals
    def _run(self, args: list[Any]) -> Any:
        if time.monotonic() < self._down_until:
            raise redis.ConnectionError("Redis failed a moment ago")
        return self._script(keys=self._keys, args=args)

    def _unavailable(self, exc: Exception) -> None:
        now = time.monotonic()
        self._down_until = now + _RETRY_REDIS_S
        if now - self._warned_at >= _WARN_EVERY_S:
            self._warned_at = now
            log.warning(
                "LLM limiter: Redis unavailable (%s); this process limits its own calls", exc
            )


__all__ = ["RedisLLMLimiter"]
