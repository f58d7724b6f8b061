"""IndexWorker: consumes outbox events and converges the replica to the FS.

`run_once` claims a batch, groups its events by what they touch and runs them together (one FS
read per URI, one embedding pass over all new chunk texts, one transaction for all rows), then
marks each event done or failed. Every event type means "make the replica match the FS for
this URI", so any delivery order converges:

- UPSERT_CONTEXT: index the FS node (never over a newer replica row; `payload.replace` from
  repair lets the FS version win when the replica is ahead); a node gone from the FS is
  removed from the replica.
- DELETE_CONTEXT: the node, its chunks and its outgoing edges leave the replica (if the FS has
  the node again — recreated since — it is indexed instead).
- UPSERT_RELATION: the replica edges of the URI become its `.relations.json` edges.
- MOVE_CONTEXT (payload `from_uri`, `to_uri`): rows under `from_uri` go, FS nodes under
  `to_uri` are indexed re-using the stored vectors of unchanged chunk texts.

If the batch as a whole fails (e.g. a database error), each event is retried alone so one bad
event cannot hold the others back; its failures back off exponentially and end in `dead`.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import os
import socket
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from ctxpipe.core.config import CLAIM_BATCH_AUTO, DRAINS_AUTO, Auto, on_device
from ctxpipe.core.enums import OutboxEventType, OutboxStatus
from ctxpipe.core.errors import InvalidURIError
from ctxpipe.core.models import OutboxEvent
from ctxpipe.core.uri import node_uri
from ctxpipe.index.indexer import RELATIONS_KEY, Indexer, SyncReport
from ctxpipe.observability.spans import tracer
from ctxpipe.providers.embedder import device_type
from ctxpipe.storage.outbox_store import OutboxStore

log = logging.getLogger(__name__)


class PermanentEventError(ValueError):
    """An event that can never succeed (bad payload, bad URI): it goes `dead` at once."""


class IndexBatchResult(BaseModel):
    """Outcome of one `run_once`."""

    claimed: int = 0
    succeeded: int = 0
    failed: int = 0  # failed and will be retried after the backoff
    dead: int = 0
    indexed: int = 0  # node rows written
    unchanged: int = 0
    refused: int = 0  # version regressions refused
    deleted: int = 0
    relations: int = 0
    chunks: int = 0
    embedded: int = 0  # chunk texts run through the model
    units_embedded: int = 0  # unit (line, sentence) texts run through the model
    more: bool = False  # drain stopped on its budget with events possibly still due
    errors: dict[str, str] = Field(default_factory=dict)  # event id -> error
    timings_ms: dict[str, int] = Field(default_factory=dict)

    def merge(self, other: IndexBatchResult) -> IndexBatchResult:
        data = self.model_dump()
        for key, value in other.model_dump().items():
            if isinstance(value, bool):  # `more`: either stopped on its budget
                data[key] = data[key] or value
            elif isinstance(value, int):
                data[key] += value
            elif key == "errors":
                data[key].update(value)
            elif key == "timings_ms":
                for k, v in value.items():
                    data[key][k] = data[key].get(k, 0) + v
        return IndexBatchResult.model_validate(data)


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def move_endpoints(event: OutboxEvent) -> tuple[str, str]:
    p = event.payload
    src = p.get("from_uri") or p.get("from")
    dst = p.get("to_uri") or p.get("to") or (event.uri if src and src != event.uri else None)
    if not isinstance(src, str) or not isinstance(dst, str) or not src or not dst:
        raise PermanentEventError("MOVE_CONTEXT needs payload.from_uri and payload.to_uri")
    return node_uri(src), node_uri(dst)


@dataclass
class _Plan:
    """The work of a set of events, grouped."""

    nodes: dict[str, list[str]] = field(default_factory=dict)  # uri -> event ids
    replace: set[str] = field(default_factory=set)
    relations: dict[str, list[str]] = field(default_factory=dict)
    moves: list[tuple[OutboxEvent, str, str]] = field(default_factory=list)
    invalid: dict[str, BaseException] = field(default_factory=dict)  # event id -> error


def plan_events(events: Sequence[OutboxEvent]) -> _Plan:
    plan = _Plan()
    for e in events:
        try:
            if e.event_type is OutboxEventType.MOVE_CONTEXT:
                src, dst = move_endpoints(e)
                plan.moves.append((e, src, dst))
                continue
            uri = node_uri(e.uri)
            if e.event_type is OutboxEventType.UPSERT_RELATION:
                plan.relations.setdefault(uri, []).append(e.event_id)
            else:  # UPSERT_CONTEXT and DELETE_CONTEXT both converge the node to the FS
                plan.nodes.setdefault(uri, []).append(e.event_id)
                if e.event_type is OutboxEventType.UPSERT_CONTEXT and e.payload.get("replace"):
                    plan.replace.add(uri)
        except (PermanentEventError, InvalidURIError) as exc:
            plan.invalid[e.event_id] = exc
    return plan


def is_retryable(exc: BaseException) -> bool:
    return not isinstance(exc, (PermanentEventError, InvalidURIError))


class _Budget:
    """What a drain may still do, shared by its loops: batches until a deadline, at most
    `batches` of them."""

    def __init__(self, deadline: float, batches: int | None) -> None:
        self.deadline = deadline
        self.left = batches
        self.started = 0
        self._lock = threading.Lock()

    def take(self) -> bool:
        """May one more batch start? (The first always may.)"""
        with self._lock:
            if self.started and time.monotonic() >= self.deadline:
                return False
            if self.left is not None:
                if self.left <= 0:
                    return False
                self.left -= 1
            self.started += 1
            return True


class IndexWorker:
    def __init__(
        self,
        outbox: OutboxStore,
        indexer: Indexer,
        *,
        worker_id: str | None = None,
        batch_size: int | Auto = "auto",
        drains: int | Auto = 1,
    ) -> None:
        self.outbox = outbox
        self.indexer = indexer
        self.worker_id = worker_id or default_worker_id()
        self._batch_size = batch_size
        self._drains = drains

    @property
    def batch_size(self) -> int:
        """Events claimed at once (`Settings.outbox_batch_size`): as set, or, at `auto`, 256
        where the indexer's model runs on a CUDA GPU and 64 elsewhere. Resolved at the first
        claim, when the model is about to load anyway (a worker's start imports no torch)."""
        return on_device(self._batch_size, device_type(self.indexer.embedder), CLAIM_BATCH_AUTO)

    @property
    def drains(self) -> int:
        """Batches indexed at once by `drain` (`Settings.outbox_drains`): as set, or, at
        `auto`, 3 where the indexer's model runs on a CUDA GPU and 1 elsewhere."""
        return on_device(self._drains, device_type(self.indexer.embedder), DRAINS_AUTO)

    def check(self) -> None:
        """Start-up check: the model's dimension fits the schema (clear `EmbeddingError`)."""
        self.indexer.check_dimension()

    # ------------------------------------------------------------------ the loop
    def run_once(self, limit: int | None = None) -> IndexBatchResult:
        """Claim one batch, process it, mark every event. Returns the counts."""
        self.check()  # before claiming: a misconfigured worker must not burn retries
        started = time.perf_counter()
        events = self.outbox.claim_batch(self.worker_id, limit or self.batch_size)
        result = IndexBatchResult(claimed=len(events))
        if not events:
            return result
        claim_ms = int((time.perf_counter() - started) * 1000)
        with tracer.start_as_current_span("index.batch") as span:
            span.set_attributes(
                {"ctxpipe.worker_id": self.worker_id, "ctxpipe.claimed": len(events)}
            )
            result = self._batch(events, result)
            span.set_attributes(
                {
                    "ctxpipe.succeeded": result.succeeded,
                    "ctxpipe.failed": result.failed,
                    "ctxpipe.chunks": result.chunks,
                    "ctxpipe.embedded": result.embedded,
                }
            )
        result.timings_ms["claim"] = claim_ms
        result.timings_ms["total"] = int((time.perf_counter() - started) * 1000)
        return result

    def drain(self, max_seconds: float = 60.0, max_batches: int | None = None) -> IndexBatchResult:
        """`run_once` until nothing is due (or the time/batch budget is spent); with `drains`
        above 1, that many loops at once on threads of their own, sharing the model: while one
        waits on PostgreSQL writing its batch (the vector index is updated row by row) another
        reads, chunks and embeds the next. Each batch is claimed, written and marked on its own,
        as by separate workers."""
        budget = _Budget(time.monotonic() + max_seconds, max_batches)
        n = self.drains
        if n <= 1:
            return self._drain(budget)
        # each loop in a copy of this context: its batches' spans stay in the caller's trace
        contexts = [contextvars.copy_context() for _ in range(n)]
        with ThreadPoolExecutor(n, thread_name_prefix="index-drain") as pool:
            parts = list(pool.map(lambda ctx: ctx.run(self._drain, budget), contexts))
        return functools.reduce(IndexBatchResult.merge, parts)

    def _drain(self, budget: _Budget) -> IndexBatchResult:
        total = IndexBatchResult()
        while budget.take():
            res = self.run_once()
            total = total.merge(res)
            if res.claimed == 0:
                return total
        total.more = True
        return total

    # ------------------------------------------------------------------ internals
    def _batch(self, events: Sequence[OutboxEvent], result: IndexBatchResult) -> IndexBatchResult:
        """Process a claimed batch (each event on its own when the batch fails) and mark it."""
        report = SyncReport()
        try:
            outcome = self._process(events, report)
        except Exception as exc:  # noqa: BLE001 - isolate: retry each event on its own
            log.warning("index batch of %d failed (%s); retrying one by one", len(events), exc)
            report = SyncReport()
            outcome = {}
            for e in events:
                try:
                    outcome.update(self._process([e], report))
                except Exception as one_exc:  # noqa: BLE001
                    outcome[e.event_id] = one_exc
        result = self._finish(events, outcome, result)
        self._count(result, report)
        return result

    def _process(
        self, events: Sequence[OutboxEvent], report: SyncReport
    ) -> dict[str, BaseException | None]:
        """Run the events' work; returns event id -> None (success) or its error."""
        plan = plan_events(events)
        out: dict[str, BaseException | None] = dict(plan.invalid)
        if plan.nodes:
            self.indexer.sync_nodes(plan.nodes, replace=plan.replace, report=report)
        if plan.relations:
            self.indexer.sync_relations(plan.relations, report=report)
        for event, src, dst in plan.moves:
            before = set(report.errors)
            try:
                self.indexer.move(src, dst, report=report)
                fresh = [k for k in report.errors if k not in before]
                out[event.event_id] = report.errors[fresh[0]] if fresh else None
            except Exception as exc:  # noqa: BLE001
                out[event.event_id] = exc
        for prefix, group in (("", plan.nodes), (RELATIONS_KEY, plan.relations)):
            for uri, ids in group.items():
                err = report.errors.get(prefix + uri)
                for eid in ids:
                    out.setdefault(eid, err)
        return out

    def _finish(
        self,
        events: Sequence[OutboxEvent],
        outcome: dict[str, BaseException | None],
        result: IndexBatchResult,
    ) -> IndexBatchResult:
        done = [e.event_id for e in events if outcome.get(e.event_id) is None]
        # an event another worker re-claimed after our lease ran out is counted by that worker
        result.succeeded = self.outbox.mark_done(done, worker_id=self.worker_id) if done else 0
        for e in events:
            exc = outcome.get(e.event_id)
            if exc is None:
                continue
            msg = f"{type(exc).__name__}: {exc}"
            status = self.outbox.mark_failed(
                e.event_id, msg, retryable=is_retryable(exc), worker_id=self.worker_id
            )
            result.errors[e.event_id] = msg
            if status is OutboxStatus.DEAD:
                result.dead += 1
                log.error(
                    "outbox event %s (%s %s) is dead: %s", e.event_id, e.event_type, e.uri, msg
                )
            else:
                result.failed += 1
                log.warning(
                    "outbox event %s (%s %s) failed: %s", e.event_id, e.event_type, e.uri, msg
                )
        return result

    @staticmethod
    def _count(result: IndexBatchResult, report: SyncReport) -> None:
        result.indexed = len(report.indexed)
        result.unchanged = len(report.unchanged)
        result.refused = len(report.refused)
        result.deleted = len(report.deleted)
        result.relations = report.relations
        result.chunks = report.chunks
        result.embedded = report.embedded
        result.units_embedded = report.units_embedded
        for key, secs in report.timings.items():
            result.timings_ms[key] = int(secs * 1000)


__all__ = [
    "IndexBatchResult",
    "IndexWorker",
    "PermanentEventError",
    "default_worker_id",
    "plan_events",
]
