"""CandidateExtractor: its categories' memories — from its own LLM call, or from the session's
one extraction call (`extraction.session`) — turned into validated candidates."""

from __future__ import annotations

import time
from collections import defaultdict
from datetime import datetime
from typing import Any, ClassVar

from ctxpipe.core.enums import (
    AGENT_CATEGORIES,
    ExtractorStatus,
    MemoryCategory,
    OwnerScope,
)
from ctxpipe.core.errors import LLMError
from ctxpipe.core.llm_schemas import ExtractedMemory, ExtractionOutput
from ctxpipe.core.models import (
    CandidateMemory,
    ExtractionResult,
    ExtractorReport,
    SessionArchive,
    ToolSkillCandidate,
)
from ctxpipe.core.session import Message, RequestContext, ToolUse, message_vars
from ctxpipe.providers.base import LLM, LLMUsage


def session_time(own: list[Message]) -> datetime | None:
    """When a session was held: its latest message's time."""
    return max((m.created_at for m in own if m.created_at), default=None)


def prompt_vars(own: list[Message], tools: list[ToolUse], ctx: RequestContext) -> dict[str, Any]:
    """The variables an extraction prompt reads of a session: its messages (injected ones
    removed), the tools used, who speaks to whom, and when (`session_time`)."""
    when = session_time(own)
    return {
        "messages": message_vars(own),
        "tools": [t.model_dump() for t in tools],
        "user_id": ctx.user_id,
        "agent_id": ctx.agent_id,
        "session_time": when.isoformat() if when else None,
    }


def owner_of(category: MemoryCategory) -> OwnerScope:
    return OwnerScope.AGENT if category in AGENT_CATEGORIES else OwnerScope.USER


class CandidateExtractor:
    """Base extractor: renders its prompt, calls the LLM, keeps only its own categories."""

    name: str = ""
    prompt_id: str = ""
    categories: frozenset[MemoryCategory] = frozenset()
    # the LLM-free gate (`skip_reason`) runs before the call; off only to measure what it saves
    gated: ClassVar[bool] = True

    def wanted(self, categories_filter: list[MemoryCategory] | None) -> frozenset[MemoryCategory]:
        if not categories_filter:
            return self.categories
        return self.categories & frozenset(categories_filter)

    async def extract(
        self,
        messages: list[Message],
        archive: SessionArchive,
        ctx: RequestContext,
        llm: LLM,
        *,
        tools: list[ToolUse] | None = None,
        categories_filter: list[MemoryCategory] | None = None,
        usage: LLMUsage | None = None,
        proposed: list[ExtractedMemory] | None = None,
    ) -> ExtractionResult:
        """The candidates of this extractor's categories in `messages`: from its own LLM call,
        or, with `proposed`, from the memories the session's one extraction call proposed
        (`extraction.session`, asked for this extractor's categories: no call here)."""
        started = time.perf_counter()
        started_at = time.time()
        wanted = self.wanted(categories_filter)

        def report(status: ExtractorStatus, n: int, reason: str) -> ExtractorReport:
            return ExtractorReport(
                extractor=self.name,
                status=status,
                candidates=n,
                reason=reason,
                duration_ms=int((time.perf_counter() - started) * 1000),
                started_at=started_at,
                finished_at=time.time(),
            )

        own = [m for m in messages if not m.injected]
        if (why_not := self.no_call(own, tools or [], categories_filter)) is not None:
            return ExtractionResult(report=report(why_not[0], 0, why_not[1]))
        held = session_time(own)
        if proposed is not None:
            out = ExtractionOutput(memories=[m for m in proposed if m.category in wanted])
        else:
            variables = {
                **prompt_vars(own, tools or [], ctx),
                "summary": archive.summary,
                "key_topics": archive.key_topics,
            }
            try:
                out = await llm.complete_json(
                    self.prompt_id, variables, ExtractionOutput, ctx, usage
                )
            except LLMError as exc:
                if exc.transient:  # a timeout or overload: let the caller retry the extractor
                    raise
                return ExtractionResult(report=report(ExtractorStatus.FAILED, 0, str(exc)))
        ids = {m.id for m in own}
        candidates: list[CandidateMemory] = []
        dropped: dict[str, int] = defaultdict(int)
        for mem in out.memories:
            if mem.category not in wanted:
                dropped[f"category {mem.category.value} not handled by {self.name}"] += 1
                continue
            refs = [r for r in mem.source_refs if r in ids]
            if not refs:
                dropped["no valid source message ids"] += 1
                continue
            candidates.append(self._to_candidate(mem, refs, tools or [], held))
        if candidates:
            return ExtractionResult(
                report=report(ExtractorStatus.OK, len(candidates), ""), candidates=candidates
            )
        if out.memories:
            why = "; ".join(f"{k} ({v})" for k, v in dropped.items())
            reason = f"{len(out.memories)} proposed, all dropped: {why}"
        else:
            reason = self.empty_reason(own)
        return ExtractionResult(report=report(ExtractorStatus.EMPTY, 0, reason))

    def no_call(
        self,
        own: list[Message],
        tools: list[ToolUse],
        categories_filter: list[MemoryCategory] | None = None,
    ) -> tuple[ExtractorStatus, str] | None:
        """Why this extractor has nothing to ask the LLM about `own` (the session's messages,
        injected ones removed) — its report's status and reason — or None."""
        if not self.wanted(categories_filter):
            return ExtractorStatus.SKIPPED, "excluded by categories_filter"
        if not own:
            return (
                ExtractorStatus.EMPTY,
                "no messages left after removing context injected from memory",
            )
        if self.gated and (why := self.skip_reason(own, tools)):
            return ExtractorStatus.SKIPPED, f"gated: {why}"
        return None

    def skip_reason(self, messages: list[Message], tools: list[ToolUse]) -> str | None:
        """Why `messages` (injected ones already removed) cannot yield anything for this
        extractor's categories, decided without the LLM; None: call the LLM. The base class
        never skips; each extractor brings its gate (`ctxpipe.extraction.gates`)."""
        return None

    def empty_reason(self, messages: list[Message]) -> str:
        users = sum(1 for m in messages if m.role == "user")
        return (
            f"nothing for {', '.join(sorted(c.value for c in self.categories))} in "
            f"{len(messages)} messages ({users} from the user)"
        )

    def _to_candidate(
        self,
        mem: ExtractedMemory,
        refs: list[str],
        tools: list[ToolUse],
        session_time: datetime | None = None,
    ) -> CandidateMemory:
        common: dict[str, Any] = dict(
            category=mem.category,
            owner_scope=owner_of(mem.category),
            routing_key=mem.routing_key,
            abstract=mem.abstract,
            overview=mem.overview,
            content=mem.content,
            confidence=mem.confidence,
            source_refs=refs,
            event_time=mem.event_time,
            observed_at=session_time.isoformat() if session_time else None,
        )
        if mem.category is not MemoryCategory.SKILLS:
            return CandidateMemory(**common)
        name = mem.tool_name or mem.skill_name or mem.routing_key
        calls = [t for t in tools if t.name == name]
        return ToolSkillCandidate(
            **common,
            tool_name=mem.tool_name or (name if not mem.skill_name else ""),
            skill_name=mem.skill_name,
            call_count=len(calls),
            success_count=sum(1 for t in calls if t.success),
            total_duration_ms=sum(t.duration_ms for t in calls),
            total_tokens=sum(t.tokens for t in calls),
            best_for=mem.best_for,
            common_failures=mem.common_failures,
        )
