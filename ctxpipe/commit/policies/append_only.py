"""AppendOnlyPolicy: events and cases always create a node, under a deterministic URI."""

from __future__ import annotations

from ctxpipe.commit.policies.base import MergePolicy, PlanContext
from ctxpipe.core.enums import DedupDecision
from ctxpipe.core.models import CandidateMemory, ContextNode, WritePlan


class AppendOnlyPolicy(MergePolicy):
    name = "append_only"

    async def plan(
        self, candidate: CandidateMemory, uri: str, existing: ContextNode | None, pc: PlanContext
    ) -> WritePlan:
        # The URI is derived from (commit id, candidate): it exists only on a re-run.
        if existing is not None:
            return self.skip_plan(candidate, uri, "already created by this commit (re-run)")
        if pc.dedup is not None:
            verdict = await pc.dedup.check(candidate, uri, pc)
            if verdict.decision is DedupDecision.SKIP:
                return self.skip_plan(
                    candidate, verdict.merge_target or uri, verdict.reason, verdict
                )
            return self.create_plan(
                candidate, uri, pc, f"append-only; {verdict.reason}", dedup=verdict
            )
        return self.create_plan(candidate, uri, pc, "append-only: always a new node")
