"""Repair: compare the FS (the truth) with the index replica and emit outbox events for every
divergence: missing, stale and orphaned rows, nodes and relations.

- **missing**: a node on the FS without a replica row → UPSERT_CONTEXT.
- **stale**: version or content hash differ → UPSERT_CONTEXT (with ``replace`` when the FS is
  *behind* the replica, e.g. a node deleted and recreated while its events were lost).
- **orphaned**: a replica row whose node is gone from the FS → DELETE_CONTEXT.
- **relations**: replica edges of a node differ from its ``.relations.json`` → UPSERT_RELATION.

Incremental by default: every node is listed (one ``stat`` each, so missing and orphaned rows
are always found) but only nodes changed since the last run (``repair_runs.last_fs_mtime``,
minus a safety slack) are compared in detail; ``full`` compares every node. URIs with an event
still in flight are left to that event. Event ids are deterministic for a given divergence, so
running repair twice queues nothing twice; a divergence that comes back re-arms its done event.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from ctxpipe.core.enums import OutboxEventType
from ctxpipe.core.errors import NodeNotFoundError, StorageError
from ctxpipe.core.models import OutboxEvent, stable_id, utcnow
from ctxpipe.fs import ContextFS, FSRelationStore
from ctxpipe.index.fs_scan import scan_fs
from ctxpipe.index.replica import NodeState, ReplicaStore
from ctxpipe.storage.outbox_store import OutboxStore

# Node files are written before their commit point: compare nodes a little older than the
# newest change the last run saw, so a write in flight during that run is not skipped.
MTIME_SLACK_S = 300.0
LIST_LIMIT = 200


class RepairReport(BaseModel):
    mode: Literal["incremental", "full"]
    dry_run: bool = False
    fs_nodes: int = 0
    replica_nodes: int = 0
    compared: int = 0  # nodes whose version/hash/edges were checked in detail
    in_flight: int = 0  # divergent URIs skipped because an event is already queued
    missing: int = 0
    stale: int = 0
    orphaned: int = 0
    relations: int = 0
    unreadable: int = 0  # FS nodes whose files could not be read (see the worker's errors)
    events_queued: int = 0
    since_mtime: float | None = None
    last_fs_mtime: float | None = None
    run_id: int | None = None
    duration_ms: int = 0
    started_at: datetime | None = None
    uris: dict[str, list[str]] = Field(default_factory=dict)  # kind -> URIs (first 200)


def _event(
    kind: OutboxEventType, uri: str, discriminator: str, payload: dict[str, object], retries: int
) -> OutboxEvent:
    return OutboxEvent(
        event_id=OutboxEvent.make_id(kind, uri, f"repair:{discriminator}"),
        event_type=kind,
        uri=uri,
        payload={**payload, "source": "repair"},
        max_retries=retries,
    )


class RepairJob:
    def __init__(
        self,
        fs: ContextFS,
        relations: FSRelationStore,
        replica: ReplicaStore,
        outbox: OutboxStore,
        *,
        max_retries: int = 5,
    ) -> None:
        self.fs = fs
        self.relations = relations
        self.replica = replica
        self.outbox = outbox
        self.max_retries = max_retries

    def run(self, *, full: bool = False, dry_run: bool = False) -> RepairReport:
        started, started_at = time.perf_counter(), utcnow()
        last = None if full else self.replica.last_repair()
        since = None
        if last is not None and last.get("last_fs_mtime") is not None:
            since = float(last["last_fs_mtime"]) - MTIME_SLACK_S
        report = RepairReport(
            mode="incremental" if since is not None else "full",
            dry_run=dry_run,
            since_mtime=since,
            started_at=started_at,
        )
        entries = {e.uri: e for e in scan_fs(self.fs)}
        states = self.replica.all_node_states()
        edges = self.replica.edge_ids()
        inflight = self.replica.inflight_uris()
        report.fs_nodes, report.replica_nodes = len(entries), len(states)
        mtimes = [e.mtime for e in entries.values()]
        report.last_fs_mtime = max(mtimes) if mtimes else (last or {}).get("last_fs_mtime")

        found: dict[str, list[str]] = {"missing": [], "stale": [], "orphaned": [], "relations": []}
        events: list[OutboxEvent] = []

        def emit(kind: str, uri: str, event: OutboxEvent) -> None:
            if uri in inflight:
                report.in_flight += 1
                return
            found[kind].append(uri)
            events.append(event)

        for uri, entry in entries.items():
            state = states.get(uri)
            if state is not None and since is not None and entry.mtime < since:
                continue  # unchanged since the last run
            report.compared += 1
            try:
                node_event = self._node_event(uri, state)
                rel_event = self._relation_event(uri, edges.get(uri, set()))
            except StorageError:
                report.unreadable += 1
                continue
            if node_event is not None:
                emit("missing" if state is None else "stale", uri, node_event)
            if rel_event is not None:
                emit("relations", uri, rel_event)
        for uri, state in states.items():
            if uri not in entries:
                payload = {"version": state.version, "content_hash": state.content_hash}
                disc = f"{state.version}:{state.content_hash}"
                emit("orphaned", uri, self._mk(OutboxEventType.DELETE_CONTEXT, uri, disc, payload))
        for uri in sorted(set(edges) - set(entries) - set(states)):  # edges without any node
            emit("relations", uri, self._relations_mk(uri, set(), edges[uri]))

        report.missing, report.stale = len(found["missing"]), len(found["stale"])
        report.orphaned, report.relations = len(found["orphaned"]), len(found["relations"])
        report.uris = {k: sorted(v)[:LIST_LIMIT] for k, v in found.items() if v}
        if not dry_run:
            report.events_queued = len(self.outbox.append_batch(events, rearm=True))
            report.run_id = self.replica.record_repair(started_at, report.mode, report.model_dump())
        report.duration_ms = int((time.perf_counter() - started) * 1000)
        return report

    # ------------------------------------------------------------------ comparisons
    def _mk(
        self, kind: OutboxEventType, uri: str, disc: str, payload: dict[str, object]
    ) -> OutboxEvent:
        return _event(kind, uri, disc, payload, self.max_retries)

    def _node_event(self, uri: str, state: NodeState | None) -> OutboxEvent | None:
        try:
            st = self.fs.stat_node(uri)
        except (NodeNotFoundError, ValueError):
            return None
        if not st.exists:
            return None
        payload: dict[str, object] = {"version": st.version, "content_hash": st.content_hash}
        if state is None:
            disc = f"{st.version}:{st.content_hash}:-"
            return self._mk(OutboxEventType.UPSERT_CONTEXT, uri, disc, payload)
        if st.version == state.version and st.content_hash == state.content_hash:
            return None
        if st.version < state.version:
            payload["replace"] = True  # the FS is the truth even when it went backwards
        disc = f"{st.version}:{st.content_hash}:{state.version}:{state.content_hash}"
        return self._mk(OutboxEventType.UPSERT_CONTEXT, uri, disc, payload)

    def _relation_event(self, uri: str, replica_ids: set[str]) -> OutboxEvent | None:
        try:
            fs_ids = {e.edge_id for e in self.relations.get_edges(uri)}
        except NodeNotFoundError:
            fs_ids = set()
        if fs_ids == replica_ids:
            return None
        return self._relations_mk(uri, fs_ids, replica_ids)

    def _relations_mk(self, uri: str, fs_ids: set[str], replica_ids: set[str]) -> OutboxEvent:
        disc = stable_id(*sorted(fs_ids), "|", *sorted(replica_ids), length=16)
        payload: dict[str, object] = {"edge_ids": sorted(fs_ids)}
        return self._mk(OutboxEventType.UPSERT_RELATION, uri, disc, payload)


__all__ = ["MTIME_SLACK_S", "RepairJob", "RepairReport"]
