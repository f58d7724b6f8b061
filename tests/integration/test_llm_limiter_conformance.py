"""One contract, two limiters: the Redis one (every worker's) and the in-process twin follow
the same rules, on real time with a one-second window. And the Redis one is shared: two
processes' limiters of one scope count the same requests; another scope counts its own."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import pytest
import redis

from ctxpipe.providers.llm_limits import Decision, InProcessLLMLimiter, LimitSpec, LLMLimiter
from ctxpipe.providers.llm_limits.redis_limiter import RedisLLMLimiter

MakeLimiter = Callable[..., LLMLimiter]


@pytest.fixture(params=["in-process", "redis"])
def make_limiter(request: pytest.FixtureRequest) -> Iterator[MakeLimiter]:
    made: list[RedisLLMLimiter] = []
    scope = uuid.uuid4().hex[:12]

    def make(**spec: float) -> LLMLimiter:
        limit = LimitSpec(**spec)  # type: ignore[arg-type]
        if request.param == "in-process":
            return InProcessLLMLimiter(limit, scope=scope)
        url = request.getfixturevalue("redis_url")
        lim = RedisLLMLimiter.from_url(url, limit, scope=scope)
        made.append(lim)
        return lim

    yield make
    for lim in made:
        lim.close()


def test_requests_per_window(make_limiter: MakeLimiter) -> None:
    lim = make_limiter(requests=3, window_s=1.0, lease_s=5.0)
    for i in range(3):
        assert lim.acquire(f"r{i}", 1).granted
        lim.release(f"r{i}", 1)
    denied = lim.acquire("r3", 1)
    assert (denied.granted, denied.reason) == (False, "requests")
    assert 0.5 < denied.wait_s <= 1.01
    time.sleep(denied.wait_s + 0.02)
    assert lim.acquire("r3", 1).granted
    assert lim.snapshot().requests_in_window == 1
    for i in range(4, 6):
        assert lim.acquire(f"r{i}", 1).granted  # in flight, not released
    time.sleep(1.05)  # a window later they still count: they have not ended
    assert lim.acquire("r6", 1) == Decision(False, 1.0, "requests")


def test_tokens_per_window_with_settlement(make_limiter: MakeLimiter) -> None:
    lim = make_limiter(tokens=100, window_s=1.0)
    assert lim.acquire("a", 60).granted
    denied = lim.acquire("b", 60)
    assert denied.reason == "tokens" and 0.5 < denied.wait_s <= 1.01
    lim.release("a", 20)
    assert lim.acquire("b", 60).granted
    assert lim.snapshot().tokens_in_window == 80
    lim.release("b", None)  # no usage in the reply: the reservation stands
    assert lim.snapshot().tokens_in_window == 80
    assert lim.acquire("huge", 500).reason == "tokens"
    time.sleep(1.05)
    assert lim.acquire("huge", 500).granted  # alone in an empty window


def test_concurrency_cap_release_and_lease(make_limiter: MakeLimiter) -> None:
    lim = make_limiter(concurrency=2, lease_s=0.4)
    assert lim.acquire("a", 1).granted and lim.acquire("b", 1).granted
    assert lim.acquire("c", 1).reason == "concurrency"
    lim.release("a", 1)
    assert lim.acquire("c", 1).granted
    assert lim.snapshot().in_flight == 2
    time.sleep(0.45)  # their holders never came back: the leases end
    assert lim.snapshot().in_flight == 0
    assert lim.acquire("d", 1).granted


def test_cool_down_and_counters(make_limiter: MakeLimiter) -> None:
    lim = make_limiter()
    lim.cool_down(0.3)
    lim.cool_down(0.1)
    denied = lim.acquire("a", 1)
    assert denied.reason == "retry-after" and 0.2 < denied.wait_s <= 0.3
    assert 0.0 < lim.snapshot().cooldown_s <= 0.3
    time.sleep(0.32)
    assert lim.acquire("a", 1).granted
    lim.count(throttled=2, wait_seconds=1.25, http_429=3, retry_after_honoured=1, deferred=1)
    snap = lim.snapshot()
    assert (snap.throttled, snap.http_429, snap.retry_after_honoured, snap.deferred) == (
        2,
        3,
        1,
        1,
    )
    assert snap.wait_seconds == pytest.approx(1.25)


def test_two_processes_limiters_share_one_scope_and_not_another(redis_url: str) -> None:
    spec = LimitSpec(requests=2, window_s=5.0, lease_s=10.0)
    scope = uuid.uuid4().hex[:12]
    first = RedisLLMLimiter.from_url(redis_url, spec, scope=scope)
    second = RedisLLMLimiter.from_url(redis_url, spec, scope=scope)  # another connection
    other = RedisLLMLimiter.from_url(redis_url, spec, scope=scope + "x")
    try:
        assert first.acquire("a", 1).granted and second.acquire("b", 1).granted
        assert first.acquire("c", 1).reason == "requests"
        assert second.acquire("c", 1).reason == "requests"
        assert other.acquire("c", 1).granted
        first.count(http_429=1)
        assert second.snapshot().http_429 == 1 and other.snapshot().http_429 == 0
        keys = redis.Redis.from_url(redis_url).keys(f"*{scope}*")
        assert keys and all(b"sk-" not in k for k in keys)
    finally:
        for lim in (first, second, other):
            lim.close()


def test_without_redis_each_process_limits_itself() -> None:
    lim = RedisLLMLimiter.from_url(
        "redis://127.0.0.1:1/0", LimitSpec(requests=1, window_s=5.0), scope="down"
    )
    assert lim.acquire("a", 1).granted
    assert lim.acquire("b", 1).reason == "requests"
    lim.release("a", 1)
    with pytest.raises(redis.RedisError):
        lim.snapshot()  # the cluster-wide reading is what is unavailable
