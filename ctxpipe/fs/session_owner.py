"""Who a session belongs to: the user (and agent) whose commit first wrote to it.

The owner is recorded on the FS — the single source of truth — as a hidden file beside the
session's nodes (``{session}/.owner.json``: invisible to listings, globbing, indexing and
repair). It is written once, atomically, under the session's owner lock, so of two racing first
commits exactly one wins; the other is refused before it writes anything.

A session written before owners were recorded has no such file: its owner is the user and agent
recorded in its oldest archive (``metadata.user_id`` / ``metadata.agent_id``). A session with
neither is unowned — nothing of it exists yet.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from pydantic import BaseModel, ValidationError

from ctxpipe.core.errors import TenancyError
from ctxpipe.core.session import RequestContext
from ctxpipe.core.uri import CtxURI
from ctxpipe.fs.atomic import atomic_write_file
from ctxpipe.fs.context_fs import ContextFS
from ctxpipe.fs.locks import OwnerLock

OWNER_FILE = ".owner.json"


class SessionOwner(BaseModel):
    user_id: str
    agent_id: str
    recorded: bool = True  # False: derived from the session's oldest archive


class SessionOwnerError(TenancyError):
    """A request names a session that belongs to another user (or agent)."""

    def __init__(self, account: str, session_id: str, ctx: RequestContext, what: str) -> None:
        PermissionError.__init__(
            self,
            f"session {session_id!r} of account {account!r} belongs to another "
            f"{what} than user {ctx.user_id!r} / agent {ctx.agent_id!r}: "
            "use a session id of your own",
        )


def session_lock_key(account: str, session_id: str) -> str:
    """The owner-lock key that serialises writers of one session (archives, owner record)."""
    return f"{account}/sessions/{session_id}"


class SessionOwners:
    """Reads, checks and records session owners on a ContextFS."""

    def __init__(self, fs: ContextFS) -> None:
        self._fs = fs

    def _session(self, account: str, session_id: str) -> CtxURI:
        return CtxURI.parse(f"ctx://{account}/sessions/{session_id}/")

    def owner(self, account: str, session_id: str) -> SessionOwner | None:
        """The recorded owner, else the one of the oldest archive, else None."""
        base = self._session(account, session_id)
        path = self._fs.resolve_path(base) / OWNER_FILE
        try:
            return SessionOwner.model_validate(json.loads(path.read_bytes()))
        except FileNotFoundError:
            pass
        except (ValueError, ValidationError):  # a damaged record: fall back to the archives
            pass
        return self._from_archives(base)

    def _from_archives(self, base: CtxURI) -> SessionOwner | None:
        archives = base.join("archives")
        if not self._fs.exists(archives):
            return None
        children = [c for c in self._fs.list_children(archives) if c.name.isdigit()]
        for child in sorted(children, key=lambda c: int(c.name)):
            try:
                meta = self._fs.read_node(child.uri, include_content=False).metadata
            except (OSError, ValueError):
                continue
            user = meta.get("user_id")
            if isinstance(user, str) and user:
                agent = meta.get("agent_id")
                return SessionOwner(
                    user_id=user,
                    agent_id=agent if isinstance(agent, str) and agent else "default",
                    recorded=False,
                )
        return None

    # ------------------------------------------------------------------ checks
    def may_read(self, ctx: RequestContext, session_id: str) -> bool | None:
        """True: the session is `ctx`'s user's; False: another user's; None: unowned."""
        owner = self.owner(ctx.account_id, session_id)
        if owner is None:
            return None
        return owner.user_id == ctx.user_id

    def check_commit(self, ctx: RequestContext) -> SessionOwner | None:
        """Refuse a commit of `ctx` into a session another user or agent owns."""
        owner = self.owner(ctx.account_id, ctx.session_id)
        if owner is not None:
            if owner.user_id != ctx.user_id:
                raise SessionOwnerError(ctx.account_id, ctx.session_id, ctx, "user")
            if owner.agent_id != ctx.agent_id:
                raise SessionOwnerError(ctx.account_id, ctx.session_id, ctx, "agent")
        return owner

    def claim(
        self,
        ctx: RequestContext,
        lock: OwnerLock,
        timeout: float | None = None,
        guard: Callable[[], None] | None = None,
    ) -> None:
        """Record `ctx` as the session's owner unless it is already recorded (atomic, under
        the session lock); SessionOwnerError when someone else owns it. `guard` runs first
        under the lock (it raises to refuse, e.g. when the user was erased meanwhile)."""
        with lock.hold(session_lock_key(ctx.account_id, ctx.session_id), timeout):
            if guard is not None:
                guard()
            owner = self.check_commit(ctx)
            if owner is not None and owner.recorded:
                return
            path = self._fs.resolve_path(self._session(ctx.account_id, ctx.session_id))
            path.mkdir(parents=True, exist_ok=True)
            record = SessionOwner(user_id=ctx.user_id, agent_id=ctx.agent_id)
            atomic_write_file(
                path / OWNER_FILE, record.model_dump_json(exclude={"recorded"}).encode("utf-8")
            )


SHARED_SCOPES = ("resources", "skills")


def may_read(ctx: RequestContext, uri: CtxURI, owners: SessionOwners) -> bool:
    """May `ctx` read `uri`? Its account only: its user's and agent's spaces, the sessions its
    user owns (an unowned session only when it is `ctx`'s own), and the shared scopes."""
    if uri.account != ctx.account_id:
        return False
    if uri.scope in SHARED_SCOPES:
        return True
    if not uri.segments:
        return False
    owner = uri.segments[0]
    if uri.scope == "users":
        return owner == ctx.user_id
    if uri.scope == "agents":
        return owner == ctx.agent_id
    if uri.scope == "sessions":
        verdict = owners.may_read(ctx, owner)
        return verdict if verdict is not None else owner == ctx.session_id
    return False


__all__ = [
    "OWNER_FILE",
    "SHARED_SCOPES",
    "may_read",
    "SessionOwner",
    "SessionOwnerError",
    "SessionOwners",
    "session_lock_key",
]
