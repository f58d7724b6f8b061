"""The rules provider's extractors on hand-written conversations (tests/fixtures/conversations).

Every assertion names a fact a person would expect AND the message it must be attributed to.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxpipe.core.llm_schemas import ExtractedMemory, ExtractionOutput
from ctxpipe.core.session import SessionInput, message_vars
from ctxpipe.providers.rules import RulesLLM

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conversations"
LLM = RulesLLM()


def load(name: str) -> SessionInput:
    return SessionInput.model_validate(json.loads((FIXTURES / f"{name}.json").read_text()))


def variables(session: SessionInput) -> dict[str, Any]:
    own = [m for m in session.messages if not m.injected]
    latest = max(m.created_at for m in own if m.created_at)
    return {
        "messages": message_vars(own),
        "summary": "",
        "key_topics": [],
        "tools": [t.model_dump() for t in session.used_tools],
        "user_id": session.user_id,
        "agent_id": session.agent_id,
        "session_time": latest.isoformat(),
    }


def extract(name: str, prompt: str) -> list[ExtractedMemory]:
    out = LLM.complete_json_sync(prompt, variables(load(name)), ExtractionOutput)
    return out.memories


def one(mems: list[ExtractedMemory], category: str, key: str | None = None) -> ExtractedMemory:
    hits = [m for m in mems if m.category == category and (key is None or m.routing_key == key)]
    assert len(hits) == 1, f"expected one {category}/{key}, got {[m.routing_key for m in hits]}"
    return hits[0]


def lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


# --------------------------------------------------------------------------- profile
def cited(mem: ExtractedMemory, *words: str) -> list[str]:
    """The ids cited by the lines of `mem` that carry every one of `words`."""
    out: list[str] = []
    for ln in lines(mem.overview):
        if all(w.lower() in ln.lower() for w in words):
            out.extend(r.strip() for r in ln.rsplit("[", 1)[-1].rstrip("]").split(","))
    return out


def test_profile_backend_developer() -> None:
    p = one(extract("backend_pool_exhaustion", "extraction.profile"), "profile", "profile")
    # each statement of the user about themselves, in the third person, citing its message
    assert cited(p, "name is Priya Raman") == ["m1"]
    assert cited(p, "The user works at Northwind Traders as a backend developer") == ["m1"]
    assert cited(p, "The user has been writing Go and Python for about six years") == ["m1"]
    assert "m1" in p.source_refs and "Northwind Traders" in p.abstract
    assert "Morning!" not in p.overview  # a greeting is no statement
    assert 0.5 <= p.confidence <= 0.95


def test_profile_facts_attributed_to_their_messages() -> None:
    p = one(extract("wedding_trip_planning", "extraction.profile"), "profile")
    assert cited(p, "The user is a nurse in Dublin") == ["t1"]
    assert cited(p, "vegetarian") == ["t5"]
    assert cited(p, "The user plays the cello in a community orchestra") == ["t7"]
    # nothing from the assistant's messages
    assert "guesthouse" not in p.overview and "Casa" not in p.overview


def test_profile_phd_student() -> None:
    p = one(extract("gnn_oom_research", "extraction.profile"), "profile")
    assert cited(p, "PhD student at ETH Zurich") == ["r1"]
    assert cited(p, "graph neural networks") == ["r1"]


# --------------------------------------------------------------------------- preferences
def test_preferences_from_attitudes_and_instructions() -> None:
    mems = extract("backend_pool_exhaustion", "extraction.preferences")
    said = {ln for m in mems for ln in lines(m.overview)}
    assert "- The user can't stand camelCase in Python [m9]" in said
    assert "- The user would rather use Neovim than VS Code. [m9]" in said
    # an instruction to the assistant about its replies is the response-style preference
    style = one(mems, "preferences", "response style")
    assert lines(style.overview) == ["- The user wants: please keep explanations short. [m9]"]
    assert all(m.source_refs == ["m9"] for m in mems)
    # "How do I check…" is a question, not a preference
    assert not any("check" in m.overview for m in mems)


@pytest.mark.parametrize(
    ("sentence", "instruction"),
    [
        ("Please keep explanations short.", True),
        ("Always answer in metric units!", True),  # an exclamation with a request's marker
        ("Use bullet points for the steps.", True),
        ("Wow, that looks great!", False),  # an exclamation: no request
        ("Keep it up, you're doing great!", False),
        ("Love that purple color!", False),  # the speaker's own attitude, subject left out
        ("I keep my notes in Obsidian.", False),  # a subject: a statement
    ],
)
def test_what_counts_as_a_standing_instruction(sentence: str, instruction: bool) -> None:
    from ctxpipe.providers.rules.extract import _instruction
    from ctxpipe.providers.rules.inputs import load_messages

    msg = load_messages([{"id": "m1", "role": "user", "content": sentence}])[0]
    assert (_instruction(msg, sentence) is not None) is instruction


def test_preferences_travel_and_food() -> None:
    mems = extract("wedding_trip_planning", "extraction.preferences")
    food = next(m for m in mems if "spicy" in m.overview)
    assert lines(food.overview) == ["- The user loves spicy food. [t5]"]
    assert food.abstract.endswith("The user loves spicy food")
    stay = next(m for m in mems if "guesthouses" in m.overview)
    assert cited(stay, "prefers small family-run guesthouses over big hotel chains") == ["t5"]


def test_no_preferences_without_statements() -> None:
    assert extract("gnn_oom_research", "extraction.preferences") == []


# --------------------------------------------------------------------------- entities / events
def test_entities_cite_only_the_turns_that_name_them() -> None:
    mems = extract("backend_pool_exhaustion", "extraction.entity_event")
    tomas = one(mems, "entities", "tomas-silva")
    assert tomas.abstract.startswith("Tomás Silva: The user's colleague Tomás Silva reviewed")
    assert tomas.source_refs == ["m10"]
    assert one(mems, "entities", "falcon").source_refs == ["m3"]
    assert one(mems, "entities", "northwind-traders").source_refs == ["m1"]
    assert one(mems, "entities", "pgbouncer").source_refs == ["m5"]
    for m in mems:  # every line carries the name its memory is about
        if m.category == "entities":
            name = m.abstract.split(":")[0]
            assert all(name in ln for ln in lines(m.overview)), m.overview


def test_entities_places_and_family() -> None:
    mems = extract("wedding_trip_planning", "extraction.entity_event")
    hannah = one(mems, "entities", "hannah")
    assert "The user's sister Hannah is getting married in Porto" in hannah.abstract
    assert hannah.source_refs == ["t3"]
    assert one(mems, "entities", "porto").source_refs == ["t3"]
    assert one(mems, "entities", "dublin").source_refs == ["t1", "t3"]
    assert one(mems, "entities", "casa-da-ribeira").source_refs == ["t7"]


def test_events_resolve_relative_dates() -> None:
    mems = extract("backend_pool_exhaustion", "extraction.entity_event")
    events = {m.event_time: m for m in mems if m.category == "events"}
    # session on Tuesday 2026-05-12: "yesterday" → 05-11, "on Friday" (past) → 05-08
    deploy = events["2026-05-11"]
    assert deploy.source_refs == ["m3"]
    assert "Falcon's new checkout flow yesterday (11 May 2026)" in deploy.content
    review = events["2026-05-08"]
    assert review.source_refs == ["m10"]
    assert "Tomás Silva reviewed the PR on Friday (8 May 2026)" in review.abstract


def test_events_past_and_planned() -> None:
    mems = extract("wedding_trip_planning", "extraction.entity_event")
    events = {m.event_time: m for m in mems if m.category == "events"}
    # a message's events are told in one line, dated by the first date it names: the
    # wedding "on June 6" (planned: the next June 6) and the flights "Last Saturday"
    wedding = events["2026-06-06"]
    assert wedding.source_refs == ["t3"]
    assert "Last Saturday (18 April 2026) the user booked the flights" in wedding.content


def test_events_absolute_and_week() -> None:
    mems = extract("gnn_oom_research", "extraction.entity_event")
    events = {m.event_time: m for m in mems if m.category == "events"}
    assert events["2026-03-02"].source_refs == ["r7"]
    assert "submitted" in events["2026-03-02"].abstract
    week = next(m for m in events.values() if m.source_refs == ["r8"])
    assert "(the week of" in week.content


# --------------------------------------------------------------------------- procedure
def test_case_confirmed_solution() -> None:
    mems = extract("backend_pool_exhaustion", "extraction.procedure")
    cases = [m for m in mems if m.category == "cases"]
    pool = next(m for m in cases if "operationalerror" in m.routing_key)
    assert pool.source_refs == ["m3", "m4", "m5"]
    assert "→" in pool.abstract and "PgBouncer" in pool.abstract.split("→")[1]
    ov = lines(pool.overview)
    assert any(ln.startswith("- solution:") and ln.endswith("[m4]") for ln in ov)
    assert any(ln.startswith("- outcome: confirmed") and ln.endswith("[m5]") for ln in ov)
    assert pool.confidence >= 0.85
    howto = next(m for m in cases if m is not pool)
    assert howto.source_refs == ["m7", "m8"]
    assert howto.abstract.startswith("How to check")
    assert howto.confidence < pool.confidence  # never confirmed


def test_case_picks_the_attempt_that_worked() -> None:
    mems = extract("gnn_oom_research", "extraction.procedure")
    case = one(mems, "cases")
    assert case.source_refs == ["r3", "r4", "r5", "r6", "r7"]
    ov = lines(case.overview)
    solution = next(ln for ln in ov if ln.startswith("- solution:"))
    assert solution.endswith("[r6]") and "mixed precision" in solution
    rejected = next(ln for ln in ov if ln.startswith("- rejected attempt:"))
    assert "[r4]" in rejected and "[r5]" in rejected
    assert "mixed precision" in case.abstract


def test_no_case_without_a_problem() -> None:
    mems = extract("wedding_trip_planning", "extraction.procedure")
    assert [m for m in mems if m.category == "cases"] == []


def test_patterns_routine_and_step_list() -> None:
    routine = one(extract("gnn_oom_research", "extraction.procedure"), "patterns")
    assert routine.source_refs == ["r1"]
    steps = [ln for ln in lines(routine.overview) if ln.startswith("- step")]
    assert len(steps) == 3
    assert "sync" in steps[0] and "smoke test" in steps[1] and "full sweep" in steps[2]
    assert "- kind: user routine" in lines(routine.overview)
    rollout = one(extract("backend_pool_exhaustion", "extraction.procedure"), "patterns")
    assert rollout.source_refs == ["m6"] and rollout.confidence < routine.confidence


def test_skills_from_tool_log() -> None:
    mems = extract("backend_pool_exhaustion", "extraction.procedure")
    sql = one(mems, "skills", "run_sql")
    assert sql.tool_name == "run_sql" and sql.skill_name == ""
    assert "pg_stat_activity" in sql.best_for
    assert sql.common_failures == "timeout after 30s: server did not respond (1x)"
    assert "- usage: 2 calls, 1 succeeded" in sql.overview
    gnn = extract("gnn_oom_research", "extraction.procedure")
    py = one(gnn, "skills", "python_exec")
    assert "CUDA out of memory" in py.common_failures and "(2x)" in py.common_failures
    arxiv = one(gnn, "skills", "arxiv_search")
    assert arxiv.skill_name == "arxiv_search" and "sampling" in arxiv.best_for
    booking = one(
        extract("wedding_trip_planning", "extraction.procedure"), "skills", "hotel_booking"
    )
    assert booking.common_failures == "HTTP 429: rate limited (1x)"


# --------------------------------------------------------------------------- invariants
@pytest.mark.parametrize(
    "name", ["backend_pool_exhaustion", "wedding_trip_planning", "gnn_oom_research"]
)
@pytest.mark.parametrize(
    "prompt",
    [
        "extraction.profile",
        "extraction.preferences",
        "extraction.entity_event",
        "extraction.procedure",
    ],
)
def test_refs_are_real_message_ids_and_confidence_in_range(name: str, prompt: str) -> None:
    session = load(name)
    ids = {m.id for m in session.messages}
    for m in extract(name, prompt):
        assert m.source_refs, m
        assert set(m.source_refs) <= ids, (m.routing_key, m.source_refs)
        assert 0.5 <= m.confidence <= 0.95
        assert m.abstract.strip() and "\n" not in m.abstract
        for ref in m.source_refs:  # every ref is cited in the text it supports
            assert f"{ref}" in m.overview + m.content or m.category == "skills"


@pytest.mark.parametrize(
    ("sentence", "fact"),
    [
        (
            "I now work as a machine learning engineer at Globex.",
            "The user now works as a machine learning engineer at Globex.",
        ),
        ("I'm currently based in Berlin.", "The user is currently based in Berlin."),
        (
            "I've got two cats named Miso and Tofu.",
            "The user has got two cats named Miso and Tofu.",
        ),
        (
            "I'm a nurse at St. Mary's Hospital in Accra.",
            "The user is a nurse at St. Mary's Hospital in Accra.",
        ),
        ("I'm a morning person.", "The user is a morning person."),
        ("I'm so happy!", None),  # a feeling of the moment with nothing to keep
        ("Do I work at Acme?", None),
    ],
)
def test_a_statement_about_oneself_is_kept_whole(sentence: str, fact: str | None) -> None:
    msgs = [{"id": "q1", "role": "user", "content": sentence}]
    out = LLM.complete_json_sync("extraction.profile", {"messages": msgs}, ExtractionOutput)
    if fact is None:
        assert out.memories == []
    else:
        assert lines(out.memories[0].overview) == [f"- {fact} [q1]"]
