"""Hierarchical retrieval (HierarchicalRetriever) over the ctx:// tree.

For one typed query:

1. **global** — a search of the whole visible scope; its best ``global_top_k`` (3) items
   start the drill-down (the rest of its ``final_take`` items stay candidates);
2. **drill-down** — a priority queue of places to look into, best parent score first: the
   directory holding a hit (its sibling nodes) and the hit's node itself (its other chunks —
   L1/L2 lines — and its child nodes). Each look returns ``children_top_k`` (5) children,
   scored ``final = α·child + (1-α)·parent`` (α = 0.5); a child that is itself a node (or a
   directory with children) is queued with its final score as the parent score;
3. **convergence** — stop when the top score (the mean of the best ``final_take`` scores)
   moved less than ``convergence_threshold`` (0.001) for ``max_convergence_rounds`` (3) rounds
   in a row, or the queue is empty, or ``max_rounds`` is reached; return the best
   ``final_take`` (10) items.

Scores are the searcher's, in [0, 1] (the hybrid searcher scales the fused find score).

Every round is recorded in a trajectory (what was opened, with which parent score, what came
back with which child and final scores) so the drill-down can be inspected.
The searcher is a protocol, so the algorithm runs against in-memory fixtures in unit tests.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from typing import Protocol

from ctxpipe.core.uri import CtxURI, parse_uri
from ctxpipe.retrieval.config import HierarchicalConfig
from ctxpipe.retrieval.models import FindFilters, FindHit, TrajectoryStep, TypedQueryResult


class ChildSearcher(Protocol):
    """What hierarchical retrieval needs from the index."""

    def global_search(
        self, query: str, qvec: Sequence[float], filters: FindFilters, top_k: int
    ) -> list[FindHit]: ...

    def search_children(
        self, query: str, qvec: Sequence[float], filters: FindFilters, parent: str, top_k: int
    ) -> list[FindHit]:
        """Nodes (any chunk) whose parent directory is `parent`."""
        ...

    def search_within(
        self, query: str, qvec: Sequence[float], filters: FindFilters, uri: str, top_k: int
    ) -> list[FindHit]:
        """Chunks of node `uri` itself plus its child nodes' chunks."""
        ...


def hit_key(h: FindHit) -> str:
    """One returned unit: a chunk's part that cites these turns (find returns one hit per
    cited turn, several from one chunk), or the chunk itself when it cites none."""
    key = f"{h.uri}#{h.level}.{h.chunk_index}"
    return f"{key}@{','.join(sorted(h.source_refs))}" if h.source_refs else key


def parent_dir(uri: str) -> str | None:
    try:
        u: CtxURI = parse_uri(uri)
    except ValueError:
        return None
    if len(u.segments) <= 1:
        return None  # never drill into a whole owner space or scope root
    return str(u.parent.node)


class HierarchicalRetriever:
    def __init__(self, searcher: ChildSearcher, config: HierarchicalConfig | None = None) -> None:
        self.searcher = searcher
        self.config = config or HierarchicalConfig()

    def retrieve(
        self,
        query: str,
        qvec: Sequence[float],
        filters: FindFilters,
        *,
        context_type: str = "memory",
        intent: str = "",
        priority: int = 3,
    ) -> TypedQueryResult:
        cfg = self.config
        alpha = cfg.alpha
        best: dict[str, tuple[float, FindHit]] = {}
        trajectory: list[TrajectoryStep] = []
        counter = itertools.count()
        queue: list[tuple[float, int, str, str]] = []  # (-parent score, seq, target, kind)
        queued: set[tuple[str, str]] = set()

        def push(score: float, target: str | None, kind: str) -> None:
            if target is None or (target, kind) in queued:
                return
            queued.add((target, kind))
            heapq.heappush(queue, (-score, next(counter), target, kind))

        def offer(h: FindHit, final: float) -> bool:
            key = hit_key(h)
            cur = best.get(key)
            if cur is not None and cur[0] >= final:
                return False
            best[key] = (final, h.model_copy(update={"score": final}))
            return True

        def top_score() -> float:
            """Mean of the best `final_take` scores: it moves while drilling still improves
            what would be returned."""
            top = sorted((s for s, _ in best.values()), reverse=True)[: cfg.final_take]
            return sum(top) / len(top) if top else 0.0

        globals_ = self.searcher.global_search(
            query, qvec, filters, max(cfg.global_top_k, cfg.final_take)
        )
        for i, h in enumerate(globals_):
            offer(h, h.score)
            if i < cfg.global_top_k:  # the best few are drilled into
                push(h.score, parent_dir(h.uri), "directory")
                push(h.score, h.uri, "node")
        trajectory.append(
            TrajectoryStep(
                round=0,
                node="",
                kind="global",
                children=[(hit_key(h), h.score, h.score) for h in globals_[: cfg.global_top_k]],
                top_score=top_score(),
            )
        )
        rounds = 0
        stable = 0
        converged = False
        prev_top = top_score()
        while queue and rounds < cfg.max_rounds:
            neg, _, target, kind = heapq.heappop(queue)
            parent_score = -neg
            rounds += 1
            if kind == "directory":
                children = self.searcher.search_children(
                    query, qvec, filters, target, cfg.children_top_k
                )
            else:
                children = self.searcher.search_within(
                    query, qvec, filters, target, cfg.children_top_k
                )
            scored: list[tuple[str, float, float]] = []
            for c in children:
                final = alpha * c.score + (1 - alpha) * parent_score
                offer(c, final)
                scored.append((hit_key(c), c.score, final))
                if c.uri != target:
                    push(final, c.uri, "node")
            now_top = top_score()
            changed = abs(now_top - prev_top) >= cfg.convergence_threshold
            stable = 0 if changed else stable + 1
            prev_top = now_top
            trajectory.append(
                TrajectoryStep(
                    round=rounds,
                    node=target,
                    kind=kind,
                    parent_score=parent_score,
                    children=scored,
                    top_score=now_top,
                    changed=changed,
                )
            )
            if stable >= cfg.max_convergence_rounds:
                converged = True
                break
        if not queue:
            converged = True
        ranked = sorted(best.values(), key=lambda x: (-x[0], hit_key(x[1])))
        hits = [h for _, h in ranked[: cfg.final_take]]
        return TypedQueryResult(
            query=query,
            context_type=context_type,
            intent=intent,
            priority=priority,
            hits=hits,
            trajectory=trajectory,
            rounds=rounds,
            converged=converged,
        )


__all__ = ["ChildSearcher", "HierarchicalRetriever", "hit_key", "parent_dir"]
