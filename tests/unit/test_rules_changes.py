"""Changes and reversals as a mechanism: a new statement on the topic of a valid line closes
it when it contradicts or replaces it, and accumulates otherwise (single-valued attributes —
home, work, name, response style — against the things a person has many of).

The cases are the development set (tests/data/changes_dev.yaml), run through the commit
pipeline; the held-out set beside it is only measured (bench/change_cases.py), never tested
here, so that no rule is fitted to it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from change_cases import DEV, judge, load_cases, run_case  # noqa: E402

from ctxpipe.core.validity import split_annotation  # noqa: E402
from ctxpipe.providers.rules.topics import slot_of  # noqa: E402

CASES = load_cases(DEV)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_a_development_case_is_handled(case: dict[str, Any], tmp_path: Path) -> None:
    outcome = run_case(case, tmp_path)
    assert outcome.handled, "\n".join(outcome.lines)


def test_a_closed_line_keeps_when_it_held(tmp_path: Path) -> None:
    case = next(c for c in CASES if c["expect"] == "supersede")
    lines = run_case(case, tmp_path).lines
    closed = [ln for ln in lines if split_annotation(ln)[1].closed]
    assert closed, lines
    for ln in closed:  # learned in the first session, replaced in the second, named
        v = split_annotation(ln)[1]
        assert (v.valid_from, v.valid_to) == ("2024-03-01", "2024-04-02") and v.superseded


def test_the_judge_reads_both_outcomes() -> None:
    lines = [
        "- The user lives in Berlin. [s1:u1] (valid from 2024-03-01 until 2024-04-02)"
        " (superseded: The user lives in Porto.)",
        "- The user lives in Porto. [s2:u2] (valid from 2024-04-02)",
    ]
    move = {"expect": "supersede", "old": "Berlin", "new": "Porto"}
    assert judge(move, lines)
    assert not judge({**move, "expect": "accumulate"}, lines)
    assert not judge(move, [ln.split(" (valid")[0] for ln in lines])  # nothing closed


@pytest.mark.parametrize(
    ("line", "slot"),
    [
        ("The user lives in Lisbon.", "home"),
        ("Big news: The user left Berlin and moved to Munich", "home"),
        ("The user is a nurse at St. Mary's Hospital in Accra.", "work"),
        ("The user now leads a team of six engineers at Initech.", "work"),
        ("The user's name is Priya", "name"),
        ("prefers short answers", "response style"),
        ("The user wants: please keep explanations short.", "response style"),
        ("The user's sister Hannah lives in Cork.", None),  # someone else's home
        ("The user has a dog called Pixel; her name is Miso.", None),  # not the user's name
        ("The user and others agreed to move the nightly jobs to dbt.", None),
        ("The user loves jazz.", None),
        ("The user joined Stripe last month.", "work"),
        ("The user works in marketing.", "work"),
        # a noun phrase is the subject, not the user: "work" is a noun there
        ("Now the hard work starts to turn the user's dream into a reality.", None),
        ("That job was a great fit for the user.", None),
        # a work verb of an activity, not of a job
        ("The user has been working on building up confidence.", None),
        ("The user would appreciate help with managing their social media.", None),
    ],
)
def test_single_valued_attributes(line: str, slot: str | None) -> None:
    assert slot_of(line) == slot


def test_a_line_that_sets_two_attributes_closes_the_old_value_of_each() -> None:
    from ctxpipe.providers.rules.topics import slots_of

    moved = "The user left Berlin and moved to Munich, where the user now leads a team at Initech."
    assert slots_of(moved) == ("home", "work")
    assert slots_of("The user lives in Lisbon.") == ("home",)
    assert slots_of("The user loves jazz.") == ()


@pytest.mark.parametrize(
    ("old", "new"),
    [  # one common word between two lines is not a topic; nor is the owner's name
        (
            "Caroline's friends are their rocks and give Caroline the strength to push on.",
            "They're a huge part of Caroline's journey and remind Caroline to never give up!",
        ),
        (
            "It made Caroline think how much work is left for LGBTQ rights.",
            "Now Caroline's relationships feel more genuine.",
        ),
        (
            "Jon is gonna keep on going and never quit.",
            "Jon will keep pushing and working to make their dreams happen.",
        ),
    ],
)
def test_lines_that_share_a_word_but_not_a_topic_both_stay_valid(old: str, new: str) -> None:
    from ctxpipe.providers.rules.lines import parse_lines
    from ctxpipe.providers.rules.merge import merge_lines

    owner = old.split()[0].removesuffix("'s")
    merged, conflicts, added, _ = merge_lines(
        parse_lines(f"- {old} [m1]"), parse_lines(f"- {new} [m2]"), True, owner
    )
    assert added == 1 and not conflicts
    assert all(ln.active for ln in merged)


def test_a_reversal_on_the_same_topic_still_closes_the_line() -> None:
    from ctxpipe.providers.rules.lines import parse_lines
    from ctxpipe.providers.rules.merge import merge_lines

    old = parse_lines("- Ana loves running in the morning. [m1]")
    new = parse_lines("- Ana doesn't love running anymore. [m2]")
    merged, conflicts, _, _ = merge_lines(old, new, True, "Ana")
    assert conflicts and not merged[0].active and merged[1].active
