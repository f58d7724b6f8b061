"""Beat job: cut the open sessions idle for CTXPIPE_SESSION_IDLE_COMMIT_S (and submit again the
cuts whose submit was lost) through the Celery submit path."""

from __future__ import annotations

from typing import Any

from ctxpipe.sessions.wiring import make_open_sessions
from tasks import context
from tasks.app import app
from tasks.dispatcher import CeleryDispatcher

CUT_IDLE = "ctxpipe.maintenance.cut_idle_sessions"


@app.task(name=CUT_IDLE, acks_late=True)
def cut_idle_sessions(limit: int = 100) -> dict[str, Any]:
    """The commit ids submitted (left unsubmitted ones first, then the idle sessions' cuts)."""
    settings = app.conf.ctxpipe_settings
    rt = context.runtime(settings)
    sessions = make_open_sessions(settings, rt.db, rt.fs, CeleryDispatcher(settings, rt.db).submit)
    return {"commit_ids": sessions.cut_idle(limit)}
