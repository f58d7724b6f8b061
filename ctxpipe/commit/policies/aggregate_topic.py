"""AggregateTopicPolicy: preferences, entities and patterns aggregate by routing key."""

from __future__ import annotations

from ctxpipe.commit.policies.base import MergePolicy, PlanContext, already_applied
from ctxpipe.core.enums import DedupDecision
from ctxpipe.core.models import CandidateMemory, ContextNode, WritePlan


class AggregateTopicPolicy(MergePolicy):
    name = "aggregate_topic"

    async def plan(
        self, candidate: CandidateMemory, uri: str, existing: ContextNode | None, pc: PlanContext
    ) -> WritePlan:
        if already_applied(existing, pc.commit_id):
            return self.skip_plan(candidate, uri, "already applied by this commit")
        if existing is not None:
            return await self.merge_plan(
                candidate, uri, existing, pc, f"topic {candidate.routing_key!r} exists"
            )
        if pc.dedup is None:
            return self.create_plan(candidate, uri, pc, "new topic (dedup disabled)")
        verdict = await pc.dedup.check(candidate, uri, pc)
        if verdict.decision is DedupDecision.SKIP:
            return self.skip_plan(candidate, verdict.merge_target or uri, verdict.reason, verdict)
        if verdict.decision is DedupDecision.MERGE_EXISTING and verdict.merge_target:
            if verdict.merge_target in pc.pending:  # folded by the router into that plan
                return self.create_plan(
                    candidate, verdict.merge_target, pc, verdict.reason, dedup=verdict
                )
            target = pc.dedup.read(verdict.merge_target)
            if target is not None:
                if already_applied(target, pc.commit_id):
                    return self.skip_plan(
                        candidate,
                        verdict.merge_target,
                        "similar node already updated by this commit",
                        verdict,
                    )
                return await self.merge_plan(
                    candidate, verdict.merge_target, target, pc, verdict.reason, dedup=verdict
                )
        return self.create_plan(candidate, uri, pc, f"new topic; {verdict.reason}", dedup=verdict)
