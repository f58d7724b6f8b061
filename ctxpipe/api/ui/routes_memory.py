"""The memory tree, one node (levels, metadata, tags, validity, relations, history) and the
removal of one memory, through the same service calls as the /v1 node routes."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Form, Query, Request, Response
from fastapi.responses import RedirectResponse

from ctxpipe.api.auth import require
from ctxpipe.api.keys import Scope
from ctxpipe.api.routes.deps import service
from ctxpipe.api.ui import views
from ctxpipe.api.ui.render import PREFIX, UiRoute, page
from ctxpipe.api.ui.visitor import Visitor, check_csrf, visitor
from ctxpipe.core.errors import NodeNotFoundError
from ctxpipe.core.models import NodeSummary
from ctxpipe.core.uri import parse_uri
from ctxpipe.service import ContextEngineService

router = APIRouter(prefix=PREFIX, route_class=UiRoute, include_in_schema=False)
Svc = Annotated[ContextEngineService, Depends(service)]
Who = Annotated[Visitor, Depends(visitor)]
Uri = Annotated[str, Query(min_length=1, max_length=512)]
TREE_DEPTH = 3


def _listing(svc: ContextEngineService, uri: str, who: Visitor, depth: int) -> list[NodeSummary]:
    """`svc.tree`, empty where nothing was written yet."""
    try:
        return svc.tree(uri, who.ctx, depth)
    except NodeNotFoundError:
        return []


def deletable(uri: str, who: Visitor) -> bool:
    """Whether the API would remove this node for the key: one of its own user's memories,
    with the commit scope (`ContextEngineService.remove` decides; this only hides the button
    where it would refuse)."""
    u = parse_uri(uri)
    own = u.scope == "users" and len(u.segments) >= 2 and u.segments[0] == who.ctx.user_id
    return own and who.may_delete


@router.get("/")
def home(request: Request, who: Who, svc: Svc, removed: str = "") -> Response:
    trees = [(r, _listing(svc, r.uri, who, TREE_DEPTH)) for r in views.roots(who.ctx)]
    return page(request, "tree.html", who, trees=trees, focus=None, removed=removed[:512])


@router.get("/tree")
def tree(request: Request, uri: Uri, who: Who, svc: Svc) -> Response:
    nodes = svc.tree(uri, who.ctx, TREE_DEPTH)
    focus = views.Root(uri, uri)
    return page(request, "tree.html", who, trees=[(focus, nodes)], focus=focus, removed="")


@router.get("/node")
def node(request: Request, uri: Uri, who: Who, svc: Svc) -> Response:
    stat = svc.stat(uri, who.ctx)
    if not stat.exists:
        raise NodeNotFoundError(uri)
    try:
        whole = svc.node(uri, who.ctx)
    except NodeNotFoundError:
        whole = None  # a directory of nodes, not a node itself
    levels: list[tuple[str, str]] = []
    facts: list[views.FactLine] = []
    if whole is not None:
        levels = [(f"L{n}", svc.read(uri, who.ctx, n)) for n in (0, 1, 2)]
        facts = views.fact_lines(levels[2][1], whole.category)
    return page(
        request,
        "node.html",
        who,
        uri=uri,
        stat=stat,
        node=whole,
        levels=levels,
        facts=facts,
        tags=views.tags_of(whole.metadata) if whole else [],
        metadata=views.plain_metadata(whole.metadata) if whole else [],
        children=_listing(svc, uri, who, 1),
        relations=svc.relations(uri, who.ctx) if whole else [],
        history=list(reversed(svc.history(uri, who.ctx))) if whole else [],
        deletable=whole is not None and deletable(uri, who),
    )


@router.get("/node/delete")
def confirm_delete(request: Request, uri: Uri, who: Who, svc: Svc) -> Response:
    """The confirmation page of a removal."""
    stat = svc.stat(uri, who.ctx)
    if not stat.exists:
        raise NodeNotFoundError(uri)
    abstract = svc.read(uri, who.ctx, 0)
    return page(request, "delete.html", who, uri=uri, stat=stat, abstract=abstract)


@router.post("/node/delete")
def delete(
    request: Request,
    uri: Annotated[str, Form(min_length=1, max_length=512)],
    who: Who,
    svc: Svc,
    csrf: Annotated[str, Form(max_length=128)] = "",
) -> Response:
    """Remove the memory as `DELETE /v1/nodes` does (the commit scope, the user's own)."""
    check_csrf(who.csrf, csrf)
    require(Scope.COMMIT)(who.key)
    if not svc.remove(uri, who.ctx):
        raise NodeNotFoundError(uri)
    return RedirectResponse(f"{PREFIX}/?removed={quote(uri, safe='')}", status_code=303)
