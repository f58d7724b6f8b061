"""SkillToolPolicy: one fixed node per tool/skill with never-decreasing usage counters."""

from __future__ import annotations

from typing import Any

from ctxpipe.commit.policies.base import MergePolicy, PlanContext, already_applied
from ctxpipe.core.models import CandidateMemory, ContextNode, ToolSkillCandidate, WritePlan

COUNTERS = ("call_count", "success_count", "total_duration_ms", "total_tokens")


def merged_stats(existing: dict[str, Any] | None, c: ToolSkillCandidate) -> dict[str, Any]:
    old = existing or {}
    stats: dict[str, Any] = {
        k: max(0, int(old.get(k, 0))) + max(0, int(getattr(c, k))) for k in COUNTERS
    }
    calls = stats["call_count"]
    stats["success_rate"] = round(stats["success_count"] / calls, 4) if calls else 0.0
    stats["avg_duration_ms"] = round(stats["total_duration_ms"] / calls, 1) if calls else 0.0
    return stats


def _guide(old: str, new: str) -> str:
    parts = [p.strip() for p in (old, new) if p and p.strip()]
    return "; ".join(dict.fromkeys(parts))


class SkillToolPolicy(MergePolicy):
    name = "skill_tool"

    async def plan(
        self, candidate: CandidateMemory, uri: str, existing: ContextNode | None, pc: PlanContext
    ) -> WritePlan:
        if already_applied(existing, pc.commit_id):
            return self.skip_plan(candidate, uri, "usage already counted for this commit")
        tc = (
            candidate
            if isinstance(candidate, ToolSkillCandidate)
            else ToolSkillCandidate(**candidate.model_dump(exclude={"kind"}))
        )
        old_meta = existing.metadata if existing else {}
        meta: dict[str, Any] = {
            "tool_name": tc.tool_name,
            "skill_name": tc.skill_name,
            "stats": merged_stats(old_meta.get("stats"), tc),
            "best_for": _guide(old_meta.get("best_for", ""), tc.best_for),
            "common_failures": _guide(old_meta.get("common_failures", ""), tc.common_failures),
        }
        if existing is None:
            return self.create_plan(tc, uri, pc, "first use of this tool", metadata=meta)
        return await self.merge_plan(
            tc, uri, existing, pc, "usage stats accumulated", metadata=meta
        )
