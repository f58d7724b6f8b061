"""`build_context`: a token-budgeted prompt context.

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

Incremental builds reuse the session's previous snapshot (`ctxpipe.retrieval.context.snapshots`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import date

from ctxpipe.core.llm_schemas import TypedQuery
from ctxpipe.core.session import RequestContext
from ctxpipe.fs import ContextFS
from ctxpipe.retrieval.config import ContextConfig
from ctxpipe.retrieval.context.budget_allocator import BudgetAllocator, ContextPriority, TokenBudget
from ctxpipe.retrieval.context.candidates import (
    Candidate,
    conversation_candidates,
    hit_candidates,
    named_speaker,
    preference_candidates,
    speaks,
    superseded,
)
from ctxpipe.retrieval.context.context_request import (
    SECTION_ORDER,
    TITLES,
    ContextItem,
    ContextRequest,
    ContextResult,
    ContextSection,
)
from ctxpipe.retrieval.context.placer import Placement, Placer, rank_candidates
from ctxpipe.retrieval.context.snapshots import (
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
from ctxpipe.retrieval.find.hybrid_finder import HybridFinder
from ctxpipe.retrieval.models import FindFilters, FindHit
from ctxpipe.retrieval.search.hierarchical_retriever import hit_key
from ctxpipe.retrieval.search.intent_analyzer import IntentAnalyzer
from ctxpipe.retrieval.search.search_engine import merge_by_rank, scope_filters
from ctxpipe.retrieval.tokens import TokenCounter
from ctxpipe.retrieval.units.lexical import Unit

log = logging.getLogger(__name__)


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
        self.placer = Placer(counter)

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
        # what this request may see: a snapshot built for another agent or other filters is
        # never reused (it would hand one agent's memories to another)
        scope_hash = sha(f"{ctx.agent_id}\x1f{filters.model_dump_json()}")
        prev = self.snapshots.get(ctx.account_id, ctx.user_id, ctx.session_id)
        if not req.incremental or (prev is not None and prev.scope_hash != scope_hash):
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
            cands = self._candidates(req, ctx, found_hits, conv, filters.as_of)
            turns = sum(1 for m in req.messages if m.role == "user")
            budget = self.allocator.allocate(
                total,
                has_retrieval=any(c.section == "retrieval" for c in cands),
                profile=req.profile,
                history_length=turns,
                system_tokens=self.counter.count(req.system_prompt),
            )
            t2 = time.perf_counter()
            placed = self.placer.fill(cands, budget)
            self.placer.expand(placed, total)
            sections = self.placer.sections(placed, budget, total)
            timings["assemble"] = (time.perf_counter() - t2) * 1000
        text = self.placer.text(sections)
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
                scope_hash=scope_hash,
                budget=total,
                profile=profile,
                message_ids=message_ids,
                sections=[
                    SectionSnapshot(
                        name=s.name,
                        hash=s.hash,
                        tokens=s.tokens,
                        text=self.placer.section_text(s),
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
        k = self._evidence_k(req)
        asked = " ".join(req.query.lower().split())
        first: list[FindHit] = []
        if asked:  # the query as asked leads: its ranking is the strongest evidence we have
            first = self.finder.find(req.query, filters, k, record=False).hits
        per_query: list[list[FindHit]] = []
        for tq in typed:
            if " ".join(tq.query.lower().split()) == asked:
                continue
            scoped = scope_filters(filters, tq, ctx.agent_id)
            per_query.append(self.finder.find(tq.query, scoped, k, record=False).hits)
        if not per_query:
            return first, [t.query for t in typed]
        # then what the typed queries add (rewrites with the conversation, per-type scopes)
        have = {hit_key(h) for h in first}
        more = [h for h in merge_by_rank(per_query, 2 * k) if hit_key(h) not in have]
        return first + more, [t.query for t in typed]

    def _evidence_k(self, req: ContextRequest) -> int:
        """Hits asked of each typed query: enough to fill the budget with short views (a
        larger budget needs more evidence, not longer views of the same)."""
        total = req.budget or self.config.default_budget
        per_budget = total // max(1, self.config.tokens_per_hit)
        k = max(self.config.memory_top_k, self.config.retrieval_top_k, per_budget)
        return min(k, max(self.config.max_hits, self.config.memory_top_k))

    def _candidates(
        self,
        req: ContextRequest,
        ctx: RequestContext,
        hits: Sequence[FindHit],
        conv: list[Candidate],
        as_of: date | None = None,
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
                    as_of,
                )
            except Exception as exc:  # noqa: BLE001 - preferences are optional context
                log.warning("user preferences unavailable: %s", exc)
        # a profile or preference memory shown above may still be evidence: the line that
        # matched the query is kept (the novelty rule leaves out what the context holds)
        memory = [h for h in hits if h.context_type == "memory"]
        other = [h for h in hits if h.context_type != "memory"]
        k = self._evidence_k(req)
        evidence = hit_candidates(
            memory[: max(k, self.config.memory_top_k)],
            "long_term",
            int(ContextPriority.EPISODIC),
            self.fs,
            as_of=as_of,
        )
        evidence += hit_candidates(
            other[: max(k, self.config.retrieval_top_k)],
            "retrieval",
            int(ContextPriority.RETRIEVAL),
            self.fs,
            as_of=as_of,
            replies=self.config.replies,
        )
        rank = {hit_key(h): i for i, h in enumerate(hits)}
        closed = {hit_key(h) for h in hits if superseded(h, as_of)}
        named = named_speaker(req.query, hits) if self.config.about_speaker else ""
        for c in evidence:  # one ranking for both: the retrieval's
            c.order = rank.get(c.key, len(rank) + c.order)
            if named and not speaks(c, named):  # a turn of someone the query is not about
                c.order += len(rank) + len(evidence)
            if c.key in closed:  # a value that no longer holds: after every current one
                c.order += 2 * (len(rank) + len(evidence))
        cands += evidence
        for c in conv:
            c.section = "short_term"
        return cands + conv

    # ------------------------------------------------------------------ fill & expand
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
        room = total - self.counter.count(self.placer.text(stable)) - 2  # the "\n\n" joint
        for c in conv:
            c.section = "short_term"
        budget = TokenBudget(total=total, short_term=max(0, room), profile=profile)
        placed: dict[str, Placement] = {}
        if conv and room > self.placer.header("short_term"):
            left = room - self.placer.header("short_term")
            for c in rank_candidates(conv):
                p = self.placer.fit(c, 0, left)
                if p is None or p.truncated:
                    continue
                placed[c.key] = p
                left -= p.tokens
        conv_sec = self.placer.sections(placed, budget, max(0, room))[-1]
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
        previous = sha([(snap.hash if (snap := prev.section(n)) else "") for n in SECTION_ORDER])
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


__all__ = ["ContextBuilder", "ContextItem", "ContextRequest", "ContextResult", "ContextSection"]
