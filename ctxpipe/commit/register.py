"""Phase 5: register the outbox events of a commit (best effort) and build its result."""

from __future__ import annotations

import logging

from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.journal import CommitJournal
from ctxpipe.commit.payloads import ArchiveOutcome, CommitRequest, PlanOutcome, WriteOutcome
from ctxpipe.core.enums import CommitStatus, ExtractorStatus, OutboxEventType, WriteAction
from ctxpipe.core.errors import CtxError
from ctxpipe.core.models import (
    CommitResult,
    CommitStats,
    ExtractionResult,
    OutboxEvent,
    SessionArchive,
    stable_id,
)
from ctxpipe.providers.base import LLMUsage

log = logging.getLogger(__name__)


def build_outbox_events(
    c: CommitComponents, archive: SessionArchive, written: WriteOutcome
) -> list[OutboxEvent]:
    """Deterministic events: id = hash(type, uri, version), so a re-run adds none."""
    events: list[OutboxEvent] = []
    touched = [
        r.uri for r in written.write_results if r.action is not WriteAction.SKIP and not r.error
    ]
    if archive.archive_uri and archive.persisted:
        touched.insert(0, archive.archive_uri)
    for uri in dict.fromkeys(touched):
        try:
            st = c.fs.stat_node(uri)
        except CtxError:
            continue
        events.append(
            OutboxEvent(
                event_id=OutboxEvent.make_id(OutboxEventType.UPSERT_CONTEXT, uri, st.version),
                event_type=OutboxEventType.UPSERT_CONTEXT,
                uri=uri,
                payload={"version": st.version, "content_hash": st.content_hash},
                max_retries=c.settings.outbox_max_retries,
            )
        )
    by_source: dict[str, list[str]] = {}
    for e in written.relation_edges:
        by_source.setdefault(e.from_uri, []).append(e.edge_id)
    for uri, ids in by_source.items():
        digest = stable_id(*sorted(ids), length=16)
        events.append(
            OutboxEvent(
                event_id=OutboxEvent.make_id(OutboxEventType.UPSERT_RELATION, uri, digest),
                event_type=OutboxEventType.UPSERT_RELATION,
                uri=uri,
                payload={"edge_ids": sorted(ids)},
                max_retries=c.settings.outbox_max_retries,
            )
        )
    return events


def usage_by_phase(
    archived: ArchiveOutcome,
    extractions: list[ExtractionResult],
    plan: PlanOutcome,
    written: WriteOutcome | None = None,
) -> dict[str, LLMUsage]:
    """What each phase of a commit cost in LLM calls and tokens (phases that made no call are
    left out)."""
    parts: dict[str, LLMUsage] = {"archive": archived.usage}
    for r in extractions:
        parts[f"extract_{r.report.extractor}"] = r.usage
    parts["plan"] = plan.usage
    if written is not None:
        parts["write"] = written.usage
    return {k: v for k, v in parts.items() if v.calls or v.prompt_tokens or v.completion_tokens}


def total_usage(by_phase: dict[str, LLMUsage]) -> LLMUsage:
    total = LLMUsage()
    for part in by_phase.values():
        total.add(part)
    return total


def register_phase(
    c: CommitComponents,
    req: CommitRequest,
    archive: SessionArchive,
    plan: PlanOutcome,
    written: WriteOutcome,
    *,
    usage: dict[str, LLMUsage] | None = None,
    duration_ms: int = 0,
) -> CommitResult:
    """Best effort: an outbox failure leaves the commit successful, with a warning."""
    warnings = list(plan.warnings)
    archive = written.archive or archive
    events = build_outbox_events(c, archive, written)
    if events and c.outbox is None:
        warnings.append("no outbox configured; the index replica will catch up by repair")
        events = []
    elif events:
        try:
            assert c.outbox is not None
            c.outbox.append_batch(events)
        except Exception as exc:  # noqa: BLE001 - phase 5 never fails a commit
            log.warning("outbox registration failed, repair will heal it: %s", exc)
            warnings.append(f"outbox registration failed (repair will heal): {exc}"[:300])
            events = []
    result = build_result(req, archive, plan, written, events, warnings, usage, duration_ms)
    if not (req.options.dry_run or c.settings.commit.dry_run):
        try:
            CommitJournal(c.fs).save(req, result)
        except OSError as exc:  # phase 5 never fails a commit: a re-run re-plans instead
            log.warning("commit journal not written: %s", exc)
            result.warnings.append(f"commit journal not written: {exc}"[:300])
    return result


def build_result(
    req: CommitRequest,
    archive: SessionArchive,
    plan: PlanOutcome,
    written: WriteOutcome,
    events: list[OutboxEvent],
    warnings: list[str],
    usage: dict[str, LLMUsage] | None,
    duration_ms: int,
) -> CommitResult:
    """`usage`: LLM usage per phase (see `usage_by_phase`)."""
    by_phase = usage or {}
    total = total_usage(by_phase)
    results = written.write_results
    ok = [r for r in results if not r.error]
    count = lambda a: sum(1 for r in ok if r.action is a and (r.created or r.updated))  # noqa: E731
    stats = CommitStats(
        candidates_extracted=plan.candidates_extracted,
        candidates_skipped=len(plan.skipped) + sum(1 for r in ok if r.action is WriteAction.SKIP),
        nodes_created=count(WriteAction.CREATE),
        nodes_merged=count(WriteAction.MERGE),
        nodes_appended=count(WriteAction.APPEND),
        relations_written=len(written.relation_edges),
        outbox_events_queued=len(events),
        duration_ms=duration_ms,
        llm_calls=total.calls,
        llm_prompt_tokens=total.prompt_tokens,
        llm_completion_tokens=total.completion_tokens,
        llm_by_phase=by_phase,
    )
    status = CommitStatus.PARTIAL if written.failed else CommitStatus.SUCCESS
    reasons: list[str] = []
    if written.failed:
        reasons.append(f"{len(written.failed)} write(s) failed: " + "; ".join(written.failed))
    failed_ex = [r for r in plan.extractors if r.status is ExtractorStatus.FAILED]
    if failed_ex:
        status = CommitStatus.PARTIAL
        reasons.append("extractor(s) failed: " + ", ".join(r.extractor for r in failed_ex))
    if not any(r.created or r.updated for r in ok):
        why = [
            f"{r.extractor}: {r.status.value}" + (f" ({r.reason})" if r.reason else "")
            for r in plan.extractors
        ]
        skipped = [f"{s.routing_key}: {s.reason}" for s in plan.skipped][:10]
        skipped += [
            f"{i.plan.target_uri}: {i.plan.reason}"
            for i in plan.items
            if i.plan.action is WriteAction.SKIP
        ][:10]
        reasons.append("no memory stored; " + "; ".join(why + skipped))
    return CommitResult(
        commit_id=req.commit_id,
        status=status,
        archive=archive,
        write_results=results,
        outbox_events=events,
        relation_edges=written.relation_edges,
        plans=[i.plan for i in plan.items],
        extractors=plan.extractors,
        skipped=plan.skipped,
        warnings=warnings,
        stats=stats,
        reason=" | ".join(reasons),
        dry_run=req.options.dry_run,
    )
