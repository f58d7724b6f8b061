"""The PostgreSQL side of erasing a user: every table, in one transaction."""

from __future__ import annotations

from ctxpipe.core.models import OutboxEvent
from ctxpipe.storage.db import Database
from ctxpipe.storage.outbox_store import OutboxStore
from ctxpipe.storage.queries import Queries

# (query, what it counts) in the order they run: rows that reference others go first
ERASE_QUERIES = (
    ("erase_outbox", "outbox_events"),
    ("erase_edges", "relation_edges"),
    ("erase_nodes", "context_nodes"),
    ("erase_recall_stats", "recall_stats"),
    ("erase_snapshots", "context_snapshots"),
    ("erase_archives", "session_archives"),
    ("erase_commits", "commits"),
    ("erase_open_session_cuts", "open_session_cuts"),
    ("erase_open_sessions", "open_sessions"),  # their open_messages by cascade
)


class PgErasureStore:
    def __init__(
        self, db: Database, schema: str = "ctx", outbox: OutboxStore | None = None
    ) -> None:
        self._db = db
        self._q = Queries(schema)
        self._outbox = outbox

    def ledger_sessions(self, account: str, user: str) -> list[str]:
        with self._db.connection() as conn:
            rows = conn.execute(
                self._q["erase_user_sessions"], {"account": account, "user": user}
            ).fetchall()
        return [str(r[0]) for r in rows]

    def erase(
        self, account: str, user: str, sessions: list[str], uris: list[str]
    ) -> dict[str, int]:
        params = {
            "account": account,
            "user": user,
            "space": f"users/{user}",
            "prefix": f"ctx://{account}/users/{user}/%",
            "sessions": sessions,
            "uris": uris,
        }
        counts: dict[str, int] = {}
        with self._db.connection() as conn, conn.transaction():
            for name, table in ERASE_QUERIES:
                cur = conn.execute(self._q[name], params)
                counts[table] = counts.get(table, 0) + max(cur.rowcount, 0)
        return counts

    def reindex(self, events: list[OutboxEvent]) -> None:
        if events and self._outbox is not None:
            self._outbox.append_batch(events)


__all__ = ["ERASE_QUERIES", "PgErasureStore"]
