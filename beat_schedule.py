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
    }
