"""Date expressions: find them in a sentence and resolve them to absolute ISO dates.

Relative expressions ("yesterday", "last Saturday", "two weeks ago", "next month") are resolved
against an anchor date (the message's `created_at`, else the session time). Coarse periods
resolve to their first day (week → Monday, month → the 1st, year → 1 January) and keep a
`precision` so callers can say "week of 2026-03-02" instead of pretending to know the day.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

MONTHS = {
    name: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for name in names
}
WEEKDAYS = {
    name: i
    for i, names in enumerate(
        [
            ("monday", "mon"),
            ("tuesday", "tue", "tues"),
            ("wednesday", "wed"),
            ("thursday", "thu", "thurs"),
            ("friday", "fri"),
            ("saturday", "sat"),
            ("sunday", "sun"),
        ]
    )
    for name in names
}
NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "a couple of": 2,
    "a few": 3,
    "couple of": 2,
}

_MONTH = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_WEEKDAY = r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_NUM = r"(\d+|a couple of|couple of|a few|an?|one|two|three|four|five|six|seven|eight|nine|ten)"
_ORD = r"(\d{1,2})(?:st|nd|rd|th)?"

PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("iso", re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")),
    ("slash", re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b")),
    ("month_day", re.compile(rf"\b(?:on\s+)?{_MONTH}\s+{_ORD}\b(?:,?\s+(\d{{4}}))?", re.I)),
    (
        "day_month",
        re.compile(rf"\b(?:on\s+)?(?:the\s+)?{_ORD}\s+(?:of\s+)?{_MONTH}(?:,?\s+(\d{{4}}))?", re.I),
    ),
    ("day_before", re.compile(r"\bthe day before yesterday\b", re.I)),
    ("day_after", re.compile(r"\bthe day after tomorrow\b", re.I)),
    ("yesterday", re.compile(r"\b(yesterday|last night)\b", re.I)),
    ("today", re.compile(r"\b(today|tonight|this (?:morning|afternoon|evening))\b", re.I)),
    ("tomorrow", re.compile(r"\btomorrow\b", re.I)),
    ("ago", re.compile(rf"\b{_NUM}\s+(day|week|month|year)s?\s+ago\b", re.I)),
    ("in_n", re.compile(rf"\bin\s+{_NUM}\s+(day|week|month|year)s?\b", re.I)),
    ("rel_weekday", re.compile(rf"\b(last|this|next|coming|on|this past)\s+{_WEEKDAY}\b", re.I)),
    ("rel_period", re.compile(r"\b(last|this|next|past)\s+(week|weekend|month|year)\b", re.I)),
    ("in_month", re.compile(rf"\b(?:in|during|since|by)\s+{_MONTH}(?:\s+(\d{{4}}))?\b", re.I)),
    ("in_year", re.compile(r"\b(?:in|since|during|back in)\s+((?:19|20)\d{2})\b", re.I)),
]

# all the patterns as one: a text it finds nothing in holds no date mention (one pass, not one
# per pattern, for the many sentences that have none)
_ANY = re.compile("|".join(f"(?:{pattern.pattern})" for _, pattern in PATTERNS), re.I)


def has_date(text: str) -> bool:
    """Could `text` hold a date mention (False: `find_dates` finds none)?"""
    return _ANY.search(text) is not None


@dataclass(frozen=True)
class DateMention:
    text: str
    start: int
    end: int
    value: date | None
    precision: str  # day | week | month | year
    relative: bool

    @property
    def iso(self) -> str | None:
        return self.value.isoformat() if self.value else None

    def describe(self) -> str:
        if self.value is None:
            return self.text
        if self.precision == "day":
            return self.value.isoformat()
        if self.precision == "week":
            return f"the week of {self.value.isoformat()}"
        if self.precision == "month":
            return self.value.strftime("%B %Y")
        return str(self.value.year)


def _num(text: str) -> int:
    t = text.lower()
    return int(t) if t.isdigit() else NUMBER_WORDS.get(t, 1)


def _month_num(text: str) -> int:
    return MONTHS[text.lower().rstrip(".")[:3]]


def _shift_months(d: date, months: int) -> date:
    total = d.year * 12 + d.month - 1 + months
    return date(total // 12, total % 12 + 1, 1)


def _safe(y: int, m: int, d: int) -> date | None:
    try:
        return date(y, m, d)
    except ValueError:
        return None


def _with_year(
    month: int, day: int, year: str | None, anchor: date | None, tense: str | None
) -> date | None:
    if year:
        return _safe(int(year), month, day)
    if anchor is None:
        return None
    d = _safe(anchor.year, month, day)
    if d is None:
        return None
    if tense == "past" and d > anchor:
        return _safe(anchor.year - 1, month, day)
    if tense == "future" and d < anchor:
        return _safe(anchor.year + 1, month, day)
    return d


def _resolve(
    kind: str, m: re.Match[str], anchor: date | None, tense: str | None
) -> tuple[date | None, str, bool]:
    """(date | None, precision, relative) for one regex match."""
    g = m.groups()
    if kind == "iso":
        return _safe(int(g[0]), int(g[1]), int(g[2])), "day", False
    if kind == "slash":
        a, b = int(g[0]), int(g[1])
        month, day = (b, a) if a > 12 else (a, b)
        return _safe(int(g[2]), month, day), "day", False
    if kind == "month_day":
        return _with_year(_month_num(g[0]), int(g[1]), g[2], anchor, tense), "day", g[2] is None
    if kind == "day_month":
        return _with_year(_month_num(g[1]), int(g[0]), g[2], anchor, tense), "day", g[2] is None
    if anchor is None:
        return None, "day", True
    if kind == "day_before":
        return anchor - timedelta(days=2), "day", True
    if kind == "day_after":
        return anchor + timedelta(days=2), "day", True
    if kind == "yesterday":
        return anchor - timedelta(days=1), "day", True
    if kind == "today":
        return anchor, "day", True
    if kind == "tomorrow":
        return anchor + timedelta(days=1), "day", True
    if kind in ("ago", "in_n"):
        n = _num(g[0]) * (-1 if kind == "ago" else 1)
        unit = g[1].lower()
        if unit == "day":
            return anchor + timedelta(days=n), "day", True
        if unit == "week":
            d = anchor + timedelta(weeks=n)
            return d - timedelta(days=d.weekday()), "week", True
        if unit == "month":
            return _shift_months(anchor, n), "month", True
        return date(anchor.year + n, 1, 1), "year", True
    if kind == "rel_weekday":
        which, wd = g[0].lower(), WEEKDAYS[g[1].lower()]
        if which in ("last", "this past") or (which == "on" and tense == "past"):
            delta = (anchor.weekday() - wd) % 7 or 7
            return anchor - timedelta(days=delta), "day", True
        if which == "next" or which == "coming" or which == "on":
            delta = (wd - anchor.weekday()) % 7 or 7
            return anchor + timedelta(days=delta), "day", True
        monday = anchor - timedelta(days=anchor.weekday())  # "this Friday"
        return monday + timedelta(days=wd), "day", True
    if kind == "rel_period":
        which, unit = g[0].lower(), g[1].lower()
        step = {"last": -1, "past": -1, "this": 0, "next": 1}[which]
        if unit in ("week", "weekend"):
            monday = anchor - timedelta(days=anchor.weekday()) + timedelta(weeks=step)
            if unit == "weekend":
                return monday + timedelta(days=5), "day", True
            return monday, "week", True
        if unit == "month":
            return _shift_months(anchor, step), "month", True
        return date(anchor.year + step, 1, 1), "year", True
    if kind == "in_month":
        month = _month_num(g[0])
        year = int(g[1]) if g[1] else anchor.year
        if not g[1] and tense == "past" and month > anchor.month:
            year -= 1
        if not g[1] and tense == "future" and month < anchor.month:
            year += 1
        return date(year, month, 1), "month", not g[1]
    if kind == "in_year":
        return date(int(g[0]), 1, 1), "year", False
    return None, "day", True


def find_dates(sentence: str, anchor: date | None, tense: str | None = None) -> list[DateMention]:
    """Non-overlapping date mentions, most specific pattern first, in text order."""
    if not has_date(sentence):
        return []
    taken: list[tuple[int, int]] = []
    out: list[DateMention] = []
    for kind, pattern in PATTERNS:
        for m in pattern.finditer(sentence):
            if any(m.start() < e and s < m.end() for s, e in taken):
                continue
            if kind == "month_day" and m.group(1) == "may":
                # "may 3" in lower case is more likely the modal verb than the month
                continue
            value, precision, relative = _resolve(kind, m, anchor, tense)
            taken.append((m.start(), m.end()))
            out.append(DateMention(m.group(0), m.start(), m.end(), value, precision, relative))
    out.sort(key=lambda d: d.start)
    return out


def absolutize(sentence: str, mentions: list[DateMention]) -> str:
    """Replace relative date expressions by absolute ones ("last Sunday" → "on 2026-03-08")."""
    s = sentence
    for d in sorted(mentions, key=lambda x: x.start, reverse=True):
        if not d.relative or d.value is None:
            continue
        lead = d.text.split(" ")[0].lower()
        prep = {"month": "in", "year": "in", "week": "during"}.get(d.precision, "on")
        if lead in ("in", "during", "since", "by", "on"):
            prep = lead
        s = s[: d.start] + f"{prep} {d.describe()}" + s[d.end :]
    return s


def best_date(mentions: list[DateMention]) -> DateMention | None:
    """The most precise resolved mention (day beats week beats month beats year)."""
    rank = {"day": 0, "week": 1, "month": 2, "year": 3}
    resolved = [m for m in mentions if m.value is not None]
    return min(resolved, key=lambda m: (rank[m.precision], m.start)) if resolved else None
