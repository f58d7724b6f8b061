"""Ledgered steps: each commit phase made idempotent under redelivery.

A step runs its phase once per (commit id, phase): its output, a pydantic model (see
`commit.outputs`), is stored write-once in the commit ledger as that model's JSON, and a
redelivered step returns the stored output, parsed, without running again. No step takes or
returns a bare dict: the Celery tasks dump the models they get back to JSON. Each step is a
coroutine (`archive`, `extract`, `plan`, `write`, `register`) with a blocking twin
(`archive_step` …) for a Celery task. `commit.canvas` orders them; Celery runs that canvas and
so does the in-process executor (`commit.executor`, on an `InMemoryLedger`), so in-process
commits and the tests run the code the workers run. Steps classify
failures: transient ones raise `TransientStepError` (the task layer retries with backoff),
permanent ones mark the commit failed in the ledger and raise `CommitError`.
The Celery tasks in `tasks/` are thin wrappers around the blocking twins.

The pieces live beside this module: `commit.submission` (`submit`, the ledger row of a new
commit), `commit.step_state` (`Delivery`, the state a step reads) and `commit.phase_runs` (one
run of a phase and the storing of its output); their names are re-exported here, where the
task layer and the tests find them.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.failures import (
    CommitAlreadyFailedError,
    CommitIdConflictError,
    TransientStepError,
    is_transient,
    transient_as_retry,
)
from ctxpipe.commit.ledger import LedgerPort
from ctxpipe.commit.outputs import ARCHIVE, EXTRACT_KEYS, EXTRACT_PREFIX, PLAN, RESULT, WRITE
from ctxpipe.commit.payloads import ArchiveOutcome, PlanOutcome, WriteOutcome
from ctxpipe.commit.phase_runs import (
    archived_completion,
    extract_missing,
    run_archive,
    run_extract,
    run_phase,
    run_plan,
    traced_write,
)
from ctxpipe.commit.phases import archive_phase
from ctxpipe.commit.register import register_phase, usage_by_phase
from ctxpipe.commit.step_state import MAX_DELIVERIES, Delivery, need, read_state
from ctxpipe.commit.submission import submit
from ctxpipe.core.enums import CommitPhase
from ctxpipe.core.models import CommitResult, ExtractionResult
from ctxpipe.core.thread_loop import run_on_thread_loop
from ctxpipe.observability.spans import phase_span
from ctxpipe.storage.commit_ledger import Completion

P = ParamSpec("P")
T = TypeVar("T")


@transient_as_retry("archive")
async def archive(
    c: CommitComponents, ledger: LedgerPort, commit_id: str, delivery: Delivery | None = None
) -> ArchiveOutcome:
    keys = [ARCHIVE]
    req, _, outs = read_state(c, ledger, commit_id, keys, delivery, phase="archive", done=ARCHIVE)
    if outs.archive is not None:
        return outs.archive
    return await run_archive(c, ledger, commit_id, req)


@transient_as_retry("extract")
async def extract(
    c: CommitComponents,
    ledger: LedgerPort,
    commit_id: str,
    name: str,
    delivery: Delivery | None = None,
) -> ExtractionResult:
    key = EXTRACT_PREFIX + name
    keys = [key, ARCHIVE]
    req, _, outs = read_state(c, ledger, commit_id, keys, delivery, phase="extract", done=key)
    if name in outs.extracted:  # redelivered: the first stored output stands
        return outs.extracted[name]
    # missing only when a crash of PostgreSQL lost it (not flushed yet): run it again
    archived = outs.archive or await run_archive(c, ledger, commit_id, req)
    return await run_extract(c, ledger, commit_id, name, req, archived)


@transient_as_retry("plan")
async def plan(
    c: CommitComponents, ledger: LedgerPort, commit_id: str, delivery: Delivery | None = None
) -> PlanOutcome:
    """Plan the commit's writes, after running whatever it needs that is not stored yet: on
    the chord's canvas nothing (or what a crash of PostgreSQL lost: the archive's and the
    extractors' outputs are stored without waiting for the flush to disk); on the fused
    canvas (`prepare`, the first half of `run`) the archive and the four extractors,
    concurrently. What runs here is stored in one transaction (one round trip, all or none),
    the plan after it, durably: the write applies it to the FS. A redelivery resumes after
    the plan, or after the extractors, or redoes the archive (which finds its files already
    written) and the extractors."""
    keys = [PLAN, ARCHIVE, *EXTRACT_KEYS]
    req, _, outs = read_state(c, ledger, commit_id, keys, delivery, phase="plan", done=PLAN)
    if outs.plan is not None:
        return outs.plan
    pending: list[Completion] = []
    if outs.archive is None:  # stored with the extractors' outputs: a rerun redoes both
        outcome = await run_phase(ledger, commit_id, "archive", archive_phase(c, req))
        archived = archived_completion(outcome)
        outs = outs.merged({ARCHIVE: archived.payload})
        pending.append(archived)
    outs = await extract_missing(c, ledger, commit_id, req, outs, "extract", pending)
    return await run_plan(c, ledger, commit_id, req, outs)


prepare = plan  # the first task of the fused canvas: archive, extractors and plan in one


@transient_as_retry("write")
async def write(
    c: CommitComponents, ledger: LedgerPort, commit_id: str, delivery: Delivery | None = None
) -> WriteOutcome:
    keys = [WRITE, ARCHIVE, PLAN]
    req, _, outs = read_state(c, ledger, commit_id, keys, delivery, phase="write", done=WRITE)
    if outs.write is not None:
        return outs.write
    archived = need(outs.archive, ARCHIVE, "write").archive
    planned = need(outs.plan, PLAN, "write")
    if req.options.dry_run or c.settings.commit.dry_run:
        outcome = WriteOutcome()
    else:
        work = traced_write(c, req, archived, planned)
        outcome = await run_phase(ledger, commit_id, "write", work)
    stored = ledger.complete(
        commit_id,
        WRITE,
        outcome.model_dump(mode="json"),
        CommitPhase.WRITTEN,
        timings={"write_ms": outcome.duration_ms, "written_at": time.time()},
    )
    return WriteOutcome.model_validate(stored)


@transient_as_retry("register")
async def register(
    c: CommitComponents, ledger: LedgerPort, commit_id: str, delivery: Delivery | None = None
) -> CommitResult:
    keys = [RESULT, ARCHIVE, PLAN, WRITE, *EXTRACT_KEYS]
    req, created_at, outs = read_state(
        c, ledger, commit_id, keys, delivery, phase="register", done=RESULT
    )
    if outs.result is not None:
        return outs.result
    started = time.perf_counter()
    archived = need(outs.archive, ARCHIVE, "register")
    planned = need(outs.plan, PLAN, "register")
    written = need(outs.write, WRITE, "register")
    usage = usage_by_phase(archived, outs.extraction_results(), planned, written)
    elapsed = int((time.time() - created_at.timestamp()) * 1000)
    with phase_span("register", commit_id):
        result = register_phase(
            c, req, archived.archive, planned, written, usage=usage, duration_ms=elapsed
        )
    stored = ledger.complete(
        commit_id,
        RESULT,
        result.model_dump(mode="json"),
        CommitPhase.REGISTERED,
        status=result.status.value,
        with_result=True,
        timings={"register_ms": int((time.perf_counter() - started) * 1000), "total_ms": elapsed},
    )
    return CommitResult.model_validate(stored)


async def finish(
    c: CommitComponents, ledger: LedgerPort, commit_id: str, delivery: Delivery | None = None
) -> CommitResult:
    """Write (the commit point), then register, in one step: the commit's last task. Each
    keeps its own write-once output and its own delivery count ("write#0", "register#0"), so
    a redelivery after the write replays it and runs only the registration. Returns the
    commit's result."""
    await write(c, ledger, commit_id, None if delivery is None else delivery.of("write"))
    reg = None if delivery is None else delivery.of("register")
    return await register(c, ledger, commit_id, reg)


async def run(
    c: CommitComponents, ledger: LedgerPort, commit_id: str, delivery: Delivery | None = None
) -> CommitResult:
    """`prepare`, then `finish`: a whole commit in one step, where no extractor gets a task of
    its own (one task on the workers, no hop between the plan and the write). Each step keeps
    its delivery count ("prepare#0", "write#0", "register#0"), so a redelivery resumes after
    the last output stored. Returns the commit's result."""
    await prepare(c, ledger, commit_id, None if delivery is None else delivery.of("prepare"))
    return await finish(c, ledger, commit_id, None if delivery is None else delivery.of("finish"))


def blocking(step: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """The blocking twin of a step, for a Celery task: it runs the step on the event loop the
    worker's thread keeps from one task to the next (`core.thread_loop`)."""

    @functools.wraps(step)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_on_thread_loop(step(*args, **kwargs))

    return run


archive_step = blocking(archive)
extract_step = blocking(extract)
plan_step = blocking(plan)
prepare_step = blocking(prepare)
write_step = blocking(write)
register_step = blocking(register)
finish_step = blocking(finish)
run_step = blocking(run)


def resume_point(phase: str) -> str | None:
    """Where to re-drive a stuck commit from (None: nothing to do)."""
    return {
        CommitPhase.ENQUEUED.value: "archive",
        CommitPhase.ARCHIVED.value: "extract",
        CommitPhase.EXTRACTED.value: "extract",
        CommitPhase.PLANNED.value: "write",
        CommitPhase.WRITTEN.value: "register",
    }.get(phase)


__all__ = [
    "MAX_DELIVERIES",
    "CommitAlreadyFailedError",
    "CommitIdConflictError",
    "CommitPhase",
    "Delivery",
    "TransientStepError",
    "archive",
    "archive_step",
    "blocking",
    "extract",
    "extract_step",
    "finish",
    "finish_step",
    "is_transient",
    "plan",
    "plan_step",
    "prepare",
    "prepare_step",
    "register",
    "register_step",
    "resume_point",
    "run",
    "run_step",
    "submit",
    "transient_as_retry",
    "write",
    "write_step",
]
