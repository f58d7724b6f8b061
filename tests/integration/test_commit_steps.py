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
