"""OutboxStore: the `outbox_events` table that drives the index replica (seed 004 §14)."""

from __future__ import annotations

from psycopg.types.json import Jsonb

from ctxpipe.core.models import OutboxEvent
from ctxpipe.core.uri import CtxURI
from ctxpipe.storage.db import Database
from ctxpipe.storage.queries import Queries


class OutboxStore:
    def __init__(self, db: Database, schema: str = "ctx") -> None:
        self._db = db
        self._q = Queries(schema)

    # ------------------------------------------------------------ write side (commit)
    def append_batch(self, events: list[OutboxEvent]) -> list[OutboxEvent]:
        """Insert events; ids are deterministic so a re-run inserts nothing new.
        Returns the events that were actually new."""
        if not events:
            return []
        inserted: set[str] = set()
        with self._db.connection() as conn, conn.cursor() as cur:
            for e in events:
                cur.execute(
                    self._q["outbox_append"],
                    {
                        "event_id": e.event_id,
                        "event_type": e.event_type.value,
                        "uri": e.uri,
                        "account_id": CtxURI.parse(e.uri).account,
                        "payload": Jsonb(e.payload),
                        "max_retries": e.max_retries,
                    },
                )
                if cur.fetchone() is not None:
                    inserted.add(e.event_id)
        return [e for e in events if e.event_id in inserted]

    def append(self, event: OutboxEvent) -> OutboxEvent | None:
        new = self.append_batch([event])
        return new[0] if new else None
