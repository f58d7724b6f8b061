"""The indexer on an in-memory replica with a fake model: what a batch of nodes gets written.
No servers, no model."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from ctxpipe.core.enums import ContextType
from ctxpipe.core.models import ContextNode
from ctxpipe.fs import ContextFS, FSRelationStore
from ctxpipe.index.indexer import Indexer
from ctxpipe.index.memory_replica import MemoryReplica
from ctxpipe.index.replica import NodeWrite

if TYPE_CHECKING:  # the fake model of tests/unit/conftest.py
    from conftest import HashEmbedder

SUMMARY = "Ann adopted a puppy named Biscuit and plans a trip to Lisbon."


@pytest.fixture
def fs(tmp_path: Path) -> ContextFS:
    return ContextFS(tmp_path / "fs")


def archive(fs: ContextFS, abstract: str) -> ContextNode:
    return fs.write_node(
        ContextNode(
            uri="ctx://acme/sessions/s1/archives/1",
            abstract=abstract,
            overview="Session s1 archive",
            content="[m1] user (Ann): I adopted a puppy named Biscuit.\n"
            "[m2] user (Ann): We fly to Lisbon in May.",
            context_type=ContextType.SESSION,
            category="archive",
            source_refs=["s1:m1", "s1:m2"],
            metadata={"message_ids": ["m1", "m2"]},
        )
    )


def memory(fs: ContextFS, abstract: str) -> ContextNode:
    return fs.write_node(
        ContextNode(
            uri="ctx://acme/users/ann/memories/events/puppy",
            abstract=abstract,
            overview=f"- {abstract} [m1]",
            content=f"- {abstract} [m1]",
            category="events",
            source_refs=["s1:m1"],
        )
    )


def test_a_batch_with_one_text_in_a_chunk_with_units_and_one_without(
    fs: ContextFS, hash_embedder: type[HashEmbedder]
) -> None:
    """An archive's summary chunk (no units: it cites no turn) with the same text as a memory's
    chunk (whose vector is its units' mean): both get a vector, the batch is written whole."""
    nodes = [archive(fs, SUMMARY), memory(fs, SUMMARY)]
    replica = MemoryReplica(hash_embedder.dimension)
    indexer = Indexer(fs, FSRelationStore(fs), replica, hash_embedder())
    report = indexer.sync_nodes([n.uri for n in nodes])
    assert not report.errors
    assert sorted(report.indexed) == sorted(n.uri for n in nodes)
    for write in replica.nodes.values():
        for chunk, vec in zip(write.chunks, write.vectors, strict=True):
            assert np.asarray(vec).shape == (8,), chunk.chunk_id
            assert abs(float(np.linalg.norm(vec)) - 1.0) < 1e-5
    summary = [
        v
        for w in replica.nodes.values()
        for c, v in zip(w.chunks, w.vectors, strict=True)
        if c.text_content == SUMMARY and c.level == 0
    ]
    assert len(summary) == 2


def test_the_replica_never_goes_back_a_version(
    fs: ContextFS, hash_embedder: type[HashEmbedder]
) -> None:
    node = memory(fs, SUMMARY)
    replica = MemoryReplica(hash_embedder.dimension)
    indexer = Indexer(fs, FSRelationStore(fs), replica, hash_embedder())
    indexer.sync_nodes([node.uri])
    newer = fs.write_node(node.model_copy(update={"abstract": "Ann named the puppy Biscuit."}))
    assert newer.version > node.version
    assert indexer.sync_nodes([node.uri]).indexed == [node.uri]
    # an older version is refused (never regress), unless repair says the FS went back
    assert replica.write([NodeWrite(node, [], [], [])]) == (set(), set())
    assert replica.nodes[node.uri].node.version == newer.version
    assert replica.write([NodeWrite(node, [], [], [])], replace=[node.uri]) == ({node.uri}, set())
    assert replica.nodes[node.uri].node.version == node.version
