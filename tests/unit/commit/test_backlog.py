"""Back-pressure at submit: the cap decision, the retry-after and the refusal on the in-memory
ledger (the PostgreSQL ledger is tested in tests/integration/test_cost_and_backpressure.py)."""

from __future__ import annotations

import pytest

from ctxpipe.commit import steps
from ctxpipe.commit.backlog import (
    DEFAULT_RETRY_AFTER_S,
    MAX_RETRY_AFTER_S,
    BacklogFullError,
    admits,
    retry_after_s,
)
from ctxpipe.commit.ledger import InMemoryLedger
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.enums import CommitPhase
from ctxpipe.core.session import RequestContext
from ctxpipe.storage.commit_ledger import CommitBacklog


def req(commit_id: str, session: str = "s1") -> CommitRequest:
    ctx = RequestContext(account_id="acme", user_id="ann", agent_id="a", session_id=session)
    messages = [{"id": "m1", "role": "user", "content": "I live in Porto."}]
    return CommitRequest(commit_id=commit_id, ctx=ctx, messages=messages)  # type: ignore[arg-type]


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


def test_submit_over_the_cap_is_refused_and_records_nothing():
    ledger = InMemoryLedger()
    assert steps.submit(ledger, req("c1"), max_pending=2)
    assert steps.submit(ledger, req("c2", "s2"), max_pending=2)
    with pytest.raises(BacklogFullError) as err:
        steps.submit(ledger, req("c3", "s3"), max_pending=2)
    assert err.value.pending == 2 and err.value.cap == 2
    assert err.value.retry_after_s == DEFAULT_RETRY_AFTER_S
    assert err.value.oldest_age_s is not None and err.value.oldest_age_s >= 0
    msg = str(err.value)
    assert "backlog full" in msg and "nothing was recorded" in msg and "submit again in" in msg
    assert ledger.get("c3") is None
    # a commit already accepted is never refused: resubmitting it is idempotent
    assert steps.submit(ledger, req("c1"), max_pending=2) is False


def test_finished_commits_free_their_place_and_set_the_drain_rate():
    ledger = InMemoryLedger()
    for i in range(3):
        steps.submit(ledger, req(f"c{i}", f"s{i}"), max_pending=3)
    ledger.advance("c0", CommitPhase.REGISTERED)
    ledger.fail("c1", "archive", "boom")
    b = ledger.backlog()
    assert b.in_flight == 1 and b.finished_recently == 2
    assert steps.submit(ledger, req("c3", "s3"), max_pending=3)
    assert steps.submit(ledger, req("c4", "s4"), max_pending=3)
    with pytest.raises(BacklogFullError) as err:
        steps.submit(ledger, req("c5", "s5"), max_pending=3)
    assert err.value.retry_after_s == 30.0  # 2 finished per minute, one over the cap


def test_cap_zero_never_refuses():
    ledger = InMemoryLedger()
    for i in range(50):
        assert steps.submit(ledger, req(f"c{i}", f"s{i}"), max_pending=0)
    assert ledger.backlog().in_flight == 50
