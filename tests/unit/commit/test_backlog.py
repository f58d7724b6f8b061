"""Back-pressure at submit: the BacklogGate refuses over its cap with a retry-after."""

from __future__ import annotations

import pytest

from ctxpipe.commit.backlog import BacklogFullError, BacklogGate


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_under_the_cap_passes_and_cap_zero_never_refuses():
    BacklogGate(10, lambda: 10).check()
    BacklogGate(0, lambda: 10**9).check()


def test_over_the_cap_refuses_with_a_clear_error():
    with pytest.raises(BacklogFullError) as err:
        BacklogGate(10, lambda: 25).check()
    assert err.value.depth == 25 and err.value.cap == 10
    assert err.value.retry_after_s > 0
    assert "backlog full" in str(err.value) and "submit again in" in str(err.value)


def test_retry_after_follows_the_drain_rate():
    clock = Clock()
    depths = iter([300, 200])  # drained 100 messages in 10 s: 10/s
    gate = BacklogGate(100, lambda: next(depths), clock=clock)
    with pytest.raises(BacklogFullError):
        gate.check()
    clock.t += 10
    with pytest.raises(BacklogFullError) as err:
        gate.check()
    assert err.value.retry_after_s == 10.0  # (200 - 100) / 10 per second


def test_readings_are_cached_briefly():
    clock = Clock()
    seen = []

    def depth() -> int:
        seen.append(1)
        return 5

    gate = BacklogGate(10, depth, cache_s=0.5, clock=clock)
    gate.check()
    gate.check()
    clock.t += 1
    gate.check()
    assert len(seen) == 2


def test_unreadable_broker_fails_open():
    def boom() -> int:
        raise ConnectionError("connection refused")

    BacklogGate(1, boom).check()  # the enqueue that follows reports the outage itself
