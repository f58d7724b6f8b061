"""Commit tasks: one thin task per step of a commit's canvas (`ctxpipe.commit.canvas`), and
`workflow`, which maps that canvas (data) onto Celery's chain, group and chord.

A step returns its output as a pydantic model; a task returns it as JSON (the task's result on
the broker's backend, as it always was)."""

from __future__ import annotations

from typing import Any

from celery import Task, chain, chord, group
from celery.canvas import Signature
from pydantic import BaseModel

from ctxpipe.commit import canvas, steps
from ctxpipe.commit.failures import throttle_delay
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.session import SessionInput
from tasks import context
from tasks.app import app
from tasks.queues import PLAN, START, SUBMIT, step_task


class CommitTask(Task):
    """Retries transient failures with backoff + jitter, and a throttled LLM call after the
    wait it carries (`LLMThrottledError`: the worker slot is free meanwhile); refuses
    redelivery loops (the step's first ledger read counts the delivery: `steps.Delivery`)."""

    abstract = True
    autoretry_for = (steps.TransientStepError,)
    # backoff 1, 2, 4 … 30 s with full jitter: ten tries span ~1.5 min on average, so an outage
    # of PostgreSQL or Redis of a minute is ridden out without the sweeper
    retry_backoff = 1
    retry_backoff_max = 30
    retry_jitter = True
    max_retries = 10
    # an LLM call throttled past `llm_max_wait_s` (the provider's limits or its Retry-After)
    # retries after the wait it asked for, its worker slot free meanwhile: more tries, as
    # throttling is no outage
    throttle_max_retries = 50
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
        """This delivery of this task's message, for the step to count in the ledger: a
        message the broker redelivered (its worker process was lost before acknowledging it)
        counts towards the bound on redeliveries."""
        info = self.request.delivery_info or {}
        return steps.Delivery(
            self.name.rsplit(".", 1)[-1],
            int(self.request.retries or 0),
            redelivered=bool(info.get("redelivered")),
        )


def _task(name: str, **kw: Any):
    return app.task(name=name, base=CommitTask, bind=True, **kw)


def _json(output: BaseModel) -> dict[str, Any]:
    """A step's output as the task's JSON result."""
    return output.model_dump(mode="json")


def _run_step(self: CommitTask, commit_id: str) -> dict[str, Any]:
    """The canvas step this task runs (by the task's short name), once, under the ledger; after
    the step that ends a commit, the indexing of its nodes, now rather than at the next beat."""
    step = canvas.STEPS[self.name.rsplit(".", 1)[-1]]
    try:
        result = steps.blocking(step.run)(
            self.components(), self.ledger(), commit_id, self.delivery()
        )
    except steps.TransientStepError as exc:
        delay = throttle_delay(exc)
        if delay is None:
            raise  # autoretry_for: backoff
        raise self.retry(exc=exc, countdown=delay, max_retries=self.throttle_max_retries) from exc
    if step.last:
        from tasks.index import kick_drain

        kick_drain(self.settings)
    return _json(result)


# Steps whose result nobody reads, not stored on the result backend (a GET and a SET saved per
# task): the links of the chain are immutable signatures and producers follow the ledger. The
# extractors' results count the chord's completion; the last step's is the workflow's result
# (`workflow(...).apply_async().get()`).
UNREAD_RESULTS = frozenset({"archive", "plan", "write"})


def _step_task(name: str) -> Task:
    def run(self: CommitTask, commit_id: str) -> dict[str, Any]:
        return _run_step(self, commit_id)

    run.__name__ = run.__qualname__ = name
    run.__doc__ = f"The `{name}` step of a commit (`ctxpipe.commit.canvas`)."
    return _task(step_task(name), ignore_result=name in UNREAD_RESULTS)(run)


@_task(PLAN, ignore_result="plan" in UNREAD_RESULTS)
def plan(self: CommitTask, _header_results: list[Any], commit_id: str) -> dict[str, Any]:
    """Chord body. The extractor outputs are read from the ledger (write-once), so the plan
    never depends on which delivery of a header task reported first."""
    return _run_step(self, commit_id)


TASKS: dict[str, Task] = {
    name: plan if name == "plan" else _step_task(name) for name in canvas.STEPS
}
archive = TASKS["archive"]


def _signature(stage: canvas.Stage, commit_id: str) -> Signature:
    if isinstance(stage, canvas.Chord):
        header = group(TASKS[s.task].si(commit_id) for s in stage.header)
        return chord(header, TASKS[stage.body.task].s(commit_id))
    return TASKS[stage.task].si(commit_id)


def workflow(commit_id: str, start: str = "archive", kind: str | None = None) -> Signature:
    """The commit's canvas from phase `start` (`canvas.canvas`) as Celery signatures: with the
    default `chord` canvas chain(archive, chord(group(4 extractors), plan), write, register),
    or its tail; with `fused` (`kind`, default: the settings' `commit.canvas`) the one task
    `run` (from `write`: `finish`, write then register)."""
    kind = kind or app.conf.ctxpipe_settings.commit.canvas
    stages = canvas.canvas(start, "fused" if kind == "fused" else "chord")
    return chain(*(_signature(s, commit_id) for s in stages))


@app.task(name=START, ignore_result=True, acks_late=True)
def start(commit_id: str, phase: str = "archive", _extractors: list[str] | None = None) -> None:
    """Build and launch a commit's canvas on a worker: producers only send this one small
    message (fire-and-forget) and follow the commit through the ledger. A third argument
    (the extractors with a task of their own, sent by earlier producers) is ignored: every
    extractor has one on the `chord` canvas."""
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
