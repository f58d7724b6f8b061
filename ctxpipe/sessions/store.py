"""The port of the open-session store: appended messages and the cuts made from them.

Two implementations keep the same contract: `PgOpenSessionStore` (PostgreSQL, one transaction
per call under the session's row lock) and `InMemoryOpenSessionStore` (a dict under a lock:
the rules' unit tests and in-process use without a database)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, Field

from ctxpipe.core.session import Message, RequestContext
from ctxpipe.fs.session_owner import SessionOwnerError
from ctxpipe.sessions.rules import CutRules


class NewMessage(BaseModel):
    """A message to append, with its token count (over the part the pipeline reads)."""

    message: Message
    tokens: int = Field(0, ge=0)


class Appended(BaseModel):
    """What one append did inside its transaction."""

    appended: int = 0
    duplicates: int = 0
    cuts: list[str] = Field(default_factory=list)  # commit ids, in order
    open_messages: int = 0
    open_tokens: int = 0


class Cut(BaseModel):
    """A cut: its commit id, the session's owner, and its messages in order."""

    commit_id: str
    account_id: str
    session_id: str
    user_id: str
    agent_id: str
    reason: str
    messages: list[Message]
    submitted_at: datetime | None = None


class OpenSessionStore(Protocol):
    def append(self, ctx: RequestContext, batch: list[NewMessage], rules: CutRules) -> Appended:
        """Append the messages the session does not hold yet (by id), in order, and cut a
        commit wherever `rules` say so; all in one transaction under the session's lock.
        `TenancyError` when the session belongs to another user or agent."""
        ...

    def cut(self, ctx: RequestContext, reason: str, idle_s: float | None = None) -> str | None:
        """Cut the whole open part of `ctx`'s session (a close; an idle sweep with `idle_s`:
        only if the session is still idle, and skipping a session another call holds).
        None when nothing is open."""
        ...

    def idle(self, idle_s: float, limit: int) -> list[tuple[str, str]]:
        """(account, session) of sessions with an open part untouched for `idle_s` seconds."""
        ...

    def get_cut(self, commit_id: str) -> Cut | None: ...

    def unsubmitted(self, older_than_s: float, limit: int) -> list[str]:
        """Commit ids of cuts made at least `older_than_s` ago and not marked submitted."""
        ...

    def mark_submitted(self, commit_id: str) -> None: ...

    def state(self, ctx: RequestContext) -> Appended | None:
        """The session's open part (no append counted), or None for an unknown session."""
        ...


def check_owner(ctx: RequestContext, user_id: str, agent_id: str) -> None:
    """An open session is appended to (and closed) by the user and agent that opened it only."""
    if user_id != ctx.user_id:
        raise SessionOwnerError(ctx.account_id, ctx.session_id, ctx, "user")
    if agent_id != ctx.agent_id:
        raise SessionOwnerError(ctx.account_id, ctx.session_id, ctx, "agent")


__all__ = ["Appended", "Cut", "NewMessage", "OpenSessionStore", "check_owner"]
