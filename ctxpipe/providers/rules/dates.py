"""Dates in a sentence, resolved with `dateparser` against the time the sentence was said.

A span is a date expression of one of the shapes English uses for days (a deictic day word,
"last/this/next <unit or weekday>", "<n> <units> ago", a weekday, a month with an optional
day and year, "in <year>"); month and weekday names come from the `calendar` module, and the
arithmetic ("three weeks ago" on 8 May 2023) is dateparser's. A span is *relative* when its
date depends on when it was said: it is resolved twice, against two different days, and the
answers differ. Only relative spans need the absolute date written next to them.
"""

from __future__ import annotations

import calendar
import re
import warnings
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache

import dateparser

_MONTHS = "|".join([*calendar.month_name[1:], *(m + r"\.?" for m in calendar.month_abbr[1:])])
_DAYS = "|".join(calendar.day_name)
_UNIT = r"(?:day|week|weekend|month|year)s?"
_NUM = r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|few|several)"
_DATE_RE = re.compile(
    rf"\b(?:(?i:yesterday|today|tonight|tomorrow)"
    rf"|(?i:last|this|next|past)\s+(?:(?i:{_UNIT})|{_DAYS})"
    rf"|(?i:{_NUM})\s+(?i:{_UNIT})\s+(?i:ago)"
    rf"|(?:\d{{1,2}}(?:st|nd|rd|th)?\s+)?(?:{_MONTHS})(?:\s+\d{{1,2}}(?:st|nd|rd|th)?)?(?:,?\s+\d{{4}})?"
    rf"|(?:{_DAYS})"
    rf"|(?<=\bin\s)\d{{4}})\b"
)
_MONTH_SET = frozenset(calendar.month_name[1:])
_SETTINGS = {"RETURN_AS_TIMEZONE_AWARE": False}


@dataclass(frozen=True)
class DateSpan:
    start: int
    end: int
    text: str
    day: date
    relative: bool
    grain: str  # "day" | "week" | "month" | "year"

    def label(self) -> str:
        if self.grain == "year":
            return str(self.day.year)
        if self.grain == "month":
            return f"{calendar.month_name[self.day.month]} {self.day.year}"
        prefix = "the week of " if self.grain == "week" else ""
        return f"{prefix}{self.day.day} {calendar.month_name[self.day.month]} {self.day.year}"


@lru_cache(maxsize=8192)
def _parse(span: str, base: date, past: bool = True) -> date | None:
    settings = {
        **_SETTINGS,
        "RELATIVE_BASE": datetime(base.year, base.month, base.day, 12),
        "PREFER_DATES_FROM": "past" if past else "future",
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = dateparser.parse(span, languages=["en"], settings=settings)
    return found.date() if found else None


def _grain(span: str) -> str:
    low = span.lower()
    for grain in ("week", "month", "year"):
        if grain in low:
            return grain
    if re.fullmatch(r"\d{4}", low):
        return "year"
    named_month = any(m.lower() in low for m in calendar.month_name[1:])
    return "month" if named_month and not re.search(r"\b\d{1,2}(?:st|nd|rd|th)?\b", low) else "day"


def find_dates(text: str, said_on: date | None, past: bool = True) -> list[DateSpan]:
    """The date expressions of `text` that resolve, against the day it was said on (a day
    without a year, a bare weekday: the last one when `past`, else the next one)."""
    base = said_on or date.today()
    out: list[DateSpan] = []
    for m in _DATE_RE.finditer(text):
        span = m.group(0)
        if m.start() == 0 and not re.search(r"\d", span) and span.split()[0] in _MONTH_SET:
            continue  # "May I …", "March on": a sentence-initial month word is a verb
        day = _parse(span, base, past)
        if day is None:
            continue
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


def strip_dates(text: str) -> str:
    """`text` without its date expressions and the dates written after them."""
    return _DATE_RE.sub(" ", re.sub(r"\s\((?:the week of )?[\w ]*\d{4}\)", " ", text))
