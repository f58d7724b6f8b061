"""The ledgered steps the Celery tasks run, against the real PostgreSQL ledger."""

from __future__ import annotations

import pytest

from ctxpipe.commit import steps
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.errors import CommitError, LLMError
from ctxpipe.core.session import RequestContext
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES
from ctxpipe.providers.base import run_sync
from ctxpipe.providers.rules import RulesLLM
from ctxpipe.runtime import Runtime
from ctxpipe.storage.commit_ledger import CommitLedger

MESSAGES = [
    {"id": "m1", "role": "user", "content": "I'm a nurse in Porto and I love surfing."},
    {"id": "m2", "role": "assistant", "content": "Surfing in Porto sounds wonderful."},
    {"id": "m3", "role": "user", "content": "I always surf before my night shifts."},
]


class ScriptedLLM:
    """Rules LLM, but the archive prompt raises the given error."""

    name = "scripted"

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.inner = RulesLLM()

    async def complete_json(self, prompt_id, variables, schema, ctx=None, usage=None):  # type: ignore[no-untyped-def]
        if prompt_id == "compression.archive_summary":
            raise self.error
        return await self.inner.complete_json(prompt_id, variables, schema, ctx, usage)

    def complete_json_sync(self, *a, **k):  # type: ignore[no-untyped-def]
        return run_sync(self.complete_json(*a, **k))


def outbox_rows(rt: Runtime) -> list[tuple[str, str]]:
    with rt.db.connection() as conn:
        return conn.execute(
            "SELECT event_id, uri FROM ctx.outbox_events ORDER BY event_id"
        ).fetchall()


def make_req(commit_id: str) -> CommitRequest:
    ctx = RequestContext(account_id="acme", user_id="rita", agent_id="a", session_id="s9")
    return CommitRequest(commit_id=commit_id, ctx=ctx, messages=MESSAGES)  # type: ignore[arg-type]


def test_steps_run_once_and_replay_their_stored_output(make_settings, clean_db):
    settings = make_settings(redis=False)
    rt = Runtime(settings)
    ledger = CommitLedger(rt.db)
    c = rt.components()
    req = make_req("steps-1")
    assert steps.submit(ledger, req) and not steps.submit(ledger, req)

    outputs = [steps.archive_step(c, ledger, req.commit_id)]
    outputs += [steps.extract_step(c, ledger, req.commit_id, n) for n in EXTRACTOR_NAMES]
    assert ledger.get(req.commit_id).phase == "extracted"
    outputs.append(steps.plan_step(c, ledger, req.commit_id))
    outputs.append(steps.write_step(c, ledger, req.commit_id))
    outputs.append(steps.register_step(c, ledger, req.commit_id))
    row = ledger.get(req.commit_id)
    assert row.phase == "registered" and row.status == "success"
    assert set(row.extractors) == set(EXTRACTOR_NAMES)
    assert {"archive_ms", "plan_ms", "write_ms", "register_ms"} <= set(row.timings)
    assert row.result["stats"]["nodes_created"] >= 1
    events = outbox_rows(rt)
    assert len(events) == row.result["stats"]["outbox_events_queued"] > 0

    c.step_cache.clear()  # a redelivery in another worker process
    again = [steps.archive_step(c, ledger, req.commit_id)]
    again += [steps.extract_step(c, ledger, req.commit_id, n) for n in EXTRACTOR_NAMES]
    again += [
        steps.plan_step(c, ledger, req.commit_id),
        steps.write_step(c, ledger, req.commit_id),
        steps.register_step(c, ledger, req.commit_id),
    ]
    assert again == outputs
    c.step_cache.clear()
    write_again = steps.write_step(c, ledger, req.commit_id)  # stored output wins
    assert write_again == outputs[-2]
    from ctxpipe.commit.payloads import ArchiveOutcome, PlanOutcome, WriteOutcome
    from ctxpipe.commit.register import register_phase

    archive = ArchiveOutcome.model_validate(ledger.load_output(req.commit_id, "archive")).archive
    register_phase(
        c,
        req,
        archive,  # phase 5 really re-run: no new outbox rows
        PlanOutcome.model_validate(outputs[-3]),
        WriteOutcome.model_validate(outputs[-2]),
    )
    assert outbox_rows(rt) == events
    assert ledger.get(req.commit_id).phase == "registered"
    rt.close()


def test_permanent_failure_marks_the_ledger_failed(make_settings, clean_db):
    settings = make_settings(redis=False)
    rt = Runtime(settings, llm=ScriptedLLM(LLMError("model refused", transient=False)))
    ledger = CommitLedger(rt.db)
    req = make_req("steps-fail")
    steps.submit(ledger, req)
    with pytest.raises(CommitError):
        steps.archive_step(rt.components(), ledger, req.commit_id)
    row = ledger.get(req.commit_id)
    assert row.phase == "failed" and row.error_phase == "archive"
    assert "model refused" in row.error
    rt.close()


def test_transient_failure_is_retryable_and_leaves_the_phase(make_settings, clean_db):
    settings = make_settings(redis=False)
    rt = Runtime(settings, llm=ScriptedLLM(LLMError("timed out", transient=True)))
    ledger = CommitLedger(rt.db)
    req = make_req("steps-transient")
    steps.submit(ledger, req)
    with pytest.raises(steps.TransientStepError):
        steps.archive_step(rt.components(), ledger, req.commit_id)
    assert ledger.get(req.commit_id).phase == "enqueued"
    rt.close()


def test_ledger_phase_never_moves_backwards(make_settings, clean_db):
    from ctxpipe.core.enums import CommitPhase

    rt = Runtime(make_settings(redis=False))
    ledger = CommitLedger(rt.db)
    req = make_req("steps-order")
    steps.submit(ledger, req)
    ledger.advance(req.commit_id, CommitPhase.PLANNED)
    ledger.advance(req.commit_id, CommitPhase.ARCHIVED)  # a late, redelivered extractor
    assert ledger.get(req.commit_id).phase == "planned"
    ledger.fail(req.commit_id, "write", "disk full")
    ledger.advance(req.commit_id, CommitPhase.WRITTEN)
    assert ledger.get(req.commit_id).phase == "failed"
    assert ledger.bump_attempt(req.commit_id, "write") == 1
    assert ledger.bump_attempt(req.commit_id, "write") == 2
    rt.close()


def test_a_commit_marked_failed_never_writes_later(make_settings, clean_db):
    """E.g. the sweeper gave up on it while one of its tasks was still queued."""
    settings = make_settings(redis=False)
    rt = Runtime(settings)
    ledger = CommitLedger(rt.db)
    c = rt.components()
    req = make_req("steps-late")
    steps.submit(ledger, req)
    steps.archive_step(c, ledger, req.commit_id)
    for n in EXTRACTOR_NAMES:
        steps.extract_step(c, ledger, req.commit_id, n)
    steps.plan_step(c, ledger, req.commit_id)
    ledger.fail(req.commit_id, "plan", "stuck in phase planned after 3 re-drives")
    with pytest.raises(steps.CommitAlreadyFailedError):
        steps.write_step(c, ledger, req.commit_id)
    assert not any(settings.fs_root.rglob("content.md"))
    assert ledger.get(req.commit_id).phase == "failed"
    rt.close()


def test_commit_id_reused_by_another_tenant_is_refused(make_settings, clean_db):
    rt = Runtime(make_settings(redis=False))
    ledger = CommitLedger(rt.db)
    req = make_req("shared-key")
    assert steps.submit(ledger, req)
    assert not steps.submit(ledger, req)  # the same commit again: idempotent
    other = req.model_copy(update={"ctx": req.ctx.model_copy(update={"account_id": "evil"})})
    with pytest.raises(steps.CommitIdConflictError):
        steps.submit(ledger, other)
    # another user or agent in the very same session: refused too, the ledger row untouched
    row = ledger.get("shared-key")
    for change in ({"user_id": "mallory"}, {"agent_id": "other"}):
        theirs = req.model_copy(update={"ctx": req.ctx.model_copy(update=change)})
        with pytest.raises(steps.CommitIdConflictError):
            steps.submit(ledger, theirs)
    assert ledger.get("shared-key") == row
    rt.close()


def test_submit_refuses_an_input_over_the_limits_before_recording_it(make_settings, clean_db):
    from ctxpipe.core.config import LimitsConfig
    from ctxpipe.core.session import InputLimitError

    rt = Runtime(make_settings(redis=False))
    ledger = CommitLedger(rt.db)
    req = make_req("too-big")
    with pytest.raises(InputLimitError, match="CTXPIPE_LIMITS__MAX_MESSAGES"):
        steps.submit(ledger, req, LimitsConfig(max_messages=1))
    with pytest.raises(InputLimitError, match="CTXPIPE_LIMITS__MAX_MESSAGE_CHARS"):
        steps.submit(ledger, req, LimitsConfig(max_message_chars=5))
    assert ledger.get("too-big") is None
    assert steps.submit(ledger, req, LimitsConfig())
    rt.close()


def test_transient_extractor_failure_is_retried_not_recorded(make_settings, clean_db):
    class FlakyExtraction(ScriptedLLM):
        async def complete_json(self, prompt_id, variables, schema, ctx=None, usage=None):  # type: ignore[no-untyped-def]
            if prompt_id == "extraction.profile":
                raise LLMError("read timeout", transient=True)
            return await self.inner.complete_json(prompt_id, variables, schema, ctx, usage)

    rt = Runtime(make_settings(redis=False), llm=FlakyExtraction(LLMError("unused")))
    ledger = CommitLedger(rt.db)
    c = rt.components()
    req = make_req("steps-flaky")
    steps.submit(ledger, req)
    steps.archive_step(c, ledger, req.commit_id)
    with pytest.raises(steps.TransientStepError):
        steps.extract_step(c, ledger, req.commit_id, "profile")
    assert ledger.load_output(req.commit_id, "extract:profile") is None  # retry runs it again
    rt.close()


def test_progress_resets_the_sweepers_count(make_settings, clean_db):
    from ctxpipe.core.enums import CommitPhase

    rt = Runtime(make_settings(redis=False))
    ledger = CommitLedger(rt.db)
    req = make_req("steps-sweep")
    steps.submit(ledger, req)
    assert ledger.bump_attempt(req.commit_id, "sweep") == 1
    ledger.advance(req.commit_id, CommitPhase.ENQUEUED)  # no progress: count kept
    assert ledger.get(req.commit_id).attempts.get("sweep") == 1
    ledger.advance(req.commit_id, CommitPhase.ARCHIVED)  # progress: count reset
    assert "sweep" not in ledger.get(req.commit_id).attempts
    rt.close()


def test_a_redelivered_step_is_counted_and_a_poison_task_stops(make_settings, clean_db):
    """The delivery is counted by the statement that reads the step's state: a retry is a
    message of its own; the delivery after MAX_DELIVERIES of a step that never finished
    fails the commit with a clear message, and every later task of it stops."""
    rt = Runtime(make_settings(redis=False))
    ledger = CommitLedger(rt.db)
    c = rt.components()
    req = make_req("steps-poison")
    steps.submit(ledger, req)
    counted = [ledger.state(req.commit_id, ["archive"], "archive#0") for _ in range(3)]
    assert [s.deliveries for s in counted] == [1, 2, 3]
    assert ledger.state(req.commit_id, [], "archive#1").deliveries == 1  # a retry
    assert ledger.state(req.commit_id, []).deliveries == 0  # not a delivery: nothing counted
    assert ledger.state("nope", [], "archive#0") is None
    assert ledger.get(req.commit_id).attempts == {"archive#0": 3, "archive#1": 1}
    assert ledger.get(req.commit_id).phase == "enqueued"  # counting is no progress

    lost = steps.Delivery("archive", 0)
    for _ in range(steps.MAX_DELIVERIES - 3):  # these deliveries lost their worker too
        ledger.state(req.commit_id, [], lost.key)
    with pytest.raises(CommitError, match="archive was delivered 6 times without finishing"):
        steps.archive_step(c, ledger, req.commit_id, lost)
    row = ledger.get(req.commit_id)
    assert row.phase == "failed" and row.error_phase == "archive"
    assert "delivered 6 times" in row.error
    with pytest.raises(steps.CommitAlreadyFailedError):
        steps.write_step(c, ledger, req.commit_id, steps.Delivery("write", 0))
    rt.close()


def test_a_finished_step_redelivered_replays_however_often(make_settings, clean_db):
    rt = Runtime(make_settings(redis=False))
    ledger = CommitLedger(rt.db)
    c = rt.components()
    req = make_req("steps-replay")
    steps.submit(ledger, req)
    delivery = steps.Delivery("archive", 0)
    first = steps.archive_step(c, ledger, req.commit_id, delivery)
    for _ in range(steps.MAX_DELIVERIES + 1):
        assert steps.archive_step(c, ledger, req.commit_id, delivery) == first
    row = ledger.get(req.commit_id)
    # a finished step's deliveries write nothing: only the first one was counted
    assert row.phase == "archived" and row.attempts == {"archive#0": 1}
    counted = ledger.state(req.commit_id, ["archive"], "archive#0", done="archive")
    assert counted.deliveries == 0 and "archive" in counted.outputs
    rt.close()


def test_extractors_finishing_at_once_move_the_commit_to_extracted(make_settings, clean_db):
    """Each extractor's output and report go in one statement; the one that completes the set
    moves the commit on, counted on the locked commit row (never missed by a race)."""
    from concurrent.futures import ThreadPoolExecutor

    from ctxpipe.core.enums import CommitPhase

    rt = Runtime(make_settings(redis=False))
    ledger = CommitLedger(rt.db)
    for round_ in range(5):
        cid = f"steps-race-{round_}"
        steps.submit(ledger, make_req(cid))
        ledger.advance(cid, CommitPhase.ARCHIVED)

        def report(name: str, cid: str = cid) -> dict:
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
        row = ledger.get(cid)
        assert row.phase == "extracted" and set(row.extractors) == set(EXTRACTOR_NAMES)
    again = ledger.complete("steps-race-0", "extract:profile", {"name": "x"}, CommitPhase.ARCHIVED)
    assert again == {"name": "profile"}  # the first stored output wins
    assert ledger.get("steps-race-0").phase == "extracted"  # and the phase never goes back
    rt.close()


def test_prepare_then_finish_run_a_commit_in_two_steps(make_settings, clean_db):
    rt = Runtime(make_settings(redis=False))
    ledger = CommitLedger(rt.db)
    c = rt.components()
    req = make_req("steps-prepare")
    steps.submit(ledger, req)
    planned = steps.prepare_step(c, ledger, req.commit_id, steps.Delivery("prepare", 0))
    row = ledger.get(req.commit_id)
    assert row.phase == "planned" and set(row.extractors) == set(EXTRACTOR_NAMES)
    assert {"archive_ms", "plan_ms"} <= set(row.timings)
    assert ledger.load_output(req.commit_id, "plan") == planned
    assert steps.prepare_step(c, ledger, req.commit_id, steps.Delivery("prepare", 0)) == planned
    result = steps.finish_step(c, ledger, req.commit_id, steps.Delivery("finish", 0))
    row = ledger.get(req.commit_id)
    assert row.phase == "registered" and result["status"] == "success" and row.result == result
    assert {"write#0", "register#0", "prepare#0"} <= set(row.attempts)
    assert steps.finish_step(c, ledger, req.commit_id, steps.Delivery("finish", 0)) == result
    assert ledger.get(req.commit_id).attempts == row.attempts  # a replay writes nothing
    rt.close()


def test_outputs_stored_together_are_stored_all_or_none(make_settings, clean_db):
    """`complete_all` stores a step's outputs in one transaction: all of them, advancing the
    commit as each would; an output a concurrent run stored first stands; and when one
    cannot be stored none of them is."""
    from ctxpipe.core.enums import CommitPhase
    from ctxpipe.storage.commit_ledger import Completion

    rt = Runtime(make_settings(redis=False))
    ledger = CommitLedger(rt.db)
    steps.submit(ledger, make_req("steps-all"))
    ledger.complete("steps-all", "extract:profile", {"first": True}, CommitPhase.ARCHIVED)
    done = [Completion("archive", {"a": 1}, CommitPhase.ARCHIVED, timings={"archive_ms": 3})]
    done += [
        Completion(
            f"extract:{n}",
            {"name": n},
            CommitPhase.ARCHIVED,
            extractors={n: {"status": "ok"}},
            extracted_when=len(EXTRACTOR_NAMES),
        )
        for n in EXTRACTOR_NAMES
    ]
    stored = ledger.complete_all("steps-all", done)
    assert stored[0] == {"a": 1}
    assert stored[1:] == [
        {"first": True} if n == "profile" else {"name": n} for n in EXTRACTOR_NAMES
    ]
    row = ledger.get("steps-all")
    assert row.phase == "extracted" and row.timings["archive_ms"] == 3
    assert set(row.extractors) == set(EXTRACTOR_NAMES)

    steps.submit(ledger, make_req("steps-none"))
    unstorable = Completion("extract:profile", {"tags": {"a", "b"}}, CommitPhase.ARCHIVED)
    with pytest.raises(TypeError):  # a set is not JSON
        ledger.complete_all(
            "steps-none", [Completion("archive", {"a": 1}, CommitPhase.ARCHIVED), unstorable]
        )
    assert ledger.load_output("steps-none", "archive") is None
    assert ledger.get("steps-none").phase == "enqueued"
    rt.close()
