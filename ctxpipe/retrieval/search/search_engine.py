"""`search(query, session)`: intent analysis → typed queries → hierarchical retrieval each →
one merged, grouped result."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ctxpipe.core.llm_schemas import TypedQuery
from ctxpipe.core.session import Message, RequestContext
from ctxpipe.retrieval.config import HierarchicalConfig
from ctxpipe.retrieval.find.hybrid_finder import HybridFinder
from ctxpipe.retrieval.models import FindFilters, FindHit, SearchResult, TypedQueryResult
from ctxpipe.retrieval.search.hierarchical_retriever import (
    HierarchicalRetriever,
    hit_key,
    parent_dir,
)
from ctxpipe.retrieval.search.intent_analyzer import IntentAnalyzer, IntentResult


class FinderSearcher:
    """`ChildSearcher` over the hybrid finder (the index replica)."""

    def __init__(self, finder: HybridFinder) -> None:
        self.finder = finder

    def _find(
        self, query: str, qvec: Sequence[float], filters: FindFilters, top_k: int
    ) -> list[FindHit]:
        """Hits with their fused score scaled to [0, 1] (by the best score it can reach)."""
        hits = self.finder.find(query, filters, top_k, query_vector=qvec, record=False).hits
        top = self.finder.best_score(query, filters.as_of)
        return [h.model_copy(update={"score": min(1.0, h.score / top)}) for h in hits]

    def global_search(
        self, query: str, qvec: Sequence[float], filters: FindFilters, top_k: int
    ) -> list[FindHit]:
        return self._find(query, qvec, filters, top_k)

    def search_children(
        self, query: str, qvec: Sequence[float], filters: FindFilters, parent: str, top_k: int
    ) -> list[FindHit]:
        return self._find(query, qvec, filters.narrowed(parent_uris=[parent]), top_k)

    def search_within(
        self, query: str, qvec: Sequence[float], filters: FindFilters, uri: str, top_k: int
    ) -> list[FindHit]:
        own = self._find(query, qvec, filters.narrowed(uris=[uri]), top_k)
        kids = self._find(query, qvec, filters.narrowed(parent_uris=[uri]), top_k)
        merged = sorted(own + kids, key=lambda h: -h.score)
        return merged[:top_k]


class PoolSearcher:
    """`ChildSearcher` over find's best `pool` hits for one query: the global step is find,
    and drilling into a directory or a node re-ranks the pool's hits under it with the
    parent's score, on find's own scale (a search inside a narrower scope would rank its best
    chunk first whatever its score in the whole scope). One per typed query."""

    def __init__(self, finder: HybridFinder, pool: int) -> None:
        self.inner = FinderSearcher(finder)
        self.pool = pool
        self._hits: list[FindHit] = []

    def global_search(
        self, query: str, qvec: Sequence[float], filters: FindFilters, top_k: int
    ) -> list[FindHit]:
        self._hits = self.inner.global_search(query, qvec, filters, max(top_k, self.pool))
        return self._hits[:top_k]

    def search_children(
        self, query: str, qvec: Sequence[float], filters: FindFilters, parent: str, top_k: int
    ) -> list[FindHit]:
        return [h for h in self._hits if parent_dir(h.uri) == parent][:top_k]

    def search_within(
        self, query: str, qvec: Sequence[float], filters: FindFilters, uri: str, top_k: int
    ) -> list[FindHit]:
        return [h for h in self._hits if uri in (h.uri, parent_dir(h.uri))][:top_k]


def scope_filters(base: FindFilters, tq: TypedQuery, agent_id: str | None) -> FindFilters:
    """Where a typed query looks: memory → every visible memory and session (the
    memory root is 'across user and agent'); resource → resources; skill → the shared skills
    and the agent's own memories (cases, patterns, skills)."""
    root = f"ctx://{base.account_id}/"
    if tq.context_type == "resource":
        prefixes = [root + "resources/"]
    elif tq.context_type == "skill":
        prefixes = [root + "skills/"]
        if agent_id:
            prefixes.append(f"{root}agents/{agent_id}/")
    else:
        return base
    if base.uri_prefixes:  # the caller's --scope narrows further, it is never widened
        prefixes = [
            narrower
            for p in prefixes
            for q in base.uri_prefixes
            for narrower in ([q] if q.startswith(p) else [p] if p.startswith(q) else [])
        ]
        if not prefixes:
            return base  # nothing of this type inside the caller's scope: keep the scope
    return base.narrowed(uri_prefixes=list(dict.fromkeys(prefixes)))


class SearchEngine:
    def __init__(
        self,
        finder: HybridFinder,
        intent: IntentAnalyzer,
        config: HierarchicalConfig | None = None,
    ) -> None:
        self.finder = finder
        self.intent = intent
        self.config = config or HierarchicalConfig()
        self.retriever = HierarchicalRetriever(FinderSearcher(finder), self.config)

    def _retriever(self) -> HierarchicalRetriever:
        """The hierarchical retriever, over a fresh pool of find's hits when pooling."""
        if self.config.pool:
            return HierarchicalRetriever(PoolSearcher(self.finder, self.config.pool), self.config)
        return self.retriever

    def search(
        self,
        query: str,
        filters: FindFilters,
        *,
        recent: Sequence[Message | dict[str, Any]] = (),
        ctx: RequestContext | None = None,
        agent_id: str | None = None,
        record: bool = True,
    ) -> SearchResult:
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        intent: IntentResult = self.intent.analyze_sync(query, recent, ctx)
        timings["intent"] = (time.perf_counter() - t0) * 1000
        results: list[TypedQueryResult] = []
        if intent.queries:
            t1 = time.perf_counter()
            vectors = self.finder.embedder.encode([q.query for q in intent.queries])
            timings["embed"] = (time.perf_counter() - t1) * 1000
            t2 = time.perf_counter()
            for tq, vec in zip(intent.queries, vectors, strict=True):
                scoped = scope_filters(filters, tq, agent_id or (ctx.agent_id if ctx else None))
                res = self._retriever().retrieve(
                    tq.query,
                    vec,
                    scoped,
                    context_type=tq.context_type,
                    intent=tq.intent,
                    priority=tq.priority,
                )
                if not res.hits and scoped is not filters:
                    # nothing of that type exists here: look in memory instead
                    res = self._retriever().retrieve(
                        tq.query,
                        vec,
                        filters,
                        context_type=tq.context_type,
                        intent=tq.intent + " (memory fallback)",
                        priority=tq.priority,
                    )
                results.append(res)
            timings["retrieve"] = (time.perf_counter() - t2) * 1000
        hits = merge_results(results, self.config.final_take)
        groups: dict[str, list[FindHit]] = {}
        for h in sorted(hits, key=lambda h: -h.score):
            groups.setdefault(h.context_type or "memory", []).append(h)
        if record and hits and self.finder.recall_stats is not None:
            self.finder.recall_stats.record_hits_later(filters.account_id, hits)
        timings["total"] = (time.perf_counter() - t0) * 1000
        return SearchResult(
            query=query,
            reasoning=intent.reasoning,
            intent_source=intent.source,
            queries=results,
            groups=groups,
            timings_ms=timings,
        )


def merge_by_rank(lists: Sequence[Sequence[FindHit]], take: int) -> list[FindHit]:
    """Round-robin over ranked hit lists (first list first); each item once (best score)."""
    best: dict[str, FindHit] = {}
    order: list[str] = []
    depth = max((len(hs) for hs in lists), default=0)
    for i in range(depth):
        for hs in lists:
            if i >= len(hs):
                continue
            h = hs[i]
            key = hit_key(h)
            if key not in best:
                order.append(key)
                best[key] = h
            elif h.score > best[key].score:
                best[key] = h
    return [best[k] for k in order[:take]]


def merge_results(results: Sequence[TypedQueryResult], take: int) -> list[FindHit]:
    """Interleave the typed queries' hits by priority (1 first), each item once."""
    ordered = sorted(results, key=lambda r: r.priority)
    return merge_by_rank([r.hits for r in ordered], take)


__all__ = [
    "FinderSearcher",
    "PoolSearcher",
    "SearchEngine",
    "merge_by_rank",
    "merge_results",
    "scope_filters",
]
