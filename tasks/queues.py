"""Queues and routes. Task names are stable: producers may `send_task` them by name. The queue
names themselves live in `ctxpipe.core.queues` (no Celery there: `ctxpipe status` reads them)."""

from __future__ import annotations

from kombu import Queue

from ctxpipe.core.queues import COMMIT, EMBED, EXTRACT, MAINTENANCE, QUEUES

SUBMIT = "ctxpipe.commit.submit"
START = "ctxpipe.commit.start"
ARCHIVE = "ctxpipe.commit.archive"
EXTRACT_TASKS = {
    "profile": "ctxpipe.commit.extract_profile",
    "preferences": "ctxpipe.commit.extract_preferences",
    "entity_event": "ctxpipe.commit.extract_entity_event",
    "procedure": "ctxpipe.commit.extract_procedure",
}
PLAN = "ctxpipe.commit.plan"
PREPARE = "ctxpipe.commit.prepare"  # archive + extractors + plan in one task
WRITE = "ctxpipe.commit.write"
REGISTER = "ctxpipe.commit.register"
FINISH = "ctxpipe.commit.finish"  # write + register in one task: the last of a commit
RUN = "ctxpipe.commit.run"  # prepare + finish: the whole commit in one task (no chord)
SWEEP = "ctxpipe.maintenance.sweep_stuck_commits"
REAP = "ctxpipe.maintenance.reap"

TASK_QUEUES = tuple(Queue(name, routing_key=name) for name in QUEUES)

TASK_ROUTES: dict[str, dict[str, str]] = {
    "ctxpipe.commit.extract_*": {"queue": EXTRACT},
    "ctxpipe.commit.*": {"queue": COMMIT},
    "ctxpipe.index.*": {"queue": EMBED},
    "ctxpipe.maintenance.*": {"queue": MAINTENANCE},
}
