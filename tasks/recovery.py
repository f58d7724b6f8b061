"""Worker liveness for fast recovery (the logic is in `ctxpipe.commit.recovery`).

- every worker node gets an incarnation id at `worker_init` (in the parent, before the pool
  forks, so prefork children inherit it); once the node is ready a daemon thread of the parent
  refreshes its heartbeat every third of `worker_heartbeat_ttl_s`;
- every commit task the node *receives* (running or prefetched: both are lost with the node) is
  recorded under the incarnation by the parent (`task_received`), marked running by the pool
  process that starts it (`task_prerun`: only a death while it runs counts towards failing the
  commit as one that kills its worker); `task_postrun` removes it;
- ``ctxpipe.maintenance.reap`` (beat, every `reap_interval_s`) re-drives the commits of dead
  incarnations and, after a broker restart, the commits in flight.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import redis
from celery.signals import (
    task_postrun,
    task_prerun,
    task_received,
    worker_init,
    worker_ready,
    worker_shutdown,
)

from ctxpipe.commit.recovery import BrokerWatch, CommitReaper, WorkerRegistry, incarnation_id
from ctxpipe.core.config import Settings
from ctxpipe.fs.redis_lock import set_holder
from ctxpipe.storage.broker_queues import COMMIT_PATH_QUEUES, WAITING_READ_LIMIT, waiting_tasks
from tasks import context
from tasks.app import app
from tasks.queues import PLAN, REAP, SUBMIT

log = logging.getLogger(__name__)

_node: dict[str, Any] = {"incarnation": None, "stop": None}


def incarnation() -> str | None:
    """This worker process's incarnation id (None outside a worker)."""
    return _node["incarnation"]


def registry(settings: Settings, client: redis.Redis | None = None) -> WorkerRegistry:
    return WorkerRegistry(
        client or context.redis_client(settings), ttl_s=settings.worker_heartbeat_ttl_s
    )


@worker_init.connect
def _on_worker_init(sender: Any = None, **_: Any) -> None:
    _node["incarnation"] = incarnation_id(getattr(sender, "hostname", None))
    set_holder(_node["incarnation"])  # before the pool forks: its processes inherit it


@worker_ready.connect
def _on_worker_ready(**_: Any) -> None:
    settings: Settings = app.conf.ctxpipe_settings
    inc = _node["incarnation"] or incarnation_id()
    _node["incarnation"] = inc
    set_holder(inc)
    stop = threading.Event()
    _node["stop"] = stop
    # the thread's own client: prefork children never share it
    client = redis.Redis.from_url(settings.redis_url, socket_timeout=5, socket_connect_timeout=5)
    reg = registry(settings, client)
    period = settings.worker_heartbeat_ttl_s / 3

    def beat() -> None:
        while True:
            try:
                reg.heartbeat(inc)
            except redis.RedisError as exc:  # broker down: try again, the TTL is the judge
                log.warning("worker heartbeat failed: %s", exc)
            if stop.wait(period):
                return

    threading.Thread(target=beat, name="ctxpipe-heartbeat", daemon=True).start()


@worker_shutdown.connect
def _on_worker_shutdown(**_: Any) -> None:
    stop, inc = _node["stop"], _node["incarnation"]
    if stop is not None:
        stop.set()
    if inc is not None:
        try:
            registry(app.conf.ctxpipe_settings).retire(inc)
        except redis.RedisError:
            pass  # its heartbeat expires; the reaper finds nothing to re-drive


def commit_of(task_name: str, args: Any) -> str | None:
    """The commit id a commit task works on (None for other tasks and for `submit`, whose
    commit is not recorded yet: its producer re-sends until submit answers)."""
    if not task_name.startswith("ctxpipe.commit.") or task_name == SUBMIT:
        return None
    index = 1 if task_name == PLAN else 0  # the chord body gets the header results first
    try:
        value = args[index]
    except (IndexError, TypeError, KeyError):
        return None
    return value if isinstance(value, str) else None


def waiting_commits(client: redis.Redis, limit: int = WAITING_READ_LIMIT) -> set[str] | None:
    """The commits with a task message waiting in the commit path's queues (None: more than
    `limit` messages, too many to read)."""
    tasks = waiting_tasks(client, COMMIT_PATH_QUEUES, limit)
    if tasks is None:
        return None
    return {c for name, args in tasks if (c := commit_of(name, args)) is not None}


@task_received.connect
def _on_task_received(request: Any = None, **_: Any) -> None:
    inc = _node["incarnation"]
    if inc is None or request is None:
        return
    commit_id = commit_of(str(request.name), request.args)
    if commit_id is None:
        return
    try:
        registry(app.conf.ctxpipe_settings, _parent_client()).track(
            inc, request.id, commit_id, str(request.name).rsplit(".", 1)[-1]
        )
    except redis.RedisError as exc:  # the sweeper is still there for this one
        log.warning("could not record task %s for recovery: %s", request.id, exc)


@task_prerun.connect
def _on_task_prerun(
    task_id: str | None = None, task: Any = None, args: Any = None, **_: Any
) -> None:
    inc = _node["incarnation"]
    if inc is None or task_id is None or task is None:
        return
    commit_id = commit_of(str(task.name), args)
    if commit_id is None:
        return
    try:
        registry(app.conf.ctxpipe_settings).track(
            inc, task_id, commit_id, str(task.name).rsplit(".", 1)[-1], running=True
        )
    except redis.RedisError as exc:  # still recorded as received: re-driven all the same
        log.warning("could not mark task %s running for recovery: %s", task_id, exc)


def _parent_client() -> redis.Redis:
    """The worker parent's own client (pool children never use it)."""
    client = _node.get("client")
    if client is None:
        settings: Settings = app.conf.ctxpipe_settings
        client = redis.Redis.from_url(settings.redis_url, socket_timeout=5)
        _node["client"] = client
    return client


@task_postrun.connect
def _on_task_postrun(task_id: str | None = None, **_: Any) -> None:
    inc = _node["incarnation"]
    if inc is None or task_id is None:
        return
    try:
        registry(app.conf.ctxpipe_settings).untrack(inc, task_id)
    except redis.RedisError:
        pass  # a stale entry only re-drives a finished commit: a no-op


@app.task(name=REAP, acks_late=True, ignore_result=True)
def reap() -> dict[str, Any]:
    """Re-drive commits caught by a dead worker node or a broker restart."""
    from tasks.commit import workflow

    settings: Settings = app.conf.ctxpipe_settings
    client = context.redis_client(settings)
    reaper = CommitReaper(
        context.ledger(settings),
        registry(settings, client),
        BrokerWatch(client),
        lambda commit_id, start: workflow(commit_id, start).apply_async(),
        waiting=lambda: waiting_commits(client),
        lost_after_s=settings.lost_task_after_s,
    )
    report = reaper.reap()
    if report.redriven or report.failed or report.locks_freed:
        log.warning(
            "reaper: re-drove %d commit(s) (%d whose next task was lost), failed %d, freed %d "
            "lock(s) (dead nodes: %s, broker restarted: %s)",
            len(report.redriven), len(report.lost), len(report.failed), report.locks_freed,
            report.dead_nodes, report.broker_restarted,
        )  # fmt: skip
    return {
        "redriven": report.redriven,
        "lost": report.lost,
        "failed": report.failed,
        "locks_freed": report.locks_freed,
        "dead_nodes": report.dead_nodes,
        "broker_restarted": report.broker_restarted,
    }
