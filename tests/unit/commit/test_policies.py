"""Each policy's plan, as a user of the memory tree would see it."""

from __future__ import annotations

from conftest import TOOLS, commit, ctx, request

from ctxpipe.commit.policies.base import PlanContext
from ctxpipe.commit.policy_router import PolicyRouter, resolve_target_uri
from ctxpipe.core.enums import MemoryCategory, OwnerScope, WriteAction
from ctxpipe.core.models import CandidateMemory
from ctxpipe.providers.base import LLMUsage, run_sync
from ctxpipe.providers.rules import RulesLLM


def cand(category: MemoryCategory, key: str, abstract: str, **kw) -> CandidateMemory:  # type: ignore[no-untyped-def]
    owner = (
        OwnerScope.AGENT
        if category in (MemoryCategory.CASES, MemoryCategory.PATTERNS, MemoryCategory.SKILLS)
        else OwnerScope.USER
    )
    return CandidateMemory(
        category=category,
        owner_scope=owner,
        routing_key=key,
        abstract=abstract,
        content=kw.pop("content", abstract),
        confidence=0.9,
        source_refs=kw.pop("refs", ["m1"]),
        **kw,
    )


def pc(commit_id: str = "c1") -> PlanContext:
    return PlanContext(ctx=ctx(), commit_id=commit_id, llm=RulesLLM(), usage=LLMUsage())


def test_routing_is_deterministic_and_owner_scoped():
    p = pc("c1")
    ev = cand(MemoryCategory.EVENTS, "summit talk", "Presented at the summit")
    assert resolve_target_uri(ev, p) == resolve_target_uri(ev, pc("c1"))
    assert resolve_target_uri(ev, p) != resolve_target_uri(ev, pc("c2"))
    assert resolve_target_uri(ev, p).startswith("ctx://acme/users/alice/memories/events/")
    case = cand(MemoryCategory.CASES, "airflow import error", "Fix the import error")
    assert resolve_target_uri(case, p).startswith("ctx://acme/agents/helper/memories/cases/")
    pref = cand(MemoryCategory.PREFERENCES, "Code Style", "Prefers type hints")
    assert resolve_target_uri(pref, p) == "ctx://acme/users/alice/memories/preferences/code-style"
    prof = cand(MemoryCategory.PROFILE, "profile", "Data engineer")
    assert resolve_target_uri(prof, p) == "ctx://acme/users/alice/memories/profile"


def test_aggregate_topic_merges_same_routing_key(make_components):
    comp = make_components()
    router = PolicyRouter(comp.fs)
    first = run_sync(
        router.build_plan(
            cand(MemoryCategory.PREFERENCES, "editor", "Prefers Vim for editing"), pc("c1")
        )
    )
    assert first.plan.action is WriteAction.CREATE
    from ctxpipe.commit.context_writer import ContextWriter

    ContextWriter(comp.fs).apply_plan(ctx(), first.plan, "c1")
    second = run_sync(
        router.build_plan(
            cand(MemoryCategory.PREFERENCES, "editor", "Uses tmux with Vim every day", refs=["m7"]),
            pc("c2"),
        )
    )
    assert second.plan.action is WriteAction.MERGE
    assert second.plan.target_uri == first.plan.target_uri
    assert "tmux" in second.plan.node_patch["content"].lower()
    assert "vim" in second.plan.node_patch["content"].lower()
    assert second.plan.expected_version == 1


def test_append_only_creates_once_per_commit(make_components):
    comp = make_components()
    router = PolicyRouter(comp.fs)
    ev = cand(MemoryCategory.EVENTS, "moved to berlin", "Moved to Berlin in March 2026")
    plan = run_sync(router.build_plan(ev, pc("c1"))).plan
    assert plan.action is WriteAction.CREATE and plan.expected_version == 0
    from ctxpipe.commit.context_writer import ContextWriter

    ContextWriter(comp.fs).apply_plan(ctx(), plan, "c1")
    rerun = run_sync(router.build_plan(ev, pc("c1"))).plan
    assert rerun.action is WriteAction.SKIP
    other = run_sync(router.build_plan(ev, pc("c2"))).plan
    assert other.action is WriteAction.CREATE and other.target_uri != plan.target_uri


def test_skill_counters_accumulate_and_never_decrease(make_components):
    comp = make_components()
    msgs = [
        {"id": "m1", "role": "user", "content": "Count the events table please."},
        {"id": "m2", "role": "assistant", "content": "I ran sql_runner: there are 42 rows."},
        {"id": "m3", "role": "user", "content": "Great, thanks."},
    ]
    commit(comp, request(msgs, tools=TOOLS, commit_id="c1"))
    uri = "ctx://acme/agents/helper/memories/skills/sql-runner"
    s1 = comp.fs.read_node(uri).metadata["stats"]
    assert s1["call_count"] == 2 and s1["success_count"] == 1
    assert s1["total_duration_ms"] == 200 and s1["success_rate"] == 0.5
    assert "syntax error" in comp.fs.read_node(uri).metadata["common_failures"]

    commit(comp, request(msgs, tools=TOOLS[:1], session="s2", commit_id="c2"))
    s2 = comp.fs.read_node(uri).metadata["stats"]
    assert s2["call_count"] == 3 and s2["success_count"] == 2
    for k in ("call_count", "success_count", "total_duration_ms", "total_tokens"):
        assert s2[k] >= s1[k]
