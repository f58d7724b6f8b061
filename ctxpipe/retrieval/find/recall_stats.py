"""Recall statistics: every node a read returns records one recall —
count, accumulated score, last score, last recalled — for the retention work.

Recording is best effort: a failure is logged and never fails the read. One statement per
result list (arrays unnested), one recall per node even when several of its chunks matched
(the best similarity counts).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime

import psycopg
from pydantic import BaseModel

from ctxpipe.retrieval.models import FindHit
from ctxpipe.storage.db import Database
from ctxpipe.storage.queries import Queries

log = logging.getLogger(__name__)


class RecallStats(BaseModel):
    uri: str
    recall_count: int
    total_score: float
    last_score: float | None = None
    first_recalled_at: datetime | None = None
    last_recalled_at: datetime | None = None
    value: float | None = None

    @property
    def average_score(self) -> float:
        return self.total_score / self.recall_count if self.recall_count else 0.0

    def compute_value(
        self,
        now: float | None = None,
        recall_weight: float = 0.3,
        score_weight: float = 0.5,
        recency_weight: float = 0.2,
    ) -> float:
        """The recall value: ln(1+count)·wr + avg score·ws + recency·wt."""
        now = time.time() if now is None else now
        last = self.last_recalled_at.timestamp() if self.last_recalled_at else now
        recency = 1.0 / (1.0 + max(0.0, now - last) / 86400.0)
        return (
            math.log1p(self.recall_count) * recall_weight
            + self.average_score * score_weight
            + recency * recency_weight
        )


class RecallStatsStore:
    def __init__(self, db: Database, schema: str = "ctx") -> None:
        self.db = db
        self.queries = Queries(schema)
        self.failures = 0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="recall-stats")
        self._pending: list[Future[int]] = []
        self._lock = threading.Lock()

    def record(self, account_id: str, items: Iterable[tuple[str, float]]) -> int:
        """Record one recall per distinct uri (best score); returns how many were recorded."""
        best: dict[str, float] = {}
        for uri, score in items:
            s = float(score) if math.isfinite(score) else 0.0
            best[uri] = max(best.get(uri, s), s)
        if not best:
            return 0
        uris = sorted(best)
        try:
            with self.db.connection() as conn:
                conn.execute(
                    self.queries["recall_record"],
                    {"account": account_id, "uris": uris, "scores": [best[u] for u in uris]},
                )
        except (psycopg.Error, OSError) as exc:
            self.failures += 1
            log.warning("recording %d recall(s) failed (ignored): %s", len(uris), exc)
            return 0
        return len(uris)

    def record_hits(self, account_id: str, hits: Iterable[FindHit]) -> int:
        return self.record(account_id, ((h.uri, h.similarity) for h in hits))

    def record_later(self, account_id: str, items: Iterable[tuple[str, float]]) -> None:
        """`record` on a background thread (non-blocking); see `flush`."""
        batch = list(items)
        if batch:
            with self._lock:
                self._pending.append(self._pool.submit(self.record, account_id, batch))

    def record_hits_later(self, account_id: str, hits: Iterable[FindHit]) -> None:
        self.record_later(account_id, [(h.uri, h.similarity) for h in hits])

    def flush(self, timeout: float = 30.0) -> None:
        """Wait for the recalls recorded in the background so far."""
        with self._lock:
            pending, self._pending = self._pending, []
        for fut in pending:
            fut.result(timeout=timeout)

    def get(self, account_id: str, uris: list[str]) -> dict[str, RecallStats]:
        self.flush()
        with self.db.connection() as conn:
            rows = conn.execute(
                self.queries["recall_get"], {"account": account_id, "uris": list(uris)}
            ).fetchall()
        return {
            r[0]: RecallStats(
                uri=r[0],
                recall_count=int(r[1]),
                total_score=float(r[2]),
                last_score=r[3],
                first_recalled_at=r[4],
                last_recalled_at=r[5],
            )
            for r in rows
        }

    def lowest_value(
        self,
        account_id: str,
        limit: int = 20,
        recall_weight: float = 0.3,
        score_weight: float = 0.5,
        recency_weight: float = 0.2,
    ) -> list[RecallStats]:
        """The least valuable recalled nodes first (candidates for forgetting)."""
        self.flush()
        with self.db.connection() as conn:
            rows = conn.execute(
                self.queries["recall_lowest_value"],
                {
                    "account": account_id,
                    "limit": limit,
                    "w_recall": recall_weight,
                    "w_score": score_weight,
                    "w_recency": recency_weight,
                },
            ).fetchall()
        return [
            RecallStats(
                uri=r[0],
                recall_count=int(r[1]),
                total_score=float(r[2]),
                last_score=r[3],
                first_recalled_at=r[4],
                last_recalled_at=r[5],
                value=float(r[6]),
            )
            for r in rows
        ]


__all__ = ["RecallStats", "RecallStatsStore"]
