"""`policy.dedup_decision` with the rules provider: one test per branch."""

from __future__ import annotations

from ctxpipe.core.enums import DedupDecision
from ctxpipe.core.llm_schemas import DedupDecisionOutput
from ctxpipe.providers.rules import RulesLLM


def decide(
    category: str,
    candidate: str,
    existing: str,
    similarity: float,
    existing_content: str = "",
    candidate_content: str = "",
) -> DedupDecisionOutput:
    return RulesLLM().complete_json_sync(
        "policy.dedup_decision",
        {
            "category": category,
            "candidate_abstract": candidate,
            "candidate_content": candidate_content,
            "existing_abstract": existing,
            "existing_content": existing_content,
            "similarity": similarity,
        },
        DedupDecisionOutput,
    )


RUN = "On 2026-03-08 the user ran the Berlin half marathon in 1:52."


def test_event_near_identical_is_skipped() -> None:
    out = decide("events", RUN, RUN, 0.99)
    assert out.decision is DedupDecision.SKIP
    assert "similarity 0.99" in out.reason and "Jaccard 1.00" in out.reason


def test_event_with_another_date_is_created() -> None:
    other = RUN.replace("2026-03-08", "2025-03-09")
    out = decide("events", other, RUN, 0.97)
    assert out.decision is DedupDecision.CREATE
    assert "2025-03-09" in out.reason


def test_similar_case_is_still_created() -> None:
    out = decide(
        "cases",
        "Airflow DAG fails with ModuleNotFoundError psycopg2 → install psycopg2-binary",
        "Airflow DAG fails with ModuleNotFoundError pandas → add pandas to the image",
        0.9,
    )
    assert out.decision is DedupDecision.CREATE
    assert "append-only" in out.reason


def test_mergeable_without_new_content_is_skipped() -> None:
    out = decide(
        "preferences",
        "Editor preferences: would rather use Neovim",
        "Editor preferences: would rather use Neovim than VS Code",
        0.93,
        existing_content="- would rather use Neovim than VS Code [m9]",
    )
    assert out.decision is DedupDecision.SKIP
    assert "no new content" in out.reason and "containment 1.00" in out.reason


def test_mergeable_with_new_details_is_merged() -> None:
    out = decide(
        "entities",
        "Hannah (person, the user's sister): Hannah is a dentist in Porto.",
        "Hannah (person, the user's sister): The user's sister Hannah lives in Porto.",
        0.88,
    )
    assert out.decision is DedupDecision.MERGE_EXISTING
    assert "dentist" in out.reason  # the new token is named


def test_unrelated_mergeable_is_created() -> None:
    out = decide(
        "preferences",
        "Food preferences: loves spicy food",
        "Editor preferences: would rather use Neovim than VS Code",
        0.41,
    )
    assert out.decision is DedupDecision.CREATE


def test_superseded_lines_are_not_existing_knowledge() -> None:
    # returning to a former employer is news even though "Acme" is in the old node's history
    out = decide(
        "profile",
        "User: works at Acme",
        "User: works at Globex",
        0.9,
        existing_content="- works at Acme [m1] (superseded: works at Globex)\n"
        "- works at Globex [m2]",
    )
    assert out.decision is DedupDecision.MERGE_EXISTING
