"""A query that names a day, a month or a year favours what was said (or happened) then.

"What did Melanie paint on October 13, 2023?", "what setback did she face in September
2023?", "what did I tell you last Monday?": the date is the strongest clue such a question
has, and neither the full-text nor the vector ranking reads it as a date. `find` resolves
the dates a query names (`ctxpipe.core.dates`; a relative one against the request's `as_of`,
else today) into periods — a day, a weekend, a month, a season, a year — and every candidate
line dated inside one of them gets one more reciprocal-rank term in the fusion, as if first in
a ranking of its own (all such lines alike). A line's date is the day its turn was said (an
archive line's header), for a memory the date of the event it records, else of the session it
was learned from. An archive line also speaks of the periods its directed relative dates name,
resolved against the day it was said: "last month I got hurt", said on 13 October 2023, is
about September 2023 and gets the term for a query about September. A query that names no
date changes nothing.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence
from datetime import date, timedelta
from functools import lru_cache

import numpy as np

from ctxpipe.core.dates import BACKWARD, DIRECTED, FORWARD, Period, find_dates
from ctxpipe.retrieval.models import CandidateRow
from ctxpipe.retrieval.units.lexical import Unit
from ctxpipe.retrieval.units.snippets import hit_date

# a bare month or weekday is a date after one of these ("in May", "on Friday"), else maybe a
# name ("What did June say?", "Who is Friday?")
_NAMES = (
    frozenset(calendar.month_name[1:])
    | frozenset(calendar.month_abbr[1:])
    | frozenset(calendar.day_name)
)
_DATE_LEAD = re.compile(
    r"\b(?:in|on|since|during|by|until|till|before|after|from|of|early|mid|late)\s+$",
    re.IGNORECASE,
)


def query_periods(query: str, today: date) -> list[Period]:
    """The periods the dates of `query` name (relative ones resolved against `today`)."""
    out: list[Period] = []
    for span in find_dates(query, today, judge_relative=False):
        name = span.text.strip().rstrip(".").title() in _NAMES
        if name and not _DATE_LEAD.search(query[: span.start]):
            continue
        p = span.period()
        if p is not None and p not in out:
            out.append(p)
    return out


def _day(iso: str) -> date | None:
    try:
        return date.fromisoformat(iso) if iso else None
    except ValueError:
        return None


def line_bonus(
    periods: Sequence[Period],
    lines: Sequence[Unit],
    line_row: Sequence[int],
    rows: Sequence[CandidateRow],
    weight: float,
    rrf_k: float,
) -> np.ndarray | None:
    """`weight / (rrf_k + 1)` for every line dated inside one of `periods`, 0 for the others
    (None when nothing is dated there, or no period is named)."""
    if not periods or weight <= 0 or not lines:
        return None
    bonus = np.zeros(len(lines), dtype=np.float32)
    for i, line in enumerate(lines):
        day = _day(hit_date(line, rows[line_row[i]]))
        if day is None:
            continue
        if any(start <= day < end for start, end in periods) or _speaks_of(line, day, periods):
            bonus[i] = weight / (rrf_k + 1.0)
    return bonus if bonus.any() else None


def _speaks_of(line: Unit, day: date, periods: Sequence[Period]) -> bool:
    """An archive line says something happened in one of `periods` ("last month I got hurt",
    said on 13 October 2023, speaks of September 2023): one of its directed relative dates,
    resolved against the day it was said, overlaps one of them."""
    if not line.spoken_on:
        return False
    words = _directed_words(line.body)
    if not words:
        return False
    # a span pointing back ends by the day after it was said, one pointing ahead begins on
    # it: such a line cannot speak of a period that lies wholly on the other side (the date
    # parser, a fraction of a millisecond a span, is left out for it)
    nxt = day + timedelta(days=1)
    if words <= BACKWARD and all(start >= nxt for start, _ in periods):
        return False
    if words <= FORWARD and all(end <= day for _, end in periods):
        return False
    return any(
        first < end and start < after
        for first, after in _spoken_of(line.body, day)
        for start, end in periods
    )


@lru_cache(maxsize=32_768)
def _directed_words(body: str) -> frozenset[str]:
    """The direction words of a line ("last", "next", "ago" …), lower-cased. Cached, like
    `_spoken_of`: the candidates' lines recur query after query."""
    return frozenset(w.lower() for w in DIRECTED.findall(body))


@lru_cache(maxsize=16_384)
def _spoken_of(body: str, day: date) -> tuple[Period, ...]:
    """The periods the directed relative dates of a line said on `day` name (a week, named
    only roughly, as the seven days from its day)."""
    return tuple(
        span.period() or (span.day, span.day + timedelta(days=7))
        for span in find_dates(body, day, directed_only=True)
    )


__all__ = ["line_bonus", "query_periods"]
