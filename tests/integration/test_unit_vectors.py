"""Index-time unit vectors on real PostgreSQL/pgvector with the real model: the lines and
sentences `find` ranks are embedded when a node is indexed, reused while their text is
unchanged, removed with their node, and let a query embed only the question."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
import pytest

from ctxpipe.core.config import ChunkingConfig
from ctxpipe.core.enums import ContextType, OutboxEventType
from ctxpipe.core.models import ContextNode, OutboxEvent
from ctxpipe.index.indexer import Indexer
from ctxpipe.index.reindex import reindex
from ctxpipe.index.wiring import make_outbox, make_replica, make_worker
from ctxpipe.retrieval.config import FindConfig
from ctxpipe.retrieval.find.hybrid_finder import HybridFinder
from ctxpipe.retrieval.models import FindFilters
from ctxpipe.retrieval.tokens import counter_for_model
from ctxpipe.retrieval.units.lexical import unit_key, unit_texts
from ctxpipe.runtime import Runtime

ARCHIVE = "ctx://acme/sessions/s1/archives/1"
PREF = "ctx://acme/users/alice/memories/preferences/go"
TURNS = [
    ("m1", "user", "I adopted a golden retriever puppy named Biscuit. He chews my shoes."),
    ("m2", "assistant", "Congratulations! Try a bitter apple spray on the shoes."),
    ("m3", "user", "I am training for the Lisbon half marathon in May. It starts at nine."),
    ("m4", "assistant", "Good luck! Keep your long runs slow."),
    ("m5", "user", "At work I lead the payments team. We are moving the ledger to PostgreSQL."),
    ("m6", "user", "My sister Clara visits from Porto next Friday. We will hike in Sintra."),
]


class CountingEmbedder:
    """The runtime's embedder, recording the texts of every `encode` and `encode_spans` call
    (what the model reads)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.calls: list[list[str]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def dimension(self) -> int:
        return int(self.inner.dimension)

    @property
    def max_seq_length(self) -> int:
        return int(self.inner.max_seq_length)

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return self.inner.encode(texts)  # type: ignore[no-any-return]

    def encode_spans(self, texts: Sequence[str], spans: Any, *, fit: bool = False) -> Any:
        self.calls.append(list(texts))
        return self.inner.encode_spans(texts, spans, fit=fit)

    @property
    def texts(self) -> list[str]:
        return [t for call in self.calls for t in call]


@pytest.fixture
def rt(make_settings: Any, clean_db: str) -> Iterator[Runtime]:
    runtime = Runtime(make_settings(redis=False))
    yield runtime
    runtime.close()


def archive_node(rt: Runtime) -> ContextNode:
    ids = [m for m, _, _ in TURNS]
    return rt.fs.write_node(
        ContextNode(
            uri=ARCHIVE,
            abstract="Alice talked about her dog, a race, her work and her sister.",
            overview="## Key topics\n- dog\n- marathon\n- payments team",
            content="\n".join(f"[{m}] {role}: {text}" for m, role, text in TURNS),
            context_type=ContextType.SESSION,
            category="archive",
            source_refs=[f"s1:{m}" for m in ids],
            metadata={"message_ids": ids},
        )
    )


def pref_node(rt: Runtime, content: str = "- prefers Go for services [m3]") -> ContextNode:
    return rt.fs.write_node(
        ContextNode(
            uri=PREF,
            abstract="Alice prefers Go for backend services.",
            overview="- prefers Go [m3]\n- writes table-driven tests [m5]",
            content=content,
            category="preferences",
            source_refs=["s1:m3", "s1:m5"],
        )
    )


def event(kind: OutboxEventType, uri: str, tag: str, **payload: Any) -> OutboxEvent:
    return OutboxEvent(
        event_id=OutboxEvent.make_id(kind, uri, tag), event_type=kind, uri=uri, payload=payload
    )


def upsert(node: ContextNode) -> OutboxEvent:
    return event(
        OutboxEventType.UPSERT_CONTEXT,
        node.uri,
        str(node.version),
        version=node.version,
        content_hash=node.content_hash,
    )


def units_of(rt: Runtime, uri: str) -> dict[str, str]:
    """unit key → chunk text, of the units stored for the chunks of `uri`."""
    with psycopg.connect(rt.settings.database_url) as conn:
        rows = conn.execute(
            "SELECT u.unit_key, c.text_content "
            "FROM ctx.chunk_units AS u JOIN ctx.context_chunks AS c USING (chunk_id) "
            "WHERE c.uri = %s",
            (uri,),
        ).fetchall()
    return {r[0]: r[1] for r in rows}


def chunks_with_units(rt: Runtime) -> set[str]:
    with psycopg.connect(rt.settings.database_url) as conn:
        rows = conn.execute("SELECT DISTINCT chunk_id FROM ctx.chunk_units").fetchall()
    return {str(r[0]) for r in rows}


def unit_count(rt: Runtime) -> int:
    with psycopg.connect(rt.settings.database_url) as conn:
        row = conn.execute("SELECT count(*) FROM ctx.chunk_units").fetchone()
    return int(row[0]) if row else 0


def counting_worker(rt: Runtime) -> tuple[Any, CountingEmbedder]:
    w = make_worker(rt, worker_id="units")
    counting = CountingEmbedder(rt.embedder)
    w.indexer.embedder = counting  # type: ignore[assignment]
    return w, counting


def finder(rt: Runtime, embedder: Any, **cfg: Any) -> HybridFinder:
    return HybridFinder(
        rt.db,
        embedder,
        counter_for_model(rt.embedder.model_name),
        schema=rt.settings.db_schema,
        config=FindConfig(record_recalls=False, **cfg),
    )


FILTERS = FindFilters(account_id="acme")
QUESTIONS = [
    "What is the name of Alice's dog?",
    "Which race is Alice training for?",
    "Where is the ledger moving?",
    "Who visits from Porto?",
    "Which language does Alice prefer for services?",
]


# ------------------------------------------------------------------ index side
def test_every_unit_find_ranks_is_stored_with_its_chunk(rt: Runtime) -> None:
    w, counting = counting_worker(rt)
    make_outbox(rt).append_batch([upsert(archive_node(rt)), upsert(pref_node(rt))])
    res = w.run_once()
    assert res.succeeded == 2 and res.units_embedded > 0
    # one pass over the chunks' lines (read together), one over the summaries' texts
    assert len(counting.calls) == 2
    read = counting.texts
    window = next(t for t in read if "Biscuit" in t)
    assert "user: I adopted" in window and "assistant: Congratulations!" in window
    assert "user: He chews my shoes." not in read  # a sentence is pooled, never read again
    assert len(read) == len(set(read))
    with psycopg.connect(rt.settings.database_url) as conn:
        chunks = conn.execute(
            "SELECT chunk_id, text_content, source_refs, context_type FROM ctx.context_chunks"
        ).fetchall()
        stored = conn.execute("SELECT chunk_id, unit_key FROM ctx.chunk_units").fetchall()
    want = {
        (cid, unit_key(u))
        for cid, text, refs, ctype in chunks
        for u in unit_texts(text, refs, ctype)
    }
    assert want and set(stored) == want
    # an archive turn and each of its sentences (with the speaker) are units
    keys = {k for _, k in stored}
    turn = "user: I adopted a golden retriever puppy named Biscuit. He chews my shoes."
    assert {unit_key(turn), unit_key("user: He chews my shoes.")} <= keys
    assert make_replica(rt).counts()["units"] == len(want)


def test_units_go_with_their_node_on_delete_and_move(rt: Runtime) -> None:
    w, counting = counting_worker(rt)
    outbox = make_outbox(rt)
    node = pref_node(rt)
    outbox.append_batch([upsert(node), upsert(archive_node(rt))])
    w.run_once()
    before = units_of(rt, PREF)
    assert before and units_of(rt, ARCHIVE)

    target = PREF.replace("/go", "/golang")
    rt.fs.write_node(node.model_copy(update={"uri": target}))
    rt.fs.delete(PREF)
    counting.calls.clear()
    outbox.append_batch(
        [event(OutboxEventType.MOVE_CONTEXT, target, "mv", from_uri=PREF, to_uri=target)]
    )
    res = w.run_once()
    assert res.succeeded == 1 and res.embedded == 0 and res.units_embedded == 0
    assert counting.calls == []  # same texts: chunk and unit vectors reused
    assert units_of(rt, PREF) == {} and units_of(rt, target) == before

    rt.fs.delete(ARCHIVE)
    outbox.append_batch([event(OutboxEventType.DELETE_CONTEXT, ARCHIVE, "d")])
    assert w.run_once().deleted == 1
    assert units_of(rt, ARCHIVE) == {}
    assert unit_count(rt) == len(before)


def test_reindexing_unchanged_text_embeds_nothing(rt: Runtime) -> None:
    w, counting = counting_worker(rt)
    v1 = pref_node(rt)
    make_outbox(rt).append_batch([upsert(v1), upsert(archive_node(rt))])
    w.run_once()
    before = units_of(rt, PREF)
    v2 = rt.fs.write_node(v1.model_copy(update={"metadata": {"note": "touched"}}))
    assert v2.version == v1.version + 1  # a new version with the same text
    counting.calls.clear()
    make_outbox(rt).append_batch([upsert(v2)])
    res = w.run_once()
    assert res.indexed == 1 and res.embedded == 0 and res.units_embedded == 0
    assert counting.calls == [] and units_of(rt, PREF) == before


def test_a_changed_line_re_embeds_only_its_units(rt: Runtime) -> None:
    w, counting = counting_worker(rt)
    make_outbox(rt).append_batch([upsert(pref_node(rt))])
    w.run_once()
    before = units_of(rt, PREF)
    counting.calls.clear()
    v2 = pref_node(rt, content="- prefers Go for services. Rust for tools [m3]")
    make_outbox(rt).append_batch([upsert(v2)])
    res = w.run_once()
    # the L2 chunk's vector is the mean of its units: its own text is not encoded; the
    # changed chunk is read once, its line and both sentences pooled from that pass
    assert res.indexed == 1 and res.embedded == 0
    assert counting.texts == ["prefers Go for services. Rust for tools"]
    assert res.units_embedded == 3
    after = units_of(rt, PREF)
    kept = {k for k, text in before.items() if text != "- prefers Go for services [m3]"}
    assert kept and kept <= set(after)
    assert unit_key("prefers Go for services") not in after  # the old line is gone


# ------------------------------------------------------------------ query side
def test_find_embeds_only_the_question(rt: Runtime) -> None:
    make_outbox(rt).append_batch([upsert(archive_node(rt)), upsert(pref_node(rt))])
    make_worker(rt, worker_id="units").run_once()
    counting = CountingEmbedder(rt.embedder)
    f = finder(rt, counting)
    for q in QUESTIONS:
        counting.calls.clear()
        res = f.find(q, FILTERS, 5)
        assert res.hits, q
        assert counting.calls == [[q]], q
    # so the candidates come without their chunks' vectors (a line that is its whole chunk
    # has a stored unit vector too), which the query-time path below still reads; a chunk
    # with no stored units (the archive's summary) keeps its own
    arm = f.store.text_arm(QUESTIONS[0], FILTERS, 20)
    qvec = f.embed(QUESTIONS[0])
    rows = f.store.send_fuse(qvec, FILTERS, arm, 20, chunk_vectors=False).result().rows
    with_units = chunks_with_units(rt)
    assert {r.chunk_id for r in rows} & with_units and {r.chunk_id for r in rows} - with_units
    assert all((r.embedding is None) == (r.chunk_id in with_units) for r in rows)
    assert all(
        r.embedding is not None for r in f.store.send_fuse(qvec, FILTERS, arm, 20).result().rows
    )

    # the query-time path (the fallback of a replica without unit vectors) encodes units
    fly = CountingEmbedder(rt.embedder)
    finder(rt, fly, stored_units=False).find(QUESTIONS[0], FILTERS, 5)
    assert len(fly.texts) > 1


def test_stored_vectors_rank_as_the_query_time_path(rt: Runtime) -> None:
    make_outbox(rt).append_batch([upsert(archive_node(rt)), upsert(pref_node(rt))])
    make_worker(rt, worker_id="units").run_once()
    stored = finder(rt, rt.embedder)
    fly = finder(rt, rt.embedder, stored_units=False)
    for q in QUESTIONS:
        a, b = stored.find(q, FILTERS, 8).hits, fly.find(q, FILTERS, 8).hits
        assert [(h.uri, h.text, h.source_refs) for h in a] == [
            (h.uri, h.text, h.source_refs) for h in b
        ], q
        for x, y in zip(a, b, strict=True):
            assert x.score == pytest.approx(y.score, abs=1e-6)
            assert x.similarity == pytest.approx(y.similarity, abs=1e-4)


def test_a_replica_without_unit_vectors_falls_back_to_encoding(
    make_settings: Any, clean_db: str
) -> None:
    runtime = Runtime(make_settings(redis=False, chunking={"unit_vectors": False}))
    try:
        make_outbox(runtime).append_batch([upsert(archive_node(runtime))])
        res = make_worker(runtime, worker_id="units").run_once()
        assert res.succeeded == 1 and res.units_embedded == 0 and unit_count(runtime) == 0
        counting = CountingEmbedder(runtime.embedder)
        hits = finder(runtime, counting).find(QUESTIONS[0], FILTERS, 5).hits
        assert hits and len(counting.texts) > 1  # units encoded at query time
        # `ctxpipe reindex` with unit vectors on: a fresh finder embeds only the question
        indexer = Indexer(
            runtime.fs,
            runtime.relations,
            make_replica(runtime),
            runtime.embedder,
            ChunkingConfig(unit_vectors=True),
        )
        assert not reindex(indexer).errors and unit_count(runtime) > 0
        counting.calls.clear()
        again = finder(runtime, counting).find(QUESTIONS[0], FILTERS, 5).hits
        assert [h.text for h in again] == [h.text for h in hits]
        assert counting.calls == [[QUESTIONS[0]]]
    finally:
        runtime.close()


def test_a_one_line_chunk_without_unit_vectors_is_ranked_by_its_own_vector(
    make_settings: Any, clean_db: str
) -> None:
    """A replica indexed without unit vectors (before them, or with them off): a chunk that
    is one line ranks that line by the chunk's own vector, so the question is all find
    encodes; only chunks of several lines are read at query time."""
    runtime = Runtime(make_settings(redis=False, chunking={"unit_vectors": False}))
    try:
        uris = []
        for i, text in enumerate(
            ["Alice prefers Go for backend services.", "Alice writes table-driven tests."]
        ):
            node = runtime.fs.write_node(
                ContextNode(
                    uri=f"{PREF}{i}",
                    abstract=text,
                    category="preferences",
                    source_refs=[f"s1:m{i + 3}"],
                )
            )
            uris.append(upsert(node))
        make_outbox(runtime).append_batch(uris)
        assert make_worker(runtime, worker_id="units").run_once().succeeded == 2
        assert unit_count(runtime) == 0
        counting = CountingEmbedder(runtime.embedder)
        hits = finder(runtime, counting).find(QUESTIONS[-1], FILTERS, 5).hits
        assert hits and hits[0].text == "Alice prefers Go for backend services."
        assert counting.calls == [[QUESTIONS[-1]]]
        assert hits[0].similarity > 0.3  # ranked by a real cosine, not left at 0
    finally:
        runtime.close()


def test_chunk_vectors_from_units_encode_no_chunk_text_and_still_find(
    make_settings: Any, clean_db: str
) -> None:
    """`chunk_vectors="units"` (the default): a chunk's vector is the normalised mean of its
    units' vectors, so its long text is never encoded; the vector arm still finds the chunk."""
    import numpy as np

    runtime = Runtime(make_settings(redis=False))
    try:
        w, counting = counting_worker(runtime)
        make_outbox(runtime).append_batch([upsert(archive_node(runtime))])
        assert w.run_once().succeeded == 1
        encoded = {t for call in counting.calls for t in call}
        with psycopg.connect(runtime.settings.database_url) as conn:
            text, refs, ctype, vec = conn.execute(
                "SELECT text_content, source_refs, context_type, embedding::text"
                " FROM ctx.context_chunks WHERE level = 2 ORDER BY chunk_index LIMIT 1"
            ).fetchone()
        assert text not in encoded  # the chunk's own text (markers, dates): not encoded
        units = unit_texts(text, refs, ctype)
        with psycopg.connect(runtime.settings.database_url) as conn:
            rows = conn.execute(
                "SELECT u.unit_key, u.embedding::text FROM ctx.chunk_units AS u"
                " JOIN ctx.context_chunks AS c USING (chunk_id)"
                " WHERE c.level = 2 AND c.text_content = %s",
                (text,),
            ).fetchall()
        assert units and {k for k, _ in rows} == {unit_key(u) for u in units}
        vecs = np.asarray([json.loads(v) for _, v in rows], dtype=np.float32)
        mean = vecs.mean(axis=0)
        stored = np.asarray(json.loads(vec), dtype=np.float32)
        assert np.allclose(stored, mean / np.linalg.norm(mean), atol=1e-4)
        # the vector arm alone (no text arm) still puts the archive first for its topic
        hits = finder(runtime, runtime.embedder, text_weight=0.0).find(QUESTIONS[0], FILTERS, 3)
        assert hits.hits and hits.hits[0].uri == ARCHIVE
    finally:
        runtime.close()
