"""Re-indexing an updated node reads only what is new: the chunks whose text is unchanged keep
their stored vectors and unit vectors, the model reads the new or changed chunks, and the rows
equal a from-scratch index. In-memory replica, a fake model that pools spans; no servers."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctxpipe.core.config import ChunkingConfig
from ctxpipe.core.models import ContextNode
from ctxpipe.fs import ContextFS, FSRelationStore
from ctxpipe.index.indexer import Indexer
from ctxpipe.index.memory_replica import MemoryReplica

URI = "ctx://acme/users/ann/memories/preferences/food"
DIM = 8


def _vec(*parts: str) -> list[float]:
    digest = hashlib.sha256("\x00".join(parts).encode()).digest()[:DIM]
    v = np.frombuffer(digest, dtype=np.uint8).astype(np.float32) + 1.0
    return (v / np.linalg.norm(v)).tolist()


class PoolingModel:
    """Tokens are words; a span's vector depends on the whole text read (late chunking), so
    a unit vector reused from another chunk's reading would differ. Counts what it reads."""

    dimension = DIM
    pools_spans = True
    model_name = "pool-8"
    max_seq_length = 64

    def __init__(self) -> None:
        self.read: list[str] = []

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        self.read.extend(texts)
        return [_vec(t) for t in texts]

    def encode_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[Any]], *, fit: bool = False
    ) -> list[list[list[float]] | None]:
        out: list[list[list[float]] | None] = []
        for text, ranges in zip(texts, spans, strict=True):
            if fit and self.count_tokens(text) > self.max_seq_length - 2:
                out.append(None)
                continue
            self.read.append(text)
            pooled = [_vec(text, "".join(text[a:b] for a, b in r)) for r in ranges]
            out.append([_vec(text), *pooled])
        return out

    @property
    def tokens_read(self) -> int:
        return sum(self.count_tokens(t) for t in self.read)


def facts(n: int) -> str:
    return "\n".join(
        f"- Ann likes dish number {i} a lot (valid from 2023-05-0{i % 9 + 1}) [m{i}]"
        for i in range(n)
    )


def write(fs: ContextFS, content: str, version_of: ContextNode | None = None) -> ContextNode:
    node = ContextNode(
        uri=URI,
        abstract="Ann's food preferences",
        overview="What Ann likes to eat",
        content=content,
        category="preferences",
        source_refs=[f"s1:m{i}" for i in range(40)],
    )
    if version_of is not None:
        node = version_of.model_copy(update={"content": content})
    return fs.write_node(node)


def rows(
    replica: MemoryReplica,
) -> list[tuple[str, str, list[float], list[tuple[str, list[float]]]]]:
    w = replica.nodes[URI]
    return [
        (
            c.chunk_id,
            c.text_content,
            np.round(np.asarray(v, dtype=np.float64), 6).tolist(),
            [(k, np.round(np.asarray(u, dtype=np.float64), 6).tolist()) for k, u in units],
        )
        for c, v, units in zip(w.chunks, w.vectors, w.units, strict=True)
    ]


def index(fs: ContextFS, replica: MemoryReplica, model: PoolingModel) -> Indexer:
    return Indexer(fs, FSRelationStore(fs), replica, model, ChunkingConfig(chunk_tokens=40))


@pytest.mark.parametrize("appended", [1, 3])
def test_an_appended_line_is_read_in_its_chunk_alone_and_equals_a_fresh_index(
    tmp_path: Path, appended: int
) -> None:
    fs = ContextFS(tmp_path / "fs")
    node = write(fs, facts(12))
    replica = MemoryReplica(DIM)
    model = PoolingModel()
    first = index(fs, replica, model).sync_nodes([URI])
    assert first.indexed == [URI]
    before = {c.text_content for c in replica.nodes[URI].chunks}
    assert len(before) >= 4  # the node spans several chunks

    write(fs, facts(12 + appended), version_of=node)
    model.read.clear()
    report = index(fs, replica, model).sync_nodes([URI])
    assert report.indexed == [URI]
    after = [c.text_content for c in replica.nodes[URI].chunks]
    changed = [t for t in after if t not in before]
    assert changed and len(changed) < len(after) - 2  # earlier chunks keep their text
    # the model read each new or changed chunk once (its lines), nothing of the unchanged ones
    assert len(model.read) == len(set(changed))
    assert all("dish number 0 " not in text for text in model.read)
    assert model.tokens_read <= sum(len(t.split()) for t in changed) + 8 * len(changed)

    # the same rows, the same values, as indexing the node from scratch
    fresh_replica = MemoryReplica(DIM)
    fresh_model = PoolingModel()
    index(fs, fresh_replica, fresh_model).sync_nodes([URI])
    assert rows(replica) == rows(fresh_replica)
    assert model.tokens_read < fresh_model.tokens_read / 2


def test_a_chunk_whose_text_changed_does_not_keep_unit_vectors_read_in_another_chunk(
    tmp_path: Path,
) -> None:
    """Lines removed from the front shift every chunk: a line found in a stored chunk of
    another text is read again with its new chunk (its vector is pooled from that reading)."""
    fs = ContextFS(tmp_path / "fs")
    node = write(fs, facts(12))
    replica = MemoryReplica(DIM)
    model = PoolingModel()
    index(fs, replica, model).sync_nodes([URI])
    write(fs, facts(12).split("\n", 2)[2], version_of=node)
    index(fs, replica, model).sync_nodes([URI])
    fresh = MemoryReplica(DIM)
    index(fs, fresh, PoolingModel()).sync_nodes([URI])
    assert rows(replica) == rows(fresh)


def test_reindex_with_force_reads_everything_again(tmp_path: Path) -> None:
    fs = ContextFS(tmp_path / "fs")
    write(fs, facts(12))
    replica = MemoryReplica(DIM)
    model = PoolingModel()
    index(fs, replica, model).sync_nodes([URI])
    once = model.tokens_read
    model.read.clear()
    index(fs, replica, model).sync_nodes([URI], force=True)
    assert model.tokens_read == once
