"""Reindex: rebuild the replica from the FS.

Every FS node is read, chunked, embedded and written through the same `Indexer` path the
outbox worker uses, so the result equals what incremental indexing produced (same rows, chunk
ids, texts and source refs). Rows of nodes gone from the FS are deleted. With ``clean`` the
replica tables are emptied first and the HNSW index of the chunks' vectors is built once after
the load instead of row by row; without it rows are rewritten in place (readers keep finding
every node meanwhile) and a row newer than the FS is never regressed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext

from pydantic import BaseModel, Field

from ctxpipe.index.fs_scan import scan_fs
from ctxpipe.index.indexer import Indexer, SyncReport

Progress = Callable[[int, int], None]  # (nodes done, nodes total)


class ReindexReport(BaseModel):
    clean: bool = False
    fs_nodes: int = 0
    indexed: int = 0
    unchanged: int = 0
    refused: int = 0
    deleted: int = 0
    chunks: int = 0
    relations: int = 0
    errors: dict[str, str] = Field(default_factory=dict)
    duration_ms: int = 0
    timings_ms: dict[str, int] = Field(default_factory=dict)

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / (self.duration_ms / 1000) if self.duration_ms else 0.0


def reindex(
    indexer: Indexer,
    *,
    clean: bool = False,
    batch_size: int = 64,
    progress: Progress | None = None,
) -> ReindexReport:
    started = time.perf_counter()
    indexer.check_dimension()
    uris = [e.uri for e in scan_fs(indexer.fs)]
    total = len(uris)
    report = SyncReport()
    if progress:
        progress(0, total)
    if clean:
        indexer.replica.truncate()
    else:  # one a clean reindex killed mid-way left out (a clean one builds it at its end)
        indexer.replica.ensure_vector_index()
    # an empty replica is a bulk load: the vector index is built once at the end
    with indexer.replica.vector_index_deferred() if clean else nullcontext():
        for i in range(0, total, max(batch_size, 1)):
            batch = uris[i : i + batch_size]
            indexer.sync_nodes(batch, force=True, report=report)
            indexer.sync_relations(batch, report=report)
            if progress:
                progress(min(i + batch_size, total), total)
        loaded = time.perf_counter()
    if clean:
        report.timings["vector_index"] = time.perf_counter() - loaded
    on_fs = set(uris)
    gone = [u for u in indexer.replica.all_node_states() if u not in on_fs]
    gone_edges = [u for u in indexer.replica.edge_ids() if u not in on_fs]
    if gone:
        indexer.sync_nodes(gone, report=report)
    if gone_edges:
        indexer.sync_relations(gone_edges, report=report)
    return ReindexReport(
        clean=clean,
        fs_nodes=total,
        indexed=len(report.indexed),
        unchanged=len(report.unchanged),
        refused=len(report.refused),
        deleted=len(report.deleted),
        chunks=report.chunks,
        relations=report.relations,
        errors={k: f"{type(v).__name__}: {v}" for k, v in report.errors.items()},
        duration_ms=int((time.perf_counter() - started) * 1000),
        timings_ms={k: int(v * 1000) for k, v in report.timings.items()},
    )


__all__ = ["ReindexReport", "reindex"]
