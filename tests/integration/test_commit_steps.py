"""The ledgered steps on the Celery workers' own adapters: the PostgreSQL ledger and the
PostgreSQL outbox. The ledger's rules and the steps on it, the same on both ledgers, are
tests/integration/ledger/; here, what the SQL outbox adds."""

from __future__ import annotations

from ctxpipe.commit import steps
from ctxpipe.commit.payloads import ArchiveOutcome, CommitRequest, PlanOutcome, WriteOutcome
from ctxpipe.commit.register import register_phase
from ctxpipe.core.session import RequestContext
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES
from ctxpipe.runtime import Runtime
from ctxpipe.storage.commit_ledger import CommitLedger

MESSAGES = [
    {"id": "m1", "role": "user", "content": "I'm a nurse in Porto and I love surfing."},
    {"id": "m2", "role": "assistant", "content": "Surfing in Porto sounds wonderful."},
    {"id": "m3", "role": "user", "content": "I always surf before my night shifts."},
]


def outbox_rows(rt: Runtime) -> list[tuple[str, str]]:
    with rt.db.connection() as conn:
        return conn.execute(
            "SELECT event_id, uri FROM ctx.outbox_events ORDER BY event_id"
        ).fetchall()


def make_req(commit_id: str) -> CommitRequest:
    ctx = RequestContext(account_id="acme", user_id="rita", agent_id="a", session_id="s9")
    return CommitRequest(commit_id=commit_id, ctx=ctx, messages=MESSAGES)  # type: ignore[arg-type]


def test_registering_again_queues_no_new_outbox_rows(make_settings, clean_db):
    """The register phase's events have deterministic ids: a replayed step and even a real
    re-run of the phase leave the outbox table as the first run left it."""
    rt = Runtime(make_settings(redis=False))
    ledger = CommitLedger(rt.db)
    c = rt.components()
    req = make_req("steps-1")
    assert steps.submit(ledger, req)
    steps.archive_step(c, ledger, req.commit_id)
    for n in EXTRACTOR_NAMES:
        steps.extract_step(c, ledger, req.commit_id, n)
    plan = steps.plan_step(c, ledger, req.commit_id)
    write = steps.write_step(c, ledger, req.commit_id)
    result = steps.register_step(c, ledger, req.commit_id)
    events = outbox_rows(rt)
    assert len(events) == result.stats.outbox_events_queued > 0

    c.step_cache.clear()  # a redelivery in another worker process: replayed
    assert steps.register_step(c, ledger, req.commit_id) == result
    assert outbox_rows(rt) == events
    archive = ArchiveOutcome.model_validate(ledger.load_output(req.commit_id, "archive")).archive
    register_phase(  # phase 5 really re-run
        c, req, archive, PlanOutcome.model_validate(plan), WriteOutcome.model_validate(write)
    )
    assert outbox_rows(rt) == events
    assert ledger.get(req.commit_id).phase == "registered"  # type: ignore[union-attr]
    rt.close()
