"""Ledgered steps: each commit phase made idempotent under redelivery.

A step runs its phase once per (commit id, phase): the output is stored write-once in the commit
ledger and a redelivered step returns the stored output without running again. Each step is a
coroutine (`archive`, `extract`, `plan`, `write`, `register`) with a blocking twin
(`archive_step` …) for a Celery task. CommitCoordinator awaits the same coroutines on an
`InMemoryLedger`, so in-process commits and the tests run the code the workers run. Steps classify
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

from ctxpipe.commit import backlog
from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.failures import (
    CommitAlreadyFailedError,
    CommitIdConflictError,
    TransientStepError,
    is_transient,
    transient_as_retry,
)
from ctxpipe.commit.ledger import LedgerPort, store
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
from ctxpipe.core.models import ExtractionResult, SessionArchive
from ctxpipe.core.session import check_limits
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES
from ctxpipe.providers.base import run_sync
from ctxpipe.storage.commit_ledger import Completion

P = ParamSpec("P")
T = TypeVar("T")

ARCHIVE, PLAN, WRITE, RESULT = "archive", "plan", "write", "result"
EXTRACT_PREFIX = "extract:"
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
    if limits is not None:
        check_limits(req.messages, req.used_contexts, req.used_tools, limits)
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
) -> tuple[CommitRequest, datetime, dict[str, dict[str, Any]]]:
    """The request, its creation time and whichever of `keys` exist (one round trip, which
    also counts `delivery`). A commit already marked failed (for example by the sweeper) is
    never advanced again: its late tasks write nothing. A delivery over MAX_DELIVERIES whose
    step has not finished (`done`: the key of its output) fails the commit in `phase`."""
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
    return c.step_cache.request(commit_id, state.request), state.created_at, state.outputs


def _need(outputs: dict[str, dict[str, Any]], key: str, phase: str) -> dict[str, Any]:
    if key not in outputs:
        raise CommitError(f"{key} output missing", phase=phase)
    return outputs[key]


async def _run(ledger: LedgerPort, commit_id: str, phase: str, work: Awaitable[Any]) -> Any:
    try:
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


EXTRACT_KEYS = [EXTRACT_PREFIX + n for n in EXTRACTOR_NAMES]


def extraction_results(outputs: dict[str, dict[str, Any]]) -> list[ExtractionResult]:
    missing = [k.removeprefix(EXTRACT_PREFIX) for k in EXTRACT_KEYS if k not in outputs]
    if missing:
        raise CommitError(f"extractor output missing: {', '.join(missing)}", phase="extract")
    return [ExtractionResult.model_validate(outputs[k]) for k in EXTRACT_KEYS]


def _archived(outcome: ArchiveOutcome) -> Completion:
    return Completion(
        ARCHIVE,
        outcome.model_dump(mode="json"),
        CommitPhase.ARCHIVED,
        timings={"archive_ms": outcome.duration_ms},
    )


def _extracted(name: str, result: ExtractionResult) -> Completion:
    """An extractor's output; the last of the four to report moves the commit on to
    `extracted`, in the same statement that stores its output."""
    rep = result.report
    return Completion(
        EXTRACT_PREFIX + name,
        result.model_dump(mode="json"),
        CommitPhase.ARCHIVED,
        extractors={
            name: {
                "status": rep.status.value,
                "candidates": rep.candidates,
                "reason": rep.reason,
                "duration_ms": rep.duration_ms,
            }
        },
        timings={f"extract_{name}_ms": rep.duration_ms},
        extracted_when=len(EXTRACTOR_NAMES),
    )


async def _archive(
    c: CommitComponents, ledger: LedgerPort, commit_id: str, req: CommitRequest
) -> dict[str, Any]:
    outcome = await _run(ledger, commit_id, "archive", archive_phase(c, req))
    return store(ledger, commit_id, _archived(outcome))


async def _extract(
    c: CommitComponents,
    ledger: LedgerPort,
    commit_id: str,
    name: str,
    req: CommitRequest,
    archived: SessionArchive,
) -> dict[str, Any]:
    result = await _run(ledger, commit_id, "extract", extract_phase(c, name, req, archived))
    return store(ledger, commit_id, _extracted(name, result))


async def _extract_missing(
    c: CommitComponents,
    ledger: LedgerPort,
    commit_id: str,
    req: CommitRequest,
    outs: dict[str, dict[str, Any]],
    phase: str,
    pending: list[Completion] | None = None,
) -> None:
    """Run, concurrently in this process, the extractors whose output is not stored yet (all
    of them on the inline canvas; on the chord's, those with nothing to ask the LLM), then
    store their outputs — and `pending`, the archive's when it ran in this step too — in one
    transaction: one round trip and one flush to disk instead of one per output."""
    missing = [n for n in EXTRACTOR_NAMES if EXTRACT_PREFIX + n not in outs]
    done = list(pending or [])
    if missing:
        archived = ArchiveOutcome.model_validate(_need(outs, ARCHIVE, phase)).archive
        results = await asyncio.gather(
            *(
                _run(ledger, commit_id, "extract", extract_phase(c, n, req, archived))
                for n in missing
            )
        )
        done += [_extracted(n, r) for n, r in zip(missing, results, strict=True)]
    stored = ledger.complete_all(commit_id, done)
    outs.update({d.key: out for d, out in zip(done, stored, strict=True)})


async def _plan(
    c: CommitComponents,
    ledger: LedgerPort,
    commit_id: str,
    req: CommitRequest,
    outs: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    archived = ArchiveOutcome.model_validate(_need(outs, ARCHIVE, "plan")).archive
    results = extraction_results(outs)
    outcome = await _run(ledger, commit_id, "plan", plan_phase(c, req, archived, results))
    return ledger.complete(
        commit_id,
        PLAN,
        outcome.model_dump(mode="json"),
        CommitPhase.PLANNED,
        timings={"plan_ms": outcome.duration_ms},
    )


@transient_as_retry("archive")
async def archive(
    c: CommitComponents, ledger: LedgerPort, commit_id: str, delivery: Delivery | None = None
) -> dict[str, Any]:
    req, _, outs = _state(c, ledger, commit_id, [ARCHIVE], delivery, phase="archive", done=ARCHIVE)
    if ARCHIVE in outs:
        return outs[ARCHIVE]
    return await _archive(c, ledger, commit_id, req)


@transient_as_retry("extract")
async def extract(
    c: CommitComponents,
    ledger: LedgerPort,
    commit_id: str,
    name: str,
    delivery: Delivery | None = None,
) -> dict[str, Any]:
    key = EXTRACT_PREFIX + name
    req, _, outs = _state(c, ledger, commit_id, [key, ARCHIVE], delivery, phase="extract", done=key)
    if key in outs:  # redelivered: the first stored output stands
        return outs[key]
    archived = ArchiveOutcome.model_validate(_need(outs, ARCHIVE, "extract")).archive
    return await _extract(c, ledger, commit_id, name, req, archived)


@transient_as_retry("plan")
async def plan(
    c: CommitComponents, ledger: LedgerPort, commit_id: str, delivery: Delivery | None = None
) -> dict[str, Any]:
    """Plan the commit's writes. An extractor whose output is missing (one the chord left out:
    it had nothing to ask the LLM) runs here first."""
    keys = [PLAN, ARCHIVE, *EXTRACT_KEYS]
    req, _, outs = _state(c, ledger, commit_id, keys, delivery, phase="plan", done=PLAN)
    if PLAN in outs:
        return outs[PLAN]
    await _extract_missing(c, ledger, commit_id, req, outs, "plan")
    return await _plan(c, ledger, commit_id, req, outs)


@transient_as_retry("plan")
async def prepare(
    c: CommitComponents, ledger: LedgerPort, commit_id: str, delivery: Delivery | None = None
) -> dict[str, Any]:
    """Archive, the four extractors (concurrently) and the plan in one step: the commit's
    first task where the extractors do not get tasks of their own. One ledger read for all
    three. The archive's and the extractors' outputs are stored together, in one transaction,
    and the plan's after them (each write-once): a redelivery resumes after the plan, or after
    the extractors, or redoes the archive (which finds its files already written) and the
    extractors."""
    keys = [PLAN, ARCHIVE, *EXTRACT_KEYS]
    req, _, outs = _state(c, ledger, commit_id, keys, delivery, phase="plan", done=PLAN)
    if PLAN in outs:
        return outs[PLAN]
    pending: list[Completion] = []
    if ARCHIVE not in outs:  # stored with the extractors' outputs: a rerun redoes both
        archived = _archived(await _run(ledger, commit_id, "archive", archive_phase(c, req)))
        outs[ARCHIVE] = archived.payload
        pending.append(archived)
    await _extract_missing(c, ledger, commit_id, req, outs, "extract", pending)
    return await _plan(c, ledger, commit_id, req, outs)


@transient_as_retry("write")
async def write(
    c: CommitComponents, ledger: LedgerPort, commit_id: str, delivery: Delivery | None = None
) -> dict[str, Any]:
    keys = [WRITE, ARCHIVE, PLAN]
    req, _, outs = _state(c, ledger, commit_id, keys, delivery, phase="write", done=WRITE)
    if WRITE in outs:
        return outs[WRITE]
    archived = ArchiveOutcome.model_validate(_need(outs, ARCHIVE, "write")).archive
    planned = PlanOutcome.model_validate(_need(outs, PLAN, "write"))
    if req.options.dry_run or c.settings.commit.dry_run:
        outcome = WriteOutcome()
    else:
        outcome = await _run(ledger, commit_id, "write", write_phase(c, req, archived, planned))
    return ledger.complete(
        commit_id,
        WRITE,
        outcome.model_dump(mode="json"),
        CommitPhase.WRITTEN,
        timings={"write_ms": outcome.duration_ms, "written_at": time.time()},
    )


@transient_as_retry("register")
async def register(
    c: CommitComponents, ledger: LedgerPort, commit_id: str, delivery: Delivery | None = None
) -> dict[str, Any]:
    keys = [RESULT, ARCHIVE, PLAN, WRITE, *EXTRACT_KEYS]
    req, created_at, outs = _state(
        c, ledger, commit_id, keys, delivery, phase="register", done=RESULT
    )
    if RESULT in outs:
        return outs[RESULT]
    started = time.perf_counter()
    archived = ArchiveOutcome.model_validate(_need(outs, ARCHIVE, "register"))
    planned = PlanOutcome.model_validate(_need(outs, PLAN, "register"))
    written = WriteOutcome.model_validate(_need(outs, WRITE, "register"))
    usage = usage_by_phase(archived, extraction_results(outs), planned, written)
    elapsed = int((time.time() - created_at.timestamp()) * 1000)
    result = register_phase(
        c, req, archived.archive, planned, written, usage=usage, duration_ms=elapsed
    )
    return ledger.complete(
        commit_id,
        RESULT,
        result.model_dump(mode="json"),
        CommitPhase.REGISTERED,
        status=result.status.value,
        with_result=True,
        timings={"register_ms": int((time.perf_counter() - started) * 1000), "total_ms": elapsed},
    )


async def finish(
    c: CommitComponents, ledger: LedgerPort, commit_id: str, delivery: Delivery | None = None
) -> dict[str, Any]:
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
) -> dict[str, Any]:
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
