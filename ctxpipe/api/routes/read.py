"""The read path: find, search, context (POST: the query and conversation travel in the
body) and node reads (GET): read by level, ls, tree, stat, relations; DELETE removes one of
the user's own memories."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from ctxpipe.api.auth import CommitKey, ReadKey, acting_context
from ctxpipe.api.errors import documented_errors
from ctxpipe.api.keys import ApiKey
from ctxpipe.api.routes.deps import IdentityQuery, service
from ctxpipe.api.schemas import ContextIn, FindIn, ReadOut, RemoveOut, SearchIn
from ctxpipe.core.models import NodeStat, NodeSummary, RelationEdge
from ctxpipe.retrieval import ContextResult, FindResult, SearchResult
from ctxpipe.service import ContextEngineService

router = APIRouter(prefix="/v1", tags=["read"])
_ERRORS = documented_errors(400, 401, 403, 404, 413, 422, 429, 503)
Uri = Annotated[str, Query(min_length=1, max_length=512, description="a ctx:// URI")]
Svc = Annotated[ContextEngineService, Depends(service)]
Who = Annotated[IdentityQuery, Depends()]


def _ctx(body: FindIn | SearchIn | ContextIn, key: ApiKey):
    return acting_context(
        key,
        account_id=body.account_id,
        user_id=body.user_id,
        agent_id=body.agent_id,
        session_id=body.session_id,
    )


@router.post("/find", response_model=FindResult, responses=_ERRORS)
def find(body: FindIn, svc: Svc, key: ApiKey = ReadKey) -> FindResult:
    """Hybrid find (vector + full text) within what the key's user and agent may see."""
    return svc.find(body.request(), _ctx(body, key))


@router.post("/search", response_model=SearchResult, responses=_ERRORS)
def search(body: SearchIn, svc: Svc, key: ApiKey = ReadKey) -> SearchResult:
    """Intent analysis into typed queries, then hierarchical retrieval for each."""
    return svc.search(body.request(), _ctx(body, key))


@router.post("/context", response_model=ContextResult, responses=_ERRORS)
def build_context(body: ContextIn, svc: Svc, key: ApiKey = ReadKey) -> ContextResult:
    """A token-budgeted prompt context (incremental across calls of the same session)."""
    return svc.build_context(body.request(), _ctx(body, key))


@router.get("/nodes/read", response_model=ReadOut, responses=_ERRORS)
def read(
    uri: Uri,
    who: Who,
    svc: Svc,
    level: Annotated[int, Query(ge=0, le=2, description="0=L0, 1=L1, 2=L2")] = 2,
    key: ApiKey = ReadKey,
) -> ReadOut:
    return ReadOut(uri=uri, level=level, text=svc.read(uri, who.context(key), level))


@router.get("/nodes/ls", response_model=list[NodeSummary], responses=_ERRORS)
def ls(uri: Uri, who: Who, svc: Svc, key: ApiKey = ReadKey) -> list[NodeSummary]:
    return svc.ls(uri, who.context(key))


@router.get("/nodes/tree", response_model=list[NodeSummary], responses=_ERRORS)
def tree(
    uri: Uri,
    who: Who,
    svc: Svc,
    depth: Annotated[int, Query(ge=1, le=10)] = 3,
    key: ApiKey = ReadKey,
) -> list[NodeSummary]:
    return svc.tree(uri, who.context(key), depth)


@router.get("/nodes/stat", response_model=NodeStat, responses=_ERRORS)
def stat(uri: Uri, who: Who, svc: Svc, key: ApiKey = ReadKey) -> NodeStat:
    return svc.stat(uri, who.context(key))


@router.get("/nodes/relations", response_model=list[RelationEdge], responses=_ERRORS)
def relations(uri: Uri, who: Who, svc: Svc, key: ApiKey = ReadKey) -> list[RelationEdge]:
    return svc.relations(uri, who.context(key))


@router.delete("/nodes", response_model=RemoveOut, responses=_ERRORS)
def remove(uri: Uri, who: Who, svc: Svc, key: ApiKey = CommitKey) -> RemoveOut:
    """Remove one memory of the acting user (its history keeps a tombstone)."""
    return RemoveOut(uri=uri, removed=svc.remove(uri, who.context(key)))
