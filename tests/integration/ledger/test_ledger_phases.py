"""A commit's row and its phase: recorded once by its id, moving only forward, failed for good,
and moved to `extracted` by the last extractor to report, whichever it is."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ledger_world import CTX, Ledger, row_of

from ctxpipe.core.enums import CommitPhase
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES


def test_a_commit_is_recorded_once_by_its_id(ledger: Ledger) -> None:
    assert ledger.create("c", CTX, {"x": 1}) and not ledger.create("c", CTX, {"x": 2})
    row = row_of(ledger, "c")
    assert (row.account_id, row.user_id, row.agent_id, row.session_id) == tuple(CTX.values())
    assert row.phase == "enqueued" and row.request == {"x": 1}  # the first request stands
    assert row.status is None and row.result is None and row.error is None
    assert row.extractors == row.timings == row.attempts == {}
    assert row.created_at is not None and row.updated_at is not None
    assert ledger.get("nope") is None and ledger.state("nope", []) is None


def test_the_phase_only_moves_forward(ledger: Ledger) -> None:
    ledger.create("c", CTX, {})
    ledger.advance("c", CommitPhase.ARCHIVED, timings={"archive_ms": 1}, status="running")
    ledger.advance("c", CommitPhase.PLANNED, timings={"plan_ms": 3}, extractors={"a": {"n": 1}})
    ledger.advance("c", CommitPhase.ARCHIVED, timings={"late": 1})  # a late, redelivered step
    row = row_of(ledger, "c")
    assert row.phase == "planned" and row.status == "running"  # status kept when not given
    assert row.timings == {"archive_ms": 1, "plan_ms": 3} and row.extractors == {"a": {"n": 1}}
    ledger.advance("c", CommitPhase.PLANNED, extractors={"b": {}}, result={"r": 1})  # the same
    row = row_of(ledger, "c")
    assert row.phase == "planned" and set(row.extractors) == {"a", "b"}
    assert row.result == {"r": 1}
    ledger.advance("nope", CommitPhase.WRITTEN)  # an unknown commit: nothing happens
    assert ledger.get("nope") is None


def test_failed_is_final_and_registered_is_never_failed(ledger: Ledger) -> None:
    ledger.create("c", CTX, {})
    ledger.advance("c", CommitPhase.PLANNED)
    ledger.fail("c", "write", "disk full " * 300)
    ledger.advance("c", CommitPhase.WRITTEN)  # never out of failed
    ledger.complete("c", "write", {"w": 1}, CommitPhase.WRITTEN)
    row = row_of(ledger, "c")
    assert (row.phase, row.status, row.error_phase) == ("failed", "failed", "write")
    assert row.error == ("disk full " * 300)[:2000]
    assert ledger.load_output("c", "write") == {"w": 1}  # stored, but no progress
    ledger.create("d", CTX, {})
    ledger.advance("d", CommitPhase.REGISTERED, status="success", result={"ok": True})
    ledger.fail("d", "register", "too late")  # a registered commit stays registered
    row = row_of(ledger, "d")
    assert (row.phase, row.status, row.result, row.error) == (
        "registered",
        "success",
        {"ok": True},
        None,
    )
    ledger.fail("nope", "write", "x")
    assert ledger.get("nope") is None


def test_the_last_extractor_to_report_moves_the_commit_to_extracted(ledger: Ledger) -> None:
    ledger.create("c", CTX, {})
    ledger.advance("c", CommitPhase.ARCHIVED)
    for i, name in enumerate(("a", "b", "c")):
        ledger.complete(
            "c",
            f"extract:{name}",
            {},
            CommitPhase.ARCHIVED,
            extractors={name: {"status": "ok"}},
            extracted_when=3,
        )
        assert row_of(ledger, "c").phase == ("extracted" if i == 2 else "archived")
    ledger.advance("c", CommitPhase.PLANNED)
    ledger.complete(  # a late duplicate never moves the phase back
        "c", "extract:a", {}, CommitPhase.ARCHIVED, extractors={"a": {}}, extracted_when=3
    )
    assert row_of(ledger, "c").phase == "planned"


def test_extractors_finishing_at_once_move_the_commit_to_extracted(ledger: Ledger) -> None:
    """Each extractor's output and report go in one statement (one lock); the one that
    completes the set moves the commit on, whichever it is, never missed by a race."""
    for round_ in range(5):
        cid = f"race-{round_}"
        assert ledger.create(cid, CTX, {})
        ledger.advance(cid, CommitPhase.ARCHIVED)

        def report(name: str, cid: str = cid) -> dict[str, Any]:
            return ledger.complete(
                cid,
                f"extract:{name}",
                {"name": name},
                CommitPhase.ARCHIVED,
                extractors={name: {"status": "ok"}},
                extracted_when=len(EXTRACTOR_NAMES),
            )

        with ThreadPoolExecutor(len(EXTRACTOR_NAMES)) as pool:
            stored = list(pool.map(report, EXTRACTOR_NAMES))
        assert stored == [{"name": n} for n in EXTRACTOR_NAMES]
        row = row_of(ledger, cid)
        assert row.phase == "extracted" and set(row.extractors) == set(EXTRACTOR_NAMES)
    again = ledger.complete("race-0", "extract:profile", {"name": "x"}, CommitPhase.ARCHIVED)
    assert again == {"name": "profile"}  # the first stored output wins
    assert row_of(ledger, "race-0").phase == "extracted"  # and the phase never goes back
