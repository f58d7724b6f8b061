"""One run of a commit phase under the ledger, and the storing of its output.

`run_phase` runs a phase in its span and classifies its failure: a transient one raises
`TransientStepError` (the task layer retries), a permanent one marks the commit failed in the
ledger and raises `CommitError`. The others run one phase (archive, an extractor, the missing
extractors together, the plan) and store its output write-once, returning the stored one (on a
race, the first stored output stands). The steps (`commit.steps`) call them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from opentelemetry import trace

from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.failures import TransientStepError, is_transient
from ctxpipe.commit.ledger import LedgerPort, store
from ctxpipe.commit.outputs import ARCHIVE, EXTRACT_PREFIX, PLAN, ExtractorProgress, PhaseOutputs
from ctxpipe.commit.payloads import ArchiveOutcome, CommitRequest, PlanOutcome, WriteOutcome
from ctxpipe.commit.phases import archive_phase, extract_phase, plan_phase, write_phase
from ctxpipe.commit.step_state import need
from ctxpipe.core.enums import CommitPhase
from ctxpipe.core.errors import CommitError
from ctxpipe.core.models import ExtractionResult, SessionArchive
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES
from ctxpipe.observability.spans import STORE_ID, phase_span, record_ids
from ctxpipe.storage.commit_ledger import Completion

T = TypeVar("T")

EXTRACTOR = "ctxpipe.extractor"  # the span attribute naming an extractor


async def run_phase(
    ledger: LedgerPort, commit_id: str, phase: str, work: Awaitable[T], **attributes: Any
) -> T:
    """Await `work` in the span of `phase`; a failure is transient (`TransientStepError`) or
    fails the commit in the ledger (`CommitError`)."""
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


async def traced_write(
    c: CommitComponents, req: CommitRequest, archived: SessionArchive, planned: PlanOutcome
) -> WriteOutcome:
    """The write phase, named on its span as the GenAI memory operation `update_memory`: the
    store (the account) and the records (URIs) written."""
    span = trace.get_current_span()
    span.set_attributes({"gen_ai.operation.name": "update_memory", STORE_ID: req.ctx.account_id})
    outcome = await write_phase(c, req, archived, planned)
    record_ids(span, [r.uri for r in outcome.write_results if r.error is None])
    return outcome


def archived_completion(outcome: ArchiveOutcome) -> Completion:
    return Completion(
        ARCHIVE,
        outcome.model_dump(mode="json"),
        CommitPhase.ARCHIVED,
        timings={"archive_ms": outcome.duration_ms},
        durable=False,  # recomputed by the next step when a crash of PostgreSQL loses it
    )


def extracted_completion(name: str, result: ExtractionResult) -> Completion:
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


async def run_archive(
    c: CommitComponents, ledger: LedgerPort, commit_id: str, req: CommitRequest
) -> ArchiveOutcome:
    outcome = await run_phase(ledger, commit_id, "archive", archive_phase(c, req))
    return ArchiveOutcome.model_validate(store(ledger, commit_id, archived_completion(outcome)))


async def run_extract(
    c: CommitComponents,
    ledger: LedgerPort,
    commit_id: str,
    name: str,
    req: CommitRequest,
    archived: ArchiveOutcome,
) -> ExtractionResult:
    work = extract_phase(c, name, req, archived)
    result = await run_phase(ledger, commit_id, "extract", work, **{EXTRACTOR: name})
    stored = store(ledger, commit_id, extracted_completion(name, result))
    return ExtractionResult.model_validate(stored)


async def extract_missing(
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
        archived = need(outs.archive, ARCHIVE, phase)
        results = await asyncio.gather(
            *(
                run_phase(
                    ledger,
                    commit_id,
                    "extract",
                    extract_phase(c, n, req, archived),
                    **{EXTRACTOR: n},
                )
                for n in missing
            )
        )
        done += [extracted_completion(n, r) for n, r in zip(missing, results, strict=True)]
    stored = ledger.complete_all(commit_id, done)
    return outs.merged({d.key: out for d, out in zip(done, stored, strict=True)})


async def run_plan(
    c: CommitComponents,
    ledger: LedgerPort,
    commit_id: str,
    req: CommitRequest,
    outs: PhaseOutputs,
) -> PlanOutcome:
    archived = need(outs.archive, ARCHIVE, "plan").archive
    results = outs.extraction_results()
    outcome = await run_phase(ledger, commit_id, "plan", plan_phase(c, req, archived, results))
    stored = ledger.complete(
        commit_id,
        PLAN,
        outcome.model_dump(mode="json"),
        CommitPhase.PLANNED,
        timings={"plan_ms": outcome.duration_ms},
    )
    return PlanOutcome.model_validate(stored)
