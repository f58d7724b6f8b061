"""The Celery application, configured from `Settings` (`celery -A tasks.app worker ...`)."""

from __future__ import annotations

from celery import Celery

from ctxpipe.core.config import Settings
from tasks.queues import COMMIT, TASK_QUEUES, TASK_ROUTES
from tasks.telemetry import instrument_celery

# Longer than the longest task (an LLM-bound plan phase with retries); the broker re-delivers
# an unacknowledged task only after this, so it must never cut a running task short.
VISIBILITY_TIMEOUT_S = 4 * 3600


def make_app(settings: Settings | None = None) -> Celery:
    settings = settings or Settings()
    app = Celery(
        "ctxpipe",
        broker=settings.redis_url,
        backend=settings.redis_url,
        include=[
            "tasks.commit",
            "tasks.maintenance",
            "tasks.index",
            "tasks.retention",
            "tasks.recovery",
            "tasks.warmup",
            "tasks.sessions",
        ],
    )
    # an unreachable broker fails a producer's submit within seconds, not after minutes
    connect_s = settings.broker_connect_timeout_s
    transport = {"visibility_timeout": VISIBILITY_TIMEOUT_S, "socket_connect_timeout": connect_s}
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        # at-least-once: ack after the task ran; a lost worker's task goes back to the queue
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        broker_transport_options=transport,
        result_backend_transport_options={**transport, "result_chord_ordered": True},
        visibility_timeout=VISIBILITY_TIMEOUT_S,
        result_expires=7 * 24 * 3600,  # far longer than any chord
        result_backend_always_retry=True,
        result_backend_max_retries=20,
        broker_connection_retry_on_startup=True,
        # a chain's next task is published by the worker that finished the previous one: keep
        # retrying through a broker restart (~30 s) instead of dropping the continuation
        task_publish_retry=True,
        task_publish_retry_policy={
            "max_retries": 20,
            "interval_start": 0.2,
            "interval_step": 0.5,
            "interval_max": 2.0,
        },
        broker_connection_timeout=connect_s,
        # Flower: workers emit task events (received/started/succeeded/failed) unless
        # CTXPIPE_WORKER_TASK_EVENTS=false; no extra STARTED writes to the result backend and
        # no sent-events on the hot path.
        worker_send_task_events=settings.worker_task_events,
        task_queues=TASK_QUEUES,
        task_default_queue=COMMIT,
        task_routes=TASK_ROUTES,
        worker_hijack_root_logger=False,
        enable_utc=True,
        timezone="UTC",
    )
    from beat_schedule import build_schedule

    app.conf.beat_schedule = build_schedule(settings)
    app.conf.ctxpipe_settings = settings
    return app


app = make_app()
instrument_celery()  # trace context in task headers, when OTEL_TRACES_EXPORTER asks for it
