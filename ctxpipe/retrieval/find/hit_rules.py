"""Which candidate lines `find` may return and what a hit shows with them: a line holds now
or as of a date (`holds`: validity of profile and preference facts, nothing learned after the
date), a memory row carries validity (`temporal`), and a memory's L0 line adds something to
the line it comes with or only restates it (`restates`)."""

from __future__ import annotations

from datetime import date

from ctxpipe.core.validity import TEMPORAL_CATEGORIES, split_annotation, synthesis_holds
from ctxpipe.retrieval.models import CandidateRow
from ctxpipe.retrieval.units.lexical import Unit
from ctxpipe.retrieval.units.snippets import hit_date


def restates(abstract: str, text: str, *, cut: bool = False) -> bool:
    """The L0 line `abstract` says nothing `text` does not: it is empty, or its words (after
    a "Subject: " head, which a node's one-line synthesis starts with) are found in `text` in
    the same order. A line `cut` to its token cap may end in a partial word, which is not
    compared; the text may itself be a snippet cut short, so a synthesis that runs past its
    end is judged by the part the snippet has."""
    said = " ".join(text.lower().split())
    snippet = " ".join(said.split()[:-1]) if len(said.split()) >= 8 else ""
    for head in _heads(abstract):
        words = head.lower().rstrip(" .!").split()
        if cut and len(words) > 1:
            words = words[:-1]
        if not words:
            return True
        body = " ".join(words)
        if body in said:
            return True
        if snippet and body.startswith(snippet):  # the snippet ends first: it opens the line
            return True
    return False


SUBJECT_WORDS = 4  # a "Subject: " head names the node's subject in a few words


def _heads(abstract: str) -> list[str]:
    """The L0 line as it reads, and without its "Subject: " head."""
    line = " ".join(abstract.split())
    subject, sep, rest = line.partition(": ")
    return [line, rest] if sep and 0 < len(subject.split()) <= SUBJECT_WORDS else [line]


def _after(when: str | None, as_of: date) -> bool:
    """Is the ISO date (or date-time) `when` later than `as_of`? (False when unknown.)"""
    try:
        return bool(when) and date.fromisoformat(str(when)[:10]) > as_of
    except ValueError:
        return False


def temporal(row: CandidateRow) -> bool:
    """A row of a memory whose facts carry validity (a profile or preference memory)."""
    return row.context_type != "session" and row.category in TEMPORAL_CATEGORIES


def holds(row: CandidateRow, line: Unit, as_of: date | None) -> bool:
    """Does this line of a candidate chunk hold now (`as_of` None) or on `as_of`? As of a date,
    nothing learned after it was known then: an archive line said later, or a memory written
    once, by a later session (an event, an entity first named then), is not a hit — a memory
    written again since holds lines of both times and stays. A profile or preference line
    holds while its fact is valid; a memory's L0 line from the session that last wrote it."""
    if as_of is not None:
        learned: str | None = None
        if row.context_type == "session":
            learned = hit_date(line, row)
        elif not temporal(row) and row.node_version <= 1:
            learned = row.observed_at
        if _after(learned, as_of):
            return False
    if not temporal(row):
        return True
    if row.level == 0:
        return synthesis_holds(row.observed_at, as_of)
    return split_annotation(line.text)[1].holds(as_of)


__all__ = ["SUBJECT_WORDS", "holds", "restates", "temporal"]
