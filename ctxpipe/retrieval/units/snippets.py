"""What a `find` hit returns: the sentence that matched, grown with the sentences around it in
its line (an archive turn, a memory line) up to a token cap, and when it was said or is about.

A one-sentence hit often cannot stand alone ("It was amazing!" — what was?); the whole turn is
often too long to return ten of. The matched sentence is kept and its neighbours are added —
the next one first, then the previous one, alternately — while the cap allows; a line that fits
is returned whole. Grown this way, the text still comes from the one turn it cites.
"""

from __future__ import annotations

from typing import Any

from ctxpipe.core.dates import day_of
from ctxpipe.retrieval.models import CandidateRow
from ctxpipe.retrieval.tokens import TokenCounter
from ctxpipe.retrieval.units.lexical import Unit


def grow_snippet(line: Unit, sentence: Unit, cap: int, counter: TokenCounter) -> str:
    """`sentence` of `line` with as many neighbouring sentences of the line as fit in `cap`
    tokens (the speaker prefix included); the sentence alone, truncated, if even it does not."""
    if counter.count(line.text) <= cap:
        return line.text
    parts = line.sentences()
    bodies = [p.body for p in parts]
    try:
        i = bodies.index(sentence.body)
    except ValueError:
        return counter.truncate(sentence.text, cap)
    costs = [counter.count(b) + 1 for b in bodies]  # +1: the joining space
    total = counter.count(line.prefix) + costs[i]
    if total > cap:
        return counter.truncate(sentence.text, cap)
    lo = hi = i
    grew = True
    while grew:
        grew = False
        if hi + 1 < len(parts) and total + costs[hi + 1] <= cap:
            hi += 1
            total += costs[hi]
            grew = True
        if lo > 0 and total + costs[lo - 1] <= cap:
            lo -= 1
            total += costs[lo]
            grew = True
    return line.prefix + " ".join(bodies[lo : hi + 1])


def _iso(value: Any) -> str:
    """An ISO date (``2023-05-08``) from a stored date/time or a ``8 May 2023`` header."""
    day = day_of(value)
    return day.isoformat() if day else ""


def hit_date(unit: Unit, row: CandidateRow) -> str:
    """When an archive line was said; for a memory, the date of the event it records, else the
    session time it was learned from (ISO date; "" when unknown)."""
    if unit.spoken_on:
        return _iso(unit.spoken_on)
    return _iso(row.event_time) or _iso(row.observed_at)


__all__ = ["grow_snippet", "hit_date"]
