"""The memory browser served at `/ui`: server-rendered pages (Jinja2 templates, no script)
over the same `ContextEngineService` calls and the same key tenancy as the /v1 API. Signed in
with an API key (a POST form) kept as a server-side session (`sessions`) behind an HttpOnly,
SameSite=Strict cookie."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from ctxpipe.api.ui import routes_auth, routes_commits, routes_find, routes_memory
from ctxpipe.api.ui.render import PREFIX, STATIC_DIR
from ctxpipe.api.ui.sessions import SessionStore
from ctxpipe.core.config import Settings

ROUTERS = (routes_auth.router, routes_memory.router, routes_find.router, routes_commits.router)


def mount_ui(app: FastAPI, settings: Settings) -> None:
    """Serve the browser's pages and static files on `app`, its sessions in Redis."""
    app.state.ui_sessions = SessionStore(settings.redis_url, settings.ui_session_ttl_s)
    for router in ROUTERS:
        app.include_router(router)
    app.mount(f"{PREFIX}/static", StaticFiles(directory=STATIC_DIR), name="ui-static")


__all__ = ["PREFIX", "mount_ui"]
