"""The validity of profile and preference facts: the line syntax round trip and the rule."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import pytest

from ctxpipe.core.validity import (
    Validity,
    as_of_view,
    line_holds,
    parse_as_of,
    split_annotation,
    stamp_lines,
    strip_dates,
    synthesis_holds,
)
from ctxpipe.providers.rules.lines import Line, parse_lines, render_lines
from ctxpipe.providers.rules.merge import merge_bundle, merge_lines
from ctxpipe.retrieval.find.hit_rules import holds as _holds
from ctxpipe.retrieval.models import CandidateRow
from ctxpipe.retrieval.units.lexical import split_units

CLOSED = (
    '- lives in Berlin [m1, m3] — "I live in Berlin." (valid from 2023-05-01 until 2023-07-01)'
    " (superseded: lives in Lisbon)"
)
OPEN = '- lives in Lisbon [n1] — "We moved to Lisbon." (valid from 2023-07-01)'


@pytest.mark.parametrize(
    "line",
    [
        CLOSED,
        OPEN,
        "- works as a nurse [m1] (valid from 2023-05-01)",
        "- likes tea (valid until 2023-07-01) (superseded: dislikes tea)",
        "- lives in Berlin [m1] (superseded: lives in Munich)",  # written before validity
        "- lives in Berlin [m1]",
        "- prefers short answers",
    ],
)
def test_a_fact_line_round_trips(line: str) -> None:
    (fact,) = parse_lines(line)
    assert fact.bullet and render_lines([fact]) == line


def test_the_parts_of_a_closed_line() -> None:
    (fact,) = parse_lines(CLOSED)
    assert fact.text == "lives in Berlin" and fact.refs == ["m1", "m3"]
    assert fact.evidence == "I live in Berlin."
    v = fact.validity
    assert (v.valid_from, v.valid_to, v.superseded) == (
        "2023-05-01",
        "2023-07-01",
        "lives in Lisbon",
    )
    assert not fact.active
    (legacy,) = parse_lines("- lives in Berlin [m1] (superseded: lives in Munich)")
    v = legacy.validity
    assert (v.valid_from, v.valid_to, v.superseded) == ("", "", "lives in Munich")
    assert not legacy.active


def test_a_fact_with_dates_renders_them_after_the_evidence() -> None:
    fact = Line("lives in Porto", ["m9"], "Porto now.", Validity(valid_from="2024-01-02"))
    assert fact.render() == '- lives in Porto [m9] — "Porto now." (valid from 2024-01-02)'
    assert parse_lines(fact.render())[0] == fact


D = date.fromisoformat
# (valid_from, valid_to, superseded, as_of, holds)
CASES = [
    ("", "", "", None, True),  # an undated fact: always
    ("", "", "", D("1999-01-01"), True),
    ("2023-05-01", "", "", None, True),  # open: valid now
    ("2023-05-01", "", "", D("2023-04-30"), False),  # not yet learned
    ("2023-05-01", "", "", D("2023-05-01"), True),  # from is inclusive
    ("2023-05-01", "", "", D("2030-01-01"), True),  # still valid
    ("2023-05-01", "2023-07-01", "lives in Lisbon", None, False),  # closed: not now
    ("2023-05-01", "2023-07-01", "lives in Lisbon", D("2023-06-01"), True),
    ("2023-05-01", "2023-07-01", "lives in Lisbon", D("2023-07-01"), False),  # until exclusive
    ("2023-05-01", "2023-07-01", "lives in Lisbon", D("2023-04-01"), False),
    ("", "2023-07-01", "", D("1990-01-01"), True),  # no from: from the start
    ("", "2023-07-01", "", None, False),
    ("", "", "lives in Munich", None, False),  # superseded, end unknown
    ("", "", "lives in Munich", D("2023-06-01"), False),  # cannot be placed in time
    ("2023-05-01", "2023-05-01", "later in the session: x", D("2023-05-01"), False),
]


@pytest.mark.parametrize(("start", "end", "by", "as_of", "holds"), CASES)
def test_the_validity_rule(start: str, end: str, by: str, as_of: date | None, holds: bool) -> None:
    v = Validity(start, end, by)
    assert v.holds(as_of) is holds
    line = "- a fact" + v.render()
    assert line_holds(line, as_of) is holds
    assert split_annotation(line) == ("- a fact", v)


def test_a_synthesis_holds_from_the_session_that_wrote_it() -> None:
    assert synthesis_holds("2023-07-01T09:00:00+00:00", None)
    assert synthesis_holds("2023-07-01T09:00:00+00:00", D("2023-07-01"))
    assert not synthesis_holds("2023-07-01T09:00:00+00:00", D("2023-06-30"))
    assert synthesis_holds(None, D("2000-01-01"))  # undated: always


def test_as_of_a_date_a_line_does_not_know_its_future() -> None:
    line = (
        'lives in Berlin — "I live in Berlin." '
        + Validity("2023-05-01", "2023-07-01", "lives in Lisbon").render().strip()
    )
    assert as_of_view(line, D("2023-06-01")) == (
        'lives in Berlin — "I live in Berlin." (valid from 2023-05-01)'
    )
    assert as_of_view(line, None) == line


def test_as_of_is_a_date() -> None:
    assert parse_as_of("2023-06-01") == D("2023-06-01")
    assert parse_as_of(None) is None and parse_as_of("") is None
    with pytest.raises(ValueError, match="as_of"):
        parse_as_of("last june")


def test_stamping_dates_new_lines_and_closes_replaced_ones() -> None:
    old = "- lives in Berlin [m1] (valid from 2023-05-01)\n- works as a nurse [m1]"
    merged = (
        "- lives in Berlin [m1] (superseded: lives in Lisbon)\n"  # closed by this merge, undated
        "- works as a nurse [m1]\n"  # an older line stays undated
        "- lives in Lisbon [n1]\n"
        "Free text stays as it is."
    )
    assert stamp_lines(merged, "2023-07-01", old).splitlines() == [
        "- lives in Berlin [m1] (valid from 2023-05-01 until 2023-07-01)"
        " (superseded: lives in Lisbon)",
        "- works as a nurse [m1]",
        "- lives in Lisbon [n1] (valid from 2023-07-01)",
        "Free text stays as it is.",
    ]
    # stamping what is stamped changes nothing
    once = stamp_lines(merged, "2023-07-01", old)
    assert stamp_lines(once, "2023-07-01", old) == once
    # a line superseded before dates were kept keeps its unknown end
    legacy = "- lives in Rome (superseded: lives in Berlin)"
    assert stamp_lines(legacy, "2023-07-01", legacy) == legacy
    # a new node: every line from the session; one replaced within it closes the same day
    fresh = "- lives in Rome (superseded: later in the session: lives in Milan)\n- lives in Milan"
    assert stamp_lines(fresh, "2023-05-01").splitlines() == [
        "- lives in Rome (valid from 2023-05-01 until 2023-05-01)"
        " (superseded: later in the session: lives in Milan)",
        "- lives in Milan (valid from 2023-05-01)",
    ]
    assert stamp_lines(merged, "", old) == merged  # no session time: no dates


def test_the_rules_merge_closes_the_replaced_fact_with_the_new_facts_date() -> None:
    old = parse_lines("- lives in Berlin [m1] (valid from 2023-05-01)")
    new = parse_lines("- lives in Lisbon [n1] (valid from 2023-07-01)")
    merged, conflicts, added, _ = merge_lines(old, new, temporal=True)
    assert added == 1 and conflicts
    assert render_lines(merged).splitlines() == [
        "- lives in Berlin [m1] (valid from 2023-05-01 until 2023-07-01)"
        " (superseded: lives in Lisbon)",
        "- lives in Lisbon [n1] (valid from 2023-07-01)",
    ]
    out = merge_bundle(
        {
            "category": "profile",
            "existing_abstract": "User: lives in Berlin",
            "existing_overview": "- lives in Berlin [m1] (valid from 2023-05-01)",
            "existing_content": "- lives in Berlin [m1] (valid from 2023-05-01)",
            "new_abstract": "User: lives in Lisbon",
            "new_overview": "- lives in Lisbon [n1] (valid from 2023-07-01)",
            "new_content": "- lives in Lisbon [n1] (valid from 2023-07-01)",
        }
    )
    assert "Berlin" not in out["abstract"] and "Lisbon" in out["abstract"]
    assert "(valid from 2023-05-01 until 2023-07-01)" in out["content"]
    # a fact that is said again keeps the date it was first learned
    again, _, added, folded = merge_lines(merged, parse_lines("- lives in Lisbon [z1]"), True)
    assert (added, folded) == (0, 1)
    assert again[1].validity.valid_from == "2023-07-01" and again[1].refs == ["n1", "z1"]


def test_tags_do_not_read_the_dates() -> None:
    assert "valid" not in strip_dates(OPEN) and "2023" not in strip_dates(OPEN)


def _row(level: int, category: str = "profile", observed: str = "2023-07-01") -> CandidateRow:
    return CandidateRow(
        chunk_id="c1",
        uri="ctx://a/users/u/memories/profile",
        level=level,
        chunk_index=0,
        category=category,
        context_type="memory",
        observed_at=observed,
    )


def test_find_keeps_the_lines_that_hold() -> None:
    (closed,) = split_units(CLOSED, ["s1:m1", "s1:m3"], derived=True)
    (open_,) = split_units(OPEN, ["s2:n1"], derived=True)
    june = D("2023-06-01")
    assert not _holds(_row(2), closed, None) and _holds(_row(2), closed, june)
    assert _holds(_row(2), open_, None) and not _holds(_row(2), open_, june)
    # the L0 line says what holds since the last session that wrote the memory
    (l0,) = split_units("User: lives in Lisbon", ["s2:n1"], derived=True)
    assert _holds(_row(0), l0, None) and not _holds(_row(0), l0, june)
    # other memories and session archives are not dated
    assert _holds(_row(2, "entities"), closed, None)
    assert _holds(replace(_row(2), context_type="session"), closed, None)


def test_the_client_sends_as_of_as_an_iso_date() -> None:
    from ctxpipe.client import _calls as calls
    from ctxpipe.client.context_request import context_request
    from ctxpipe.client.find_request import find_request
    from ctxpipe.client.search_request import search_request

    who = {"user_id": "ann"}
    req = find_request("q", 5, D("2023-06-01"))
    assert calls.find(who, req).body["as_of"] == "2023-06-01"
    assert "as_of" not in calls.find(who, find_request("q", 5, None)).body
    ctx_req = context_request("q", None, None, "default", "", True, D("2023-06-01"))
    assert calls.build_context(who, ctx_req).body["as_of"] == "2023-06-01"
    search_req = search_request("q", None, None, "2023-06-01")
    assert calls.search(who, search_req).body["as_of"] == "2023-06-01"
