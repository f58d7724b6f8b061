"""Beat jobs: re-drive stuck commits (and, as they land, outbox drain, repair, retention)."""

from __future__ import annotations

from typing import Any

from ctxpipe.commit import steps
from tasks import context
from tasks.app import app
from tasks.commit import workflow
from tasks.queues import SWEEP

MAX_SWEEPS = 3


@app.task(name=SWEEP, acks_late=True)
def sweep_stuck_commits(limit: int = 100) -> dict[str, Any]:
    """Commits that made no progress for `stuck_commit_after_s` are re-driven from their
    current phase (every step is idempotent); after MAX_SWEEPS attempts they are failed."""
    settings = app.conf.ctxpipe_settings
    ledger = context.ledger(settings)
    redriven, failed = [], []
    for commit_id, phase, attempts in ledger.stuck(settings.stuck_commit_after_s, limit):
        start = steps.resume_point(phase)
        if start is None:
            continue
        if int(attempts.get("sweep", 0)) >= MAX_SWEEPS:
            ledger.fail(commit_id, phase, f"stuck in phase {phase} after {MAX_SWEEPS} re-drives")
            failed.append(commit_id)
            continue
        ledger.bump_attempt(commit_id, "sweep")
        ledger.touch(commit_id)
        workflow(commit_id, start).apply_async()
        redriven.append(commit_id)
    return {"redriven": redriven, "failed": failed}
