"""POST /v1/sessions/{session_id}/messages (append to an open session) and
POST /v1/sessions/{session_id}/close (commit what is open)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from ctxpipe.api.auth import CommitKey, acting_context
from ctxpipe.api.errors import ApiError, documented_errors
from ctxpipe.api.keys import ApiKey
from ctxpipe.api.routes.deps import service
from ctxpipe.client.models import Identity
from ctxpipe.client.session_models import MessagesIn, SessionAppended, SessionCloseIn
from ctxpipe.core.session import RequestContext
from ctxpipe.service import ContextEngineService

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])
_ERRORS = documented_errors(400, 401, 403, 409, 413, 422, 429, 503)
SessionId = Annotated[str, Path(max_length=128)]


def _context(key: ApiKey, session_id: str, body: Identity) -> RequestContext:
    if body.session_id is not None and body.session_id != session_id:
        raise ApiError(
            400, "the body names another session than the path", details={"field": "session_id"}
        )
    return acting_context(
        key,
        account_id=body.account_id,
        user_id=body.user_id,
        agent_id=body.agent_id,
        session_id=session_id,
    )


@router.post("/{session_id}/messages", response_model=SessionAppended, responses=_ERRORS)
def add_messages(
    session_id: SessionId,
    body: MessagesIn,
    key: ApiKey = CommitKey,
    svc: ContextEngineService = Depends(service),
) -> SessionAppended:
    """Append messages to an open session, durably and in order. A message whose id the
    session already holds is not appended again (a retried call changes nothing). A commit is
    cut, and enqueued like any commit, whenever the open part reaches
    `CTXPIPE_SESSION_MAX_MESSAGES` messages or `CTXPIPE_SESSION_MAX_TOKENS` tokens, after
    `CTXPIPE_SESSION_IDLE_COMMIT_S` without a new message, or with `close`; `commit_ids`
    names the commits this call cut."""
    ctx = _context(key, session_id, body)
    return svc.add_messages(ctx, body.messages, close=body.close)


@router.post("/{session_id}/close", response_model=SessionAppended, responses=_ERRORS)
def close_session(
    session_id: SessionId,
    body: SessionCloseIn | None = None,
    key: ApiKey = CommitKey,
    svc: ContextEngineService = Depends(service),
) -> SessionAppended:
    """Commit what is still open of the session now (`commit_ids` is empty when nothing
    was). Appending again later opens a new part."""
    ctx = _context(key, session_id, body or SessionCloseIn())
    return svc.close_session(ctx)
