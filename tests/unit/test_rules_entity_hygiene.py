"""Entity hygiene of the rules extractor: a form of address is not a fact about a person, and an
entity needs a statement of the user about it (issue: greetings and names used to address the
other speaker became entity memories citing dozens of turns). The speakers of a session, and
the short forms of their names, are never entities of it."""

from __future__ import annotations

from typing import Any

import pytest

from ctxpipe.core.llm_schemas import ExtractionOutput
from ctxpipe.providers.rules import RulesLLM


@pytest.mark.parametrize(
    "said",
    [
        "Hey Jo! Long time no chat, my garden is blooming.",
        "Wow, Jo, that's a lovely garden you have there.",
        "Priyanka, look at this photo of my garden in Porto!",
        "Glad you liked the garden, Priya.",
    ],
)
def test_a_speaker_addressed_by_name_or_short_name_is_no_entity(said: str) -> None:
    ents = _entities([("user", said)], other="Priyanka" if "Priya" in said else "Jo")
    assert "jo" not in ents and "priyanka" not in ents and "priya" not in ents


def _messages(turns: list[tuple[str, str]], other: str = "Jo") -> list[dict[str, Any]]:
    return [
        {
            "id": f"t{i}",
            "role": role,
            "name": "Sam" if role == "user" else other,
            "content": text,
            "created_at": f"2026-05-0{1 + i // 10}T10:{i % 10:02d}:00Z",
        }
        for i, (role, text) in enumerate(turns)
    ]


def _entities(turns: list[tuple[str, str]], other: str = "Jo") -> dict[str, Any]:
    turns = [*turns, ("assistant", "Thanks!")]  # the other speaker's name is in the session
    variables = {
        "messages": _messages(turns, other),
        "summary": "",
        "key_topics": [],
        "tools": [],
        "user_id": "sam",
        "agent_id": "jo",
        "session_time": "2026-05-01T10:59:00Z",
    }
    out = RulesLLM().complete_json_sync("extraction.entity_event", variables, ExtractionOutput)
    return {m.routing_key: m for m in out.memories if m.category == "entities"}


def test_greetings_and_thanks_to_the_other_speaker_make_no_entity() -> None:
    ents = _entities(
        [
            ("user", "Hey Jo! Long time no chat."),
            ("assistant", "Hi Sam! How was your week?"),
            ("user", "Busy, but good. Thanks, Jo!"),
            ("assistant", "Glad to hear it, Sam."),
            ("user", "Wow, Jo, you always cheer me up."),
        ]
    )
    assert "jo" not in ents and "sam" not in ents


def test_a_person_the_user_talks_about_keeps_only_the_statements() -> None:
    ents = _entities(
        [
            ("user", "Hey Jo! My cousin Marta visited us in Seville last weekend."),
            ("assistant", "How lovely! What did you two do?"),
            ("user", "Marta and I cooked paella for the whole family."),
            ("assistant", "Thanks for sharing, Sam!"),
        ]
    )
    marta = ents["marta"]
    assert "cousin" in marta.abstract
    assert marta.source_refs == ["t0", "t2"]
    assert "jo" not in ents
    assert not [ln for ln in marta.content.splitlines() if "Hey Jo" in ln.split("—")[0]]


def test_a_name_only_asked_about_is_not_an_entity() -> None:
    ents = _entities(
        [
            ("assistant", "Here's a pic of Biscuit, our new puppy."),
            ("user", "So cute! What's the funniest thing Biscuit has done?"),
            ("assistant", "Biscuit stole a whole loaf of bread yesterday."),
        ]
    )
    assert "biscuit" not in ents
