"""Placing candidates in a token budget: per-section fill, a common pool for what sections
leave unused, progressive expansion L0 → L1 → L2, and assembly of the final text — counted
with the real tokenizer and never over budget.

What an agent needs most is the evidence for its query, so the two evidence sections (memory
lines and retrieved turns) are filled as one: they share their budget, ranked by the retrieval
rank alone (a memory line is not preferred to the turn that answers just because it is a
memory), breadth first — every hit's short view before any hit is opened to L1/L2 — and each
takes the pool before the query-independent profile lines do. A unit whose content words are
already in the context (a memory line restating a turn placed above it, the same archive line
reached by two hits) is left out: repeated words cost tokens and hold nothing new.

Evidence is packed in rank order, never reordered to fill the budget: a hit that does not fit
whole is not skipped for a shorter one ranked below it; the first that does not fit takes the
budget's last tokens, cut at a line (or word) boundary. Skipping it used to let the shorter,
worse hits below it take its place, and the context held the answer less often than find's
hits joined in rank order at the same budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctxpipe.core.text import token_set
from ctxpipe.retrieval.context.budget_allocator import ContextPriority, TokenBudget
from ctxpipe.retrieval.context.candidates import Candidate, cited, render
from ctxpipe.retrieval.context.context_request import (
    SECTION_ORDER,
    TITLES,
    ContextItem,
    ContextSection,
)
from ctxpipe.retrieval.context.snapshots import sha
from ctxpipe.retrieval.tokens import TokenCounter
from ctxpipe.retrieval.units.lexical import Unit


@dataclass
class Placement:
    cand: Candidate
    view: int
    units: list[Unit]
    tokens: int
    truncated: bool = False


EVIDENCE = ("long_term", "retrieval")  # filled as one, by retrieval rank
# the sections in fill order, the evidence ones as one group
GROUPS = tuple(dict.fromkeys(EVIDENCE if s in EVIDENCE else (s,) for s in SECTION_ORDER))
MIN_CUT_TOKENS = 8  # a line cut shorter than this (its speaker aside) is left out


def rank_candidates(cands: Sequence[Candidate]) -> list[Candidate]:
    """Candidates in priority order (priority, then score, then given order); evidence (one
    priority, above profile lines and below the query and the recent turns) by its retrieval
    rank alone. The pool takes what the sections leave in this order too."""
    return sorted(
        cands,
        key=lambda c: (
            -(c.priority if c.section not in EVIDENCE else int(ContextPriority.RETRIEVAL)),
            -c.score if c.section not in EVIDENCE else 0.0,
            c.order,
        ),
    )


def words_of(units: Sequence[Unit]) -> set[str]:
    """The content words of some units (their speaker prefixes aside)."""
    return {w for u in units for w in token_set(u.body)}


def novel(units: Sequence[Unit], seen: set[str]) -> list[Unit]:
    """The units that add a content word to `seen` (each judged after the ones before it)."""
    out: list[Unit] = []
    have = set(seen)
    for u in units:
        words = words_of([u])
        if words and words <= have:
            continue
        out.append(u)
        have |= words
    return out


class Placer:
    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter

    def header(self, section: str) -> int:
        return self.counter.count(TITLES[section])

    def fit(
        self, cand: Candidate, view: int, room: int, seen: set[str] | None = None
    ) -> Placement | None:
        """The candidate's view in at most `room` tokens (cut at line boundaries); with `seen`,
        an evidence view keeps only its units that add to those content words."""
        units = cand.view(view)
        if units and seen is not None and cand.section in EVIDENCE:
            units = novel(units, seen)
        if not units or room <= 0:
            return None
        n = self.counter.count(render(units))
        if n <= room:
            return Placement(cand, view, list(units), n)
        kept: list[Unit] = []
        for u in units:
            trial = render([*kept, u])
            if self.counter.count(trial) <= room:
                kept.append(u)
                continue
            left = room - (self.counter.count(render(kept)) if kept else 0)
            if cand.section == "user_prefs":
                cut = self.whole_facts(u.text, left)
            else:
                cut = self.counter.truncate(u.text, left)
            # a cut that keeps a few words of a line (or only its speaker) holds nothing
            if cut and self.counter.count(cut[len(u.prefix) :]) >= MIN_CUT_TOKENS:
                kept.append(Unit(cut, list(u.refs)))
            break
        if not kept:
            return None
        return Placement(cand, view, kept, self.counter.count(render(kept)), truncated=True)

    def whole_facts(self, text: str, room: int) -> str:
        """A profile or preference line cut to `room` tokens at a fact boundary: its
        synthesis joins facts with "; " ("Ann: lives in Lisbon; works as a nurse (+3 more)"),
        and a fact cut in the middle says something else ("Ann: is allergic to"). Empty
        when not even the first fact fits."""
        facts = text.split("; ")
        for n in range(len(facts) - 1, 0, -1):
            head = "; ".join(facts[:n])
            if self.counter.count(head) <= room:
                return head
        return ""

    def fill(self, cands: list[Candidate], budget: TokenBudget) -> dict[str, Placement]:
        placed: dict[str, Placement] = {}
        opened: set[str] = set()
        seen: set[str] = set()
        used = 0
        for group in GROUPS:
            share = sum(budget.section(s) for s in group)
            room = share
            for c in rank_candidates([c for c in cands if c.section in group]):
                head = 0 if c.section in opened else self.header(c.section)
                p = self.fit(c, 0, room - head, seen)
                if p is not None and p.truncated and c.section in EVIDENCE:
                    break  # evidence goes in rank order: the pool goes on from this one
                if p is None or (p.truncated and p.tokens < 12):
                    continue
                placed[c.key] = p
                room -= p.tokens + head
                opened.add(c.section)
                seen |= words_of(p.units)
            if any(s in opened for s in group):
                used += share - room
        pool = budget.total - used
        for c in rank_candidates([c for c in cands if c.key not in placed]):
            cost_header = 0 if c.section in opened else self.header(c.section)
            p = self.fit(c, 0, pool - cost_header, seen)
            if p is None or (p.truncated and c.section not in EVIDENCE):
                continue
            placed[c.key] = p
            pool -= p.tokens + cost_header
            opened.add(c.section)
            seen |= words_of(p.units)
            if p.truncated:  # the next hit in rank order, cut to the budget's last tokens
                return placed
        # the budget's last tokens: the best evidence left, cut to fit
        for c in rank_candidates([c for c in cands if c.key not in placed]):
            if c.section not in EVIDENCE:
                continue
            head = 0 if c.section in opened else self.header(c.section)
            p = self.fit(c, 0, pool - head, seen)
            if p is not None:
                placed[c.key] = p
            break
        return placed

    def used(self, placed: dict[str, Placement]) -> int:
        sections = {p.cand.section for p in placed.values()}
        return sum(p.tokens for p in placed.values()) + sum(self.header(s) for s in sections)

    def expand(self, placed: dict[str, Placement], total: int) -> None:
        """L0 → L1 for every expandable item (best first), then L1 → L2."""
        expandable = [p for p in placed.values() if p.cand.section in ("user_prefs", *EVIDENCE)]
        order = rank_candidates([p.cand for p in expandable])
        for view in (1, 2):
            for c in order:
                pool = total - self.used(placed)
                if pool <= 0:
                    return
                cur = placed[c.key]
                if cur.view != view - 1 or cur.truncated:
                    continue
                others = words_of([u for k, p in placed.items() if k != c.key for u in p.units])
                nxt = self.fit(c, view, cur.tokens + pool, others)
                if nxt is None or nxt.tokens <= cur.tokens:
                    continue
                if not set(cited(cur.units)) <= set(cited(nxt.units)) or (
                    nxt.truncated and not {u.text for u in cur.units} <= {u.text for u in nxt.units}
                ):
                    continue  # a longer view must still hold every line of this one, whole
                placed[c.key] = nxt

    # ------------------------------------------------------------------ assembly
    def sections(
        self, placed: dict[str, Placement], budget: TokenBudget, total: int
    ) -> list[ContextSection]:
        while True:
            sections = []
            for name in SECTION_ORDER:
                mine = [p for p in placed.values() if p.cand.section == name]
                if name == "short_term":
                    mine.sort(key=lambda p: p.cand.order)
                else:
                    ranked = {
                        c.key: i for i, c in enumerate(rank_candidates([p.cand for p in mine]))
                    }
                    mine.sort(key=lambda p: ranked[p.cand.key])
                items = [
                    ContextItem(
                        key=p.cand.key,
                        uri=p.cand.uri,
                        view=p.view,
                        text=render(p.units),
                        tokens=p.tokens,
                        priority=p.cand.priority,
                        score=p.cand.score,
                        source_refs=cited(p.units),
                        truncated=p.truncated,
                    )
                    for p in mine
                ]
                sec = ContextSection(
                    name=name, title=TITLES[name], budget=budget.section(name), items=items
                )
                sec.tokens = self.counter.count(self.section_text(sec)) if items else 0
                sec.hash = sha(self.section_text(sec)) if items else ""
                sections.append(sec)
            if self.counter.count(self.text(sections)) <= total or not placed:
                return sections
            worst = max(placed.values(), key=lambda p: (-p.cand.priority, -p.cand.score))
            del placed[worst.cand.key]  # safety net: never over budget

    @staticmethod
    def section_text(sec: ContextSection) -> str:
        body = "\n".join(i.text for i in sec.items)
        return f"{sec.title}\n{body}" if sec.title and body else body

    def text(self, sections: Sequence[ContextSection]) -> str:
        return "\n\n".join(self.section_text(s) for s in sections if s.items)


__all__ = ["Placement", "Placer", "rank_candidates"]
