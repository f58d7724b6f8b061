"""Builds the maintenance jobs from the application's adapters (the CLI and the beat tasks
share this). `MaintenanceAdapters` is the port this package owns for that; `Runtime` is one."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from ctxpipe.core.config import Settings
from ctxpipe.core.models import utcnow
from ctxpipe.fs import ContextFS, OwnerLock
from ctxpipe.maintenance.erasure import UserEraser
from ctxpipe.maintenance.forgetting import Forgetter, Recall
from ctxpipe.storage.db import Database
from ctxpipe.storage.outbox_store import OutboxStore


class MaintenanceAdapters(Protocol):
    """What the maintenance jobs are built from (read-only; `Runtime` is one). `db` and
    `outbox` are only touched when `use_database` is true."""

    @property
    def settings(self) -> Settings: ...
    @property
    def use_database(self) -> bool: ...
    @property
    def fs(self) -> ContextFS: ...
    @property
    def lock(self) -> OwnerLock: ...
    @property
    def db(self) -> Database: ...
    @property
    def outbox(self) -> OutboxStore: ...


def make_forgetter(rt: MaintenanceAdapters, clock: Callable[[], datetime] = utcnow) -> Forgetter:
    """A Forgetter on the runtime's FS, lock and outbox, valuing memories by the recall
    statistics of the replica database (none when it is unreachable: recency alone)."""
    recall = None
    if rt.use_database:
        from ctxpipe.retrieval.find.recall_stats import RecallStatsStore

        store = RecallStatsStore(rt.db, rt.settings.db_schema)

        def recall(account: str, uris: list[str]) -> dict[str, Recall]:
            out: dict[str, Recall] = {}
            for i in range(0, len(uris), 5000):
                for uri, st in store.get(account, uris[i : i + 5000]).items():
                    out[uri] = Recall(
                        count=st.recall_count,
                        avg_score=st.total_score / st.recall_count if st.recall_count else 0.0,
                        last_at=st.last_recalled_at,
                    )
            return out

    return Forgetter(
        rt.fs,
        rt.lock,
        rt.settings.forgetting,
        outbox=rt.outbox if rt.use_database else None,
        recall=recall,
        clock=clock,
        lock_timeout_s=rt.settings.lock_timeout_s,
    )


def make_eraser(rt: MaintenanceAdapters, clock: Callable[[], datetime] = utcnow) -> UserEraser:
    """A UserEraser on the runtime's FS and lock, and its database when it is used."""
    from ctxpipe.storage.erasure_store import PgErasureStore

    replica = (
        PgErasureStore(rt.db, rt.settings.db_schema, outbox=rt.outbox) if rt.use_database else None
    )
    return UserEraser(rt.fs, rt.lock, replica, clock, rt.settings.lock_timeout_s)
