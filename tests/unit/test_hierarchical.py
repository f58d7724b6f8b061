"""Hierarchical retrieval (seed 001) against an in-memory tree: drill-down order, score
propagation, convergence, the trajectory. No servers."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ctxpipe.retrieval.config import HierarchicalConfig
from ctxpipe.retrieval.hierarchical import HierarchicalRetriever, hit_key, parent_dir
from ctxpipe.retrieval.models import FindFilters, FindHit

ROOT = "ctx://acme/users/u1/memories"
EVENTS, ENTITIES = f"{ROOT}/events", f"{ROOT}/entities"
FILTERS = FindFilters(account_id="acme", owner_spaces=["users/u1"])


def node(uri: str, score: float, level: int = 0, chunk: int = 0) -> FindHit:
    return FindHit(
        uri=uri,
        level=level,
        chunk_index=chunk,
        score=score,
        similarity=score,
        parent_uri=uri.rsplit("/", 1)[0],
        text=f"{uri.rsplit('/', 1)[1]} L{level}.{chunk}",
    )


class TreeSearcher:
    """Scores are fixed per item; records every call (the drill-down order)."""

    def __init__(self) -> None:
        self.nodes = {
            f"{EVENTS}/trip": 0.90,
            f"{EVENTS}/party": 0.40,
            f"{EVENTS}/move": 0.70,
            f"{ENTITIES}/atlas": 0.80,
            f"{ENTITIES}/marco": 0.20,
            f"{ENTITIES}/atlas/db": 0.60,  # a child node of atlas
        }
        self.chunks = {
            f"{EVENTS}/trip": [node(f"{EVENTS}/trip", 0.95, 2, 0), node(f"{EVENTS}/trip", 0.3, 1)],
            f"{ENTITIES}/atlas": [node(f"{ENTITIES}/atlas", 0.5, 2, 0)],
        }
        self.calls: list[tuple[str, str]] = []

    def global_search(
        self, query: str, qvec: Sequence[float], filters: FindFilters, top_k: int
    ) -> list[FindHit]:
        self.calls.append(("global", ""))
        ranked = sorted(self.nodes.items(), key=lambda kv: -kv[1])
        return [node(u, s) for u, s in ranked[:top_k]]

    def search_children(
        self, query: str, qvec: Sequence[float], filters: FindFilters, parent: str, top_k: int
    ) -> list[FindHit]:
        self.calls.append(("directory", parent))
        kids = [node(u, s) for u, s in self.nodes.items() if u.rsplit("/", 1)[0] == parent]
        return sorted(kids, key=lambda h: -h.score)[:top_k]

    def search_within(
        self, query: str, qvec: Sequence[float], filters: FindFilters, uri: str, top_k: int
    ) -> list[FindHit]:
        self.calls.append(("node", uri))
        own = list(self.chunks.get(uri, []))
        kids = [node(u, s) for u, s in self.nodes.items() if u.rsplit("/", 1)[0] == uri]
        return sorted(own + kids, key=lambda h: -h.score)[:top_k]


def retrieve(cfg: HierarchicalConfig | None = None) -> tuple[TreeSearcher, object]:
    searcher = TreeSearcher()
    res = HierarchicalRetriever(searcher, cfg or HierarchicalConfig()).retrieve("q", [0.0], FILTERS)
    return searcher, res


def test_parent_dir() -> None:
    assert parent_dir(f"{EVENTS}/trip") == EVENTS
    assert parent_dir("ctx://acme/users/u1") is None  # never a whole owner space


def test_global_then_drill_down_best_parent_first() -> None:
    searcher, res = retrieve(HierarchicalConfig(max_convergence_rounds=100))
    assert searcher.calls[0] == ("global", "")
    steps = res.trajectory
    assert steps[0].kind == "global"
    assert [c[0] for c in steps[0].children] == [
        hit_key(node(f"{EVENTS}/trip", 0)),
        hit_key(node(f"{ENTITIES}/atlas", 0)),
        hit_key(node(f"{EVENTS}/move", 0)),
    ]
    # the queue is ordered by parent score: trip's directory and node (0.90) come first,
    # then atlas (0.80), then move (0.70)
    drilled = [(s.kind, s.node, round(s.parent_score, 3)) for s in steps[1:4]]
    assert drilled[0][2] == drilled[1][2] == 0.9
    assert {drilled[0][1], drilled[1][1]} == {EVENTS, f"{EVENTS}/trip"}
    parents = [s.parent_score for s in steps[1:]]
    assert parents[:4] == sorted(parents[:4], reverse=True)
    assert all(s.round == i for i, s in enumerate(steps))


def test_score_propagation_final_is_alpha_child_plus_rest_parent() -> None:
    for alpha in (0.5, 0.2, 1.0):
        _, res = retrieve(HierarchicalConfig(alpha=alpha, max_convergence_rounds=100))
        best = {hit_key(h): h.score for h in res.hits}
        chunk = hit_key(node(f"{EVENTS}/trip", 0, 2, 0))
        assert best[chunk] == pytest.approx(alpha * 0.95 + (1 - alpha) * 0.90)
        for step in res.trajectory[1:]:
            for _key, child, final in step.children:
                assert final == pytest.approx(alpha * child + (1 - alpha) * step.parent_score)


def test_child_nodes_are_drilled_with_their_propagated_score() -> None:
    _, res = retrieve(HierarchicalConfig(max_convergence_rounds=100))
    db = f"{ENTITIES}/atlas/db"
    step = next(s for s in res.trajectory if s.node == f"{ENTITIES}/atlas" and s.kind == "node")
    final = next(f for k, _, f in step.children if k.startswith(db + "#"))
    assert final == pytest.approx(0.5 * 0.6 + 0.5 * 0.8)
    later = next(s for s in res.trajectory if s.node == db)
    assert later.kind == "node" and later.parent_score == pytest.approx(final)


def test_convergence_after_rounds_without_change() -> None:
    cfg = HierarchicalConfig(max_convergence_rounds=2, convergence_threshold=0.5)
    searcher, res = retrieve(cfg)
    assert res.converged
    assert res.rounds == 2  # two rounds that moved the top score by < 0.5
    assert [s.changed for s in res.trajectory[1:]] == [False, False]
    full_searcher, full = retrieve(HierarchicalConfig(max_convergence_rounds=100))
    assert full.rounds > res.rounds and len(full_searcher.calls) > len(searcher.calls)


def test_max_rounds_and_final_take() -> None:
    _, res = retrieve(HierarchicalConfig(max_rounds=1, final_take=2, max_convergence_rounds=99))
    assert res.rounds == 1 and len(res.hits) == 2 and not res.converged
    scores = [h.score for h in res.hits]
    assert scores == sorted(scores, reverse=True)


def test_results_are_best_first_and_unique() -> None:
    _, res = retrieve(HierarchicalConfig(max_convergence_rounds=100))
    keys = [hit_key(h) for h in res.hits]
    assert len(keys) == len(set(keys)) and len(keys) <= 10
    assert [h.score for h in res.hits] == sorted((h.score for h in res.hits), reverse=True)
    assert res.hits[0].uri == f"{EVENTS}/trip" and res.hits[0].level == 2
