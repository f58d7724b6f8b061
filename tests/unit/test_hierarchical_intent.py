"""Intent analysis glue (IntentAnalyzer) over the offline rules provider, plus the
merge of typed-query results and their scopes. No servers."""

from __future__ import annotations

import asyncio
from typing import Any

from ctxpipe.core.errors import LLMError
from ctxpipe.core.llm_schemas import TypedQuery
from ctxpipe.providers.rules import RulesLLM
from ctxpipe.retrieval.config import IntentConfig
from ctxpipe.retrieval.models import FindFilters, FindHit, TypedQueryResult
from ctxpipe.retrieval.search.intent_analyzer import IntentAnalyzer, normalise
from ctxpipe.retrieval.search.search_engine import merge_results, scope_filters


class BrokenLLM:
    name = "broken"

    async def complete_json(self, *a: Any, **k: Any) -> Any:
        raise LLMError("provider down", transient=True)

    def complete_json_sync(self, *a: Any, **k: Any) -> Any:
        raise LLMError("provider down", transient=True)


class RecordingLLM(RulesLLM):
    def __init__(self) -> None:
        super().__init__()
        self.variables: dict[str, Any] = {}

    def complete_json_sync(self, prompt_id: str, variables: dict[str, Any], *a: Any, **k: Any):  # type: ignore[no-untyped-def]
        self.variables = variables
        return super().complete_json_sync(prompt_id, variables, *a, **k)


def test_compound_question_becomes_typed_queries() -> None:
    res = IntentAnalyzer(RulesLLM()).analyze_sync(
        "Where does Alice live and how do I use the deploy_tool command?"
    )
    assert res.source == "llm"
    assert [q.context_type for q in res.queries] == ["memory", "skill"]
    assert [q.priority for q in res.queries] == [1, 2]


def test_chitchat_needs_no_retrieval() -> None:
    res = IntentAnalyzer(RulesLLM()).analyze_sync("thanks, that's great!")
    assert res.queries == [] and res.source == "llm"


def test_recent_messages_resolve_pronouns_and_are_capped() -> None:
    llm = RecordingLLM()
    recent = [
        {"id": f"m{i}", "role": "user", "content": f"filler message number {i}"} for i in range(8)
    ]
    recent.append({"id": "m9", "role": "user", "content": "My colleague Marco moved to Berlin."})
    recent.append(
        {"id": "m10", "role": "user", "content": "ignored", "injected": True}
    )  # recalled text is never sent back
    res = IntentAnalyzer(llm).analyze_sync("Where does he work now?", recent)
    assert len(llm.variables["recent_messages"]) == 5  # the last 5 messages only
    assert all(m["content"] != "ignored" for m in llm.variables["recent_messages"])
    assert llm.variables["max_queries"] == 5
    assert "Marco" in res.queries[0].query


def test_llm_failure_falls_back_to_the_raw_query() -> None:
    res = IntentAnalyzer(BrokenLLM()).analyze_sync("where is the Atlas runbook?")  # type: ignore[arg-type]
    assert res.source == "fallback" and "provider down" in res.reasoning
    assert [(q.query, q.context_type) for q in res.queries] == [
        ("where is the Atlas runbook?", "memory")
    ]
    res = asyncio.run(IntentAnalyzer(BrokenLLM()).analyze("x"))  # type: ignore[arg-type]
    assert res.source == "fallback"
    off = IntentAnalyzer(BrokenLLM(), IntentConfig(fallback_to_query=False))  # type: ignore[arg-type]
    assert off.analyze_sync("x").queries == []


def test_normalise_orders_by_priority_dedupes_and_caps() -> None:
    qs = [
        TypedQuery(query="b", priority=2),
        TypedQuery(query="a", priority=1),
        TypedQuery(query="A ", priority=3),
        TypedQuery(query="c", priority=5),
        TypedQuery(query="d", priority=4),
    ]
    assert [q.query for q in normalise(qs, 3)] == ["a", "b", "d"]


def test_typed_queries_look_in_their_scope() -> None:
    base = FindFilters(account_id="acme", owner_spaces=["users/u1", "agents/bot"])
    mem = scope_filters(base, TypedQuery(query="x", context_type="memory"), "bot")
    assert mem is base
    res = scope_filters(base, TypedQuery(query="x", context_type="resource"), "bot")
    assert res.uri_prefixes == ["ctx://acme/resources/"]
    skill = scope_filters(base, TypedQuery(query="x", context_type="skill"), "bot")
    assert skill.uri_prefixes == ["ctx://acme/skills/", "ctx://acme/agents/bot/"]
    assert skill.owner_spaces == base.owner_spaces  # narrowing never widens


def test_merge_interleaves_by_priority_and_dedupes() -> None:
    def hit(uri: str, score: float) -> FindHit:
        return FindHit(uri=f"ctx://acme/users/u1/{uri}", level=0, score=score)

    first = TypedQueryResult(query="a", context_type="memory", priority=1,
                             hits=[hit("x", 0.9), hit("y", 0.8)])  # fmt: skip
    second = TypedQueryResult(query="b", context_type="memory", priority=2,
                              hits=[hit("z", 0.95), hit("x", 0.99)])  # fmt: skip
    merged = merge_results([second, first], 10)
    assert [h.uri.rsplit("/", 1)[1] for h in merged] == ["x", "z", "y"]
    assert merged[0].score == 0.99  # the best score of a duplicate is kept
    assert len(merge_results([first, second], 2)) == 2
