"""Commits: the key's latest commits with each phase's duration, one commit's extractors
(status and why), LLM calls and tokens per phase; the outbox and the index replica's health
as `ctxpipe status` reads them; links to Flower."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response

from ctxpipe.api.routes.commits import commit_of_key
from ctxpipe.api.routes.deps import service
from ctxpipe.api.ui import views
from ctxpipe.api.ui.render import PREFIX, UiRoute, page
from ctxpipe.api.ui.visitor import Visitor, visitor
from ctxpipe.core.config import Settings
from ctxpipe.index.status import IndexStatus, collect_status
from ctxpipe.service import ContextEngineService

router = APIRouter(prefix=PREFIX, route_class=UiRoute, include_in_schema=False)
Svc = Annotated[ContextEngineService, Depends(service)]
Who = Annotated[Visitor, Depends(visitor)]
LIST_LIMIT = 50


def flower_url(request: Request) -> str:
    """Flower on the API's host, at the configured port (`CTXPIPE_FLOWER_PORT`)."""
    settings: Settings = request.app.state.settings
    host = request.url.hostname or "127.0.0.1"
    return f"{request.url.scheme}://{host}:{settings.flower_port}"


def health(svc: ContextEngineService) -> IndexStatus:
    """Queues, outbox, FS nodes vs replica rows, the last repair (`ctxpipe status`)."""
    rt = svc.runtime
    return collect_status(rt.settings, db=rt.db, fs=rt.fs)


@router.get("/commits")
def commits(request: Request, who: Who, svc: Svc) -> Response:
    """The commits the key may read with `GET /v1/commits/{id}`, newest first."""
    key = who.key
    rows = svc.recent_commits(
        key.account_id, user_id=key.user_id, agent_id=key.agent_id, limit=LIST_LIMIT
    )
    return page(
        request,
        "commits.html",
        who,
        commits=[(c, views.phase_times(c.timings)) for c in rows],
        phases=[p.phase for p in views.phase_times({})],
        health=health(svc),
        flower=flower_url(request),
    )


@router.get("/commits/{commit_id}")
def commit(
    request: Request,
    commit_id: Annotated[str, Path(max_length=128)],
    who: Who,
    svc: Svc,
) -> Response:
    view = commit_of_key(svc, commit_id, who.key)
    return page(
        request,
        "commit.html",
        who,
        c=view,
        phases=views.phase_times(view.timings),
        flower=flower_url(request),
    )
