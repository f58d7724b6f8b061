"""`ctxpipe status`: one snapshot of the pipeline's health.

Queue depths (Redis ``LLEN`` of the Celery queues, priority sub-queues included), the commit
backlog from the ledger (commits in flight, the oldest one's age, the drain rate and the
back-pressure cap), outbox events per status and the age of the oldest one still waiting, nodes
on the FS vs rows in the replica, the last repair run, commits per ledger phase and what the
finished commits cost in LLM calls and tokens, and the LLM limiter's throttling (cluster-wide,
from Redis). A part whose server is unreachable is reported
in ``errors`` instead of failing the whole snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from ctxpipe.core.config import Settings
from ctxpipe.core.queues import QUEUES
from ctxpipe.fs import ContextFS
from ctxpipe.index.fs_scan import count_fs_nodes
from ctxpipe.index.replica import ReplicaStore
from ctxpipe.providers.llm_limits import LimiterSnapshot
from ctxpipe.providers.llm_limits.wiring import llm_throttling
from ctxpipe.storage.broker_queues import queue_depths
from ctxpipe.storage.commit_ledger import CommitBacklog, CommitLedger, LLMCost
from ctxpipe.storage.db import Database
from ctxpipe.storage.outbox_store import OutboxStore


class IndexStatus(BaseModel):
    queues: dict[str, int] = Field(default_factory=dict)
    outbox: dict[str, int] = Field(default_factory=dict)
    oldest_pending_age_s: float | None = None
    fs_nodes: int = 0
    replica_nodes: int = 0
    replica_chunks: int = 0
    replica_edges: int = 0
    last_repair: dict[str, Any] | None = None
    commits_by_phase: dict[str, int] = Field(default_factory=dict)
    commit_backlog: CommitBacklog = Field(default_factory=CommitBacklog)
    llm_cost: LLMCost = Field(default_factory=LLMCost)
    llm_throttling: LimiterSnapshot | None = None  # None: the `rules` provider
    errors: dict[str, str] = Field(default_factory=dict)
    taken_at: datetime | None = None

    @property
    def pending(self) -> int:
        return self.outbox.get("pending", 0) + self.outbox.get("failed", 0)

    @property
    def in_sync(self) -> bool:
        """No event waiting or running and as many replica rows as FS nodes."""
        busy = self.pending + self.outbox.get("claimed", 0)
        return not self.errors and busy == 0 and self.fs_nodes == self.replica_nodes


def _short(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


def collect_status(
    settings: Settings,
    *,
    db: Database,
    fs: ContextFS,
    queues: Sequence[str] = QUEUES,
) -> IndexStatus:
    from ctxpipe.core.models import utcnow

    st = IndexStatus(taken_at=utcnow())
    try:
        st.queues = queue_depths(settings.redis_url, queues)
    except Exception as exc:  # noqa: BLE001 - report, don't fail
        st.errors["redis"] = _short(exc)
    try:
        st.llm_throttling = llm_throttling(settings)
    except Exception as exc:  # noqa: BLE001
        st.errors["redis"] = _short(exc)
    try:
        st.fs_nodes = count_fs_nodes(fs)
    except Exception as exc:  # noqa: BLE001
        st.errors["fs"] = _short(exc)
    try:
        outbox = OutboxStore.from_settings(db, settings)
        replica = ReplicaStore(db, settings.db_schema)
        st.outbox = outbox.counts()
        st.oldest_pending_age_s = outbox.oldest_pending_age_s()
        counts = replica.counts()
        st.replica_nodes, st.replica_chunks = counts["nodes"], counts["chunks"]
        st.replica_edges = counts["edges"]
        st.last_repair = replica.last_repair()
        ledger = CommitLedger(db, schema=settings.db_schema)
        st.commits_by_phase = ledger.counts_by_phase()
        st.commit_backlog = ledger.backlog().model_copy(
            update={"max_pending": settings.commit.max_pending}
        )
        st.llm_cost = ledger.llm_cost()
    except Exception as exc:  # noqa: BLE001
        st.errors["postgres"] = _short(exc)
    return st


__all__ = ["IndexStatus", "collect_status", "queue_depths"]
