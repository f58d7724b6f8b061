"""The commit phases as plain functions on pydantic payloads.

The same functions run in-process (CommitCoordinator) and as Celery tasks (tasks/), so each
takes the wired `CommitComponents` plus JSON-serialisable inputs and returns a payload.
Phases 1-3 write nothing but the archive; phase 4 is the commit point; phase 5 is best effort.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

from ctxpipe.commit.archive_builder import ArchiveBuilder
from ctxpipe.commit.big_messages import reading_window
from ctxpipe.commit.big_messages import warnings as big_message_warnings
from ctxpipe.commit.candidate_pipeline import CandidatePipeline
from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.context_writer import ContextWriter
from ctxpipe.commit.deduplicator import CandidateDeduplicator
from ctxpipe.commit.payloads import (
    ArchiveOutcome,
    CommitRequest,
    PlanItem,
    PlanOutcome,
    WriteOutcome,
)
from ctxpipe.commit.policies.base import PlanContext
from ctxpipe.commit.policy_router import PolicyRouter
from ctxpipe.commit.relation_writer import RelationWriter, derive_edges
from ctxpipe.core.enums import ExtractorStatus
from ctxpipe.core.errors import (
    CommitError,
    CtxError,
    FilesystemUnavailableError,
    LockTimeoutError,
    StorageError,
    VersionConflictError,
)
from ctxpipe.core.models import (
    ExtractionResult,
    RelationEdge,
    RelationOp,
    SessionArchive,
    WriteResult,
)
from ctxpipe.core.uri import CtxURI
from ctxpipe.extraction.agent_privacy import share_agent_memories
from ctxpipe.extraction.extractors import EXTRACTORS
from ctxpipe.fs.capacity import check_writable, is_out_of_space
from ctxpipe.fs.erasure_marks import ErasureMarks
from ctxpipe.fs.session_owner import SessionOwners, may_read
from ctxpipe.providers.base import LLMUsage

log = logging.getLogger(__name__)
# Node writes are blocking file I/O (fsync-bound): one long-lived pool per process, not a
# fresh executor per event loop.
_IO_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="ctxpipe-write")


def _fresh_pool_after_fork() -> None:  # a forked child inherits no threads: start over
    global _IO_POOL
    _IO_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="ctxpipe-write")


os.register_at_fork(after_in_child=_fresh_pool_after_fork)


def _ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


# ------------------------------------------------------------------ phase 1: archive
def check_session_owner(c: CommitComponents, req: CommitRequest) -> None:
    """Refuse, before anything is written, a commit into another user's or agent's session."""
    try:
        SessionOwners(c.fs).check_commit(req.ctx)
    except CtxError as exc:
        raise CommitError(str(exc), phase="archive") from exc


async def archive_phase(c: CommitComponents, req: CommitRequest) -> ArchiveOutcome:
    started = time.perf_counter()
    usage = LLMUsage()
    check_session_owner(c, req)
    try:
        archive, extraction = await ArchiveBuilder(c).build_archive(req, usage)
    except Exception as exc:
        raise CommitError(str(exc), phase="archive") from exc
    return ArchiveOutcome(
        archive=archive, usage=usage, duration_ms=_ms(started), extraction=extraction
    )


# ------------------------------------------------------------------ phase 2: extract
async def extract_phase(
    c: CommitComponents, name: str, req: CommitRequest, archived: ArchiveOutcome
) -> ExtractionResult:
    """One extractor: from the memories the archive step's session call proposed for it, or
    from its own LLM call. An LLM failure is reported in the result, not raised."""
    usage = LLMUsage()
    shared = archived.extraction
    result = await EXTRACTORS[name].extract(
        reading_window(req.messages, c.settings.limits.max_message_chars),
        archived.archive,
        req.ctx,
        c.llm,
        tools=req.used_tools,
        categories_filter=req.options.categories_filter,
        usage=usage,
        proposed=shared.memories if shared is not None and name in shared.asked else None,
    )
    result.report.reason = result.report.reason[:500]
    result.usage = usage
    result.candidates = share_agent_memories(
        result.candidates, req.messages, req.used_tools, req.ctx, c.settings.agent_memory
    )
    return result


# ------------------------------------------------------------------ phase 3: plan
def _recalled_texts(c: CommitComponents, req: CommitRequest) -> list[str]:
    """Abstracts of the used contexts the committer may read (a context of another user or
    agent resolves to nothing: a commit must not learn what another owner's memory says)."""
    texts: list[str] = []
    owners = SessionOwners(c.fs)
    for uri in req.used_contexts:
        try:
            if may_read(req.ctx, CtxURI.parse(uri), owners) and c.fs.exists(uri):
                texts.append(c.fs.read_node(uri, include_content=False).abstract)
        except (CtxError, ValueError, OSError):
            continue
    window = c.settings.limits.max_message_chars
    texts.extend(m.content[:window] for m in req.messages if m.injected)
    return texts


_REF_GROUP = re.compile(r"\[([^\[\]\n]{1,400})\]")


def qualify_text_refs(text: str, session_id: str, ids: set[str]) -> str:
    """`[m1, m3]` → `[s1:m1, s1:m3]` when every token is a message id of this session, so a
    memory that accumulates facts from many sessions still cites unambiguous turns."""

    def sub(m: re.Match[str]) -> str:
        tokens = [t.strip() for t in m.group(1).split(",")]
        if not tokens or not all(t in ids for t in tokens):
            return m.group(0)
        return "[" + ", ".join(f"{session_id}:{t}" for t in tokens) + "]"

    return _REF_GROUP.sub(sub, text)


def plan_context(c: CommitComponents, req: CommitRequest, usage: LLMUsage) -> PlanContext:
    dedup = None
    if c.settings.commit.enable_dedup and not req.options.skip_dedup:
        check = getattr(c.embedder, "check_dimension", None)
        if check is not None and c.vector_index is not None:
            check(c.settings.embedding_dim)  # a model of the wrong size fails, never degrades
        dedup = CandidateDeduplicator(c.fs, c.settings.dedup, c.embedder, c.vector_index)
    return PlanContext(
        ctx=req.ctx,
        commit_id=req.commit_id,
        llm=c.llm,
        usage=usage,
        dedup=dedup,
        agent_memory=c.settings.agent_memory,
    )


async def plan_phase(
    c: CommitComponents,
    req: CommitRequest,
    archive: SessionArchive,
    results: list[ExtractionResult],
) -> PlanOutcome:
    started = time.perf_counter()
    reports = [r.report for r in results]
    if results and all(r.report.status is ExtractorStatus.FAILED for r in results):
        raise CommitError(
            "every extractor failed: " + "; ".join(f"{r.extractor}: {r.reason}" for r in reports),
            phase="extract",
        )
    usage = LLMUsage()
    pipeline = CandidatePipeline(c.settings.pipeline)
    raw = CandidatePipeline.flatten(results)
    cap = req.options.max_candidates
    if cap is None:
        cap = min(
            c.settings.pipeline.max_candidates_per_commit,
            c.settings.commit.max_candidates_per_commit,
        )
    kept, skipped = pipeline.normalize(
        raw,
        injected_ids={m.id for m in req.messages if m.injected},
        recalled_texts=_recalled_texts(c, req),
        max_candidates=cap,
    )
    ids = {m.id for m in req.messages}
    sid = req.ctx.session_id
    kept = [
        k.model_copy(
            update={
                "overview": qualify_text_refs(k.overview, sid, ids),
                "content": qualify_text_refs(k.content, sid, ids),
            }
        )
        for k in kept
    ]
    try:
        pc = plan_context(c, req, usage)
        items = await PolicyRouter(c.fs).plan_all(kept, pc)
    except Exception as exc:
        raise CommitError(str(exc), phase="plan") from exc
    warnings = [
        f"extractor {r.extractor} failed: {r.reason}"
        for r in reports
        if r.status is ExtractorStatus.FAILED
    ]
    warnings.extend(big_message_warnings(req.messages, c.settings.limits))
    for item in items:
        d = item.plan.dedup
        if d is not None and "degraded" in d.reason:
            warnings.append(f"dedup degraded for {item.plan.target_uri}: {d.reason}")
    return PlanOutcome(
        items=items,
        skipped=skipped,
        extractors=reports,
        candidates_extracted=len(raw),
        usage=usage,
        warnings=list(dict.fromkeys(warnings)),
        duration_ms=_ms(started),
    )


# ------------------------------------------------------------------ phase 4: write
def owner_lock_keys(req: CommitRequest, items: list[PlanItem]) -> list[str]:
    keys = set()
    for item in items:
        u = CtxURI.parse(item.plan.target_uri)
        keys.add(f"{u.account}/{u.scope}/{u.segments[0]}")
    return sorted(keys)


async def _replan(c: CommitComponents, req: CommitRequest, item: PlanItem) -> PlanItem:
    usage = LLMUsage()
    pc = plan_context(c, req, usage)
    items = await PolicyRouter(c.fs).plan_all(item.candidates, pc)
    return items[0]


async def write_phase(
    c: CommitComponents, req: CommitRequest, archive: SessionArchive, plan: PlanOutcome
) -> WriteOutcome:
    """The commit point: under the owner-space locks, apply every plan (re-planning a node
    that another commit changed since planning), then write relations."""
    started = time.perf_counter()
    writer = ContextWriter(c.fs)
    out = WriteOutcome()
    categories: list[tuple[WriteResult, str]] = []
    marks = ErasureMarks(c.fs)

    def not_erased() -> None:  # under each lock the eraser also takes
        marks.check(req.ctx.account_id, req.ctx.user_id, req.submitted_at)

    try:  # a full or read-only FS fails the commit here, before it writes anything
        check_writable(c.fs.fs_root, c.settings.fs_min_free_mb)
    except FilesystemUnavailableError as exc:
        raise CommitError(f"{exc}; nothing was written", phase="write") from exc
    try:  # the session's owner is recorded (or checked) before anything else is written
        SessionOwners(c.fs).claim(req.ctx, c.lock, c.settings.lock_timeout_s, guard=not_erased)
    except LockTimeoutError:
        raise
    except CtxError as exc:
        raise CommitError(str(exc), phase="write") from exc
    try:
        archive = ArchiveBuilder(c).persist(req, archive, guard=not_erased)
    except Exception as exc:
        if is_out_of_space(exc):  # retried as a whole, like a node write below
            raise StorageError(f"the archive could not be written: {exc}") from None
        raise CommitError(f"archive could not be written: {exc}", phase="write") from exc
    out.archive = archive
    with ExitStack() as stack:
        for key in owner_lock_keys(req, plan.items):
            stack.enter_context(c.lock.hold(key, c.settings.lock_timeout_s))
        try:
            not_erased()
        except CtxError as exc:
            raise CommitError(str(exc), phase="write") from exc

        def apply(item: PlanItem) -> WriteResult | Exception:
            try:
                return writer.apply_plan(req.ctx, item.plan, req.commit_id)
            except Exception as exc:  # noqa: BLE001 - handled per item below
                return exc

        writer.load_vocabularies([i.plan.target_uri for i in plan.items], req.commit_id)
        # Nodes are independent (distinct targets, each with its own node lock): write them
        # concurrently so their fsyncs share journal commits.
        loop = asyncio.get_running_loop()
        first = await asyncio.gather(
            *(loop.run_in_executor(_IO_POOL, apply, i) for i in plan.items)
        )
        full = [o for o in first if isinstance(o, BaseException) and is_out_of_space(o)]
        if full:  # retried as a whole (nodes already written are skipped): never half a commit
            done = sum(1 for o in first if not isinstance(o, BaseException))
            raise StorageError(
                f"the filesystem filled up or became read-only during the write phase "
                f"({done} of {len(first)} memories written, each whole): {full[0]}"
            )
        for item, outcome in zip(plan.items, first, strict=True):
            cat = item.plan.category.value if item.plan.category else ""
            if isinstance(outcome, VersionConflictError):
                try:
                    item = await _replan(c, req, item)
                    outcome = writer.apply_plan(req.ctx, item.plan, req.commit_id)
                except Exception as exc:  # noqa: BLE001
                    outcome = exc
            if isinstance(outcome, Exception):  # one node failing never aborts the batch
                log.warning("write failed for %s: %s", item.plan.target_uri, outcome)
                outcome = WriteResult(
                    uri=item.plan.target_uri, action=item.plan.action, error=str(outcome)[:500]
                )
                out.failed.append(f"{item.plan.target_uri}: {outcome.error}")
            out.write_results.append(outcome)
            categories.append((outcome, cat))
        if not req.options.skip_relations and c.settings.commit.enable_relations:
            rel = RelationWriter(c.relations)

            def relate(uri: str, ops: list[RelationOp]) -> list[RelationEdge] | Exception:
                try:
                    return rel.apply_edges(uri, ops)
                except Exception as exc:  # noqa: BLE001
                    return exc

            edges = derive_edges(categories, archive.archive_uri)
            results = await asyncio.gather(
                *(loop.run_in_executor(_IO_POOL, relate, uri, ops) for uri, ops in edges.items())
            )
            for uri, written in zip(edges, results, strict=True):
                if isinstance(written, Exception):
                    out.failed.append(f"relations of {uri}: {written}")
                else:
                    out.relation_edges.extend(written)
    out.duration_ms = _ms(started)
    return out
