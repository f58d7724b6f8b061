"""find's arms on 9,000 synthetic chunks of 60 owners (structured vectors loaded by COPY; the
queries bring their own vectors): owner-filtered recall of the vector arm against an exact
scan, the plan chosen by the owner's row count, and a cold scope's text arm ranking as a warm
one's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from api_world import fresh_schema

from ctxpipe.retrieval.config import FindConfig
from ctxpipe.retrieval.find.hybrid_finder import HybridFinder
from ctxpipe.retrieval.models import FindFilters
from ctxpipe.retrieval.units.lexical import query_terms

RECALL_SCHEMA = "rt_find_recall"
OWNERS, PER_OWNER, DIM = 60, 150, 384


BASE = np.random.default_rng(3).normal(size=(300, DIM)).astype(np.float32)


def _mix(rng: np.random.Generator) -> np.ndarray:
    """Like sentence embeddings: a mix of two of 300 directions plus a little noise."""
    a, b = rng.integers(len(BASE), size=2)
    w = rng.uniform(0.6, 1.0)
    v = w * BASE[a] / np.linalg.norm(BASE[a]) + (1 - w) * BASE[b] / np.linalg.norm(BASE[b])
    v = v + rng.normal(scale=0.02, size=DIM).astype(np.float32)
    return (v / np.linalg.norm(v)).astype(np.float32)


def _rows(rng: np.random.Generator) -> Iterator[tuple[Any, ...]]:
    for o in range(OWNERS):
        for i in range(PER_OWNER):
            yield o, i, _mix(rng)


@pytest.fixture(scope="module")
def synthetic(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HybridFinder]:
    """9,000 chunks of 60 owners (1.7 % each) with structured unit vectors, loaded by COPY."""
    fresh_schema(pg_url, RECALL_SCHEMA)
    rng = np.random.default_rng(7)
    with psycopg.connect(pg_url) as conn:
        with conn.cursor() as cur:
            with cur.copy(
                f"COPY {RECALL_SCHEMA}.context_nodes (uri, account_id, owner_space, version) "
                "FROM STDIN"
            ) as cp:
                for o in range(OWNERS):
                    for i in range(PER_OWNER):
                        cp.write_row(
                            (f"ctx://syn/users/o{o}/memories/n{i}", "syn", f"users/o{o}", 1)
                        )
            with cur.copy(
                f"COPY {RECALL_SCHEMA}.context_chunks (chunk_id, uri, account_id, level, "
                "text_content, embedding, context_type, owner_space) FROM STDIN"
            ) as cp:
                for o, i, v in _rows(rng):
                    vec = "[" + ",".join(f"{x:.6f}" for x in v) + "]"
                    uri = f"ctx://syn/users/o{o}/memories/n{i}"
                    note = f"note {i} of owner {o}"
                    cp.write_row((f"c{o}-{i}", uri, "syn", 0, note, vec, "memory", f"users/o{o}"))
        conn.execute(f"ANALYZE {RECALL_SCHEMA}.context_chunks")
    from ctxpipe.providers.embedder import PACKAGED_MODEL, SentenceTransformerEmbedder
    from ctxpipe.retrieval.tokens import counter_for_model
    from ctxpipe.storage.db import Database

    db = Database(pg_url, min_size=1, max_size=2)
    finder = HybridFinder(
        db,
        SentenceTransformerEmbedder(PACKAGED_MODEL, device="cpu"),
        counter_for_model(PACKAGED_MODEL),
        schema=RECALL_SCHEMA,
        config=FindConfig(exact_scan_max_rows=2000, record_recalls=False),
    )
    yield finder
    db.close()


def _vector_arm(
    finder: HybridFinder, q: np.ndarray, filters: FindFilters, plan: str | None
) -> tuple[list[str], str, int]:
    cand = finder.store.candidates("", list(q), filters, finder.config.candidates, plan=plan)
    ranked = sorted(cand.rows, key=lambda r: r.vr if r.vr is not None else 1 << 30)
    return [r.chunk_id for r in ranked][:10], cand.plan, cand.scope_rows


def test_owner_filtered_search_keeps_recall(synthetic: HybridFinder) -> None:
    rng = np.random.default_rng(11)
    recalls: dict[str, list[float]] = {"chosen": [], "hnsw": [], "unfiltered": []}
    plans = set()
    for _ in range(25):
        q = _mix(rng)
        owner = FindFilters(account_id="syn", owner_spaces=[f"users/o{rng.integers(OWNERS)}"])
        truth = {c for c, _ in synthetic.exact_neighbours(list(q), owner, 10)}
        got, plan, n = _vector_arm(synthetic, q, owner, None)
        plans.add((plan, n))
        recalls["chosen"].append(len(truth & set(got)) / 10)
        forced, _, _ = _vector_arm(synthetic, q, owner, "hnsw")
        recalls["hnsw"].append(len(truth & set(forced)) / 10)
        everyone = FindFilters(account_id="syn")
        truth_all = {c for c, _ in synthetic.exact_neighbours(list(q), everyone, 10)}
        got_all, plan_all, _ = _vector_arm(synthetic, q, everyone, None)
        assert plan_all == "hnsw"  # 9,000 rows > exact_scan_max_rows
        recalls["unfiltered"].append(len(truth_all & set(got_all)) / 10)
    assert plans == {("exact", PER_OWNER)}  # a small owner is scanned exactly
    assert np.mean(recalls["chosen"]) == 1.0
    assert np.mean(recalls["unfiltered"]) >= 0.9
    # HNSW with iterative scans still fills the owner's LIMIT (pgvector >= 0.8)
    assert np.mean(recalls["hnsw"]) >= 0.8


def test_plan_choice_follows_the_owner_row_count(synthetic: HybridFinder) -> None:
    q = list(np.ones(DIM, dtype=np.float32) / np.sqrt(DIM))
    small = FindFilters(account_id="syn", owner_spaces=["users/o1"])
    many = FindFilters(account_id="syn", owner_spaces=[f"users/o{i}" for i in range(20)])
    assert synthetic.find("note", small, 3, query_vector=q).plan == "exact"
    assert synthetic.find("note", many, 3, query_vector=q).plan == "hnsw"  # 3,000 rows


def _arms(finder: HybridFinder, query: str, filters: FindFilters) -> tuple[Any, Any]:
    """The text arm of a scope not seen lately (one statement that also counts the scope and
    its terms), then the same with the statistics counted first (cached, then the arm)."""
    store = finder.store
    store.invalidate()
    cold = store.text_arm(query, filters, 40)
    store.invalidate()
    store.scope_stats(filters)
    store.term_df(filters, query_terms(query), "exact")
    warm = store.text_arm(query, filters, 40)
    return cold, warm


def test_a_cold_scope_ranks_the_text_arm_as_a_warm_one(synthetic: HybridFinder) -> None:
    rng = np.random.default_rng(5)
    for _ in range(12):
        o, i = rng.integers(OWNERS), rng.integers(PER_OWNER)
        for filters in (
            FindFilters(account_id="syn", owner_spaces=[f"users/o{o}"]),
            FindFilters(account_id="syn", owner_spaces=[f"users/o{o}", "users/o0"], levels=[0]),
            FindFilters(account_id="syn", owner_spaces=[f"users/o{o}"], categories=["none"]),
        ):
            cold, warm = _arms(synthetic, f"note {i} of owner {o}", filters)
            assert (cold.plan, cold.scope_rows, cold.text_terms, cold.ids) == (
                warm.plan,
                warm.scope_rows,
                warm.text_terms,
                warm.ids,
            )
            assert cold.scores == pytest.approx(warm.scores, rel=1e-12)
            assert cold.idf == pytest.approx(warm.idf, rel=1e-12)
            assert cold.sources == warm.sources and len(cold.sources) == len(cold.ids)
    # its counts are cached: the next query of the scope reads only the matching chunks
    assert synthetic.store.scope_stats(filters)[0] == PER_OWNER
    # a scope above the exact-scan limit is left to the large-scope path
    many = FindFilters(account_id="syn", owner_spaces=[f"users/o{i}" for i in range(20)])
    cold, warm = _arms(synthetic, "note 7 of owner 3", many)
    assert cold.plan == warm.plan == "hnsw" and cold.ids == warm.ids and cold.ids
    assert cold.scores == pytest.approx(warm.scores, rel=1e-12)
    # a plan asked for is kept when a cold scope turns out large, as when it is warm
    store = synthetic.store
    store.invalidate()
    forced = store.text_arm("note 7 of owner 3", many, 40, plan="exact")
    assert (
        forced.plan == "exact" == store.text_arm("note 7 of owner 3", many, 40, plan="exact").plan
    )
