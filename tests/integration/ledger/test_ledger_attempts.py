"""What a step reads and what is counted: the state of a commit (request, phase, listed outputs),
each delivery per task and retry, the attempts of the sweeper and the reaper, and the time of
the last progress."""

from __future__ import annotations

import time

from ledger_world import CTX, Ledger, row_of

from ctxpipe.core.enums import CommitPhase


def test_state_reads_the_request_phase_and_the_listed_outputs(ledger: Ledger) -> None:
    ledger.create("c", CTX, {"x": 1})
    ledger.advance("c", CommitPhase.PLANNED)
    ledger.save_output("c", "extract:b", {"v": 3})
    ledger.save_output("c", "archive", {"a": 1})
    state = ledger.state("c", ["extract:b", "plan"])
    assert state is not None and state.deliveries == 0  # no delivery given: none counted
    assert state.request == {"x": 1} and state.phase == "planned"
    assert state.outputs == {"extract:b": {"v": 3}}
    assert state.created_at == row_of(ledger, "c").created_at
    assert row_of(ledger, "c").attempts == {}


def test_state_counts_each_delivery_per_task_and_retry(ledger: Ledger) -> None:
    ledger.create("c", CTX, {})
    before = row_of(ledger, "c").updated_at
    counts = [ledger.state("c", ["archive"], "archive#0") for _ in range(3)]
    assert [s.deliveries for s in counts if s is not None] == [1, 2, 3]
    retried = ledger.state("c", [], "archive#1")  # a retry is a new message: its own count
    assert retried is not None and retried.deliveries == 1
    assert ledger.state("nope", [], "archive#0") is None
    row = row_of(ledger, "c")
    assert row.attempts == {"archive#0": 3, "archive#1": 1}
    assert row.phase == "enqueued" and row.updated_at == before  # counting is no progress
    ledger.save_output("c", "archive", {"a": 1})
    finished = ledger.state("c", ["archive"], "archive#0", done="archive")
    assert finished is not None and finished.deliveries == 0  # a finished step's: not counted
    assert finished.outputs == {"archive": {"a": 1}}
    assert row_of(ledger, "c").attempts == {"archive#0": 3, "archive#1": 1}


def test_bumping_an_attempt_counts_per_key_and_is_no_progress(ledger: Ledger) -> None:
    ledger.create("c", CTX, {})
    before = row_of(ledger, "c").updated_at
    assert [ledger.bump_attempt("c", "write") for _ in range(2)] == [1, 2]
    assert ledger.bump_attempt("c", "reap") == 1
    assert ledger.bump_attempt("nope", "write") == 0
    row = row_of(ledger, "c")
    assert row.attempts == {"write": 2, "reap": 1} and row.updated_at == before
    ledger.fail("c", "write", "disk full")
    assert ledger.bump_attempt("c", "write") == 3  # counted on a failed commit too


def test_progress_resets_the_sweepers_count(ledger: Ledger) -> None:
    ledger.create("c", CTX, {})
    assert ledger.bump_attempt("c", "sweep") == 1
    ledger.advance("c", CommitPhase.ENQUEUED)  # no progress: count kept
    assert row_of(ledger, "c").attempts.get("sweep") == 1
    ledger.advance("c", CommitPhase.ARCHIVED)  # progress: count reset
    assert "sweep" not in row_of(ledger, "c").attempts
    ledger.bump_attempt("c", "sweep")
    ledger.bump_attempt("c", "reap")
    ledger.complete("c", "archive", {}, CommitPhase.ARCHIVED)  # no progress either
    assert row_of(ledger, "c").attempts == {"sweep": 1, "reap": 1}
    ledger.complete("c", "plan", {}, CommitPhase.PLANNED)  # progress, by a completion
    assert row_of(ledger, "c").attempts == {"reap": 1}


def test_touch_moves_the_time_of_the_last_progress_only(ledger: Ledger) -> None:
    ledger.create("c", CTX, {})
    before = row_of(ledger, "c")
    time.sleep(0.01)
    ledger.touch("c")
    ledger.touch("nope")
    after = row_of(ledger, "c")
    assert after.updated_at > before.updated_at
    assert after.model_dump(exclude={"updated_at"}) == before.model_dump(exclude={"updated_at"})
