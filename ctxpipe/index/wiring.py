"""Build the index components from a `ctxpipe.runtime.Runtime` (FS, DB pool, embedder)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxpipe.index.indexer import Indexer
from ctxpipe.index.outbox_store import OutboxStore
from ctxpipe.index.repair import RepairJob
from ctxpipe.index.replica import ReplicaStore
from ctxpipe.index.worker import IndexWorker

if TYPE_CHECKING:
    from ctxpipe.runtime import Runtime


def make_replica(rt: Runtime) -> ReplicaStore:
    return ReplicaStore(rt.db, rt.settings.db_schema)


def make_outbox(rt: Runtime) -> OutboxStore:
    return OutboxStore.from_settings(rt.db, rt.settings)


def make_indexer(rt: Runtime) -> Indexer:
    return Indexer(rt.fs, rt.relations, make_replica(rt), rt.embedder, rt.settings.chunking)


def make_worker(rt: Runtime, worker_id: str | None = None) -> IndexWorker:
    return IndexWorker(
        make_outbox(rt),
        make_indexer(rt),
        worker_id=worker_id,
        batch_size=rt.settings.outbox_batch_size,
    )


def make_repair(rt: Runtime) -> RepairJob:
    return RepairJob(
        rt.fs,
        rt.relations,
        make_replica(rt),
        make_outbox(rt),
        max_retries=rt.settings.outbox_max_retries,
    )


__all__ = ["make_indexer", "make_outbox", "make_repair", "make_replica", "make_worker"]
