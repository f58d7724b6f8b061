"""Build the index components from the application's adapters (FS, DB pool, embedder, outbox).

`IndexAdapters` is the port this package owns for that: `ctxpipe.runtime.Runtime` satisfies it,
so nothing here imports the floor above."""

from __future__ import annotations

from typing import Protocol

from ctxpipe.core.config import Settings
from ctxpipe.fs import ContextFS, FSRelationStore
from ctxpipe.index.indexer import Indexer
from ctxpipe.index.repair import RepairJob
from ctxpipe.index.replica import ReplicaStore
from ctxpipe.index.worker import IndexWorker
from ctxpipe.providers.base import Embedder
from ctxpipe.storage.db import Database
from ctxpipe.storage.outbox_store import OutboxStore


class IndexAdapters(Protocol):
    """What the index components are built from (read-only; `Runtime` is one)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def fs(self) -> ContextFS: ...
    @property
    def relations(self) -> FSRelationStore: ...
    @property
    def db(self) -> Database: ...
    @property
    def embedder(self) -> Embedder: ...
    @property
    def outbox(self) -> OutboxStore: ...


def make_replica(rt: IndexAdapters) -> ReplicaStore:
    return ReplicaStore(rt.db, rt.settings.db_schema)


def make_outbox(rt: IndexAdapters) -> OutboxStore:
    """The adapters' one outbox (built from settings where they are built)."""
    return rt.outbox


def make_indexer(rt: IndexAdapters) -> Indexer:
    return Indexer(rt.fs, rt.relations, make_replica(rt), rt.embedder, rt.settings.chunking)


def make_worker(rt: IndexAdapters, worker_id: str | None = None) -> IndexWorker:
    return IndexWorker(
        make_outbox(rt),
        make_indexer(rt),
        worker_id=worker_id,
        batch_size=rt.settings.outbox_batch_size,
        drains=rt.settings.outbox_drains,
    )


def make_repair(rt: IndexAdapters) -> RepairJob:
    return RepairJob(
        rt.fs,
        rt.relations,
        make_replica(rt),
        make_outbox(rt),
        max_retries=rt.settings.outbox_max_retries,
    )


__all__ = [
    "IndexAdapters",
    "make_indexer",
    "make_outbox",
    "make_repair",
    "make_replica",
    "make_worker",
]
