"""Placing candidates in a token budget: per-section fill by priority, a common
pool for what sections leave unused, progressive expansion L0 → L1 → L2, and assembly of the
final text — counted with the real tokenizer and never over budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctxpipe.retrieval.budget import TokenBudget
from ctxpipe.retrieval.context_models import SECTION_ORDER, TITLES, ContextItem, ContextSection
from ctxpipe.retrieval.context_sources import Candidate, cited, render
from ctxpipe.retrieval.incremental import sha
from ctxpipe.retrieval.text import Unit
from ctxpipe.retrieval.tokens import TokenCounter


@dataclass
class Placement:
    cand: Candidate
    view: int
    units: list[Unit]
    tokens: int
    truncated: bool = False


def rank_candidates(cands: Sequence[Candidate]) -> list[Candidate]:
    """Candidates in priority order (priority, then score, then given order)."""
    return sorted(cands, key=lambda c: (-c.priority, -c.score, c.order))


class Placer:
    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter

    def header(self, section: str) -> int:
        return self.counter.count(TITLES[section])

    def fit(self, cand: Candidate, view: int, room: int) -> Placement | None:
        """The candidate's view in at most `room` tokens (cut at line boundaries)."""
        units = cand.view(view)
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
            cut = self.counter.truncate(u.text, left)
            if cut and len(cut) >= 8:
                kept.append(Unit(cut, list(u.refs)))
            break
        if not kept:
            return None
        return Placement(cand, view, kept, self.counter.count(render(kept)), truncated=True)

    def fill(self, cands: list[Candidate], budget: TokenBudget) -> dict[str, Placement]:
        placed: dict[str, Placement] = {}
        opened: set[str] = set()
        used = 0
        for section in SECTION_ORDER:
            room = budget.section(section)
            mine = rank_candidates([c for c in cands if c.section == section])
            if not mine or room <= self.header(section):
                continue
            room -= self.header(section)
            for c in mine:
                p = self.fit(c, 0, room)
                if p is None or (p.truncated and p.tokens < 12):
                    continue
                placed[c.key] = p
                room -= p.tokens
                opened.add(section)
            if section in opened:
                used += budget.section(section) - room
        pool = budget.total - used
        for c in rank_candidates([c for c in cands if c.key not in placed]):
            cost_header = 0 if c.section in opened else self.header(c.section)
            p = self.fit(c, 0, pool - cost_header)
            if p is None or p.truncated:
                continue
            placed[c.key] = p
            pool -= p.tokens + cost_header
            opened.add(c.section)
        return placed

    def used(self, placed: dict[str, Placement]) -> int:
        sections = {p.cand.section for p in placed.values()}
        return sum(p.tokens for p in placed.values()) + sum(self.header(s) for s in sections)

    def expand(self, placed: dict[str, Placement], total: int) -> None:
        """L0 → L1 for every expandable item (best first), then L1 → L2."""
        expandable = [
            p for p in placed.values() if p.cand.section in ("user_prefs", "long_term", "retrieval")
        ]
        order = rank_candidates([p.cand for p in expandable])
        for view in (1, 2):
            for c in order:
                pool = total - self.used(placed)
                if pool <= 0:
                    return
                cur = placed[c.key]
                if cur.view != view - 1 or cur.truncated:
                    continue
                nxt = self.fit(c, view, cur.tokens + pool)
                if nxt is None or nxt.tokens <= cur.tokens:
                    continue
                if len(cited(nxt.units)) < len(cited(cur.units)) and nxt.truncated:
                    continue
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
                    mine.sort(key=lambda p: (-p.cand.priority, -p.cand.score, p.cand.order))
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
