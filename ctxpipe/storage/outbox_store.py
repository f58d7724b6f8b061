"""OutboxStore: the `outbox_events` table that drives the index replica.

Write side (commit phase 5, repair): `append_batch` with deterministic ids.
Claim side (index workers): `claim_batch` (``FOR UPDATE SKIP LOCKED`` + a lease), `mark_done`,
`mark_failed` (exponential backoff through ``next_attempt_at``; ``dead`` after ``max_retries``
attempts or on a permanent error), `reclaim_expired` (a lost worker's events go back to
``pending``), `requeue` (``dead`` → ``pending``), plus listing and counts for the CLI.

Lifecycle: pending → claimed → done | failed (→ claimed again after the backoff) | dead.
A claimed event whose lease expired is claimable again; that attempt counts as a failure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from pydantic import ValidationError

from ctxpipe.core.config import Settings
from ctxpipe.core.enums import OutboxStatus
from ctxpipe.core.models import OutboxEvent
from ctxpipe.core.uri import CtxURI
from ctxpipe.storage.db import Database
from ctxpipe.storage.queries import Queries

MAX_ERROR_CHARS = 2000


def _row_to_event(row: dict[str, Any]) -> OutboxEvent:
    return OutboxEvent.model_validate(dict(row))


class OutboxStore:
    def __init__(
        self,
        db: Database,
        schema: str = "ctx",
        *,
        lease_s: float = 60.0,
        backoff_base_s: float = 2.0,
        backoff_max_s: float = 600.0,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """`clock`: the time leases, backoff and due dates are computed against; None (the
        default) uses the database's now(), one clock for every worker. Tests step a clock
        instead of sleeping."""
        self._db = db
        self._clock = clock
        self._q = Queries(schema)
        self.schema = schema
        self.lease_s = lease_s
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s

    @classmethod
    def from_settings(cls, db: Database, settings: Settings) -> OutboxStore:
        """The one way the application builds it: schema, lease and backoff from `settings`."""
        return cls(
            db,
            settings.db_schema,
            lease_s=settings.outbox_lease_s,
            backoff_base_s=settings.outbox_backoff_base_s,
            backoff_max_s=settings.outbox_backoff_max_s,
        )

    def _now(self) -> datetime | None:
        return self._clock() if self._clock is not None else None

    # ------------------------------------------------------------ write side (commit)
    def append_batch(self, events: list[OutboxEvent], *, rearm: bool = False) -> list[OutboxEvent]:
        """Insert events; ids are deterministic so a re-run inserts nothing new.

        ``rearm``: an event whose id exists and is ``done`` goes back to ``pending`` (repair
        re-emits the same deterministic id when the same divergence comes back). ``dead``
        events are never re-armed here (that is `requeue`). Returns the events that were
        actually (re)queued."""
        if not events:
            return []
        query = self._q["outbox_append_rearm" if rearm else "outbox_append"]
        inserted: set[str] = set()
        now = self._now()
        with self._db.connection() as conn, conn.cursor() as cur:
            cur.executemany(
                query,
                [
                    {
                        "event_id": e.event_id,
                        "event_type": e.event_type.value,
                        "uri": e.uri,
                        "account_id": CtxURI.parse(e.uri).account,
                        "payload": Jsonb(e.payload),
                        "max_retries": e.max_retries,
                        "now": now,
                    }
                    for e in events
                ],
                returning=True,
            )
            while True:
                row = cur.fetchone()
                if row is not None:
                    inserted.add(row[0])
                if not cur.nextset():
                    break
        return [e for e in events if e.event_id in inserted]

    def append(self, event: OutboxEvent) -> OutboxEvent | None:
        new = self.append_batch([event])
        return new[0] if new else None

    # ------------------------------------------------------------ claim side (workers)
    def claim_batch(
        self, worker_id: str, limit: int = 100, lease_s: float | None = None
    ) -> list[OutboxEvent]:
        """Claim up to `limit` due events for `worker_id` under a lease (oldest first).

        Concurrent claimers never get the same event (``FOR UPDATE SKIP LOCKED``)."""
        if limit < 1:
            return []
        params = {
            "worker_id": worker_id,
            "limit": limit,
            "lease_s": float(lease_s if lease_s is not None else self.lease_s),
            "now": self._now(),
        }
        with self._db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(self._q["outbox_claim"], params).fetchall()
        events = []
        for row in rows:
            try:
                events.append(_row_to_event(row))
            except ValidationError as exc:  # e.g. an unknown event type: can never succeed
                why = f"invalid outbox event: {' '.join(str(exc).split())}"
                self.mark_failed(row["event_id"], why, retryable=False, worker_id=worker_id)
        events.sort(key=lambda e: (e.created_at is None, e.created_at, e.event_id))
        return events

    def mark_done(self, event_id: str | Sequence[str], worker_id: str | None = None) -> int:
        """Mark claimed event(s) done; with `worker_id`, only while that worker holds them.

        Returns how many were marked (an event re-claimed after a lost lease is not)."""
        ids = [event_id] if isinstance(event_id, str) else list(event_id)
        if not ids:
            return 0
        with self._db.connection() as conn:
            rows = conn.execute(
                self._q["outbox_done"],
                {"event_ids": ids, "worker_id": worker_id, "now": self._now()},
            ).fetchall()
        return len(rows)

    def mark_failed(
        self,
        event_id: str,
        error: str,
        retryable: bool = True,
        worker_id: str | None = None,
    ) -> OutboxStatus | None:
        """Record a failed attempt: ``failed`` (retried after ``base·2^n`` seconds, capped) or
        ``dead`` (permanent error, or the last allowed attempt). None if not claimed."""
        params = {
            "event_id": event_id,
            "error": (error or "unknown error")[:MAX_ERROR_CHARS],
            "retryable": bool(retryable),
            "worker_id": worker_id,
            "backoff_base_s": float(self.backoff_base_s),
            "backoff_max_s": float(self.backoff_max_s),
            "now": self._now(),
        }
        with self._db.connection() as conn:
            row = conn.execute(self._q["outbox_fail"], params).fetchone()
        return OutboxStatus(row[0]) if row else None

    def reclaim_expired(self) -> dict[str, int]:
        """Expired leases: back to ``pending`` (counted as a failed attempt) or ``dead``."""
        with self._db.connection() as conn:
            rows = conn.execute(self._q["outbox_reclaim"], {"now": self._now()}).fetchall()
        out = {"reclaimed": 0, "dead": 0}
        for _eid, status in rows:
            out["dead" if status == OutboxStatus.DEAD.value else "reclaimed"] += 1
        return out

    def requeue(self, event_ids: Iterable[str] = (), *, all_dead: bool = False) -> list[str]:
        """``dead`` events back to ``pending`` with a fresh retry budget; returns their ids."""
        ids = list(event_ids)
        if not ids and not all_dead:
            return []
        with self._db.connection() as conn:
            rows = conn.execute(
                self._q["outbox_requeue"],
                {"all": all_dead, "event_ids": ids, "now": self._now()},
            ).fetchall()
        return sorted(r[0] for r in rows)

    # ------------------------------------------------------------ inspection
    def list_events(
        self, statuses: Iterable[OutboxStatus | str] | None = None, limit: int = 100
    ) -> list[OutboxEvent]:
        wanted = [str(s) for s in (statuses or [s for s in OutboxStatus])]
        with self._db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(
                self._q["outbox_list"], {"statuses": wanted, "limit": limit}
            ).fetchall()
        return [_row_to_event(r) for r in rows]

    def get(self, event_id: str) -> OutboxEvent | None:
        with self._db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(self._q["outbox_get"], {"event_id": event_id}).fetchone()
        return _row_to_event(row) if row else None

    def counts(self) -> dict[str, int]:
        """Events per status (every status present, zero when none)."""
        out = {s.value: 0 for s in OutboxStatus}
        with self._db.connection() as conn:
            for status, n in conn.execute(self._q["outbox_counts"]).fetchall():
                out[str(status)] = int(n)
        return out

    def oldest_pending_age_s(self) -> float | None:
        """Seconds since the oldest event still waiting (pending or failed) was created."""
        with self._db.connection() as conn:
            row = conn.execute(self._q["outbox_oldest_pending"]).fetchone()
        return float(row[0]) if row and row[0] is not None else None


__all__ = ["OutboxStore"]
