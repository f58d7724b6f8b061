"""Beat job: forgetting (TTL, capacity, value) on the maintenance queue."""

from __future__ import annotations

from typing import Any

from ctxpipe.maintenance.wiring import make_forgetter
from tasks import context
from tasks.app import app

FORGET = "ctxpipe.maintenance.forget"


@app.task(name=FORGET, acks_late=True)
def forget(dry_run: bool = False) -> dict[str, Any]:
    """Remove the memories the configured policies pick (none by default)."""
    result = make_forgetter(context.runtime(app.conf.ctxpipe_settings)).run(dry_run=dry_run)
    return {"forgotten": len(result["forgotten"]), "warning": result.get("warning", "")}
