"""Archive lines as an agent should read them: every relative date made absolute.

A turn said on 8 May 2023 that reads "we went camping last month" means April 2023; an agent
reading it months later, among lines said on other days, has to do that arithmetic itself from
the line's header — and often does not. `build_context` writes the date after each relative
date expression of the archive lines it shows ("last month (April 2023)"), resolved against
the day the line was said (`ctxpipe.core.dates`). Only spans with a direction (last, next,
this, past, ago, yesterday, tomorrow) are resolved: a bare weekday or month name may point
either way. A period that holds the day the line was said ("this morning", "this month") is
not repeated: the header states it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import date, timedelta

from ctxpipe.core.dates import DIRECTED, day_of, find_dates
from ctxpipe.retrieval.units.lexical import Unit

_HEADER_DATE = re.compile(r"\((\d{1,2} [A-Za-z]+ \d{4})\):\s*$")


def said_on(unit: Unit) -> date | None:
    """The day a line was said, from its header (``Ann (8 May 2023): ``)."""
    if unit.spoken_on:
        return day_of(unit.spoken_on)
    m = _HEADER_DATE.search(unit.prefix)
    return day_of(m.group(1)) if m else None


def dated_text(body: str, day: date) -> str:
    """`body` with the absolute date after each directed relative date expression, unless the
    period it names holds `day` itself ("this morning", "this month": the header says it)."""
    if not DIRECTED.search(body):
        return body
    out, pos = [], 0
    for span in find_dates(body, day, directed_only=True):
        first, after = span.period() or (span.day, span.day + timedelta(days=1))
        if first <= day < after:
            continue
        out.append(body[pos : span.end])
        out.append(f" ({span.label()})")
        pos = span.end
    out.append(body[pos:])
    return "".join(out)


def with_dates(units: Sequence[Unit]) -> list[Unit]:
    """Archive lines with their relative dates resolved (other lines as they are)."""
    out: list[Unit] = []
    for u in units:
        day = said_on(u)
        body = dated_text(u.body, day) if day is not None else u.body
        out.append(u if body == u.body else replace(u, text=u.prefix + body))
    return out


__all__ = ["dated_text", "said_on", "with_dates"]
