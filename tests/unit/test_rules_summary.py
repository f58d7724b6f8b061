"""`compression.archive_summary` with the rules provider."""

from __future__ import annotations

import json
from pathlib import Path

from ctxpipe.core.models import ArchiveSummary
from ctxpipe.core.session import SessionInput, message_vars
from ctxpipe.providers.rules import RulesLLM

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conversations"


def summarize(name: str, max_tokens: int = 500) -> ArchiveSummary:
    s = SessionInput.model_validate(json.loads((FIXTURES / f"{name}.json").read_text()))
    variables = {
        "messages": message_vars(s.messages),
        "tools": [t.model_dump() for t in s.used_tools],
        "session_id": s.session_id,
        "max_tokens": max_tokens,
    }
    return RulesLLM().complete_json_sync("compression.archive_summary", variables, ArchiveSummary)


def test_pool_exhaustion_summary() -> None:
    a = summarize("backend_pool_exhaustion")
    assert "connection pool exhausted" in a.summary
    assert "Tools used: web_search (1 call), run_sql (2 calls, 1 failed)." in a.summary
    topics = " | ".join(a.key_topics).lower()
    assert "pgbouncer" in topics and "connection" in topics
    assert a.key_decisions == ["Let's go with PgBouncer for production too."]
    # m7's question was answered in m8; m10's never was
    assert a.unresolved == ["Should we also bump max_connections on the primary?"]


def test_trip_summary_decisions_and_open_question() -> None:
    a = summarize("wedding_trip_planning")
    assert "Porto" in a.summary
    assert any("Casa da Ribeira" in t for t in a.key_topics)
    assert a.key_decisions == ["That sounds perfect, let's book Casa da Ribeira for three nights."]
    # the assistant's questions were answered by the user; the last user question was not
    assert a.unresolved == ["Is it allowed as cabin luggage?"]


def test_research_summary_open_item_and_decision() -> None:
    a = summarize("gnn_oom_research")
    assert "CUDA out of memory" in a.summary
    assert "RuntimeError" in a.key_topics
    assert any("batch size" in t.lower() for t in a.key_topics)
    assert a.key_decisions == [
        "Also, we decided to move the sweeps to the new A100 nodes next week."
    ]
    assert "I still need to figure out how to get priority access on the cluster." in a.unresolved


def test_summary_respects_max_tokens() -> None:
    for name in ("backend_pool_exhaustion", "wedding_trip_planning", "gnn_oom_research"):
        long = summarize(name, 500)
        short = summarize(name, 24)
        assert len(short.summary.split()) <= 24 + 1  # "…" marks a cut sentence
        assert len(short.summary) < len(long.summary)


def test_summary_of_small_talk() -> None:
    variables = {
        "messages": [
            {"id": "a", "role": "user", "content": "hi!"},
            {"id": "b", "role": "assistant", "content": "Hello! How are you?"},
            {"id": "c", "role": "user", "content": "good thanks"},
        ],
        "tools": [],
        "session_id": "s",
        "max_tokens": 100,
    }
    a = RulesLLM().complete_json_sync("compression.archive_summary", variables, ArchiveSummary)
    assert a.summary == "Small talk; nothing substantive."
    assert a.key_decisions == [] and a.unresolved == []
