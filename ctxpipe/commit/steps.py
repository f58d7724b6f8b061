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
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ParamSpec, TypeVar

from opentelemetry import trace

from ctxpipe.commit import backlog, big_messages
from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.failures import (
    CommitAlreadyFailedError,
    CommitIdConflictError,
    TransientStepError,
    is_transient,
    transient_as_retry,
)
from ctxpipe.commit.ledger import LedgerPort, store
from ctxpipe.commit.outputs import (
    ARCHIVE,
    EXTRACT_KEYS,
    EXTRACT_PREFIX,
    PLAN,
    RESULT,
    WRITE,
    ExtractorProgress,
    PhaseOutputs,
)
from ctxpipe.commit.payloads import ArchiveOutcome, CommitRequest, PlanOutcome, WriteOutcome
from ctxpipe.commit.phases import (
    archive_phase,
    extract_phase,
    plan_phase,
    write_phase,
)
from ctxpipe.commit.register import register_phase, usage_by_phase
from ctxpipe.core.config import LimitsConfig
from ctxpipe.core.enums import CommitPhase
from ctxpipe.core.errors import CommitError
from ctxpipe.core.models import CommitResult, ExtractionResult, SessionArchive
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES
from ctxpipe.observability.spans import STORE_ID, phase_span, record_ids
from ctxpipe.providers.base import run_sync
from ctxpipe.storage.commit_ledger import Completion

P = ParamSpec("P")
T = TypeVar("T")

MAX_DELIVERIES = 5  # a task that kills its worker this many times is failed, not re-run


@dataclass(frozen=True)
class Delivery:
    """One delivery of a step's task message: the task's short name ("extract_profile") and
    its retry number. The step's first ledger read counts it (`attempts["<task>#<retry>"]`)
    while the step has not finished, so a delivery costs no round trip of its own; a task
    delivered more than MAX_DELIVERIES times at the same retry without its step finishing
    fails the commit (its every delivery killed the worker: running it again would loop
    forever). A finished step's redelivery only replays its output."""

    task: str
    retry: int = 0

    @property
    def key(self) -> str:
        return f"{self.task}#{self.retry}"


def submit(
    ledger: LedgerPort,
    req: CommitRequest,
    limits: LimitsConfig | None = None,
    *,
    max_pending: int = 0,
) -> bool:
    """Record a commit request; False when this very commit was already submitted.

    `limits`: the size limits checked before anything is recorded (InputLimitError).
    `max_pending`: back-pressure — a new commit is refused with `BacklogFullError` (nothing
    recorded) while that many commits are in flight; 0: no cap (see `commit.backlog`).

    A commit id is an idempotency key: reusing it for another account, user, agent or session is
    refused (it would silently drop that session and show another tenant's result)."""
    if limits is not None:  # a long message is recorded as its bounded excerpt, never refused
        req = big_messages.admit(req, limits)
    if ledger.create(
        req.commit_id,
        req.ctx.model_dump(mode="json"),
        req.model_dump(mode="json"),
        max_pending=max_pending,
    ):
        return True
    row = ledger.get(req.commit_id)
    if row is None and max_pending > 0:  # not recorded and not known: over the cap
        raise backlog.refusal(ledger.backlog(), max_pending)
    if row is not None:
        theirs = (row.account_id, row.user_id, row.agent_id, row.session_id)
        ours = (req.ctx.account_id, req.ctx.user_id, req.ctx.agent_id, req.ctx.session_id)
        if theirs != ours:
            raise CommitIdConflictError(req.commit_id)
    return False


def _state(
    c: CommitComponents,
    ledger: LedgerPort,
    commit_id: str,
    keys: list[str],
    delivery: Delivery | None = None,
    *,
    phase: str = "",
    done: str = "",
) -> tuple[CommitRequest, datetime, PhaseOutputs]:
    """The request, its creation time and whichever of the outputs `keys` exist, parsed (one
    round trip, which also counts `delivery`). A commit already marked failed (for example by
    the sweeper) is never advanced again: its late tasks write nothing. A delivery over
    MAX_DELIVERIES whose step has not finished (`done`: the key of its output) fails the
    commit in `phase`."""
    key = delivery.key if delivery is not None else None
    state = ledger.state(commit_id, keys, key, done)
    if state is None:
        raise CommitError(f"unknown commit {commit_id}", phase="enqueued")
    if state.phase == CommitPhase.FAILED.value:
        raise CommitAlreadyFailedError(commit_id)
    if delivery is not None and state.deliveries > MAX_DELIVERIES:
        msg = (
            f"{delivery.task} was delivered {state.deliveries} times without finishing "
            "(its worker was lost each time; see the worker logs)"
        )
        ledger.fail(commit_id, phase, msg)
        raise CommitError(msg, phase=phase)
    outputs = PhaseOutputs.from_stored(state.outputs)
    return c.step_cache.request(commit_id, state.request), state.created_at, outputs


def _need(output: T | None, key: str, phase: str) -> T:
    if output is None:
        raise CommitError(f"{key} output missing", phase=phase)
    return output


async def _run(
    ledger: LedgerPort, commit_id: str, phase: str, work: Awaitable[T], **attributes: Any
) -> T:
    try:
        with phase_span(phase, commit_id, **attributes):  # a span per phase run (tracing)
            return await work
    except CommitError as exc:
        if is_transient(exc.__cause__):
            raise TransientStepError(exc.phase, exc.__cause__ or exc) from exc
        ledger.fail(commit_id, exc.phase, str(exc))
        raise
    except Exception as exc:
        if is_transient(exc):
            raise TransientStepError(phase, exc) from exc
        ledger.fail(commit_id, phase, f"{type(exc).__name__}: {exc}")
        raise CommitError(str(exc), phase=phase) from exc


EXTRACTOR = "ctxpipe.extractor"


async def _write(
    c: CommitComponents, req: CommitRequest, archived: SessionArchive, planned: PlanOutcome
) -> WriteOutcome:
    """The write phase, named on its span as the GenAI memory operation `update_memory`: the
    store (the account) and the records (URIs) written."""
    span = trace.get_current_span()
    span.set_attributes({"gen_ai.operation.name": "update_memory", STORE_ID: req.ctx.account_id})
    outcome = await write_phase(c, req, archived, planned)
    record_ids(span, [r.uri for r in outcome.write_results if r.error is None])
    return outcome


def _archived(outcome: ArchiveOutcome) -> Completion:
    return Completion(
        ARCHIVE,
        outcome.model_dump(mode="json"),
        CommitPhase.ARCHIVED,
        timings={"archive_ms": outcome.duration_ms},
        durable=False,  # recomputed by the next step when a crash of PostgreSQL loses it
    )


def _extracted(name: str, result: ExtractionResult) -> Completion:
    """An extractor's output; the last of the four to report moves the commit on to
    `extracted`, in the same statement that stores its output."""
    rep = result.report
    return Completion(
        EXTRACT_PREFIX + name,
        result.model_dump(mode="json"),
        CommitPhase.ARCHIVED,
        extractors={name: ExtractorProgress.of(rep).model_dump(mode="json")},
        timings={f"extract_{name}_ms": rep.duration_ms},
        extracted_when=len(EXTRACTOR_NAMES),
        durable=False,  # recomputed by the plan when a crash of PostgreSQL loses it
    )


async def _archive(
    c: CommitComponents, ledger: LedgerPort, commit_id: str, req: CommitRequest
) -> ArchiveOutcome:
    outcome = await _run(ledger, commit_id, "archive", archive_phase(c, req))
    return ArchiveOutcome.model_validate(store(ledger, commit_id, _archived(outcome)))


async def _extract(
    c: CommitComponents,
    ledger: LedgerPort,
    commit_id: str,
    name: str,
    req: CommitRequest,
    archived: SessionArchive,
) -> ExtractionResult:
    work = extract_phase(c, name, req, archived)
    result = await _run(ledger, commit_id, "extract", work, **{EXTRACTOR: name})
    return ExtractionResult.model_validate(store(ledger, commit_id, _extracted(name, result)))


async def _extract_missing(
    c: CommitComponents,
    ledger: LedgerPort,
    commit_id: str,
    req: CommitRequest,
    outs: PhaseOutputs,
    phase: str,
    pending: list[Completion] | None = None,
) -> PhaseOutputs:
    """Run, concurrently in this process, the extractors whose output is not stored yet (all
    of them on the inline canvas; on the chord's, those with nothing to ask the LLM), then
    store their outputs — and `pending`, the archive's when it ran in this step too — in one
    transaction: one round trip and one flush to disk instead of one per output. Returns
    `outs` with the outputs stored."""
    missing = [n for n in EXTRACTOR_NAMES if n not in outs.extracted]
    done = list(pending or [])
    if missing:
        archived = _need(outs.archive, ARCHIVE, phase).archive
        results = await asyncio.gather(
            *(
                _run(
                    ledger,
                    commit_id,
                    "extract",
                    extract_phase(c, n, req, archived),
                    **{EXTRACTOR: n},
                )
                for n in missing
            )
        )
        done += [_extracted(n, r) for n, r in zip(missing, results, strict=True)]
    stored = ledger.complete_all(commit_id, done)
    return outs.merged({d.key: out for d, out in zip(done, stored, strict=True)})


async def _plan(
    c: CommitComponents,
    ledger: LedgerPort,
    commit_id: str,
    req: CommitRequest,
    outs: PhaseOutputs,
) -> PlanOutcome:
    archived = _need(outs.archive, ARCHIVE, "plan").archive
    results = outs.extraction_results()
    outcome = await _run(ledger, commit_id, "plan", plan_phase(c, req, archived, results))
    stored = ledger.complete(
        commit_id,
        PLAN,
        outcome.model_dump(mode="json"),
        CommitPhase.PLANNED,
        timings={"plan_ms": outcome.duration_ms},
    )
    return PlanOutcome.model_validate(stored)


@transient_as_retry("archive")
async def archive(
    c: CommitComponents, ledger: LedgerPort, commit_id: str, delivery: Delivery | None = None
) -> ArchiveOutcome:
    req, _, outs = _state(c, ledger, commit_id, [ARCHIVE], delivery, phase="archive", done=ARCHIVE)
    if outs.archive is not None:
        return outs.archive
    return await _archive(c, ledger, commit_id, req)


@transient_as_retry("extract")
async def extract(
    c: CommitComponents,
    ledger: LedgerPort,
    commit_id: str,
    name: str,
    delivery: Delivery | None = None,
) -> ExtractionResult:
    key = EXTRACT_PREFIX + name
    req, _, outs = _state(c, ledger, commit_id, [key, ARCHIVE], delivery, phase="extract", done=key)
    if name in outs.extracted:  # redelivered: the first stored output stands
        return outs.extracted[name]
    # missing only when a crash of PostgreSQL lost it (not flushed yet): run it again
    archived = outs.archive or await _archive(c, ledger, commit_id, req)
    return await _extract(c, ledger, commit_id, name, req, archived.archive)


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
    req, _, outs = _state(c, ledger, commit_id, keys, delivery, phase="plan", done=PLAN)
    if outs.plan is not None:
        return outs.plan
    pending: list[Completion] = []
    if outs.archive is None:  # stored with the extractors' outputs: a rerun redoes both
        archived = _archived(await _run(ledger, commit_id, "archive", archive_phase(c, req)))
        outs = outs.merged({ARCHIVE: archived.payload})
        pending.append(archived)
    outs = await _extract_missing(c, ledger, commit_id, req, outs, "extract", pending)
    return await _plan(c, ledger, commit_id, req, outs)


prepare = plan  # the first task of the fused canvas: archive, extractors and plan in one


@transient_as_retry("write")
async def write(
    c: CommitComponents, ledger: LedgerPort, commit_id: str, delivery: Delivery | None = None
) -> WriteOutcome:
    keys = [WRITE, ARCHIVE, PLAN]
    req, _, outs = _state(c, ledger, commit_id, keys, delivery, phase="write", done=WRITE)
    if outs.write is not None:
        return outs.write
    archived = _need(outs.archive, ARCHIVE, "write").archive
    planned = _need(outs.plan, PLAN, "write")
    if req.options.dry_run or c.settings.commit.dry_run:
        outcome = WriteOutcome()
    else:
        outcome = await _run(ledger, commit_id, "write", _write(c, req, archived, planned))
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
    req, created_at, outs = _state(
        c, ledger, commit_id, keys, delivery, phase="register", done=RESULT
    )
    if outs.result is not None:
        return outs.result
    started = time.perf_counter()
    archived = _need(outs.archive, ARCHIVE, "register")
    planned = _need(outs.plan, PLAN, "register")
    written = _need(outs.write, WRITE, "register")
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
    retry = delivery.retry if delivery is not None else None
    await write(c, ledger, commit_id, None if retry is None else Delivery("write", retry))
    reg = None if retry is None else Delivery("register", retry)
    return await register(c, ledger, commit_id, reg)


async def run(
    c: CommitComponents, ledger: LedgerPort, commit_id: str, delivery: Delivery | None = None
) -> CommitResult:
    """`prepare`, then `finish`: a whole commit in one step, where no extractor gets a task of
    its own (one task on the workers, no hop between the plan and the write). Each step keeps
    its delivery count ("prepare#0", "write#0", "register#0"), so a redelivery resumes after
    the last output stored. Returns the commit's result."""
    retry = delivery.retry if delivery is not None else None
    await prepare(c, ledger, commit_id, None if retry is None else Delivery("prepare", retry))
    return await finish(c, ledger, commit_id, None if retry is None else Delivery("finish", retry))


def blocking(step: Callable[P, Awaitable[T]]) -> Callable[P, T]:
    """The blocking twin of a step, for a Celery task: it runs the step on a fresh loop."""

    @functools.wraps(step)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(step(*args, **kwargs))

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
