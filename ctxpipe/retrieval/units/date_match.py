"""A query that names a day, a month or a year favours what was said (or happened) then.

"What did Melanie paint on October 13, 2023?", "what setback did she face in September
2023?", "what did I tell you last Monday?": the date is the strongest clue such a question
has, and neither the full-text nor the vector ranking reads it as a date. `find` resolves
the dates a query names (`ctxpipe.core.dates`; a relative one against the request's `as_of`,
else today) into periods — a day, a weekend, a month, a season, a year — and every candidate
line dated inside one of them gets one more reciprocal-rank term in the fusion, as if first in
a ranking of its own (all such lines alike). A line's date is the day its turn was said (an
archive line's header), for a memory the date of the event it records, else of the session it
was learned from. A query that names no date changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta

import numpy as np

from ctxpipe.core.dates import DateSpan, find_dates
from ctxpipe.retrieval.models import CandidateRow
from ctxpipe.retrieval.units.lexical import Unit
from ctxpipe.retrieval.units.snippets import hit_date

Period = tuple[date, date]  # [first day, day after the last)


def _months_later(day: date, months: int) -> date:
    index = day.month - 1 + months
    return date(day.year + index // 12, index % 12 + 1, 1)


def period(span: DateSpan) -> Period | None:
    """The days a resolved date expression covers (None for the spans with no clear period:
    "three weeks ago" names a week only roughly)."""
    d = span.day
    if span.grain == "day":
        return d, d + timedelta(days=1)
    if span.grain == "weekend":
        return d, d + timedelta(days=2)
    if span.grain == "month":
        first = d.replace(day=1)
        return first, _months_later(first, 1)
    if span.grain == "season":
        return d, _months_later(d, 3)
    if span.grain == "year":
        return date(d.year, 1, 1), date(d.year + 1, 1, 1)
    return None


def query_periods(query: str, today: date) -> list[Period]:
    """The periods the dates of `query` name (relative ones resolved against `today`)."""
    out: list[Period] = []
    for span in find_dates(query, today):
        p = period(span)
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
        if day is not None and any(start <= day < end for start, end in periods):
            bonus[i] = weight / (rrf_k + 1.0)
    return bonus if bonus.any() else None


__all__ = ["Period", "line_bonus", "period", "query_periods"]
