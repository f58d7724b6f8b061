"""Back-pressure at submit: the cap decision and the retry-after. The refusal on each ledger is
tests/integration/ledger/; through the dispatcher, the Celery task, the API
and the CLI, tests/integration/test_cost_and_backpressure.py."""

from __future__ import annotations

import pytest

from ctxpipe.commit.backlog import (
    DEFAULT_RETRY_AFTER_S,
    MAX_RETRY_AFTER_S,
    admits,
    retry_after_s,
)
from ctxpipe.storage.commit_ledger import CommitBacklog


@pytest.mark.parametrize(
    ("in_flight", "cap", "ok"),
    [(0, 3, True), (2, 3, True), (3, 3, False), (50, 3, False), (10**9, 0, True)],
)
def test_a_new_commit_is_admitted_below_the_cap_only(in_flight, cap, ok):
    assert admits(in_flight, cap) is ok


def test_retry_after_follows_the_drain_rate():
    # 120 commits finished in the last minute: 2/s; 21 over the cap → one fits after 11 s
    b = CommitBacklog(in_flight=120, finished_recently=120, window_s=60)
    assert retry_after_s(b, 100) == 11.0
    assert retry_after_s(b.model_copy(update={"in_flight": 100}), 100) == 1.0  # at least 1 s


def test_retry_after_without_a_drain_rate_and_its_ceiling():
    assert retry_after_s(CommitBacklog(in_flight=500, finished_recently=0), 10) == (
        DEFAULT_RETRY_AFTER_S
    )
    slow = CommitBacklog(in_flight=10_000, finished_recently=1, window_s=60)
    assert retry_after_s(slow, 10) == MAX_RETRY_AFTER_S
