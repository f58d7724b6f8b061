"""Every branch of the dedup cascade, including the degraded one."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import ctx
from test_policies import cand, pc

from ctxpipe.commit.context_writer import ContextWriter
from ctxpipe.commit.deduplicator import CandidateDeduplicator
from ctxpipe.core.config import DedupConfig
from ctxpipe.core.enums import DedupDecision, MemoryCategory, WriteAction
from ctxpipe.core.models import WritePlan
from ctxpipe.providers.base import EmbeddingVector, VectorHit, run_sync


class HashEmbedder:
    """Deterministic bag-of-words vectors: enough to exercise the cascade without a model."""

    model_name = "bow"
    dimension = 64

    def encode(self, texts):  # type: ignore[no-untyped-def]
        out = []
        for t in texts:
            v = [0.0] * self.dimension
            for w in t.lower().split():
                v[hash(w) % self.dimension] += 1.0
            n = sum(x * x for x in v) ** 0.5 or 1.0
            out.append([x / n for x in v])
        return out

    async def embed_texts(self, texts):  # type: ignore[no-untyped-def]
        return [EmbeddingVector(dense_vector=v) for v in self.encode(texts)]


class StaticIndex:
    def __init__(self, hits: list[VectorHit] | None = None, error: Exception | None = None):
        self.hits = hits or []
        self.error = error
        self.calls: list[dict[str, Any]] = []

    async def search(self, query_vector, filters, top_k=10, level=0):  # type: ignore[no-untyped-def]
        self.calls.append(filters)
        if self.error:
            raise self.error
        return self.hits[:top_k]


def store(comp, uri: str, abstract: str, category: MemoryCategory) -> None:  # type: ignore[no-untyped-def]
    plan = WritePlan(
        action=WriteAction.CREATE,
        target_uri=uri,
        category=category,
        node_patch={"abstract": abstract, "overview": abstract, "content": abstract},
        expected_version=0,
    )
    ContextWriter(comp.fs).apply_plan(ctx(), plan, "c0")


PREF = "ctx://acme/users/alice/memories/preferences/editor"


def dedup(comp, index=None, **cfg) -> CandidateDeduplicator:  # type: ignore[no-untyped-def]
    return CandidateDeduplicator(
        comp.fs, DedupConfig(**cfg), HashEmbedder() if index else None, index
    )


def test_in_commit_near_duplicate_merges_into_pending_plan(make_components):
    comp = make_components()
    p = pc()
    p.pending["ctx://acme/users/alice/memories/preferences/vim"] = WritePlan(
        action=WriteAction.CREATE,
        target_uri="x",
        category=MemoryCategory.PREFERENCES,
        node_patch={
            "abstract": "Prefers Vim keybindings in every editor",
            "content": "Prefers Vim keybindings in every editor",
        },
    )
    c = cand(MemoryCategory.PREFERENCES, "vim keys", "Prefers Vim keybindings in every editor")
    r = run_sync(dedup(comp).check(c, PREF, p))
    assert r.decision is DedupDecision.MERGE_EXISTING
    assert r.merge_target == "ctx://acme/users/alice/memories/preferences/vim"
    assert "this commit" in r.reason


def test_identical_content_at_routed_uri_is_skipped(make_components):
    comp = make_components()
    store(comp, PREF, "Prefers Vim", MemoryCategory.PREFERENCES)
    c = cand(MemoryCategory.PREFERENCES, "editor", "Prefers Vim")
    r = run_sync(dedup(comp).check(c, PREF, pc()))
    assert r.decision is DedupDecision.SKIP and "identical" in r.reason


def test_existing_node_at_routed_uri_is_merged(make_components):
    comp = make_components()
    store(comp, PREF, "Prefers Vim", MemoryCategory.PREFERENCES)
    c = cand(MemoryCategory.PREFERENCES, "editor", "Prefers Vim with a dark theme")
    r = run_sync(dedup(comp).check(c, PREF, pc()))
    assert r.decision is DedupDecision.MERGE_EXISTING and r.merge_target == PREF


def test_vector_hit_below_threshold_creates(make_components):
    comp = make_components()
    store(comp, PREF, "Prefers Vim", MemoryCategory.PREFERENCES)
    idx = StaticIndex([VectorHit(uri=PREF, score=0.42)])
    c = cand(MemoryCategory.PREFERENCES, "food", "Loves spicy ramen")
    r = run_sync(dedup(comp, idx).check(c, PREF + "-other", pc()))
    assert r.decision is DedupDecision.CREATE and "0.42" in r.reason
    assert idx.calls == [
        {"account_id": "acme", "owner_space": "users/alice", "category": "preferences"}
    ]


@pytest.mark.parametrize(
    ("category", "score", "expected"),
    [
        (MemoryCategory.PREFERENCES, 0.9, DedupDecision.MERGE_EXISTING),
        (MemoryCategory.EVENTS, 0.97, DedupDecision.SKIP),
        (MemoryCategory.EVENTS, 0.9, DedupDecision.CREATE),
    ],
)
def test_vector_hit_without_llm_decision(make_components, category, score, expected):
    comp = make_components()
    uri = f"ctx://acme/users/alice/memories/{category.value}/x"
    store(comp, uri, "Went hiking in the Alps", category)
    idx = StaticIndex([VectorHit(uri=uri, score=score)])
    c = cand(category, "hike", "Went hiking in the Alps last weekend")
    r = run_sync(dedup(comp, idx, enable_llm_decision=False).check(c, uri + "-new", pc()))
    assert r.decision is expected


def test_vector_hit_with_llm_decision(make_components):
    comp = make_components()
    uri = "ctx://acme/users/alice/memories/preferences/editor"
    store(comp, uri, "Prefers Vim as the editor", MemoryCategory.PREFERENCES)
    idx = StaticIndex([VectorHit(uri=uri, score=0.93)])
    same = cand(MemoryCategory.PREFERENCES, "vim", "Prefers Vim as the editor")
    r = run_sync(dedup(comp, idx).check(same, uri + "-2", pc()))
    assert r.decision is DedupDecision.SKIP
    assert r.reason.startswith("LLM decision at similarity 0.93")
    more = cand(
        MemoryCategory.PREFERENCES,
        "vim",
        "Prefers Vim as the editor, with relative line numbers and a dark theme",
    )
    r2 = run_sync(dedup(comp, idx).check(more, uri + "-2", pc()))
    assert r2.decision is DedupDecision.MERGE_EXISTING and r2.merge_target == uri


def test_unreachable_index_degrades_to_create_with_reason(make_components):
    comp = make_components()
    idx = StaticIndex(error=ConnectionError("connection refused"))
    d = dedup(comp, idx)
    c = cand(MemoryCategory.PREFERENCES, "food", "Loves ramen")
    r = run_sync(d.check(c, PREF, pc()))
    assert r.decision is DedupDecision.CREATE
    assert "index unreachable" in r.reason and "connection refused" in r.reason
    r2 = run_sync(d.check(cand(MemoryCategory.PREFERENCES, "tea", "Likes tea"), PREF, pc()))
    assert r2.decision is DedupDecision.CREATE and len(idx.calls) == 1  # not retried per item


def test_stale_index_hits_for_deleted_nodes_are_ignored(make_components):
    comp = make_components()
    idx = StaticIndex(
        [VectorHit(uri="ctx://acme/users/alice/memories/preferences/gone", score=0.99)]
    )
    c = cand(MemoryCategory.PREFERENCES, "food", "Loves ramen")
    r = run_sync(dedup(comp, idx).check(c, PREF, pc()))
    assert r.decision is DedupDecision.CREATE


@pytest.mark.parametrize(
    ("category", "expected"),
    [
        (MemoryCategory.PREFERENCES, DedupDecision.MERGE_EXISTING),
        (MemoryCategory.EVENTS, DedupDecision.SKIP),
    ],
)
def test_prefilter_decides_above_the_llm_band_without_a_call(make_components, category, expected):
    comp = make_components()
    uri = f"ctx://acme/users/alice/memories/{category.value}/x"
    store(comp, uri, "Went hiking in the Alps", category)
    idx = StaticIndex([VectorHit(uri=uri, score=0.97)])
    p = pc()
    c = cand(category, "hike", "Went hiking in the Alps last weekend")
    r = run_sync(dedup(comp, idx).check(c, uri + "-new", p))
    assert r.decision is expected and r.merge_target == uri
    assert "without the LLM" in r.reason
    assert p.usage.calls == 0  # the LLM was not asked


def test_llm_is_asked_only_inside_the_band(make_components):
    comp = make_components()
    uri = "ctx://acme/users/alice/memories/preferences/editor"
    store(comp, uri, "Prefers Vim as the editor", MemoryCategory.PREFERENCES)
    c = cand(MemoryCategory.PREFERENCES, "vim", "Prefers Vim as the editor")
    calls = []
    for score in (0.5, 0.9, 0.99):
        p = pc()
        run_sync(dedup(comp, StaticIndex([VectorHit(uri=uri, score=score)])).check(c, uri, p))
        run_sync(
            dedup(comp, StaticIndex([VectorHit(uri=uri, score=score)])).check(c, uri + "-2", p)
        )
        calls.append(p.usage.calls)
    assert calls == [0, 1, 0]


class LaggingIndex(StaticIndex):
    """A replica that has not indexed anything of the owner yet, with nodes in the outbox."""

    def __init__(self, pending: list[str]) -> None:
        super().__init__([])
        self.pending = pending
        self.prefixes: list[str] = []

    async def has_rows(self, account_id, owner_space, category):  # type: ignore[no-untyped-def]
        return False

    async def unindexed(self, account_id, prefix, limit=50):  # type: ignore[no-untyped-def]
        self.prefixes.append(prefix)
        return [u for u in self.pending if u.startswith(prefix)]


def test_a_node_the_replica_has_not_indexed_yet_is_still_a_duplicate(make_components):
    """Two commits in a row: the first one's node is on the FS, its upsert still in the
    outbox. The second commit's near-identical candidate merges into it instead of creating
    a twin the replica would only show later."""
    comp = make_components()
    uri = "ctx://acme/users/alice/memories/preferences/editor"
    store(comp, uri, "Alice prefers Vim for editing code", MemoryCategory.PREFERENCES)
    idx = LaggingIndex([uri])
    c = cand(MemoryCategory.PREFERENCES, "vim", "Alice prefers Vim for editing code")
    r = run_sync(dedup(comp, idx, enable_llm_decision=False).check(c, uri + "-2", pc()))
    assert r.decision is DedupDecision.MERGE_EXISTING and r.merge_target == uri
    assert r.score > 0.99
    assert idx.prefixes == ["ctx://acme/users/alice/memories/preferences/"]
    # something else beside it is still created
    other = cand(MemoryCategory.PREFERENCES, "food", "Loves spicy ramen")
    r = run_sync(dedup(comp, idx, enable_llm_decision=False).check(other, uri + "-3", pc()))
    assert r.decision is DedupDecision.CREATE
