"""Commit tasks: thin wrappers that run the ledgered steps of `ctxpipe.commit.steps`."""

from __future__ import annotations

from typing import Any

import redis
from celery import Task, chain, chord, group
from celery.canvas import Signature

from ctxpipe.commit import steps
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.errors import CommitError
from ctxpipe.core.session import SessionInput
from tasks import context
from tasks.app import app
from tasks.queues import ARCHIVE, EXTRACT_TASKS, PLAN, REGISTER, START, SUBMIT, WRITE


class CommitTask(Task):
    """Retries transient failures with backoff + jitter; refuses redelivery loops."""

    abstract = True
    autoretry_for = (steps.TransientStepError,)
    # backoff 1, 2, 4 … 30 s with full jitter: ten tries span ~1.5 min on average, so an outage
    # of PostgreSQL or Redis of a minute is ridden out without the sweeper
    retry_backoff = 1
    retry_backoff_max = 30
    retry_jitter = True
    max_retries = 10
    acks_late = True
    reject_on_worker_lost = True

    @property
    def settings(self):
        return self.app.conf.ctxpipe_settings

    def components(self):
        return context.runtime(self.settings).components()

    def ledger(self):
        return context.ledger(self.settings)

    def guard(self, commit_id: str) -> None:
        """Count this delivery; record retries/redeliveries in the ledger; stop a task whose
        every delivery killed its worker instead of looping on it forever."""
        phase = self.name.rsplit(".", 1)[-1]
        try:
            n = context.count_delivery(self.settings, self.request.id, self.request.retries)
        except (redis.RedisError, OSError) as exc:  # a broker hiccup: retry, don't fail
            raise steps.TransientStepError(phase, exc) from exc
        try:  # PostgreSQL down at task start: retry like any step, never drop the commit
            if n > 1 or self.request.retries:
                self.ledger().bump_attempt(commit_id, phase)
            if n > context.MAX_DELIVERIES:
                msg = f"{self.name} was delivered {n} times without finishing (worker lost)"
                self.ledger().fail(commit_id, phase, msg)
                raise CommitError(msg, phase=phase)
        except CommitError:
            raise
        except Exception as exc:
            if steps.is_transient(exc):
                raise steps.TransientStepError(phase, exc) from exc
            raise


def _task(name: str, **kw: Any):
    return app.task(name=name, base=CommitTask, bind=True, **kw)


@_task(ARCHIVE)
def archive(self: CommitTask, commit_id: str) -> dict[str, Any]:
    self.guard(commit_id)
    return steps.archive_step(self.components(), self.ledger(), commit_id)


def _make_extract(name: str, task_name: str):
    @_task(task_name)
    def extract(self: CommitTask, commit_id: str) -> dict[str, Any]:
        self.guard(commit_id)
        return steps.extract_step(self.components(), self.ledger(), commit_id, name)

    return extract


EXTRACTORS = {name: _make_extract(name, tn) for name, tn in EXTRACT_TASKS.items()}


@_task(PLAN)
def plan(self: CommitTask, _header_results: list[Any], commit_id: str) -> dict[str, Any]:
    """Chord body. The extractor outputs are read from the ledger (write-once), so the plan
    never depends on which delivery of a header task reported first."""
    self.guard(commit_id)
    return steps.plan_step(self.components(), self.ledger(), commit_id)


@_task(WRITE)
def write(self: CommitTask, commit_id: str) -> dict[str, Any]:
    self.guard(commit_id)
    return steps.write_step(self.components(), self.ledger(), commit_id)


@_task(REGISTER)
def register(self: CommitTask, commit_id: str) -> dict[str, Any]:
    self.guard(commit_id)
    result = steps.register_step(self.components(), self.ledger(), commit_id)
    from tasks.index import kick_drain  # index the commit's nodes now, not at the next beat

    kick_drain(self.settings)
    return result


def workflow(commit_id: str, start: str = "archive") -> Signature:
    """chain(archive, chord(group(4 extractors), plan), write, register) — or its tail."""
    extract = chord(group(t.si(commit_id) for t in EXTRACTORS.values()), plan.s(commit_id))
    parts: list[Signature] = []
    if start == "archive":
        parts = [archive.si(commit_id), extract, write.si(commit_id), register.si(commit_id)]
    elif start == "extract":
        parts = [extract, write.si(commit_id), register.si(commit_id)]
    elif start == "write":
        parts = [write.si(commit_id), register.si(commit_id)]
    elif start == "register":
        parts = [register.si(commit_id)]
    else:
        raise ValueError(f"unknown start phase {start!r}")
    return chain(*parts)


@app.task(name=START, ignore_result=True, acks_late=True)
def start(commit_id: str, phase: str = "archive") -> None:
    """Build and launch a commit's canvas on a worker: producers only send this one small
    message (fire-and-forget) and follow the commit through the ledger."""
    workflow(commit_id, phase).apply_async(add_to_parent=False)


def enqueue(req: CommitRequest) -> str:
    """Record the commit in the ledger and start its workflow (idempotent by commit id).
    Refused with `BacklogFullError` (nothing recorded) while the ledger holds its cap of
    unfinished commits: the producer sees the error from the task's result and re-sends later."""
    settings = app.conf.ctxpipe_settings
    ledger = context.ledger(settings)
    new = steps.submit(ledger, req, settings.limits, max_pending=settings.commit.max_pending)
    row = None if new else ledger.get(req.commit_id)
    if new or (row is not None and row.phase == "enqueued"):
        workflow(req.commit_id).apply_async(add_to_parent=False)
    return req.commit_id


@_task(SUBMIT)
def submit(
    self: CommitTask, session: dict[str, Any], options: dict[str, Any] | None = None
) -> dict[str, str]:
    """Entry point for producers that only know the JSON contract:
    `send_task("ctxpipe.commit.submit", args=[session_json])`."""
    parsed = SessionInput.model_validate(session)
    commit_id = parsed.commit_id or self.request.id
    req = CommitRequest.from_session(parsed, options=None, commit_id=commit_id)
    if options:
        req = req.model_copy(update={"options": req.options.model_validate(options)})
    return {"commit_id": enqueue(req)}
