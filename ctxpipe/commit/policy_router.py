"""PolicyRouter: category → policy, target URI resolution, and in-commit plan folding."""

from __future__ import annotations

from ctxpipe.commit.payloads import PlanItem
from ctxpipe.commit.policies.aggregate_topic import AggregateTopicPolicy
from ctxpipe.commit.policies.append_only import AppendOnlyPolicy
from ctxpipe.commit.policies.base import MergePolicy, PlanContext, merge_texts
from ctxpipe.commit.policies.profile import ProfilePolicy
from ctxpipe.commit.policies.skill_tool import SkillToolPolicy
from ctxpipe.core.enums import MemoryCategory as C
from ctxpipe.core.enums import OwnerScope, WriteAction
from ctxpipe.core.errors import CtxError
from ctxpipe.core.models import CandidateMemory, ContextNode, ToolSkillCandidate, stable_id
from ctxpipe.core.uri import CtxURI, slugify
from ctxpipe.fs import ContextFS

CATEGORY_POLICY_MAP: dict[C, str] = {
    C.PROFILE: "profile",
    C.PREFERENCES: "aggregate_topic",
    C.ENTITIES: "aggregate_topic",
    C.EVENTS: "append_only",
    C.CASES: "append_only",
    C.PATTERNS: "aggregate_topic",
    C.SKILLS: "skill_tool",
}

DEFAULT_POLICIES: dict[str, MergePolicy] = {
    p.name: p
    for p in (ProfilePolicy(), AggregateTopicPolicy(), AppendOnlyPolicy(), SkillToolPolicy())
}


def owner_root(c: CandidateMemory, pc: PlanContext) -> str:
    a = pc.ctx.account_id
    if c.owner_scope is OwnerScope.AGENT:
        if pc.agent_memory == "per_user":  # the user's own space: nobody else reads it
            return f"ctx://{a}/users/{pc.ctx.user_id}/memories/agents/{pc.ctx.agent_id}"
        return f"ctx://{a}/agents/{pc.ctx.agent_id}/memories"
    return f"ctx://{a}/users/{pc.ctx.user_id}/memories"


def resolve_target_uri(c: CandidateMemory, pc: PlanContext) -> str:
    """Deterministic target: fixed for profile/skills, by routing key for topics, and by
    (commit id, candidate) for append-only categories so a re-run creates nothing new."""
    root = owner_root(c, pc)
    if c.category is C.PROFILE:
        return f"{root}/profile"
    if c.category is C.SKILLS:
        name = c.routing_key
        if isinstance(c, ToolSkillCandidate):
            name = c.tool_name or c.skill_name or c.routing_key
        return f"{root}/skills/{slugify(name)}"
    slug = slugify(c.routing_key, max_len=48)
    if c.category in (C.EVENTS, C.CASES):
        suffix = stable_id(pc.commit_id, c.category.value, slugify(c.routing_key), length=8)
        return f"{root}/{c.category.value}/{slug}-{suffix}"
    return f"{root}/{c.category.value}/{slug}"


class PolicyRouter:
    def __init__(self, fs: ContextFS, policies: dict[str, MergePolicy] | None = None) -> None:
        self._fs = fs
        self._policies = policies or DEFAULT_POLICIES

    def select_policy(self, c: CandidateMemory) -> MergePolicy:
        return self._policies[CATEGORY_POLICY_MAP[c.category]]

    def _existing(self, uri: str, pc: PlanContext) -> ContextNode | None:
        if self._fs.stat_node(uri).version == 0:
            return None
        try:
            return self._fs.read_node(uri, ctx=pc.ctx)
        except CtxError:
            return None

    async def build_plan(self, c: CandidateMemory, pc: PlanContext) -> PlanItem:
        uri = str(CtxURI.parse(resolve_target_uri(c, pc)).node)
        plan = await self.select_policy(c).plan(c, uri, self._existing(uri, pc), pc)
        return PlanItem(plan=plan, candidates=[c])

    async def plan_all(self, candidates: list[CandidateMemory], pc: PlanContext) -> list[PlanItem]:
        """Plan every candidate; a second candidate for a target already planned in this
        commit is folded into that plan (merged), never written as a competing version."""
        items: list[PlanItem] = []
        by_target: dict[str, PlanItem] = {}
        if pc.dedup is not None:
            await pc.dedup.prime([(c, resolve_target_uri(c, pc)) for c in candidates])
        for c in candidates:
            item = await self.build_plan(c, pc)
            plan = item.plan
            held = by_target.get(plan.target_uri)
            if plan.action is WriteAction.SKIP or held is None:
                items.append(item)
                if plan.action is not WriteAction.SKIP:
                    by_target[plan.target_uri] = item
                    pc.pending[plan.target_uri] = plan
                continue
            merged = await merge_texts(pc, c.category, held.plan.node_patch, plan.node_patch)
            hp = held.plan
            hp.node_patch = {
                "abstract": merged.abstract,
                "overview": merged.overview,
                "content": merged.content,
            }
            hp.source_refs = list(dict.fromkeys([*hp.source_refs, *plan.source_refs]))
            hp.metadata_patch = {**plan.metadata_patch, **hp.metadata_patch}
            hp.reason = f"{hp.reason}; folded {c.routing_key!r} from this commit"
            held.candidates.append(c)
        return items
