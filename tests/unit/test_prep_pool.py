"""Chunking and line splitting in worker processes (`ChunkingConfig.prep_processes`): the same
chunks and lines as in the embed worker's own thread. Real tokenizer file, no model, no torch."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ctxpipe.core.config import ChunkingConfig
from ctxpipe.core.enums import ContextType
from ctxpipe.core.models import ContextNode
from ctxpipe.fs import ContextFS, FSRelationStore
from ctxpipe.index import prep_pool
from ctxpipe.index.chunker import DocumentChunker
from ctxpipe.index.indexer import Indexer
from ctxpipe.index.memory_replica import MemoryReplica
from ctxpipe.index.prep_pool import PrepPool, TokenizerFile, close_pools, prepare, shared_pool
from ctxpipe.providers.embedder import PACKAGED_MODEL

if TYPE_CHECKING:  # the fake model of tests/unit/conftest.py
    from conftest import HashEmbedder

TURNS = [
    "I adopted a puppy named Biscuit. He chews my shoes.",
    "Congratulations! Try a bitter apple spray. It works on most puppies.",
    "We fly to Lisbon in May. My sister Clara lives there.",
]


def nodes() -> list[ContextNode]:
    out = []
    for s in range(6):
        ids = [f"m{i}" for i in range(1, 31)]
        out.append(
            ContextNode(
                uri=f"ctx://acme/sessions/s{s}/archives/1",
                abstract=f"Session {s}: a puppy, a trip.",
                overview="Session archive",
                content="\n".join(
                    f"[{m}] user (Ann) on 8 May 2023: {TURNS[i % 3]} ({s}.{i})"
                    for i, m in enumerate(ids)
                ),
                context_type=ContextType.SESSION,
                category="archive",
                source_refs=[f"s{s}:{m}" for m in ids],
                metadata={"message_ids": ids},
            )
        )
    out.append(ContextNode(uri="ctx://acme/users/ann/memories/events/x", abstract="", content=""))
    return out


CONFIG = ChunkingConfig(prep_processes=2)


@pytest.fixture(scope="module")
def pool() -> Iterator[PrepPool]:
    """The process's shared pool for `CONFIG`, started once for this module (a spawned worker
    takes a second or two to start) and closed at its end."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(prep_pool, "_POOLS", {})  # this module's pools only, none left behind
        p = shared_pool(PACKAGED_MODEL, CONFIG, 2)
        assert p is not None and p.processes == 2
        yield p
        p.close()


def test_workers_give_the_chunks_and_lines_of_the_embed_worker(pool: PrepPool) -> None:
    tokens = TokenizerFile(PACKAGED_MODEL)
    assert tokens.special_tokens == 2 and tokens.word_additive and tokens.max_seq_length == 256
    here = prepare(DocumentChunker(tokens, CONFIG), nodes(), lines=True)
    there = pool.prepare(nodes())
    assert there == here
    chunks, lines = there[0]  # type: ignore[misc]
    assert len(chunks) > 3 and set(lines) == {c.chunk_id for c in chunks}
    assert there[-1] == ([], {})  # a node with no text: no chunks


def test_an_indexer_with_prep_processes_writes_the_same_rows(
    tmp_path: Path, hash_embedder: type[HashEmbedder], pool: PrepPool
) -> None:
    tokens = TokenizerFile(PACKAGED_MODEL)
    rows = []
    for processes in (0, 2):
        fs = ContextFS(tmp_path / str(processes))
        uris = [fs.write_node(n).uri for n in nodes()[:-1]]
        replica = MemoryReplica(8)
        config = ChunkingConfig(prep_processes=processes)
        # the indexer's pool: none without prep processes, else the one kept for these settings
        assert shared_pool(PACKAGED_MODEL, config, processes) is (pool if processes else None)
        embedder = hash_embedder(PACKAGED_MODEL, tokens)
        indexer = Indexer(fs, FSRelationStore(fs), replica, embedder, config)
        report = indexer.sync_nodes(uris)
        assert not report.errors and len(report.indexed) == 6
        rows.append(
            sorted(
                (c.chunk_id, c.text_content, tuple(k for k, _ in units))
                for w in replica.nodes.values()
                for c, units in zip(w.chunks, w.units, strict=True)
            )
        )
    assert rows[0] == rows[1] and len(rows[0]) > 12


def test_a_pool_starts_every_worker_before_its_first_batch(pool: PrepPool) -> None:
    """`ready` (a benchmark round, a worker's start) has every worker loaded and answering."""
    assert pool.ready() == 2


def test_a_warm_indexer_has_its_model_and_its_prep_processes_started(
    tmp_path: Path, hash_embedder: type[HashEmbedder], pool: PrepPool
) -> None:
    """What an embed worker does when it starts (`Indexer.warm`), before its first batch."""
    fs = ContextFS(tmp_path)
    embedder = hash_embedder(PACKAGED_MODEL, TokenizerFile(PACKAGED_MODEL))
    Indexer(fs, FSRelationStore(fs), MemoryReplica(8), embedder, CONFIG).warm()
    assert embedder.read == ["warm up"]  # the model read once
    assert list(prep_pool._POOLS.values()) == [pool]  # the pool of these settings, started


def test_close_pools_stops_every_pool_of_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Closed pools leave the registry, so the next batch starts a pool afresh: its workers'
    caches cold, as a benchmark round wants them."""
    closed: list[object] = []

    class Pool:
        def close(self) -> None:
            closed.append(self)

    pools = {("a",): Pool(), ("b",): Pool()}
    monkeypatch.setattr(prep_pool, "_POOLS", dict(pools))
    close_pools()
    assert prep_pool._POOLS == {}
    assert sorted(map(id, closed)) == sorted(map(id, pools.values()))


def test_drains_asking_for_the_pool_at_once_share_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """An embed worker's drains (threads) ask for the pool at their first batch together: one
    pool is started for them all (a second would leave its processes running, unclosed)."""
    made: list[object] = []

    class SlowPool:
        def __init__(self, *args: object) -> None:
            time.sleep(0.05)  # starting processes takes a while: the window of the race
            made.append(self)

        def close(self) -> None:
            pass

    monkeypatch.setattr(prep_pool, "_POOLS", {})
    monkeypatch.setattr(prep_pool, "PrepPool", SlowPool)
    got: list[object] = []
    start = threading.Barrier(4)

    def ask() -> None:
        start.wait()
        got.append(shared_pool(PACKAGED_MODEL, ChunkingConfig(), 2))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and got == made * 4
