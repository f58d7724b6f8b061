"""Hierarchical retrieval against an in-memory tree: drill-down order, score
propagation, convergence, the trajectory. No servers."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ctxpipe.retrieval.config import HierarchicalConfig
from ctxpipe.retrieval.models import FindFilters, FindHit
from ctxpipe.retrieval.search.hierarchical_retriever import (
    HierarchicalRetriever,
    hit_key,
    parent_dir,
)

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


# the original constants (the shipped defaults were tuned on LoCoMo; the algorithm is the same)
SEED = HierarchicalConfig(global_top_k=3, alpha=0.5, pool=0)


def seed(**changes: object) -> HierarchicalConfig:
    return SEED.model_copy(update=changes)


def retrieve(cfg: HierarchicalConfig | None = None) -> tuple[TreeSearcher, object]:
    searcher = TreeSearcher()
    res = HierarchicalRetriever(searcher, cfg or SEED).retrieve("q", [0.0], FILTERS)
    return searcher, res


def test_parent_dir() -> None:
    assert parent_dir(f"{EVENTS}/trip") == EVENTS
    assert parent_dir("ctx://acme/users/u1") is None  # never a whole owner space


def test_global_then_drill_down_best_parent_first() -> None:
    searcher, res = retrieve(seed(max_convergence_rounds=100))
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
        _, res = retrieve(seed(alpha=alpha, max_convergence_rounds=100))
        best = {hit_key(h): h.score for h in res.hits}
        chunk = hit_key(node(f"{EVENTS}/trip", 0, 2, 0))
        assert best[chunk] == pytest.approx(alpha * 0.95 + (1 - alpha) * 0.90)
        for step in res.trajectory[1:]:
            for _key, child, final in step.children:
                assert final == pytest.approx(alpha * child + (1 - alpha) * step.parent_score)


def test_child_nodes_are_drilled_with_their_propagated_score() -> None:
    _, res = retrieve(seed(max_convergence_rounds=100))
    db = f"{ENTITIES}/atlas/db"
    step = next(s for s in res.trajectory if s.node == f"{ENTITIES}/atlas" and s.kind == "node")
    final = next(f for k, _, f in step.children if k.startswith(db + "#"))
    assert final == pytest.approx(0.5 * 0.6 + 0.5 * 0.8)
    later = next(s for s in res.trajectory if s.node == db)
    assert later.kind == "node" and later.parent_score == pytest.approx(final)


def test_convergence_after_rounds_without_change() -> None:
    cfg = seed(max_convergence_rounds=2, convergence_threshold=0.5)
    searcher, res = retrieve(cfg)
    assert res.converged
    assert res.rounds == 2  # two rounds that moved the top score by < 0.5
    assert [s.changed for s in res.trajectory[1:]] == [False, False]
    full_searcher, full = retrieve(seed(max_convergence_rounds=100))
    assert full.rounds > res.rounds and len(full_searcher.calls) > len(searcher.calls)


def test_max_rounds_and_final_take() -> None:
    _, res = retrieve(seed(max_rounds=1, final_take=2, max_convergence_rounds=99))
    assert res.rounds == 1 and len(res.hits) == 2 and not res.converged
    scores = [h.score for h in res.hits]
    assert scores == sorted(scores, reverse=True)


def test_results_are_best_first_and_unique() -> None:
    _, res = retrieve(seed(max_convergence_rounds=100))
    keys = [hit_key(h) for h in res.hits]
    assert len(keys) == len(set(keys)) and len(keys) <= 10
    assert [h.score for h in res.hits] == sorted((h.score for h in res.hits), reverse=True)
    assert res.hits[0].uri == f"{EVENTS}/trip" and res.hits[0].level == 2


def test_hits_of_one_chunk_citing_other_turns_are_different_items() -> None:
    """find returns one hit per cited turn, several from one archive chunk: none may be lost."""
    a = node(f"{EVENTS}/trip", 0.9, 2, 0).model_copy(update={"source_refs": ["s1:m1"]})
    b = a.model_copy(update={"source_refs": ["s1:m2"], "score": 0.8})
    assert hit_key(a) != hit_key(b)
    assert hit_key(a) == hit_key(a.model_copy(update={"score": 0.1}))
    assert hit_key(node(f"{EVENTS}/trip", 0.9)) == f"{EVENTS}/trip#0.0"  # cites nothing


class FixedFinder:
    """What PoolSearcher needs of a finder: ranked hits on one scale."""

    max_score = 1.0

    def best_score(self, query: str, as_of: object = None) -> float:
        return self.max_score

    def __init__(self, hits: list[FindHit]) -> None:
        self.hits = hits
        self.asked: list[int] = []

    def find(self, query: str, filters: FindFilters, top_k: int, **_: object) -> object:
        self.asked.append(top_k)
        return type("R", (), {"hits": self.hits[:top_k]})()


def test_pool_drill_down_reranks_finds_hits_on_finds_scale() -> None:
    from ctxpipe.retrieval.search.search_engine import PoolSearcher

    hits = [
        node(f"{EVENTS}/trip", 0.9),
        node(f"{ENTITIES}/atlas", 0.8),
        node(f"{ENTITIES}/marco", 0.3),
        node(f"{EVENTS}/move", 0.2),  # below the final take, a sibling of the best hit
        node(f"{ENTITIES}/atlas/db", 0.1),  # a child node of atlas
    ]
    finder = FixedFinder(hits)
    cfg = HierarchicalConfig(final_take=3, global_top_k=1, alpha=0.5, pool=5)
    res = HierarchicalRetriever(PoolSearcher(finder, 5), cfg).retrieve("q", [0.0], FILTERS)  # type: ignore[arg-type]
    assert finder.asked == [5]  # one find, the whole pool: no query per directory
    got = {h.uri: round(h.score, 3) for h in res.hits}
    # the best hit's sibling climbs past a weaker unrelated hit: 0.5*0.2 + 0.5*0.9 = 0.55
    assert list(got) == [f"{EVENTS}/trip", f"{ENTITIES}/atlas", f"{EVENTS}/move"]
    assert got[f"{EVENTS}/move"] == 0.55
    # nothing outside the pool is invented, and find's own best keeps its score
    assert got[f"{EVENTS}/trip"] == 0.9
