"""`retrieval.intent_analysis` with the rules provider."""

from __future__ import annotations

from typing import Any

import pytest

from ctxpipe.core.llm_schemas import IntentOutput
from ctxpipe.providers.rules import RulesLLM

RECENT = [
    {"id": "a", "role": "user", "content": "My sister Hannah is getting married in Porto."},
    {"id": "b", "role": "assistant", "content": "Congratulations to Hannah! Porto is lovely."},
]


def analyse(query: str, recent: list[dict[str, Any]] | None = None, n: int = 5) -> IntentOutput:
    return RulesLLM().complete_json_sync(
        "retrieval.intent_analysis",
        {"query": query, "recent_messages": recent or [], "max_queries": n},
        IntentOutput,
    )


@pytest.mark.parametrize("text", ["thanks!", "Hi there", "ok cool, thank you so much", "  "])
def test_chitchat_gives_no_queries(text: str) -> None:
    assert analyse(text, RECENT).queries == []


def test_compound_question_is_split() -> None:
    out = analyse("What editor do I prefer and where does my sister live?")
    assert [q.query for q in out.queries] == [
        "What editor do I prefer",
        "where does my sister live",
    ]
    assert [q.priority for q in out.queries] == [1, 2]
    assert out.queries[0].intent == "recall_preference"
    assert all(q.context_type == "memory" for q in out.queries)


def test_pronouns_resolve_against_recent_names() -> None:
    out = analyse("When is her wedding? Also, what hotel did we book there", RECENT)
    assert out.queries[0].query == "When is Hannah's wedding"
    assert "'her' → Hannah" in out.reasoning
    # a name in the earlier part of the same question is the nearest antecedent
    out = analyse("Where are the docs for PgBouncer; and what did we decide about it?")
    assert out.queries[1].query == "what did we decide about PgBouncer"


def test_context_types() -> None:
    out = analyse("How do I use the hotel_booking tool? Also where is the spec for the API docs")
    assert out.queries[0].context_type == "skill" and out.queries[0].intent == "tool_usage"
    assert out.queries[1].context_type == "skill"  # "API" is a tool word
    out = analyse("Find the design doc for project Falcon")
    assert out.queries[0].context_type == "resource"


def test_max_queries_is_respected() -> None:
    q = "What is my job? Where do I live? What food do I like? When did I book flights?"
    assert len(analyse(q).queries) == 4
    assert len(analyse(q, n=2).queries) == 2
