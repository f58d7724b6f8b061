"""Tracing and log lines of the Celery processes (the library never imports Celery, so its
instrumentation is set up here).

- Every process that imports the app (workers, beat, the API and the command that publish
  commits) gets Celery's OpenTelemetry instrumentation when `OTEL_TRACES_EXPORTER` asks for
  tracing: a publisher puts its trace context in the task's headers, a worker continues it, so
  one commit is one trace across the producer, the commit, extract and embed workers.
- The tracer provider is set up after the fork, in each pool process (`worker_process_init`);
  a worker with a pool that does not fork (solo, threads) sets it up in its main process.
- The worker's log handlers write our one-line format (`ctxpipe.observability.logs`): the
  commit id and the trace id on every line.
"""

from __future__ import annotations

import logging
from typing import Any

from celery.signals import (
    after_setup_logger,
    after_setup_task_logger,
    beat_init,
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
)

from ctxpipe.observability import logs, spans, tracing
from tasks.queues import PLAN, SUBMIT

SERVICE = "ctxpipe-worker"
_scopes: dict[str, Any] = {}  # task id -> the commit scope entered for it


def instrument_celery() -> bool:
    """Celery's instrumentation in this process, when tracing is asked for (idempotent)."""
    if not tracing.tracing_requested():
        return False
    from opentelemetry.instrumentation.celery import CeleryInstrumentor

    instrumentor = CeleryInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument()
    return True


def _forks(worker: Any) -> bool:
    from celery.concurrency import get_implementation
    from celery.concurrency.prefork import TaskPool

    pool = get_implementation(getattr(worker, "pool_cls", None) or "prefork")
    return isinstance(pool, type) and issubclass(pool, TaskPool)


@worker_init.connect
def _worker_init(sender: Any = None, **_: Any) -> None:
    if sender is not None and not _forks(sender):
        tracing.configure_tracing(SERVICE)


@worker_process_init.connect
def _pool_process_init(**_: Any) -> None:
    tracing.configure_tracing(SERVICE)


@worker_process_shutdown.connect
def _pool_process_shutdown(**_: Any) -> None:
    tracing.flush()


@beat_init.connect
def _beat_init(**_: Any) -> None:
    tracing.configure_tracing("ctxpipe-beat")


@after_setup_logger.connect
@after_setup_task_logger.connect
def _log_lines(logger: logging.Logger | None = None, **_: Any) -> None:
    for handler in logger.handlers if logger is not None else ():
        logs.install(handler)


def commit_id_of(name: str, args: Any) -> str | None:
    """The commit id a commit task was sent (the chord body's is its second argument)."""
    if not name.startswith("ctxpipe.commit.") or name == SUBMIT or not args:
        return None
    args = list(args)
    value = args[1] if name == PLAN and len(args) > 1 else args[0]
    return value if isinstance(value, str) else None


@task_prerun.connect
def _enter_commit(task_id: str = "", task: Any = None, args: Any = None, **_: Any) -> None:
    commit_id = commit_id_of(getattr(task, "name", "") or "", args)
    if commit_id and task_id:
        scope = spans.commit_scope(commit_id)
        scope.__enter__()
        _scopes[task_id] = scope


@task_postrun.connect
def _leave_commit(task_id: str = "", **_: Any) -> None:
    scope = _scopes.pop(task_id, None)
    if scope is not None:
        scope.__exit__(None, None, None)


__all__ = ["commit_id_of", "instrument_celery"]
