"""Re-indexing an updated node on PostgreSQL reads only the new or changed chunks: the unit
vectors of an unchanged chunk text come back from `chunk_units` by that chunk's text, and the
rows equal a from-scratch index. A fake model that pools spans (no model download)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from ctxpipe.core.config import ChunkingConfig
from ctxpipe.core.models import ContextNode
from ctxpipe.fs import FSRelationStore
from ctxpipe.index.indexer import Indexer
from ctxpipe.index.replica import ReplicaStore
from ctxpipe.runtime import Runtime

URI = "ctx://acme/users/ann/memories/preferences/food"


class PoolingModel:
    """Tokens are words; a span's vector depends on the whole text read (late chunking)."""

    pools_spans = True
    model_name = "pool-fake"
    max_seq_length = 64

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self.read: list[str] = []

    def _vec(self, *parts: str) -> list[float]:
        seed = int.from_bytes(hashlib.sha256("\x00".join(parts).encode()).digest()[:8], "big")
        v = np.random.default_rng(seed).random(self.dimension, dtype=np.float32) + 0.1
        return (v / np.linalg.norm(v)).tolist()

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        self.read.extend(texts)
        return [self._vec(t) for t in texts]

    def encode_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[Any]], *, fit: bool = False
    ) -> list[list[list[float]] | None]:
        out: list[list[list[float]] | None] = []
        for text, ranges in zip(texts, spans, strict=True):
            if fit and self.count_tokens(text) > self.max_seq_length - 2:
                out.append(None)
                continue
            self.read.append(text)
            pooled = [self._vec(text, "".join(text[a:b] for a, b in r)) for r in ranges]
            out.append([self._vec(text), *pooled])
        return out


@pytest.fixture
def rt(make_settings: Any, clean_db: str) -> Iterator[Runtime]:
    runtime = Runtime(make_settings(redis=False))
    yield runtime
    runtime.close()


def facts(n: int) -> str:
    return "\n".join(f"- Ann likes dish number {i} a lot (since 2023) [m{i}]" for i in range(n))


def stored(rt: Runtime) -> list[tuple[Any, ...]]:
    with rt.db.connection() as conn:
        rows = conn.execute(
            "SELECT c.chunk_id, c.text_content, c.embedding::text, u.unit_key, u.embedding::text"
            " FROM ctx.context_chunks AS c LEFT JOIN ctx.chunk_units AS u USING (chunk_id)"
            " WHERE c.uri = %s ORDER BY c.chunk_id, u.unit_key",
            (URI,),
        ).fetchall()
    return list(rows)


def test_an_appended_line_reads_only_its_chunk_and_equals_a_fresh_index(rt: Runtime) -> None:
    model = PoolingModel(int(rt.settings.embedding_dim))
    replica = ReplicaStore(rt.db)
    indexer = Indexer(
        rt.fs, FSRelationStore(rt.fs), replica, model, ChunkingConfig(chunk_tokens=40)
    )
    node = rt.fs.write_node(
        ContextNode(
            uri=URI,
            abstract="Ann's food preferences",
            overview="What Ann likes to eat",
            content=facts(12),
            category="preferences",
            source_refs=[f"s1:m{i}" for i in range(20)],
        )
    )
    assert indexer.sync_nodes([URI]).indexed == [URI]
    texts = {r[1] for r in stored(rt)}
    by_text = replica.unit_vectors([URI], model.model_name)
    assert set(by_text) <= texts and len(by_text) >= 4  # unit vectors by their chunk's text

    rt.fs.write_node(node.model_copy(update={"content": facts(13)}))
    model.read.clear()
    report = indexer.sync_nodes([URI])
    assert report.indexed == [URI]
    new = {r[1] for r in stored(rt)} - texts
    assert len(new) == 1 and len(model.read) == 1  # only the last chunk, read once
    assert "dish number 12" in model.read[0]
    incremental = stored(rt)

    indexer.sync_nodes([URI], force=True)  # from scratch: every text read again
    assert len(model.read) > 4
    assert stored(rt) == incremental
