"""The bodies of the open-session routes (`POST /v1/sessions/{session_id}/messages` and
`…/close`), owned by the client like the rest of the /v1 models."""

from __future__ import annotations

from pydantic import BaseModel, Field

from ctxpipe.client.models import Identity
from ctxpipe.core.session import Message


class MessagesIn(Identity):
    """Messages to append to an open session (the session is the path's). A message whose id
    the session already holds is not appended again."""

    messages: list[Message] = Field(min_length=1, max_length=2000)
    close: bool = Field(
        False, description="then close the session: commit whatever is still open at once"
    )


class SessionCloseIn(Identity):
    """Close an open session: its open part is committed at once."""


class SessionAppended(BaseModel):
    """What an append (or a close) did: how many messages were new, how many the session
    already held, the commits it cut (each message is in exactly one commit), and the size of
    the part still open."""

    session_id: str
    appended: int = 0
    duplicates: int = 0
    commit_ids: list[str] = Field(default_factory=list)
    open_messages: int = 0
    open_tokens: int = 0


__all__ = ["MessagesIn", "SessionAppended", "SessionCloseIn"]
