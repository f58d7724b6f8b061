"""Home and job in words nobody tuned the rules to: the profile facts, the entity types, the
third-person sentences, and what a later fact does to an earlier one."""

from __future__ import annotations

import pytest

from ctxpipe.core.llm_schemas import ExtractionOutput, MergeOutput
from ctxpipe.providers.rules import RulesLLM
from ctxpipe.providers.rules.entities import extract_entities
from ctxpipe.providers.rules.grammar import third_singular, to_third_person
from ctxpipe.providers.rules.inputs import load_messages

LLM = RulesLLM()


def profile_lines(*contents: str) -> list[str]:
    msgs = [{"id": f"m{i}", "role": "user", "content": c} for i, c in enumerate(contents, 1)]
    out = LLM.complete_json_sync("extraction.profile", {"messages": msgs}, ExtractionOutput)
    if not out.memories:
        return []
    return [
        line.split(" [")[0].removeprefix("- ") for line in out.memories[0].overview.splitlines()
    ]


@pytest.mark.parametrize(
    ("sentence", "facts"),
    [
        ("I now lead a team of six engineers at Acme.", ["leads a team of six engineers at Acme"]),
        ("We packed up and now call Munich home.", ["lives in Munich"]),
        ("I'm heading the data platform team now.", ["heads the data platform team"]),
        ("I've been promoted to engineering manager.", ["works as engineering manager"]),
        ("These days I manage a team of five.", ["manages a team of five"]),
        (
            "I switched jobs, I'm at Globex now as a staff engineer.",
            ["works as a staff engineer at Globex"],
        ),
        (
            "I left Acme last month and joined Initech.",
            ["works at Initech", "no longer works at Acme"],
        ),
        ("Our family settled in Lyon after the move.", ["lives in Lyon"]),
        ("My new home is Toronto.", ["lives in Toronto"]),
        ("I took over as head of research at Hooli.", ["works as head of research at Hooli"]),
        ("My wife and I relocated to Porto in the spring.", ["lives in Porto", "has a wife"]),
        ("I lived in Rome for two years.", ["lived in Rome"]),
        ("I've lived in Oslo for a decade.", ["lives in Oslo"]),
        (
            "I got promoted to senior designer at Umbrella.",
            ["works as senior designer at Umbrella"],
        ),
        ("I run a small bakery in the old town.", ["runs a small bakery in the old town"]),
        ("I used to live in Rome but now live in Madrid.", ["lives in Madrid"]),
        ("I'm now living in Munich.", ["lives in Munich"]),
        ("I'm now a product manager.", ["works as a product manager"]),
        ("I no longer work at Acme.", ["no longer works at Acme"]),
        ("I head up the design team at Figma.", ["heads the design team at Figma"]),
        ("I moved back home to Ohio.", ["lives in Ohio"]),
        ("Unfortunately, I lost my job at Door Dash.", ["no longer works at Door Dash"]),
    ],
)
def test_home_and_job_in_new_words(sentence: str, facts: list[str]) -> None:
    assert profile_lines(sentence) == facts


@pytest.mark.parametrize(
    "sentence",
    [
        "If I moved to Paris I would need to learn French.",
        "Do you live in Paris?",
        "I used to live in Rome.",
        "I lived in Rome for two years.",
        "I'd love to move to Lisbon someday.",
        "I'm moving to Oslo next year.",
        "I'll live in Paris after the wedding.",
        "We'll move to Lyon in June.",
        "I'd manage a team of ten if they asked.",
        "I don't live in Paris.",
        "I want to lead a team one day.",
        "I manage to get by.",
        "I'm running late for the office.",
        "We moved the meeting to Friday.",
        "We switched to Postgres last year.",
        "My sister lives in Porto.",
        "I called Anna yesterday.",
        "I joined Sarah for lunch.",
        "I work with Sarah at the office.",
        "I'm at Starbucks as a treat.",
    ],
)
def test_hedged_hypothetical_negated_and_other_people_state_no_home_or_job(sentence: str) -> None:
    lines = profile_lines(sentence)
    assert not [x for x in lines if x.startswith(("lives in", "works", "leads", "manages"))]


def test_a_later_home_and_job_in_one_session_supersede_the_earlier_ones() -> None:
    msgs = [
        {
            "id": "m1",
            "role": "user",
            "content": "I'm a data engineer at Acme and I live in Berlin.",
        },
        {
            "id": "m2",
            "role": "user",
            "content": "I moved to Munich and now lead a team at Initech.",
        },
    ]
    out = LLM.complete_json_sync("extraction.profile", {"messages": msgs}, ExtractionOutput)
    ov = out.memories[0].overview
    assert "- lives in Berlin [m1] (superseded: later in the session: lives in Munich)" in ov
    assert "- lives in Munich [m2]" in ov
    assert "- leads a team at Initech [m2]" in ov
    assert "works as a data engineer at Acme [m1] (superseded:" in ov


def test_a_title_without_employer_keeps_the_employer() -> None:
    lines = profile_lines("I work at Acme.", "These days I manage a team of five.")
    assert lines == ["works at Acme", "manages a team of five"]


def _merge(old: str, new: str) -> MergeOutput:
    return LLM.complete_json_sync(
        "policy.merge_bundle",
        {
            "category": "profile",
            "existing_abstract": "User: x",
            "existing_overview": old,
            "existing_content": old,
            "new_abstract": "User: y",
            "new_overview": new,
            "new_content": new,
        },
        MergeOutput,
    )


def test_leaving_ends_only_the_job_it_names_and_coming_back_ends_the_leaving() -> None:
    out = _merge(
        "- works as a data engineer at Acme [m1]\n- lives in Berlin [m1]",
        "- no longer works at Acme [n1]",
    )
    assert "- works as a data engineer at Acme [m1] (superseded: no longer works at Acme)" in (
        out.overview
    )
    assert "- lives in Berlin [m1]" in out.overview.splitlines()
    other = _merge("- works at Globex [m1]", "- no longer works at Acme [n1]")
    assert "- works at Globex [m1]" in other.overview.splitlines()
    back = _merge("- no longer works at Acme [m1]", "- works at Acme [n1]")
    assert "- no longer works at Acme [m1] (superseded: works at Acme)" in back.overview
    assert "- works at Acme [n1]" in back.overview.splitlines()


def _types(content: str) -> dict[str, str]:
    msgs = load_messages([{"id": "m1", "role": "user", "content": content}])
    return {
        m["routing_key"]: m["overview"].splitlines()[0].removeprefix("- type: ")
        for m in extract_entities(msgs, None)
    }


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            "I left Berlin and moved to Munich, where I now lead a team at Acme.",
            {"berlin": "place", "munich": "place", "acme": "organisation"},
        ),
        (
            "I moved from Berlin to Munich and now work at Acme.",
            {"berlin": "place", "munich": "place", "acme": "organisation"},
        ),
        (
            "I left Acme last month and joined Initech.",
            {"acme": "organisation", "initech": "organisation"},
        ),
        ("I quit Globex and moved to Lyon.", {"globex": "organisation", "lyon": "place"}),
    ],
)
def test_the_verb_decides_place_or_organisation(content: str, expected: dict[str, str]) -> None:
    types = _types(content)
    assert {k: types.get(k) for k in expected} == expected


@pytest.mark.parametrize(
    ("verb", "third"),
    [
        ("lead", "leads"),
        ("manage", "manages"),
        ("go", "goes"),
        ("have", "has"),
        ("be", "is"),
        ("do", "does"),
        ("study", "studies"),
        ("watch", "watches"),
        ("focus", "focuses"),
        ("play", "plays"),
        ("leads", "leads"),
        ("goes", "goes"),
        ("has", "has"),
        ("is", "is"),
        ("moved", "moved"),
        ("can", "can"),
    ],
)
def test_third_person_agreement(verb: str, third: str) -> None:
    assert third_singular(verb) == third


@pytest.mark.parametrize(
    ("first", "third"),
    [
        (
            "I now lead a team of six engineers at Acme.",
            "The user now leads a team of six engineers at Acme.",
        ),
        (
            "I moved to Munich and now lead a team.",
            "The user moved to Munich and now leads a team.",
        ),
        ("I no longer work at Acme.", "The user no longer works at Acme."),
        ("My wife and I live in Lyon.", "The user's wife and the user live in Lyon."),
        (
            "I work at Acme and I lead the team.",
            "The user works at Acme and the user leads the team.",
        ),
        ("I love hiking and have two dogs.", "The user loves hiking and has two dogs."),
    ],
)
def test_sentences_in_the_third_person(first: str, third: str) -> None:
    assert to_third_person(first) == third


def test_every_profile_rule_is_reached_through_the_gate() -> None:
    """A sentence is read by the profile rules only when `RULE_GATE` finds the user's "I",
    "my" or "call me" in it: every rule starts with one of those, so none is skipped."""
    from ctxpipe.providers.rules.profile import RULE_GATE, RULE_STARTS, RULES

    assert all(pattern.pattern.startswith(RULE_STARTS) for pattern, _, _ in RULES)
    for start in ["I", "my", "My", "call me", "Call me", "in my", "In my"]:
        assert RULE_GATE.search(f"so {start} x"), start
    assert profile_lines("Call me Ishmael.") == ["is named Ishmael"]
    assert RULE_GATE.search("we met at the station") is None
