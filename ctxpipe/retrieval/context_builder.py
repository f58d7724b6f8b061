"""`build_context`: a token-budgeted prompt context (seed 003).

1. **Gather** — system prompt; the user's profile/preferences (query independent, a stable
   prefix); long-term memory and retrieved context (intent analysis → hybrid find per typed
   query); the session's recent conversation plus the query.
2. **Allocate** — `BudgetAllocator` by profile, with the long-conversation adjustment.
3. **Fill** — each section ranks its candidates by priority and score and keeps what fits its
   share (truncating the first that only partly fits); what a section leaves unused goes to a
   common pool that takes the remaining candidates of every section, highest priority first.
4. **Expand** — while the pool lasts, items are upgraded L0 → L1, then L1 → L2 (best first);
   a view that does not fit whole is cut at a line boundary.
5. **Assemble** — sections most stable first (system, preferences, memory, retrieval,
   conversation); the final text is counted with the real tokenizer and is never over budget.

Incremental builds reuse the session's previous snapshot (`ctxpipe.retrieval.incremental`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field

from ctxpipe.core.llm_schemas import TypedQuery
from ctxpipe.core.session import Message, RequestContext
from ctxpipe.fs import ContextFS
from ctxpipe.retrieval.budget import BudgetAllocator, ContextPriority, TokenBudget
from ctxpipe.retrieval.config import ContextConfig
from ctxpipe.retrieval.context_sources import (
    Candidate,
    cited,
    conversation_candidates,
    hit_candidates,
    preference_candidates,
    render,
)
from ctxpipe.retrieval.find import HybridFinder
from ctxpipe.retrieval.incremental import (
    ContextSnapshot,
    Delta,
    DeltaStats,
    InMemorySnapshotStore,
    SectionSnapshot,
    SnapshotStore,
    UpdateStrategy,
    select_strategy,
    sha,
)
from ctxpipe.retrieval.intent import IntentAnalyzer
from ctxpipe.retrieval.models import FindFilters, FindHit
from ctxpipe.retrieval.search import merge_by_rank, scope_filters
from ctxpipe.retrieval.text import Unit
from ctxpipe.retrieval.tokens import TokenCounter

log = logging.getLogger(__name__)

SECTION_ORDER = ("system_prompt", "user_prefs", "long_term", "retrieval", "short_term")
TITLES = {
    "system_prompt": "",
    "user_prefs": "## User preferences",
    "long_term": "## Long-term memory",
    "retrieval": "## Retrieved context",
    "short_term": "## Conversation",
}


class ContextRequest(BaseModel):
    query: str
    messages: list[Message] = Field(default_factory=list)
    budget: int | None = None
    profile: str = "default"
    system_prompt: str = ""
    incremental: bool = True


class ContextItem(BaseModel):
    key: str
    uri: str = ""
    view: int = 0
    text: str
    tokens: int
    priority: int
    score: float = 0.0
    source_refs: list[str] = Field(default_factory=list)
    truncated: bool = False


class ContextSection(BaseModel):
    name: str
    title: str
    budget: int
    tokens: int = 0
    items: list[ContextItem] = Field(default_factory=list)
    hash: str = ""


class ContextResult(BaseModel):
    text: str
    total_tokens: int
    budget: TokenBudget
    sections: list[ContextSection]
    cited_refs: list[str] = Field(default_factory=list)
    delta: Delta
    typed_queries: list[str] = Field(default_factory=list)
    profile_found: bool = True
    timings_ms: dict[str, float] = Field(default_factory=dict)


@dataclass
class _Placed:
    cand: Candidate
    view: int
    units: list[Unit]
    tokens: int
    truncated: bool = False


class ContextBuilder:
    def __init__(
        self,
        counter: TokenCounter,
        *,
        finder: HybridFinder | None = None,
        fs: ContextFS | None = None,
        intent: IntentAnalyzer | None = None,
        config: ContextConfig | None = None,
        allocator: BudgetAllocator | None = None,
        snapshots: SnapshotStore | None = None,
        schema: str = "ctx",
    ) -> None:
        self.counter = counter
        self.finder = finder
        self.fs = fs
        self.intent = intent
        self.config = config or ContextConfig()
        self.allocator = allocator or BudgetAllocator(self.config)
        self.snapshots = snapshots or InMemorySnapshotStore(self.config.snapshots_per_process)
        self.schema = schema
        self.stats = DeltaStats()

    # ------------------------------------------------------------------ public
    def build(
        self,
        req: ContextRequest,
        ctx: RequestContext,
        filters: FindFilters,
        *,
        hits: Sequence[FindHit] | None = None,
    ) -> ContextResult:
        """Build the context of `req` for `ctx`, retrieving within `filters` (or using the
        given `hits` as the retrieval results)."""
        t0 = time.perf_counter()
        timings: dict[str, float] = {}
        total = req.budget or self.config.default_budget
        prof, found = self.allocator.registry.get(req.profile)
        profile = prof.name
        system_hash = sha(req.system_prompt)
        query_hash = sha(" ".join(req.query.lower().split()))
        prev = self.snapshots.get(ctx.account_id, ctx.user_id, ctx.session_id)
        if not req.incremental:
            prev = None
        message_ids = [m.id for m in req.messages if not m.injected]
        conv = conversation_candidates(
            req.messages,
            req.query,
            ctx.session_id,
            max_turns=self.config.max_turns,
            recent_turns=self.config.recent_turns,
        )
        same_frame = (
            prev is not None
            and prev.system_hash == system_hash
            and prev.budget == total
            and prev.profile == profile
        )
        typed: list[str] = []
        if same_frame and prev is not None and prev.query_hash == query_hash:
            sections, budget = self._reuse(prev, conv, total, profile, req)
            retrieval_items = prev.retrieval_items
            retrieval_reused = True
        else:
            t1 = time.perf_counter()
            reuse = prev is not None and prev.query_hash == query_hash
            if hits is None:
                found_hits, typed = self._retrieve(req, ctx, filters, prev if reuse else None)
            else:
                found_hits, reuse = list(hits), False
            retrieval_items = [h.model_dump() | {"chunk_text": h.chunk_text} for h in found_hits]
            retrieval_reused = reuse
            timings["retrieve"] = (time.perf_counter() - t1) * 1000
            cands = self._candidates(req, ctx, found_hits, conv)
            turns = sum(1 for m in req.messages if m.role == "user")
            budget = self.allocator.allocate(
                total,
                has_retrieval=any(c.section == "retrieval" for c in cands),
                profile=req.profile,
                history_length=turns,
                system_tokens=self.counter.count(req.system_prompt),
            )
            t2 = time.perf_counter()
            placed = self._fill(cands, budget)
            self._expand(placed, total)
            sections = self._sections(placed, budget, total)
            timings["assemble"] = (time.perf_counter() - t2) * 1000
        text = self._text(sections)
        total_tokens = self.counter.count(text)
        assert total_tokens <= total, (total_tokens, total)
        delta = self._delta(prev, sections, message_ids, system_hash, total, profile)
        delta.retrieval_reused = retrieval_reused
        delta.delta_tokens = max(0, total_tokens - delta.tokens_saved)
        self.stats.count(delta)
        self.snapshots.put(
            ContextSnapshot(
                account_id=ctx.account_id,
                user_id=ctx.user_id,
                session_id=ctx.session_id,
                query=req.query,
                query_hash=query_hash,
                system_hash=system_hash,
                budget=total,
                profile=profile,
                message_ids=message_ids,
                sections=[
                    SectionSnapshot(
                        name=s.name,
                        hash=s.hash,
                        tokens=s.tokens,
                        text=self._section_text(s),
                        items=[i.model_dump() for i in s.items],
                    )
                    for s in sections
                ],
                retrieval_items=retrieval_items,
                total_tokens=total_tokens,
            )
        )
        refs: list[str] = []
        for s in sections:
            for it in s.items:
                refs.extend(r for r in it.source_refs if r not in refs)
        if self.finder is not None and self.finder.recall_stats is not None:
            recalled = [(i.uri, i.score) for s in sections for i in s.items if i.uri]
            self.finder.recall_stats.record_later(ctx.account_id, recalled)
        timings["total"] = (time.perf_counter() - t0) * 1000
        return ContextResult(
            text=text,
            total_tokens=total_tokens,
            budget=budget,
            sections=sections,
            cited_refs=refs,
            delta=delta,
            typed_queries=typed,
            profile_found=found,
            timings_ms=timings,
        )

    # ------------------------------------------------------------------ gathering
    def _retrieve(
        self,
        req: ContextRequest,
        ctx: RequestContext,
        filters: FindFilters,
        prev: ContextSnapshot | None,
    ) -> tuple[list[FindHit], list[str]]:
        if prev is not None:
            hits = [FindHit.model_validate(h) for h in prev.retrieval_items]
            for h, raw in zip(hits, prev.retrieval_items, strict=True):
                h.chunk_text = str(raw.get("chunk_text", ""))
            return hits, []
        if self.finder is None:
            return [], []
        typed = [TypedQuery(query=req.query, priority=1)] if req.query.strip() else []
        if self.intent is not None:
            typed = self.intent.analyze_sync(req.query, req.messages, ctx).queries
        per_query: list[list[FindHit]] = []
        k = max(self.config.memory_top_k, self.config.retrieval_top_k)
        for tq in typed:
            scoped = scope_filters(filters, tq, ctx.agent_id)
            per_query.append(self.finder.find(tq.query, scoped, k, record=False).hits)
        return merge_by_rank(per_query, 2 * k), [t.query for t in typed]

    def _candidates(
        self,
        req: ContextRequest,
        ctx: RequestContext,
        hits: Sequence[FindHit],
        conv: list[Candidate],
    ) -> list[Candidate]:
        cands: list[Candidate] = []
        if req.system_prompt.strip():
            cands.append(
                Candidate(
                    key="system",
                    section="system_prompt",
                    priority=int(ContextPriority.SYSTEM),
                    views=[[Unit(req.system_prompt.strip())]],
                )
            )
        if self.finder is not None and self.config.memory_top_k:
            try:
                cands += preference_candidates(
                    self.finder.db,
                    self.schema,
                    ctx.account_id,
                    ctx.user_space,
                    self.config.memory_top_k,
                    self.fs,
                )
            except Exception as exc:  # noqa: BLE001 - preferences are optional context
                log.warning("user preferences unavailable: %s", exc)
        taken = {c.uri for c in cands if c.uri}
        memory = [h for h in hits if h.context_type == "memory" and h.uri not in taken]
        other = [h for h in hits if h.context_type != "memory"]
        cands += hit_candidates(
            memory[: self.config.memory_top_k], "long_term", int(ContextPriority.EPISODIC), self.fs
        )
        cands += hit_candidates(
            other[: self.config.retrieval_top_k],
            "retrieval",
            int(ContextPriority.RETRIEVAL),
            self.fs,
        )
        for c in conv:
            c.section = "short_term"
        return cands + conv

    # ------------------------------------------------------------------ fill & expand
    def _header(self, section: str) -> int:
        return self.counter.count(TITLES[section])

    def _fit(self, cand: Candidate, view: int, room: int) -> _Placed | None:
        """The candidate's view in at most `room` tokens (cut at line boundaries)."""
        units = cand.view(view)
        if not units or room <= 0:
            return None
        n = self.counter.count(render(units))
        if n <= room:
            return _Placed(cand, view, list(units), n)
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
        return _Placed(cand, view, kept, self.counter.count(render(kept)), truncated=True)

    def _fill(self, cands: list[Candidate], budget: TokenBudget) -> dict[str, _Placed]:
        placed: dict[str, _Placed] = {}
        opened: set[str] = set()
        used = 0
        for section in SECTION_ORDER:
            room = budget.section(section)
            mine = rank_segments_c([c for c in cands if c.section == section])
            if not mine or room <= self._header(section):
                continue
            room -= self._header(section)
            for c in mine:
                p = self._fit(c, 0, room)
                if p is None or (p.truncated and p.tokens < 12):
                    continue
                placed[c.key] = p
                room -= p.tokens
                opened.add(section)
            if section in opened:
                used += budget.section(section) - room
        pool = budget.total - used
        for c in rank_segments_c([c for c in cands if c.key not in placed]):
            cost_header = 0 if c.section in opened else self._header(c.section)
            p = self._fit(c, 0, pool - cost_header)
            if p is None or p.truncated:
                continue
            placed[c.key] = p
            pool -= p.tokens + cost_header
            opened.add(c.section)
        return placed

    def _used(self, placed: dict[str, _Placed]) -> int:
        sections = {p.cand.section for p in placed.values()}
        return sum(p.tokens for p in placed.values()) + sum(self._header(s) for s in sections)

    def _expand(self, placed: dict[str, _Placed], total: int) -> None:
        """L0 → L1 for every expandable item (best first), then L1 → L2."""
        expandable = [
            p for p in placed.values() if p.cand.section in ("user_prefs", "long_term", "retrieval")
        ]
        order = rank_segments_c([p.cand for p in expandable])
        for view in (1, 2):
            for c in order:
                pool = total - self._used(placed)
                if pool <= 0:
                    return
                cur = placed[c.key]
                if cur.view != view - 1 or cur.truncated:
                    continue
                nxt = self._fit(c, view, cur.tokens + pool)
                if nxt is None or nxt.tokens <= cur.tokens:
                    continue
                if len(cited(nxt.units)) < len(cited(cur.units)) and nxt.truncated:
                    continue
                placed[c.key] = nxt

    # ------------------------------------------------------------------ assembly
    def _sections(
        self, placed: dict[str, _Placed], budget: TokenBudget, total: int
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
                sec.tokens = self.counter.count(self._section_text(sec)) if items else 0
                sec.hash = sha(self._section_text(sec)) if items else ""
                sections.append(sec)
            if self.counter.count(self._text(sections)) <= total or not placed:
                return sections
            worst = max(placed.values(), key=lambda p: (-p.cand.priority, -p.cand.score))
            del placed[worst.cand.key]  # safety net: never over budget

    @staticmethod
    def _section_text(sec: ContextSection) -> str:
        body = "\n".join(i.text for i in sec.items)
        return f"{sec.title}\n{body}" if sec.title and body else body

    def _text(self, sections: Sequence[ContextSection]) -> str:
        return "\n\n".join(self._section_text(s) for s in sections if s.items)

    # ------------------------------------------------------------------ incremental
    def _reuse(
        self,
        prev: ContextSnapshot,
        conv: list[Candidate],
        total: int,
        profile: str,
        req: ContextRequest,
    ) -> tuple[list[ContextSection], TokenBudget]:
        """Same frame and query: keep every stable section as it was; rebuild the conversation
        in what is left."""
        stable = [
            ContextSection(
                name=s.name,
                title=TITLES[s.name],
                budget=s.tokens,
                tokens=s.tokens,
                items=[ContextItem.model_validate(i) for i in s.items],
                hash=s.hash,
            )
            for s in prev.sections
            if s.name != "short_term"
        ]
        room = total - self.counter.count(self._text(stable)) - 2  # the "\n\n" joint
        for c in conv:
            c.section = "short_term"
        budget = TokenBudget(total=total, short_term=max(0, room), profile=profile)
        placed: dict[str, _Placed] = {}
        if conv and room > self._header("short_term"):
            left = room - self._header("short_term")
            for c in rank_segments_c(conv):
                p = self._fit(c, 0, left)
                if p is None or p.truncated:
                    continue
                placed[c.key] = p
                left -= p.tokens
        conv_sec = self._sections(placed, budget, max(0, room))[-1]
        return [*stable, conv_sec], budget

    def _delta(
        self,
        prev: ContextSnapshot | None,
        sections: list[ContextSection],
        message_ids: list[str],
        system_hash: str,
        total: int,
        profile: str,
    ) -> Delta:
        hashes = {s.name: s.hash for s in sections}
        strategy = select_strategy(
            prev,
            system_hash=system_hash,
            budget=total,
            profile=profile,
            section_hashes=hashes,
            message_ids=message_ids,
        )
        current = sha([hashes[n] for n in SECTION_ORDER])
        if prev is None or strategy == UpdateStrategy.FULL_REBUILD:
            return Delta(strategy=strategy, current_hash=current)
        previous = sha([(prev.section(n).hash if prev.section(n) else "") for n in SECTION_ORDER])
        modified, reused, saved = [], [], 0
        prefix = True
        for s in sections:
            old = prev.section(s.name)
            if (old.hash if old else "") == s.hash:
                reused.append(s.name)
                if prefix:
                    saved += s.tokens
            else:
                modified.append(s.name)
                prefix = False
        removed = [s.name for s in prev.sections if s.items and not hashes.get(s.name)]
        old_keys = {i["key"] for s in prev.sections for i in s.items}
        new_items = [i.key for s in sections for i in s.items if i.key not in old_keys]
        return Delta(
            strategy=strategy,
            previous_hash=previous,
            current_hash=current,
            new_messages=[m for m in message_ids if m not in set(prev.message_ids)],
            modified_sections=modified,
            removed_sections=removed,
            reused_sections=reused,
            new_retrieval_items=[k for k in new_items if not k.startswith(("msg:", "query"))],
            tokens_saved=saved,
        )


def rank_segments_c(cands: Sequence[Candidate]) -> list[Candidate]:
    """Candidates in seed 003 priority order (priority, then score, then given order)."""
    return sorted(cands, key=lambda c: (-c.priority, -c.score, c.order))


__all__ = ["ContextBuilder", "ContextItem", "ContextRequest", "ContextResult", "ContextSection"]
