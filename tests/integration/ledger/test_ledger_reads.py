"""What the sweeper, the reaper and status read of the ledger: stuck commits, commits accepted
before an age, counts by phase, the most recent commits, the backlog and its cap."""

from __future__ import annotations

import time

import pytest
from ledger_world import CTX, Ledger, row_of

from ctxpipe.core.enums import CommitPhase


def test_stuck_commits_are_those_in_flight_without_progress_longest_first(
    ledger: Ledger,
) -> None:
    for cid in ("a", "b", "c", "done", "failed"):
        ledger.create(cid, CTX, {})
        time.sleep(0.01)
    ledger.advance("done", CommitPhase.REGISTERED)
    ledger.fail("failed", "archive", "boom")
    ledger.bump_attempt("b", "sweep")
    ledger.touch("a")  # progress: now the most recent
    assert ledger.stuck(3600) == []
    assert ledger.stuck(0) == [
        ("b", "enqueued", {"sweep": 1}),
        ("c", "enqueued", {}),
        ("a", "enqueued", {}),
    ]
    assert [c for c, _, _ in ledger.stuck(0, limit=1)] == ["b"]


def test_commits_accepted_before_an_age_are_those_in_flight_oldest_first(
    ledger: Ledger,
) -> None:
    for cid in ("a", "b", "done"):
        ledger.create(cid, CTX, {})
        time.sleep(0.01)
    ledger.advance("done", CommitPhase.REGISTERED)
    ledger.touch("a")  # progress does not change when it was accepted
    ledger.advance("b", CommitPhase.ARCHIVED)
    ledger.bump_attempt("b", "reap")
    assert ledger.accepted_before(3600) == []
    assert ledger.accepted_before(0) == [("a", "enqueued", {}), ("b", "archived", {"reap": 1})]
    assert ledger.accepted_before(0, limit=1) == [("a", "enqueued", {})]
    time.sleep(0.5)
    ledger.create("new", CTX, {})
    assert [c for c, _, _ in ledger.accepted_before(0.25)] == ["a", "b"]


def test_counts_by_phase_and_the_most_recent_commits(ledger: Ledger) -> None:
    assert ledger.counts_by_phase() == {} and ledger.recent() == []
    for cid in ("a", "b", "c"):
        ledger.create(cid, {**CTX, "session_id": cid}, {})
        time.sleep(0.01)
    ledger.advance("a", CommitPhase.REGISTERED, status="success")
    ledger.fail("b", "archive", "boom")
    assert ledger.counts_by_phase() == {"registered": 1, "failed": 1, "enqueued": 1}
    recent = ledger.recent(2)
    assert [r["commit_id"] for r in recent] == ["c", "b"]
    assert set(recent[0]) == {
        "commit_id",
        "account_id",
        "user_id",
        "session_id",
        "phase",
        "status",
        "error",
        "created_at",
        "updated_at",
    }
    assert (recent[1]["phase"], recent[1]["error"], recent[1]["session_id"]) == (
        "failed",
        "boom",
        "b",
    )
    assert recent[0]["created_at"] == row_of(ledger, "c").created_at
    assert [r["commit_id"] for r in ledger.recent()] == ["c", "b", "a"]


def test_the_backlog_counts_commits_in_flight_and_those_finished_recently(
    ledger: Ledger,
) -> None:
    empty = ledger.backlog()
    assert (empty.in_flight, empty.oldest_age_s, empty.finished_recently) == (0, None, 0)
    for i in range(4):
        ledger.create(f"c{i}", CTX, {})
    time.sleep(0.05)
    ledger.advance("c0", CommitPhase.REGISTERED)
    ledger.fail("c1", "archive", "boom")
    ledger.advance("c2", CommitPhase.PLANNED)
    b = ledger.backlog()
    assert b.in_flight == 2 and b.finished_recently == 2 and b.window_s == 60.0
    assert b.oldest_age_s is not None and 0.05 <= b.oldest_age_s < 60
    assert b.drain_per_s == pytest.approx(2 / 60)
    time.sleep(0.02)
    assert ledger.backlog(window_s=0.01).finished_recently == 0  # finished before the window


def test_a_new_commit_over_the_cap_is_not_recorded(ledger: Ledger) -> None:
    assert ledger.create("c1", CTX, {}, max_pending=2)
    assert ledger.create("c2", CTX, {}, max_pending=2)
    assert not ledger.create("c3", CTX, {}, max_pending=2)
    assert ledger.get("c3") is None
    assert not ledger.create("c1", CTX, {}, max_pending=2)  # known: not recorded again
    ledger.fail("c1", "archive", "boom")  # a finished commit frees its place
    assert ledger.create("c3", CTX, {}, max_pending=2)
    assert all(ledger.create(f"d{i}", CTX, {}, max_pending=0) for i in range(5))  # no cap
