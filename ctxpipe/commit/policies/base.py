"""MergePolicy ABC and the helpers every policy shares."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from ctxpipe.commit.policies.merge_gate import adds_nothing
from ctxpipe.core.enums import MemoryCategory, WriteAction
from ctxpipe.core.llm_schemas import MergeOutput
from ctxpipe.core.models import CandidateMemory, ContextNode, DedupResult, WritePlan
from ctxpipe.core.session import RequestContext
from ctxpipe.core.validity import TEMPORAL_CATEGORIES, session_day, stamp_lines
from ctxpipe.extraction.agent_privacy import AgentMemoryMode
from ctxpipe.providers.base import LLM, LLMUsage

MERGEABLE = frozenset(
    {
        MemoryCategory.PROFILE,
        MemoryCategory.PREFERENCES,
        MemoryCategory.ENTITIES,
        MemoryCategory.PATTERNS,
        MemoryCategory.SKILLS,
    }
)
APPLIED_COMMITS_KEY = "applied_commits"


@dataclass
class PlanContext:
    """What a policy may consult while planning one commit."""

    ctx: RequestContext
    commit_id: str
    llm: LLM
    usage: LLMUsage
    dedup: Any = None  # CandidateDeduplicator | None (skip_dedup → None)
    agent_memory: AgentMemoryMode = "shared"  # where agent-owned memories are written
    pending: dict[str, WritePlan] = field(default_factory=dict)

    def qualify(self, refs: list[str]) -> list[str]:
        """Message ids are unique within a session: store them as `session:message`."""
        return [f"{self.ctx.session_id}:{r}" for r in refs]


def candidate_patch(c: CandidateMemory) -> dict[str, str]:
    overview = c.overview.strip() or c.abstract.strip()
    content = c.content.strip() or overview
    return {"abstract": c.abstract.strip(), "overview": overview, "content": content}


def dated_patch(
    c: CandidateMemory, patch: dict[str, str], existing: dict[str, str] | None = None
) -> dict[str, str]:
    """`patch` with the fact lines of a profile or preference memory dated by the session
    they come from (`ctxpipe.core.validity.stamp_lines`; against `existing`, the node's texts
    before a merge). The same for every LLM provider: the dates never depend on the model."""
    day = session_day(c.observed_at)
    if c.category.value not in TEMPORAL_CATEGORIES or not day:
        return patch
    old = existing or {}
    out = dict(patch)
    for level in ("overview", "content"):
        if level in out:
            out[level] = stamp_lines(out[level], day, old.get(level) if existing else None)
    return out


def base_metadata(c: CandidateMemory) -> dict[str, Any]:
    meta: dict[str, Any] = {"routing_key": c.routing_key, "confidence": round(c.confidence, 3)}
    if c.event_time:
        meta["event_time"] = c.event_time
    if c.observed_at:
        meta["observed_at"] = c.observed_at
    return meta


def already_applied(node: ContextNode | None, commit_id: str) -> bool:
    return node is not None and commit_id in node.metadata.get(APPLIED_COMMITS_KEY, [])


async def merge_texts(
    pc: PlanContext, category: MemoryCategory, existing: dict[str, str], new: dict[str, str]
) -> MergeOutput:
    return await pc.llm.complete_json(
        "policy.merge_bundle",
        {
            "category": category.value,
            "existing_abstract": existing.get("abstract", ""),
            "existing_overview": existing.get("overview", ""),
            "existing_content": existing.get("content", ""),
            "new_abstract": new.get("abstract", ""),
            "new_overview": new.get("overview", ""),
            "new_content": new.get("content", ""),
        },
        MergeOutput,
        ctx=pc.ctx,
        usage=pc.usage,
    )


def node_texts(node: ContextNode) -> dict[str, str]:
    return {"abstract": node.abstract, "overview": node.overview, "content": node.content}


class MergePolicy(ABC):
    name: str = ""

    @abstractmethod
    async def plan(
        self, candidate: CandidateMemory, uri: str, existing: ContextNode | None, pc: PlanContext
    ) -> WritePlan: ...

    async def merge_plan(
        self,
        candidate: CandidateMemory,
        uri: str,
        existing: ContextNode,
        pc: PlanContext,
        reason: str,
        metadata: dict[str, Any] | None = None,
        dedup: DedupResult | None = None,
    ) -> WritePlan:
        """MERGE the candidate into `existing`; SKIP when the merge adds nothing (decided
        before the LLM call when every line is already in the node: `merge_gate`)."""
        before = node_texts(existing)
        refs = pc.qualify(candidate.source_refs)
        known = dated_patch(candidate, candidate_patch(candidate), before)
        if adds_nothing(known, existing, refs, metadata):
            return WritePlan(
                action=WriteAction.SKIP,
                target_uri=uri,
                category=candidate.category,
                reason=f"{reason}; merge adds nothing new (every line already in the node)",
                dedup=dedup,
                expected_version=existing.version,
            )
        merged = await merge_texts(
            pc, candidate.category, before, dated_patch(candidate, candidate_patch(candidate))
        )
        patch = dated_patch(
            candidate,
            {"abstract": merged.abstract, "overview": merged.overview, "content": merged.content},
            before,
        )
        meta = {**base_metadata(candidate), **(metadata or {})}
        if merged.conflicts:
            meta["conflicts"] = merged.conflicts
        unchanged = patch == node_texts(existing) and all(
            existing.metadata.get(k) == v for k, v in (metadata or {}).items()
        )
        if unchanged and set(refs) <= set(existing.source_refs):
            return WritePlan(
                action=WriteAction.SKIP,
                target_uri=uri,
                category=candidate.category,
                reason=f"{reason}; merge adds nothing new",
                dedup=dedup,
                expected_version=existing.version,
            )
        return WritePlan(
            action=WriteAction.MERGE,
            target_uri=uri,
            category=candidate.category,
            node_patch=patch,
            metadata_patch=meta,
            source_refs=refs,
            reason=f"{reason}; {merged.reason}".strip("; "),
            expected_version=existing.version,
            dedup=dedup,
        )

    def create_plan(
        self,
        candidate: CandidateMemory,
        uri: str,
        pc: PlanContext,
        reason: str,
        metadata: dict[str, Any] | None = None,
        dedup: DedupResult | None = None,
    ) -> WritePlan:
        return WritePlan(
            action=WriteAction.CREATE,
            target_uri=uri,
            category=candidate.category,
            node_patch=dated_patch(candidate, candidate_patch(candidate)),
            metadata_patch={**base_metadata(candidate), **(metadata or {})},
            source_refs=pc.qualify(candidate.source_refs),
            reason=reason,
            expected_version=0,
            dedup=dedup,
        )

    @staticmethod
    def skip_plan(
        candidate: CandidateMemory, uri: str, reason: str, dedup: DedupResult | None = None
    ) -> WritePlan:
        return WritePlan(
            action=WriteAction.SKIP,
            target_uri=uri,
            category=candidate.category,
            reason=reason,
            dedup=dedup,
        )
