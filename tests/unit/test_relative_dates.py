"""Relative dates made absolute: the calendar spans (weekends, seasons, parts of the day) and
the archive lines `build_context` shows an agent."""

from __future__ import annotations

from datetime import date, datetime

import pytest

from ctxpipe.core.dates import day_of, find_dates, resolve, strip_dates
from ctxpipe.retrieval.context.candidates import hit_candidates
from ctxpipe.retrieval.context.dated_lines import dated_text, said_on, with_dates
from ctxpipe.retrieval.models import FindHit
from ctxpipe.retrieval.units.lexical import Unit

FRI = date(2023, 8, 11)  # a Friday in summer


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("we celebrated last night", "10 August 2023"),
        ("yesterday morning I ran", "10 August 2023"),
        ("tomorrow evening we fly", "12 August 2023"),
        ("last weekend we hiked", "the weekend of 5 August 2023"),
        ("this weekend we rest", "the weekend of 12 August 2023"),
        ("next weekend we move", "the weekend of 19 August 2023"),
        # summer 2023 is not over on 11 August: the last one that ended is 2022's
        ("our camping trip last summer", "summer 2022"),
        ("last spring was wet", "spring 2023"),
        ("we plan it for next summer", "summer 2024"),
        ("this winter will be cold", "winter 2023-24"),
        ("last fall we moved", "autumn 2022"),
    ],
)
def test_calendar_spans_resolve_against_the_day_they_were_said(text: str, label: str) -> None:
    (span,) = find_dates(text, FRI)
    assert span.relative
    assert span.label() == label


def test_a_winter_begun_in_december_is_this_winter_in_january() -> None:
    (span,) = find_dates("this winter is mild", date(2024, 1, 15))
    assert span.label() == "winter 2023-24"
    (span,) = find_dates("last winter was mild", date(2024, 1, 15))
    assert span.label() == "winter 2022-23"


def test_the_resolved_calendar_spans_are_stripped_with_their_dates() -> None:
    text, _ = resolve("Last weekend we hiked and last summer we swam.", FRI)
    assert text == (
        "Last weekend (the weekend of 5 August 2023) we hiked and last summer (summer 2022) "
        "we swam."
    )
    assert strip_dates(text).split() == ["we", "hiked", "and", "we", "swam."]


def test_archive_lines_get_the_absolute_date_of_each_directed_span() -> None:
    line = Unit(
        "Ann (8 May 2023): We went camping last month, and next year we go again.",
        ["s1:D1:3"],
        prefix="Ann (8 May 2023): ",
    )
    (dated,) = with_dates([line])
    assert dated.text == (
        "Ann (8 May 2023): We went camping last month (April 2023), and next year (2024) "
        "we go again."
    )
    assert (dated.refs, dated.prefix) == (line.refs, line.prefix)
    assert said_on(line) == date(2023, 5, 8)


def test_undirected_or_already_stated_dates_are_left_as_they_are() -> None:
    day = date(2023, 5, 8)
    # a bare weekday or month may point either way; "this morning" is the header's own day
    assert dated_text("See you Friday, in June.", day) == "See you Friday, in June."
    assert dated_text("I ran this morning, this week.", day) == "I ran this morning, this week."
    # lines without a dated header, and memory lines, are not touched
    plain = Unit("Ann: we met last week", [], prefix="Ann: ")
    memory = Unit("Ann moved to Lisbon last year (2022).", ["s:1"])
    assert with_dates([plain, memory]) == [plain, memory]


def test_a_speaker_named_after_a_month_does_not_hide_the_date() -> None:
    line = Unit(
        "April (8 May 2023): We went camping last month.", [], prefix="April (8 May 2023): "
    )
    assert with_dates([line])[0].body == "We went camping last month (April 2023)."


def test_only_written_dates_are_stripped_not_other_parentheses() -> None:
    text = "Ann hiked last winter (winter 2022-23) with Tom (age 34), finishing (top 10)."
    assert strip_dates(text).split() == ["Ann", "hiked", "with", "Tom", "(age", "34),",
                                         "finishing", "(top", "10)."]  # fmt: skip


def test_build_context_shows_an_archive_hit_with_its_dates_resolved() -> None:
    hit = FindHit(
        uri="ctx://user/ann/sessions/s1",
        context_type="session",
        level=2,
        score=0.9,
        text="Ann (14 August 2023): Last night we celebrated my daughter's birthday.",
        source_refs=["s1:D5:1"],
    )
    (cand,) = hit_candidates([hit], "retrieval", 70, None)
    view = cand.view(0)
    assert view is not None
    assert [u.text for u in view] == [
        "Ann (14 August 2023): Last night (13 August 2023) we celebrated my daughter's birthday."
    ]
    assert view[0].refs == ["s1:D5:1"]


@pytest.mark.parametrize(
    ("value", "day"),
    [
        ("8 May 2023", date(2023, 5, 8)),
        ("2023-05-08", date(2023, 5, 8)),
        ("2023-05-08T14:00:00+00:00", date(2023, 5, 8)),
        ("2023-05-08 14:00", date(2023, 5, 8)),
        (datetime(2023, 5, 8, 23, 59), date(2023, 5, 8)),
        (date(2023, 5, 8), date(2023, 5, 8)),
        ("", None),
        (None, None),
        ("yesterday", None),
        ("31 February 2023", None),
    ],
)
def test_the_day_of_a_stored_or_written_date(value: object, day: date | None) -> None:
    """Archive headers, stored times and ISO dates all name their day; anything else none."""
    assert day_of(value) == day
