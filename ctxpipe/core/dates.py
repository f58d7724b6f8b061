"""Dates in a sentence, resolved against the day the sentence was said.

A span is a date expression of one of the shapes English uses for days (a deictic day word,
"last/this/next <unit, weekday, part of the day or season>", "<n> <units> ago", a weekday, a
month with an optional day and year, "in <year>"); month and weekday names come from the
`calendar` module, and the day arithmetic ("three weeks ago" on 8 May 2023) is `dateparser`'s.
Weekends and seasons are calendar spans dateparser does not know: "last weekend" is the
weekend before the week it was said in, "last summer" the latest summer (June-August, northern
meteorological seasons) that had ended. A span is *relative* when its date depends on when it
was said: it is resolved twice, against two different days, and the answers differ. Only
relative spans need the absolute date written next to them — the memory lines the rules
provider writes, and the archive lines `build_context` hands an agent, carry it.
"""

from __future__ import annotations

import calendar
import re
import warnings
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache
from typing import Literal

import dateparser

from ctxpipe.core.validity import to_date

_MONTHS = "|".join([*calendar.month_name[1:], *(m + r"\.?" for m in calendar.month_abbr[1:])])
_DAYS = "|".join(calendar.day_name)
_UNIT = r"(?:day|week|weekend|month|year)s?"
_PART = r"(?:night|morning|afternoon|evening)"
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}  # first month
_SEASON = "|".join(_SEASONS)
_NUM = r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|few|several)"
_DATE_RE = re.compile(
    rf"\b(?:(?i:(?:yesterday|tomorrow|this|last)\s+{_PART})"
    rf"|(?i:yesterday|today|tonight|tomorrow)"
    rf"|(?i:last|this|next|past)\s+(?:(?i:{_UNIT}|{_SEASON})|{_DAYS})"
    rf"|(?i:{_NUM})\s+(?i:{_UNIT})\s+(?i:ago)"
    rf"|(?:\d{{1,2}}(?:st|nd|rd|th)?\s+)?(?:{_MONTHS})(?:\s+\d{{1,2}}(?:st|nd|rd|th)?)?(?:,?\s+\d{{4}})?"
    rf"|(?:{_DAYS})"
    rf"|(?<=\bin\s)\d{{4}})\b"
)
_MONTH_SET = frozenset(calendar.month_name[1:])
_SETTINGS = {"RETURN_AS_TIMEZONE_AWARE": False}
_SHIFT = {"last": -1, "past": -1, "this": 0, "next": 1}
_DAY_SHIFT = {"yesterday": -1, "last": -1, "this": 0, "tomorrow": 1}


Grain = Literal["day", "week", "weekend", "month", "season", "year"]
Period = tuple[date, date]  # [first day, day after the last)
# a span with a direction: its date depends on when it was said, whichever day that was
DIRECTED = re.compile(r"\b(?:last|next|this|past|ago|yesterday|tomorrow)\b", re.IGNORECASE)
# of those, the words of a span that resolves before the day it was said (ending by the day
# after it) and of one that resolves on or after it; "this" and "past" may go either way
BACKWARD = frozenset({"last", "ago", "yesterday"})
FORWARD = frozenset({"next", "tomorrow"})


def _months_later(day: date, months: int) -> date:
    index = day.month - 1 + months
    return date(day.year + index // 12, index % 12 + 1, 1)


@dataclass(frozen=True)
class DateSpan:
    start: int
    end: int
    text: str
    day: date
    relative: bool
    grain: Grain

    def period(self) -> Period | None:
        """The days the span covers (None for a week, named only roughly: "three weeks ago")."""
        d = self.day
        if self.grain == "day":
            return d, d + timedelta(days=1)
        if self.grain == "weekend":
            return d, d + timedelta(days=2)
        if self.grain == "month":
            return d.replace(day=1), _months_later(d.replace(day=1), 1)
        if self.grain == "season":
            return d, _months_later(d, 3)
        if self.grain == "year":
            return date(d.year, 1, 1), date(d.year + 1, 1, 1)
        return None

    def label(self) -> str:
        d, month = self.day, calendar.month_name[self.day.month]
        if self.grain == "year":
            return str(d.year)
        if self.grain == "month":
            return f"{month} {d.year}"
        if self.grain == "season":
            if d.month == 12:  # a winter spans two years
                return f"winter {d.year}-{(d.year + 1) % 100:02d}"
            return next(f"{s} {d.year}" for s, m in _SEASONS.items() if m == d.month)
        prefix = {"week": "the week of ", "weekend": "the weekend of "}.get(self.grain, "")
        return f"{prefix}{d.day} {month} {d.year}"


@lru_cache(maxsize=8192)
def _parse(span: str, base: date, past: bool = True) -> date | None:
    low = " ".join(span.lower().split())
    calendar_span = _calendar_span(low, base)
    if calendar_span is not None:
        return calendar_span
    settings = {
        **_SETTINGS,
        "RELATIVE_BASE": datetime(base.year, base.month, base.day, 12),
        "PREFER_DATES_FROM": "past" if past else "future",
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = dateparser.parse(low, languages=["en"], settings=settings)
    return found.date() if found else None


def _calendar_span(low: str, base: date) -> date | None:
    """The first day of a weekend or season span, or of a part of a day; None for the spans
    dateparser resolves."""
    head, _, unit = low.partition(" ")
    if unit in ("night", "morning", "afternoon", "evening"):
        return base + timedelta(days=_DAY_SHIFT.get(head, 0))
    if head not in _SHIFT:
        return None
    if unit == "weekend":  # the Saturday of the week said in, shifted by weeks
        saturday = base + timedelta(days=5 - base.weekday())
        return saturday + timedelta(weeks=_SHIFT[head])
    if unit in _SEASONS:
        return _season(unit, base, _SHIFT[head])
    return None


def _season(name: str, base: date, shift: int) -> date:
    """The first day of the season `name`: the latest one that has ended (shift -1), the one
    under way or coming this year (0), the next one not yet begun (1)."""
    first = _SEASONS[name]

    def start(year: int) -> date:
        return date(year, first, 1)

    def end(year: int) -> date:  # the day after its three months
        return _months_later(start(year), 3)

    year = base.year
    if shift < 0:
        while end(year) > base:
            year -= 1
    elif shift > 0:
        while start(year) <= base:
            year += 1
    elif end(year - 1) > base:  # a winter begun last December is this winter
        year -= 1
    return start(year)


def _grain(span: str) -> Grain:
    low = span.lower()
    if any(s in low for s in _SEASONS):
        return "season"
    for grain in ("weekend", "week", "month", "year"):
        if grain in low:
            return grain
    if re.fullmatch(r"\d{4}", low):
        return "year"
    named_month = any(m.lower() in low for m in calendar.month_name[1:])
    return "month" if named_month and not re.search(r"\b\d{1,2}(?:st|nd|rd|th)?\b", low) else "day"


def find_dates(
    text: str,
    said_on: date | None,
    past: bool = True,
    *,
    directed_only: bool = False,
    judge_relative: bool = True,
) -> list[DateSpan]:
    """The date expressions of `text` that resolve, against the day it was said on (a day
    without a year, a bare weekday: the last one when `past`, else the next one);
    `directed_only`: only the spans with a direction (`DIRECTED`), relative by construction.
    Telling whether a span is relative takes a second parse of it: a caller that does not
    read `relative` skips it (`judge_relative=False`: every span then reads as absolute)."""
    base = said_on or date.today()
    out: list[DateSpan] = []
    for m in _DATE_RE.finditer(text):
        span = m.group(0)
        if m.start() == 0 and not re.search(r"\d", span) and span.split()[0] in _MONTH_SET:
            continue  # "May I …", "March on": a sentence-initial month word is a verb
        if directed_only and not DIRECTED.search(span):
            continue
        day = _parse(span, base, past)
        if day is None:
            continue
        if directed_only:
            relative = True
        elif not judge_relative:
            relative = False
        else:
            other = _parse(span, base - timedelta(days=400), past)
            relative = other != day and not re.search(r"\d{4}", span)
        out.append(DateSpan(m.start(), m.end(), span, day, relative, _grain(span)))
    return out


def resolve(text: str, said_on: date | None, past: bool = True) -> tuple[str, date | None]:
    """`text` with the absolute date after each relative date expression, and the first date
    it names (None when it names none); `past`: the text speaks of the past."""
    if said_on is None:
        return text, None
    spans = find_dates(text, said_on, past)
    out, pos = [], 0
    for s in spans:
        out.append(text[pos : s.end])
        if s.relative:
            out.append(f" ({s.label()})")
        pos = s.end
    out.append(text[pos:])
    return "".join(out), spans[0].day if spans else None


def day_of(value: object) -> date | None:
    """The day of what `to_date` reads (a stored date or time, an ISO date or time) or of a
    written date (``8 May 2023``, as archive headers show it); None when it is none of them."""
    found = to_date(value)
    if found is not None or not isinstance(value, str):
        return found
    return _written_day(value.strip())


@lru_cache(maxsize=4096)
def _written_day(text: str) -> date | None:
    """``8 May 2023`` as a date. Cached: find dates every candidate line, and the lines of a
    conversation share a few dozen days (each parse is a `strptime`)."""
    try:
        return datetime.strptime(text, "%d %B %Y").date()
    except ValueError:
        return None


def strip_dates(text: str) -> str:
    """`text` without its date expressions and the dates written after them."""
    return _DATE_RE.sub(" ", re.sub(r"\s\([\w ]*\d{4}(?:-\d{2})?\)", " ", text))
