"""The steps on the ledger: each runs once and a redelivery replays its stored output; failures,
permanent or transient; a commit marked failed never writes; deliveries counted, a poison task
stopped."""

from __future__ import annotations

import pytest
from ledger_world import Ledger, MakeComponents, ScriptedLLM, files_of, make_req, row_of, run_all

from ctxpipe.commit import steps
from ctxpipe.core.errors import CommitError, LLMError
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES


def test_steps_run_once_and_replay_their_stored_output(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    c = make_components()
    req = make_req("steps-1")
    assert steps.submit(ledger, req) and not steps.submit(ledger, req)
    outputs = [steps.archive_step(c, ledger, req.commit_id)]
    outputs += [steps.extract_step(c, ledger, req.commit_id, n) for n in EXTRACTOR_NAMES]
    assert row_of(ledger, req.commit_id).phase == "extracted"
    outputs += [
        steps.plan_step(c, ledger, req.commit_id),
        steps.write_step(c, ledger, req.commit_id),
        steps.register_step(c, ledger, req.commit_id),
    ]
    row = row_of(ledger, req.commit_id)
    assert row.phase == "registered" and row.status == "success"
    assert set(row.extractors) == set(EXTRACTOR_NAMES)
    assert {"archive_ms", "plan_ms", "write_ms", "register_ms", "total_ms"} <= set(row.timings)
    assert row.result == outputs[-1].model_dump(mode="json")
    assert row.result["stats"]["nodes_created"] >= 1
    files = files_of(c)
    events = dict(c.outbox.events)  # type: ignore[union-attr]
    assert len(events) == row.result["stats"]["outbox_events_queued"] > 0

    c.step_cache.clear()  # a redelivery in another worker process
    assert run_all(c, ledger, req.commit_id) == outputs
    c.step_cache.clear()
    assert steps.write_step(c, ledger, req.commit_id) == outputs[-2]  # the stored one wins
    assert files_of(c) == files
    assert c.outbox.events == events  # type: ignore[union-attr]
    assert row_of(ledger, req.commit_id).phase == "registered"


def test_a_permanent_failure_marks_the_commit_failed(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    c = make_components(llm=ScriptedLLM(LLMError("model refused", transient=False)))
    req = make_req("steps-fail")
    steps.submit(ledger, req)
    with pytest.raises(CommitError):
        steps.archive_step(c, ledger, req.commit_id)
    row = row_of(ledger, req.commit_id)
    assert row.phase == "failed" and row.error_phase == "archive"
    assert "model refused" in (row.error or "")
    with pytest.raises(steps.CommitAlreadyFailedError):  # its late tasks write nothing
        steps.archive_step(c, ledger, req.commit_id)


def test_a_transient_failure_is_retryable_and_leaves_the_phase(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    c = make_components(llm=ScriptedLLM(LLMError("timed out", transient=True)))
    req = make_req("steps-transient")
    steps.submit(ledger, req)
    with pytest.raises(steps.TransientStepError):
        steps.archive_step(c, ledger, req.commit_id)
    row = row_of(ledger, req.commit_id)
    assert row.phase == "enqueued" and row.error is None  # left for the retry


def test_a_transient_extractor_failure_is_retried_not_recorded(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    flaky = ScriptedLLM(
        LLMError("read timeout", transient=True), fail_on=frozenset({"extraction.profile"})
    )
    c = make_components(llm=flaky, extraction_calls="extractor")  # the extractor's own call
    req = make_req("steps-flaky")
    steps.submit(ledger, req)
    steps.archive_step(c, ledger, req.commit_id)
    with pytest.raises(steps.TransientStepError):
        steps.extract_step(c, ledger, req.commit_id, "profile")
    assert ledger.load_output(req.commit_id, "extract:profile") is None  # the retry runs it
    assert row_of(ledger, req.commit_id).phase == "archived"


def test_a_commit_marked_failed_never_writes_later(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    """E.g. the sweeper gave up on it while one of its tasks was still queued."""
    c = make_components()
    req = make_req("steps-late")
    steps.submit(ledger, req)
    steps.archive_step(c, ledger, req.commit_id)
    for n in EXTRACTOR_NAMES:
        steps.extract_step(c, ledger, req.commit_id, n)
    steps.plan_step(c, ledger, req.commit_id)
    ledger.fail(req.commit_id, "plan", "stuck in phase planned after 3 re-drives")
    with pytest.raises(steps.CommitAlreadyFailedError):
        steps.write_step(c, ledger, req.commit_id)
    assert not any(c.settings.fs_root.rglob("content.md"))
    assert row_of(ledger, req.commit_id).phase == "failed"


def test_a_redelivered_step_is_counted_and_a_poison_task_stops(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    """The delivery is counted by the read of the step's state: the broker's redelivery after
    MAX_DELIVERIES of a message whose step never finished fails the commit with a clear
    message instead of running again, and every later task of it stops."""
    c = make_components()
    req = make_req("steps-poison")
    steps.submit(ledger, req)
    lost = steps.Delivery("archive", 0, redelivered=True)
    for _ in range(steps.MAX_DELIVERIES):  # each of these "lost its worker" before running
        assert ledger.state(req.commit_id, [], lost.key) is not None
    with pytest.raises(CommitError, match="archive was redelivered 6 times without finishing"):
        steps.archive_step(c, ledger, req.commit_id, lost)
    row = row_of(ledger, req.commit_id)
    assert row.phase == "failed" and row.error_phase == "archive"
    assert "redelivered 6 times" in (row.error or "")
    with pytest.raises(steps.CommitAlreadyFailedError):
        steps.write_step(c, ledger, req.commit_id, steps.Delivery("write", 0))


def test_new_messages_of_a_step_are_counted_but_never_fail_it(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    """Re-drives send new messages of a step (a duplicate may run beside a late original):
    they are counted, apart from redeliveries, and never fail the commit — the deaths of
    whole worker nodes are bounded by the reaper."""
    c = make_components()
    req = make_req("steps-redriven")
    steps.submit(ledger, req)
    fresh = steps.Delivery("archive", 0)
    for _ in range(steps.MAX_DELIVERIES + 2):  # started, then lost with their node
        assert ledger.state(req.commit_id, [], fresh.key) is not None
    ledger.state(req.commit_id, [], steps.Delivery("archive", 0, redelivered=True).key)
    steps.archive_step(c, ledger, req.commit_id, fresh)
    row = row_of(ledger, req.commit_id)
    assert row.phase == "archived"
    assert row.attempts == {
        "archive#0": steps.MAX_DELIVERIES + 3,
        "archive#0 redelivered": 1,
    }


def test_a_finished_step_redelivered_just_replays(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    c = make_components()
    req = make_req("steps-replay")
    steps.submit(ledger, req)
    delivery = steps.Delivery("archive", 0)
    first = steps.archive_step(c, ledger, req.commit_id, delivery)
    for _ in range(steps.MAX_DELIVERIES + 2):  # re-drives of a step that had finished
        assert steps.archive_step(c, ledger, req.commit_id, delivery) == first
    row = row_of(ledger, req.commit_id)
    # a finished step's deliveries write nothing: only the first one was counted
    assert row.phase == "archived" and row.attempts == {"archive#0": 1}
