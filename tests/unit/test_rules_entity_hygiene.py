"""Entity hygiene of the rules extractor: a form of address is not a fact about a person, and an
entity needs a statement of the user about it (issue: greetings and names used to address the
other speaker became entity memories citing dozens of turns)."""

from __future__ import annotations

from typing import Any

import pytest

from ctxpipe.core.llm_schemas import ExtractionOutput
from ctxpipe.providers.rules import RulesLLM
from ctxpipe.providers.rules.entities import is_address


def _at(sentence: str, name: str) -> bool:
    start = sentence.index(name)
    return is_address(sentence, start, start + len(name))


@pytest.mark.parametrize(
    ("sentence", "name"),
    [
        ("Hey Jo!", "Jo"),
        ("Thanks, Priyanka!", "Priyanka"),
        ("Cool, thanks Jo!", "Jo"),
        ("Wow, Jo, that's a lovely garden.", "Jo"),
        ("Wow, Jo, I'm so happy for you.", "Jo"),
        ("Glad you liked it, Priyanka.", "Priyanka"),
        ("Priyanka, look at this photo!", "Priyanka"),
        ("Who helps you with the kids, Jo?", "Jo"),
    ],
)
def test_a_name_used_to_address_someone_is_an_address(sentence: str, name: str) -> None:
    assert _at(sentence, name)


@pytest.mark.parametrize(
    ("sentence", "name"),
    [
        ("I moved to Lisbon.", "Lisbon"),
        ("I love Lisbon!", "Lisbon"),
        ("Visited Porto!", "Porto"),
        ("We flew to Rome, I loved it.", "Rome"),
        ("I visited Paris, London, and Rome.", "London"),
        ("I visited Paris, London, and Rome.", "Rome"),
        ("Jo, Priyanka and I went hiking.", "Jo"),
        ("My sister Hannah is visiting.", "Hannah"),
    ],
)
def test_a_name_that_is_talked_about_is_not_an_address(sentence: str, name: str) -> None:
    assert not _at(sentence, name)


def test_address_check_stays_fast_on_huge_sentences() -> None:
    sentence = "A" * 200_000 + ", thanks Jo!"
    start = sentence.index("Jo")
    assert is_address(sentence, start, start + 2)


def _messages(turns: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [
        {
            "id": f"t{i}",
            "role": role,
            "name": "Sam" if role == "user" else "Jo",
            "content": text,
            "created_at": f"2026-05-0{1 + i // 10}T10:{i % 10:02d}:00Z",
        }
        for i, (role, text) in enumerate(turns)
    ]


def _entities(turns: list[tuple[str, str]]) -> dict[str, Any]:
    variables = {
        "messages": _messages(turns),
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
