"""Index tasks: thin wrappers around `ctxpipe.index` (routed to the `embed` queue, except the
repair scan, which is a maintenance job).

- ``ctxpipe.index.drain``: run the IndexWorker until nothing is due. Kicked after each
  commit's outbox registration (`kick_drain`) and by beat every `outbox_drain_interval_s`.
- ``ctxpipe.index.reclaim_leases``: expired leases back to pending (or dead), by beat.
- ``ctxpipe.maintenance.repair``: the FS-vs-replica scan, by beat every `repair_interval_s`.

Kicks are de-duplicated: a kick sets a short-lived Redis flag and sends a drain only if the
flag was not set; the drain clears the flag *before* it claims, so an event registered after a
drain started always gets a drain of its own.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from celery.signals import worker_ready

from ctxpipe.core.config import Settings
from ctxpipe.index.wiring import make_worker
from ctxpipe.index.worker import IndexWorker
from tasks import context
from tasks.app import app
from tasks.queues import EMBED

log = logging.getLogger(__name__)

DRAIN = "ctxpipe.index.drain"
RECLAIM = "ctxpipe.index.reclaim_leases"
REPAIR = "ctxpipe.maintenance.repair"
KICK_KEY = "ctxpipe:index:drain-kicked"
KICK_TTL_S = 30
DRAIN_MAX_S = 60.0  # one task's budget; it re-kicks itself when work is left

_lock = threading.Lock()
_workers: dict[int, IndexWorker] = {}


def _settings() -> Settings:
    settings: Settings = app.conf.ctxpipe_settings
    return settings


def index_worker(settings: Settings) -> IndexWorker:
    """This process's IndexWorker (built after fork, model loaded on first use)."""
    pid = os.getpid()
    with _lock:
        worker = _workers.get(pid)
        if worker is None:
            _workers.clear()
            worker = make_worker(context.runtime(settings))
            _workers[pid] = worker
        return worker


def kick_drain(settings: Settings | None = None) -> bool:
    """Ask the embed workers to drain the outbox now (best effort; beat drains anyway)."""
    settings = settings or _settings()
    try:
        client = context.redis_client(settings)
        if not client.set(KICK_KEY, "1", nx=True, ex=KICK_TTL_S):
            return False  # a drain is queued and has not started yet: it will see our events
        app.send_task(DRAIN, queue=EMBED)
        return True
    except Exception as exc:  # noqa: BLE001 - never fail the caller (a commit) over a kick
        log.warning("could not kick an index drain (beat will drain): %s", exc)
        return False


@app.task(name=DRAIN, acks_late=True)
def drain(max_seconds: float = DRAIN_MAX_S) -> dict[str, Any]:
    settings = _settings()
    try:
        context.redis_client(settings).delete(KICK_KEY)
    except Exception as exc:  # noqa: BLE001
        log.warning("could not clear the drain flag: %s", exc)
    result = index_worker(settings).drain(max_seconds=max_seconds)
    if result.more:
        kick_drain(settings)  # stopped on its time budget: continue in a fresh task
    return result.model_dump(mode="json")


@app.task(name=RECLAIM, acks_late=True)
def reclaim_leases() -> dict[str, int]:
    settings = _settings()
    out = index_worker(settings).outbox.reclaim_expired()
    if out["reclaimed"]:
        kick_drain(settings)
    return out


@app.task(name=REPAIR, acks_late=True)
def repair(full: bool = False) -> dict[str, Any]:
    from ctxpipe.index.wiring import make_repair

    settings = _settings()
    job = make_repair(context.runtime(settings))
    report = job.run(full=full)
    if report.events_queued:
        kick_drain(settings)
    return report.model_dump(mode="json", exclude={"uris"})


def _consumes_embed(consumer: Any) -> bool:
    try:
        names = set(consumer.app.amqp.queues.consume_from or {})
    except Exception:  # noqa: BLE001
        return False
    return not names or EMBED in names


@worker_ready.connect
def _check_embed_worker(sender: Any = None, **_: Any) -> None:
    """At start of a worker that consumes `embed`: the model's dimension must fit the schema
    column (a clear error now rather than failed tasks later). Solo/thread pools also load the
    model in the background so the first drain after start is fast."""
    if sender is None or not _consumes_embed(sender):
        return
    settings = _settings()
    try:
        worker = index_worker(settings)
        worker.check()
    except Exception as exc:  # noqa: BLE001
        log.critical("embed worker misconfigured, index drains will fail: %s", exc)
        return
    emb = worker.indexer.embedder
    log.info(
        "embed worker ready: model %s (%d dims) matches the index replica's vector column",
        emb.model_name,
        emb.dimension,
    )
    pool = type(getattr(sender, "pool", None)).__module__
    if pool.endswith(("solo", "threads")):  # never load the model in a prefork parent
        threading.Thread(target=_warm, args=(worker,), daemon=True).start()


def _warm(worker: IndexWorker) -> None:
    try:
        worker.indexer.warm()
    except Exception as exc:  # noqa: BLE001
        log.warning("embedding model warm-up failed: %s", exc)
