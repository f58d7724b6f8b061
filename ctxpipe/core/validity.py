"""Temporal validity of profile and preference facts: the line annotation and the rule.

A fact line of a profile or preference memory ends with when it held::

    - lives in Berlin [m3] (valid from 2023-05-01 until 2023-07-01) (superseded: lives in Lisbon)
    - lives in Lisbon [m9] — "We moved to Lisbon" (valid from 2023-07-01)

``valid from`` is the date of the session the fact was learned in (the session time, never the
wall clock); ``until`` is the date of the session whose fact replaced it and ``superseded:``
names that fact. A merge that replaces a fact closes it this way instead of deleting it. Lines
written before validity was recorded carry no ``(valid …)`` group and still parse: such a fact
holds from the start, and until now unless it is superseded.

The rule (`Validity.holds`): with no date asked, a fact holds when it is not closed (not
superseded, no ``until``) — the latest state, whatever the wall clock says. As of a date D, it
holds when ``from ≤ D < until``; a missing ``from`` is the start of time, a missing ``until``
is "still valid" unless the fact is superseded — a superseded fact without an ``until`` (older
lines) cannot be placed in time and is left out. A synthesis of such facts (a memory's L0 line)
is the state as of the session that last wrote it (`synthesis_holds`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import date, datetime

# the categories whose fact lines carry validity
TEMPORAL_CATEGORIES = frozenset({"profile", "preferences"})

_DATE = r"\d{4}-\d{2}-\d{2}"
# `(?<!\s)`: a match starts where a run of spaces starts, never inside one (linear on long runs)
_TAIL_RE = re.compile(
    r"(?<!\s)(?:\s+\(valid(?:\s+from\s+(?P<valid_from>" + _DATE + r"))?"
    r"(?:\s+until\s+(?P<valid_to>" + _DATE + r"))?\s*\))?"
    r"(?:\s+\(superseded:\s*(?P<superseded>.*)\))?\s*$"
)
# the dates of a line, wherever it stands (words of the memory are everything else)
_SPAN_RE = re.compile(r"\(valid(?:\s+from\s+" + _DATE + r")?(?:\s+until\s+" + _DATE + r")?\s*\)")
_BULLET_RE = re.compile(r"^\s*[-*•]\s+")
_KEY_CUT_RE = re.compile(r"(?<!\s)\s+(?:\[[^\]]*\]|—\s+\").*$")


@dataclass(frozen=True)
class Validity:
    valid_from: str = ""  # ISO date, "" = from the start
    valid_to: str = ""  # ISO date, "" = still valid (unless superseded)
    superseded: str = ""  # the fact that replaced this one

    @property
    def closed(self) -> bool:
        return bool(self.superseded or self.valid_to)

    @property
    def empty(self) -> bool:
        return not (self.valid_from or self.valid_to or self.superseded)

    def holds(self, as_of: date | None = None) -> bool:
        """Is the fact valid now (`as_of` None: not closed) or on `as_of`?"""
        if as_of is None:
            return not self.closed
        start = to_date(self.valid_from)
        if start is not None and as_of < start:
            return False
        end = to_date(self.valid_to)
        if end is None:
            return not self.superseded
        return as_of < end

    def render(self) -> str:
        """`` (valid from A until B) (superseded: X)`` — the parts that are set ("" if none)."""
        out = ""
        if self.valid_from or self.valid_to:
            span = f"from {self.valid_from}" if self.valid_from else ""
            span += f" until {self.valid_to}" if self.valid_to else ""
            out += f" (valid {span.strip()})"
        if self.superseded:
            out += f" (superseded: {self.superseded})"
        return out


_NONE = Validity()


def split_annotation(line: str) -> tuple[str, Validity]:
    """(the line without its validity annotation, the validity it states)."""
    head = line.rstrip()
    if not head.endswith(")"):  # every annotation ends with its closing parenthesis
        return head, _NONE
    m = _TAIL_RE.search(line)
    if m is None or not any(m.groupdict().values()):
        return head, _NONE
    v = Validity(
        valid_from=m.group("valid_from") or "",
        valid_to=m.group("valid_to") or "",
        superseded=(m.group("superseded") or "").strip(),
    )
    return line[: m.start()].rstrip(), v


def strip_dates(text: str) -> str:
    """`text` without its ``(valid …)`` groups."""
    return _SPAN_RE.sub(" ", text)


def to_date(value: object) -> date | None:
    """A date from a date, a datetime or an ISO string (None when there is none)."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    text = str(value).strip()
    try:
        return date.fromisoformat(text[:10])
    except ValueError:
        return None


def session_day(observed_at: object) -> str:
    """The ISO date of a session time ("" when unknown)."""
    d = to_date(observed_at)
    return d.isoformat() if d else ""


def parse_as_of(value: object) -> date | None:
    """The `as_of` of a request: None, a date, or ``YYYY-MM-DD`` (ValueError otherwise)."""
    if value is None or value == "":
        return None
    d = to_date(value)
    if d is None:
        raise ValueError(f"as_of must be a date like 2023-06-01, not {value!r}")
    return d


def line_holds(text: str, as_of: date | None = None) -> bool:
    """Does a fact line (or a line of no fact: always) hold now or on `as_of`?"""
    return split_annotation(text)[1].holds(as_of)


def synthesis_holds(observed_at: object, as_of: date | None) -> bool:
    """A text synthesised from the facts valid when its session last wrote it (a memory's L0
    line) holds now and as of any date from that session on (always, when it is undated)."""
    if as_of is None:
        return True
    written = to_date(observed_at)
    return written is None or written <= as_of


def as_of_view(text: str, as_of: date | None) -> str:
    """A line as it read on `as_of`: what closed it later is not known yet then."""
    if as_of is None:
        return text
    head, v = split_annotation(text)
    if v.empty or not v.holds(as_of):
        return text
    return head + Validity(valid_from=v.valid_from).render()


def _key(head: str) -> str:
    """What identifies a fact line across a merge (its refs and evidence may grow)."""
    return " ".join(_KEY_CUT_RE.sub("", _BULLET_RE.sub("", head)).lower().split())


def stamp_lines(text: str, day: str, existing: str | None = None) -> str:
    """Date the fact lines of `text` written in the session of `day`.

    A bullet line new to `existing` (the node's text before a merge; None for a new node) is
    valid from `day`; one already there keeps the dates it had (restored when a merge dropped
    them); a line superseded here without an ``until`` is closed on `day` — unless it was
    already superseded before, undated (an older line: its end stays unknown). Other lines are
    kept as they are."""
    if not day or not text:
        return text
    before: dict[str, list[Validity]] = {}
    for raw in (existing or "").splitlines():
        if _BULLET_RE.match(raw):
            head, v = split_annotation(raw)
            before.setdefault(_key(head), []).append(v)
    out: list[str] = []
    for raw in text.splitlines():
        if not _BULLET_RE.match(raw):
            out.append(raw)
            continue
        head, v = split_annotation(raw)
        olds = before.get(_key(head), [])
        old = next((o for o in olds if o.superseded == v.superseded), olds[0] if olds else None)
        if old is None:
            v = replace(v, valid_from=v.valid_from or day)
        else:
            v = replace(v, valid_from=v.valid_from or old.valid_from)
            if not v.valid_to and old.valid_to and old.superseded == v.superseded:
                v = replace(v, valid_to=old.valid_to)
        if v.superseded and not v.valid_to and (old is None or not old.superseded):
            v = replace(v, valid_to=day)
        out.append(head + v.render())
    return "\n".join(out)


__all__ = [
    "TEMPORAL_CATEGORIES",
    "Validity",
    "as_of_view",
    "line_holds",
    "parse_as_of",
    "session_day",
    "split_annotation",
    "stamp_lines",
    "strip_dates",
    "synthesis_holds",
    "to_date",
]
