"""The periodic schedule run by `celery beat` (intervals come from `Settings`)."""

from __future__ import annotations

from typing import Any

from ctxpipe.core.config import Settings


def build_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    return {
        "sweep-stuck-commits": {
            "task": "ctxpipe.maintenance.sweep_stuck_commits",
            "schedule": settings.sweep_interval_s,
            "options": {"queue": "maintenance", "expires": settings.sweep_interval_s},
        },
        "reap-dead-workers": {
            "task": "ctxpipe.maintenance.reap",
            "schedule": settings.reap_interval_s,
            "options": {"queue": "maintenance", "expires": settings.reap_interval_s},
        },
        "drain-outbox": {
            "task": "ctxpipe.index.drain",
            "schedule": settings.outbox_drain_interval_s,
            "options": {"queue": "embed", "expires": settings.outbox_drain_interval_s},
        },
        "reclaim-outbox-leases": {
            "task": "ctxpipe.index.reclaim_leases",
            "schedule": settings.sweep_interval_s,
            "options": {"queue": "embed", "expires": settings.sweep_interval_s},
        },
        "forget-memories": {
            "task": "ctxpipe.maintenance.forget",
            "schedule": settings.retention_interval_s,
            "options": {"queue": "maintenance", "expires": settings.retention_interval_s},
        },
        "cut-idle-sessions": {
            "task": "ctxpipe.maintenance.cut_idle_sessions",
            "schedule": settings.sweep_interval_s,
            "options": {"queue": "maintenance", "expires": settings.sweep_interval_s},
        },
        "repair-index-replica": {
            "task": "ctxpipe.maintenance.repair",
            "schedule": settings.repair_interval_s,
            "options": {"queue": "maintenance", "expires": settings.repair_interval_s},
        },
    }
