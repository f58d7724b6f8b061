"""POST /v1/commits (enqueue, 202) and GET /v1/commits/{id} (phase, extractors, result)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Response

from ctxpipe.api.auth import CommitKey, ReadKey, acting_context
from ctxpipe.api.errors import ApiError, documented_errors
from ctxpipe.api.keys import ApiKey
from ctxpipe.api.routes.deps import service
from ctxpipe.api.schemas import CommitAccepted, CommitIn, CommitStatus
from ctxpipe.service import CommitNotFoundError, CommitView, ContextEngineService

router = APIRouter(prefix="/v1/commits", tags=["commits"])
_ERRORS = documented_errors(400, 401, 403, 409, 413, 422, 429, 503)


@router.post("", status_code=202, response_model=CommitAccepted, responses=_ERRORS)
def submit_commit(
    body: CommitIn,
    response: Response,
    key: ApiKey = CommitKey,
    svc: ContextEngineService = Depends(service),
) -> CommitAccepted:
    """Record the session and enqueue its commit; returns at once with the commit id.
    Submitting the same `commit_id` again changes nothing."""
    ctx = acting_context(
        key,
        account_id=body.account_id,
        user_id=body.user_id,
        agent_id=body.agent_id,
        session_id=body.session_id,
    )
    commit_id = svc.commit_session(
        ctx,
        body.messages,
        used_contexts=body.used_contexts,
        used_tools=body.used_tools,
        options=body.options,
        commit_id=body.commit_id,
    )
    url = f"/v1/commits/{commit_id}"
    response.headers["Location"] = url
    return CommitAccepted(commit_id=commit_id, status_url=url)


@router.get(
    "/{commit_id}",
    response_model=CommitStatus,
    responses=documented_errors(401, 403, 404, 422, 429, 503),
)
def get_commit(
    commit_id: Annotated[str, Path(max_length=128)],
    key: ApiKey = ReadKey,
    svc: ContextEngineService = Depends(service),
) -> CommitStatus:
    """Phase, per-extractor status and (once registered) the result of a commit of this
    key's account (and of its user or agent, when the key is bound to one)."""
    view = commit_of_key(svc, commit_id, key)
    return CommitStatus(
        commit_id=view.commit_id,
        user_id=view.user_id,
        agent_id=view.agent_id,
        session_id=view.session_id,
        phase=view.phase,
        status=view.status,
        finished=view.finished,
        extractors=view.extractors,
        error=view.error,
        error_phase=view.error_phase,
        result=view.result,
    )


def commit_of_key(svc: ContextEngineService, commit_id: str, key: ApiKey) -> CommitView:
    """The commit when it is of the key's account (and of its user or agent, when the key is
    bound to one); 404 otherwise, the same answer as for a commit that does not exist."""
    try:
        view: CommitView | None = svc.get_commit(commit_id)
    except CommitNotFoundError:
        view = None
    visible = view is not None and view.account_id == key.account_id
    if view is not None and key.user_id is not None:
        visible = visible and view.user_id == key.user_id
    if view is not None and key.agent_id is not None:
        visible = visible and view.agent_id == key.agent_id
    if view is None or not visible:
        raise ApiError(404, f"no such commit: {commit_id}")
    return view
