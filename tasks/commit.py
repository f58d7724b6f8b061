"""Commit tasks: thin wrappers that run the ledgered steps of `ctxpipe.commit.steps`.

A step returns its output as a pydantic model; a task returns it as JSON (the task's result on
the broker's backend, as it always was)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from celery import Task, chain, chord, group
from celery.canvas import Signature
from pydantic import BaseModel

from ctxpipe.commit import steps
from ctxpipe.commit.canvas import extractor_tasks
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.session import SessionInput
from tasks import context
from tasks.app import app
from tasks.queues import (
    ARCHIVE,
    EXTRACT_TASKS,
    FINISH,
    PLAN,
    PREPARE,
    REGISTER,
    RUN,
    START,
    SUBMIT,
    WRITE,
)


class CommitTask(Task):
    """Retries transient failures with backoff + jitter; refuses redelivery loops (the step's
    first ledger read counts the delivery: `steps.Delivery`)."""

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

    def delivery(self) -> steps.Delivery:
        """This delivery of this task's message, for the step to count in the ledger."""
        return steps.Delivery(self.name.rsplit(".", 1)[-1], int(self.request.retries or 0))


def _task(name: str, **kw: Any):
    return app.task(name=name, base=CommitTask, bind=True, **kw)


@_task(ARCHIVE)
def archive(self: CommitTask, commit_id: str) -> dict[str, Any]:
    return _json(steps.archive_step(self.components(), self.ledger(), commit_id, self.delivery()))


def _json(output: BaseModel) -> dict[str, Any]:
    """A step's output as the task's JSON result."""
    return output.model_dump(mode="json")


def _make_extract(name: str, task_name: str):
    @_task(task_name)
    def extract(self: CommitTask, commit_id: str) -> dict[str, Any]:
        c, ledger = self.components(), self.ledger()
        return _json(steps.extract_step(c, ledger, commit_id, name, self.delivery()))

    return extract


EXTRACTORS = {name: _make_extract(name, tn) for name, tn in EXTRACT_TASKS.items()}


@_task(PLAN)
def plan(self: CommitTask, _header_results: list[Any], commit_id: str) -> dict[str, Any]:
    """Chord body. The extractor outputs are read from the ledger (write-once), so the plan
    never depends on which delivery of a header task reported first."""
    return _json(steps.plan_step(self.components(), self.ledger(), commit_id, self.delivery()))


@_task(PREPARE)
def prepare(self: CommitTask, commit_id: str) -> dict[str, Any]:
    """Archive, extractors and plan in one task: the canvas without a chord."""
    return _json(steps.prepare_step(self.components(), self.ledger(), commit_id, self.delivery()))


@_task(WRITE)
def write(self: CommitTask, commit_id: str) -> dict[str, Any]:
    return _json(steps.write_step(self.components(), self.ledger(), commit_id, self.delivery()))


def _last_step(self: CommitTask, step: Callable[..., BaseModel], commit_id: str) -> dict[str, Any]:
    """A step that ends a commit, then the indexing of its nodes, now rather than at the next
    beat."""
    result = step(self.components(), self.ledger(), commit_id, self.delivery())
    from tasks.index import kick_drain

    kick_drain(self.settings)
    return _json(result)


@_task(REGISTER)
def register(self: CommitTask, commit_id: str) -> dict[str, Any]:
    return _last_step(self, steps.register_step, commit_id)


@_task(FINISH)
def finish(self: CommitTask, commit_id: str) -> dict[str, Any]:
    """Write, then register: the last task of a commit's canvas."""
    return _last_step(self, steps.finish_step, commit_id)


@_task(RUN)
def run(self: CommitTask, commit_id: str) -> dict[str, Any]:
    """A whole commit (prepare, then finish) in one task: the canvas without a chord."""
    return _last_step(self, steps.run_step, commit_id)


def workflow(
    commit_id: str, start: str = "archive", extractors: Sequence[str] | None = None
) -> Signature:
    """The commit's canvas from phase `start`: chain(archive, chord(group(extractor tasks),
    plan), finish) where some extractors get a task of their own (`extractors`, default:
    `canvas.extractor_tasks` without the request), else the one task `run` (prepare, then
    finish) — or the tail (finish = write + register; from `register`: the registration
    alone)."""
    if extractors is None:
        extractors = extractor_tasks(None, app.conf.ctxpipe_settings)
    head: list[Signature] = []
    if start in ("archive", "extract"):
        if not extractors:
            return chain(run.si(commit_id))
        head = [chord(group(EXTRACTORS[n].si(commit_id) for n in extractors), plan.s(commit_id))]
        if start == "archive":
            head.insert(0, archive.si(commit_id))
    elif start not in ("write", "register"):
        raise ValueError(f"unknown start phase {start!r}")
    last = register if start == "register" else finish
    return chain(*head, last.si(commit_id))


@app.task(name=START, ignore_result=True, acks_late=True)
def start(commit_id: str, phase: str = "archive", extractors: list[str] | None = None) -> None:
    """Build and launch a commit's canvas on a worker: producers only send this one small
    message (fire-and-forget) and follow the commit through the ledger. `extractors`: those
    that get a task of their own, as the producer chose from the request."""
    workflow(commit_id, phase, extractors).apply_async(add_to_parent=False)


def enqueue(req: CommitRequest) -> str:
    """Record the commit in the ledger and start its workflow (idempotent by commit id).
    Refused with `BacklogFullError` (nothing recorded) while the ledger holds its cap of
    unfinished commits: the producer sees the error from the task's result and re-sends later."""
    settings = app.conf.ctxpipe_settings
    ledger = context.ledger(settings)
    new = steps.submit(ledger, req, settings.limits, max_pending=settings.commit.max_pending)
    row = None if new else ledger.get(req.commit_id)
    if new or (row is not None and row.phase == "enqueued"):
        fanout = extractor_tasks(req, app.conf.ctxpipe_settings)
        workflow(req.commit_id, extractors=fanout).apply_async(add_to_parent=False)
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
