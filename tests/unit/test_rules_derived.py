"""The rules provider's output is derived from the input: change the text, the output follows."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from ctxpipe.core.llm_schemas import ExtractedMemory, ExtractionOutput
from ctxpipe.core.session import SessionInput, message_vars
from ctxpipe.providers.rules import RulesLLM

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conversations"


def raw(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return data


def run(data: dict[str, Any], prompt: str) -> list[ExtractedMemory]:
    s = SessionInput.model_validate(data)
    variables = {
        "messages": message_vars(s.messages),
        "tools": [t.model_dump() for t in s.used_tools],
        "session_time": None,
    }
    return RulesLLM().complete_json_sync(prompt, variables, ExtractionOutput).memories


def rename(data: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    out = copy.deepcopy(data)
    for m in out["messages"]:
        m["content"] = m["content"].replace(old, new)
    return out


def test_renaming_people_and_places_renames_the_memories() -> None:
    data = rename(rename(raw("wedding_trip_planning"), "Hannah", "Beatriz"), "Porto", "Seville")
    ents = {m.routing_key: m for m in run(data, "extraction.entity_event")}
    assert "beatriz" in ents and "seville" in ents
    assert "hannah" not in ents and "porto" not in ents
    assert ents["beatriz"].abstract.startswith("Beatriz: The user's sister Beatriz")
    events = [m for m in run(data, "extraction.entity_event") if m.category == "events"]
    wedding = next(m for m in events if m.event_time == "2026-06-06")
    assert "beatriz" in wedding.routing_key and "Seville" in wedding.abstract


def test_moving_a_sentence_moves_its_source_ref() -> None:
    data = raw("backend_pool_exhaustion")
    moved = copy.deepcopy(data)
    sentence = " I've been writing Go and Python for about six years."
    moved["messages"][0]["content"] = moved["messages"][0]["content"].replace(sentence, "")
    moved["messages"][6]["content"] += sentence  # into m7
    before = run(data, "extraction.profile")[0]
    after = run(moved, "extraction.profile")[0]
    line = "- The user has been writing Go and Python for about six years."
    assert f"{line} [m1]" in before.overview
    assert f"{line} [m7]" in after.overview and f"{line} [m1]" not in after.overview
    assert "m7" in after.source_refs and "m7" not in before.source_refs


def test_swapping_messages_swaps_attribution() -> None:
    data = raw("backend_pool_exhaustion")
    swapped = copy.deepcopy(data)
    m9, m10 = swapped["messages"][8], swapped["messages"][9]
    m9["content"], m10["content"] = m10["content"], m9["content"]
    prefs = run(swapped, "extraction.preferences")
    assert prefs and all(p.source_refs == ["m10"] for p in prefs)
    tomas = next(
        m for m in run(swapped, "extraction.entity_event") if m.routing_key == "tomas-silva"
    )
    assert tomas.source_refs == ["m9"]


def test_changing_facts_changes_the_output() -> None:
    data = raw("backend_pool_exhaustion")
    edited = rename(data, "a backend developer", "a site reliability engineer")
    edited = rename(edited, "Northwind Traders", "Umbrella Health")
    p = run(edited, "extraction.profile")[0]
    assert "works at Umbrella Health as a site reliability engineer. [m1]" in p.overview
    assert "Northwind" not in p.overview + p.abstract + p.content
    ents = {m.routing_key for m in run(edited, "extraction.entity_event")}
    assert "umbrella-health" in ents and "northwind-traders" not in ents


def test_dates_follow_the_message_timestamps() -> None:
    data = raw("wedding_trip_planning")
    later = copy.deepcopy(data)
    for m in later["messages"]:
        m["created_at"] = m["created_at"].replace("2026-04-20", "2026-05-04")  # a Monday too

    def dated(data: dict[str, Any]) -> str:
        return next(m.content for m in run(data, "extraction.entity_event") if m.event_time)

    # the relative "last Saturday" moves with the session; the absolute "June 6" does not
    assert "Last Saturday (18 April 2026)" in dated(data)
    assert "Last Saturday (2 May 2026)" in dated(later)
    assert "June 6 (6 June 2026)" in dated(later)


def test_unrelated_chatter_yields_nothing() -> None:
    data = copy.deepcopy(raw("wedding_trip_planning"))
    data["messages"] = [
        {"id": "z1", "role": "user", "content": "hey, how's it going?"},
        {"id": "z2", "role": "assistant", "content": "All good! What can I do for you?"},
        {"id": "z3", "role": "user", "content": "nothing really, just saying hi"},
    ]
    data["used_tools"] = []
    for prompt in (
        "extraction.profile",
        "extraction.preferences",
        "extraction.entity_event",
        "extraction.procedure",
    ):
        assert run(data, prompt) == [], prompt
