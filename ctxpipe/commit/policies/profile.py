"""ProfilePolicy: one fixed profile node per user, merged via `policy.merge_bundle`."""

from __future__ import annotations

from ctxpipe.commit.policies.base import MergePolicy, PlanContext, already_applied
from ctxpipe.core.models import CandidateMemory, ContextNode, WritePlan


class ProfilePolicy(MergePolicy):
    name = "profile"

    async def plan(
        self, candidate: CandidateMemory, uri: str, existing: ContextNode | None, pc: PlanContext
    ) -> WritePlan:
        if already_applied(existing, pc.commit_id):
            return self.skip_plan(candidate, uri, "already applied by this commit")
        if existing is None:
            return self.create_plan(candidate, uri, pc, "first profile facts for this user")
        return await self.merge_plan(candidate, uri, existing, pc, "profile is a fixed node")
