"""Queues and routes. Task names are stable: producers may `send_task` them by name. The queue
names themselves live in `ctxpipe.core.queues` (no Celery there: `ctxpipe status` reads them)."""

from __future__ import annotations

from kombu import Queue

from ctxpipe.core.queues import COMMIT, EMBED, EXTRACT, MAINTENANCE, QUEUES

SUBMIT = "ctxpipe.commit.submit"
START = "ctxpipe.commit.start"


def step_task(step: str) -> str:
    """The name of the task of a canvas step (`ctxpipe.commit.canvas.STEPS`): "plan" →
    "ctxpipe.commit.plan"; the extractors' ("extract_profile" …) go to the extract queue."""
    return f"ctxpipe.commit.{step}"


PLAN = step_task("plan")  # the chord body: its commit id is its second argument
SWEEP = "ctxpipe.maintenance.sweep_stuck_commits"
REAP = "ctxpipe.maintenance.reap"

TASK_QUEUES = tuple(Queue(name, routing_key=name) for name in QUEUES)

TASK_ROUTES: dict[str, dict[str, str]] = {
    "ctxpipe.commit.extract_*": {"queue": EXTRACT},  # the canvas's extractors
    "ctxpipe.commit.*": {"queue": COMMIT},
    "ctxpipe.index.*": {"queue": EMBED},
    "ctxpipe.maintenance.*": {"queue": MAINTENANCE},
}
