"""The outbox's append in memory, for tests that commit without a database: it records the
registered events and, like the outbox table, ignores an event id it already holds."""

from __future__ import annotations

from ctxpipe.core.enums import OutboxEventType
from ctxpipe.core.models import ContextNode, OutboxEvent


class MemoryOutbox:
    """`fail`: every append raises, as when the outbox's database is unreachable."""

    def __init__(self, fail: bool = False) -> None:
        self.events: dict[str, OutboxEvent] = {}
        self.fail = fail

    def append_batch(self, events: list[OutboxEvent]) -> list[OutboxEvent]:
        if self.fail:
            raise ConnectionError("outbox database unreachable")
        new = [e for e in events if e.event_id not in self.events]
        self.events.update((e.event_id, e) for e in new)
        return new


def upsert_event(node: ContextNode) -> OutboxEvent:
    """The UPSERT_CONTEXT event of `node` at its version, as a commit registers it."""
    return OutboxEvent(
        event_id=OutboxEvent.make_id(OutboxEventType.UPSERT_CONTEXT, node.uri, node.version),
        event_type=OutboxEventType.UPSERT_CONTEXT,
        uri=node.uri,
        payload={"version": node.version},
    )
