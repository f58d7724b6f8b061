"""The outbox in memory, for tests without a database: it records the registered events and,
like the outbox table, ignores an event id it already holds; an index worker claims them in
batches, in the order they came, and marks them done."""

from __future__ import annotations

import threading

from ctxpipe.core.enums import OutboxEventType
from ctxpipe.core.models import ContextNode, OutboxEvent


class MemoryOutbox:
    """`fail`: every append raises, as when the outbox's database is unreachable."""

    def __init__(self, fail: bool = False) -> None:
        self.events: dict[str, OutboxEvent] = {}
        self.fail = fail
        self.claimed: set[str] = set()
        self.done: list[str] = []
        self._lock = threading.Lock()  # a worker's drains claim from threads of their own

    def append_batch(self, events: list[OutboxEvent]) -> list[OutboxEvent]:
        if self.fail:
            raise ConnectionError("outbox database unreachable")
        with self._lock:
            new = [e for e in events if e.event_id not in self.events]
            self.events.update((e.event_id, e) for e in new)
        return new

    def claim_batch(self, worker_id: str, limit: int = 100) -> list[OutboxEvent]:
        with self._lock:
            out = [e for i, e in self.events.items() if i not in self.claimed][:limit]
            self.claimed.update(e.event_id for e in out)
            return out

    def mark_done(self, event_id: list[str], worker_id: str | None = None) -> int:
        with self._lock:
            self.done += event_id
            return len(event_id)


def upsert_event(node: ContextNode) -> OutboxEvent:
    """The UPSERT_CONTEXT event of `node` at its version, as a commit registers it."""
    return OutboxEvent(
        event_id=OutboxEvent.make_id(OutboxEventType.UPSERT_CONTEXT, node.uri, node.version),
        event_type=OutboxEventType.UPSERT_CONTEXT,
        uri=node.uri,
        payload={"version": node.version},
    )
