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
    ],
)
def test_single_valued_attributes(line: str, slot: str | None) -> None:
    assert slot_of(line) == slot
