"""A query that names a date favours the lines dated then (`retrieval/units/date_match.py`)."""

from __future__ import annotations

from datetime import date
from typing import Any

import numpy as np
import pytest

from ctxpipe.core.dates import find_dates
from ctxpipe.retrieval.models import CandidateRow
from ctxpipe.retrieval.units.date_match import line_bonus, query_periods
from ctxpipe.retrieval.units.sentence_ranking import explode, rank_sentences
from ctxpipe.retrieval.units.unit_vectors import UnitVectors

TODAY = date(2024, 3, 6)


def row(text: str, refs: list[str], ctype: str = "session", **kw: Any) -> CandidateRow:
    return CandidateRow(
        chunk_id=f"c{abs(hash(text))}", uri=f"ctx://a/{ctype}/{abs(hash(text))}", level=2,
        chunk_index=0, rrf=0.03, sim=0.5, text_content=text, source_refs=refs,
        context_type=ctype, **kw,
    )  # fmt: skip


def test_each_grain_covers_its_period() -> None:
    def covers(text: str) -> tuple[date, date] | None:
        (span,) = find_dates(text, TODAY)
        return span.period()

    assert covers("on October 13, 2023") == (date(2023, 10, 13), date(2023, 10, 14))
    assert covers("in September 2023") == (date(2023, 9, 1), date(2023, 10, 1))
    assert covers("in December 2023") == (date(2023, 12, 1), date(2024, 1, 1))
    assert covers("in 2022") == (date(2022, 1, 1), date(2023, 1, 1))
    assert covers("last summer") == (date(2023, 6, 1), date(2023, 9, 1))
    assert covers("last weekend") == (date(2024, 3, 2), date(2024, 3, 4))
    assert covers("three weeks ago") is None  # a week named only roughly


def test_a_month_or_weekday_that_may_be_a_name_is_a_date_only_after_a_preposition() -> None:
    for query in ["What did June say about her job?", "What does August cook?", "Who is Friday?"]:
        assert query_periods(query, TODAY) == [], query
    assert query_periods("What did she do in June?", TODAY) == [
        (date(2023, 6, 1), date(2023, 7, 1))
    ]
    assert query_periods("Where was she on Friday?", TODAY) == [
        (date(2024, 3, 1), date(2024, 3, 2))
    ]


def test_a_span_not_judged_relative_resolves_the_same_with_one_parse_less(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A caller that does not read `relative` (a query's periods) gets the same spans and
    dates; each span is parsed once, not twice (against the day said and a day long before)."""
    import ctxpipe.core.dates as dates

    text = "What did she paint on October 13, 2023, and what did she cook last Friday?"
    judged = find_dates(text, TODAY)
    calls: list[tuple[str, date]] = []
    parse = dates._parse.__wrapped__

    def counted(span: str, base: date, past: bool = True) -> date | None:
        calls.append((span, base))
        return parse(span, base, past)

    monkeypatch.setattr(dates, "_parse", counted)
    plain = find_dates(text, TODAY, judge_relative=False)
    assert [(s.text, s.day, s.grain) for s in plain] == [(s.text, s.day, s.grain) for s in judged]
    assert [s.relative for s in judged] == [False, True]
    assert not any(s.relative for s in plain)
    assert len(calls) == len(plain) == 2 and {b for _, b in calls} == {TODAY}


def test_a_query_without_a_date_names_no_period() -> None:
    assert query_periods("What does Melanie do to destress?", TODAY) == []
    assert query_periods("What did Melanie paint yesterday?", TODAY) == [
        (date(2024, 3, 5), date(2024, 3, 6))
    ]


SEPT = "[D1:1] user (Mel) on 14 September 2023: I painted a sunset by the lake."
OCT = "[D2:1] user (Mel) on 13 October 2023: I painted a sunset by the lake."


def test_lines_said_in_the_named_period_get_the_bonus_and_memories_their_event_date() -> None:
    rows = [
        row(SEPT, ["s1:D1:1"]),
        row(OCT, ["s2:D2:1"]),
        row("Mel painted a sunset.", ["s2:D2:1"], "memory", event_time="2023-10-13"),
        row("Mel likes lakes.", ["s1:D1:1"], "memory"),
    ]
    ex = explode(rows)
    periods = query_periods("What did Mel paint on October 13, 2023?", TODAY)
    bonus = line_bonus(periods, ex.lines, ex.line_row, rows, weight=1.0, rrf_k=60.0)
    assert bonus is not None
    assert bonus.tolist() == pytest.approx([0.0, 1.0 / 61, 1.0 / 61, 0.0])
    assert line_bonus([], ex.lines, ex.line_row, rows, 1.0, 60.0) is None
    assert line_bonus(periods, ex.lines, ex.line_row, rows, 0.0, 60.0) is None


def test_a_line_that_speaks_of_the_named_period_gets_the_bonus_too() -> None:
    """Said in October, about September: "last month" resolved against the day it was said."""
    rows = [
        row("[D3:8] user (Mel) on 13 October 2023: Last month I got hurt and stopped pottery.",
            ["s3:D3:8"]),
        row("[D3:9] user (Mel) on 13 October 2023: I start again next week.", ["s3:D3:9"]),
        row("[D3:10] user (Mel) on 13 October 2023: In September I was at the lake.",
            ["s3:D3:10"]),
        row("Mel got hurt last month.", ["s3:D3:8"], "memory", event_time="2023-10-13"),
    ]  # fmt: skip
    ex = explode(rows)
    periods = query_periods("What setback did Mel face in September 2023?", TODAY)
    bonus = line_bonus(periods, ex.lines, ex.line_row, rows, weight=1.0, rrf_k=60.0)
    assert bonus is not None
    # a bare month may point either way (not resolved); a memory is dated by its event
    assert bonus.tolist() == pytest.approx([1.0 / 61, 0.0, 0.0, 0.0])
    october = query_periods("What did Mel do on 20 October 2023?", TODAY)
    after = line_bonus(october, ex.lines, ex.line_row, rows, 1.0, 60.0)
    assert after is not None
    assert after.tolist() == pytest.approx([0.0, 1.0 / 61, 0.0, 0.0])  # "next week"


def test_a_line_pointing_away_from_the_named_period_is_not_parsed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A line pointing back ("last week", "ago") said before the period, or pointing ahead
    ("next week") said after it, cannot speak of it: the same bonus, without the parser."""
    import ctxpipe.retrieval.units.date_match as date_match

    date_match._spoken_of.cache_clear()
    rows = [
        row("[D1:1] user (Mel) on 2 August 2023: Two weeks ago I sold a bowl.", ["s1:D1:1"]),
        row("[D1:2] user (Mel) on 2 August 2023: Next month I go to Rome.", ["s1:D1:2"]),
        row("[D5:1] user (Mel) on 20 November 2023: Next week I start pottery.", ["s5:D5:1"]),
        row("[D5:2] user (Mel) on 20 November 2023: Last month I got hurt.", ["s5:D5:2"]),
    ]  # fmt: skip
    ex = explode(rows)
    parsed: list[str] = []

    def counted(text: str, said_on: date, *args: Any, **kwargs: Any) -> Any:
        parsed.append(text)
        return find_dates(text, said_on, *args, **kwargs)

    periods = query_periods("What did Mel do in October 2023?", TODAY)
    september = query_periods("What did Mel do in September 2023?", TODAY)
    monkeypatch.setattr(date_match, "find_dates", counted)
    bonus = line_bonus(periods, ex.lines, ex.line_row, rows, weight=1.0, rrf_k=60.0)
    assert bonus is not None
    assert bonus.tolist() == pytest.approx([0.0, 0.0, 0.0, 1.0 / 61])
    # said in August, "next month" may still point into October: resolved (September)
    assert parsed == ["Next month I go to Rome.", "Last month I got hurt."]
    ahead = line_bonus(september, ex.lines, ex.line_row, rows, weight=1.0, rrf_k=60.0)
    assert ahead is not None
    assert ahead.tolist() == pytest.approx([0.0, 1.0 / 61, 0.0, 0.0])  # said in August


class _NoEmbedder:
    dimension = 4

    def encode(self, texts: list[str]) -> list[list[float]]:
        raise AssertionError("no unit is encoded when no chunk is ranked by cosine")


def test_the_line_said_on_the_named_day_ranks_first_among_equals() -> None:
    rows = [row(SEPT, ["s1:D1:1"]), row(OCT, ["s2:D2:1"])]
    ex = explode(rows)
    idf = {"painted": 1.0, "sunset": 1.0}
    vectors = UnitVectors(_NoEmbedder())  # type: ignore[arg-type]

    def first(bonus: np.ndarray | None) -> str:
        ranked = rank_sentences(
            rows, ex, np.zeros(4, dtype=np.float32), idf, vectors, dense_rows=0, line_bonus=bonus
        )
        return ranked[0].unit.refs[0]

    assert first(None) == "s1:D1:1"  # equal text, equal scores: the first row
    periods = query_periods("What did Mel paint on October 13, 2023?", TODAY)
    assert first(line_bonus(periods, ex.lines, ex.line_row, rows, 1.0, 60.0)) == "s2:D2:1"


def test_search_scales_a_dated_query_by_the_best_score_it_can_reach() -> None:
    from ctxpipe.retrieval.config import FindConfig
    from ctxpipe.retrieval.find.hybrid_finder import HybridFinder

    finder = HybridFinder(None, _NoEmbedder(), None, config=FindConfig())  # type: ignore[arg-type]
    plain = finder.best_score("What did Mel paint?")
    assert plain == finder.max_score == pytest.approx(6 / 61)
    # a line first in every ranking and dated then scores 7/61: still at most 1 once scaled
    assert finder.best_score("What did Mel paint on October 13, 2023?") == pytest.approx(7 / 61)
    off = HybridFinder(None, _NoEmbedder(), None, config=FindConfig(date_weight=0))  # type: ignore[arg-type]
    assert off.best_score("What did Mel paint on October 13, 2023?") == off.max_score


def test_warming_a_finder_loads_the_model_and_parsers_without_the_database() -> None:
    from ctxpipe.retrieval.find.hybrid_finder import HybridFinder

    class Counting:
        dimension = 4
        texts: list[str] = []

        def encode(self, texts: list[str]) -> list[list[float]]:
            self.texts.extend(texts)
            return [[1.0, 0.0, 0.0, 0.0] for _ in texts]

    embedder = Counting()

    class NoDatabase:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"warm-up used the database ({name})")

    finder = HybridFinder(NoDatabase(), embedder, None)  # type: ignore[arg-type]
    finder.warm()
    assert embedder.texts == ["warm up"]  # the model read one text: it is loaded
