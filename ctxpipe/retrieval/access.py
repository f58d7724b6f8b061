"""Tenancy on the read path: what one request context may see.

A request of (account, user, agent, session) may read, inside its account only:

- ``users/{user}`` — the user's own memories;
- ``agents/{agent}`` — the memories of the agent serving it (cases, patterns, skills);
- the sessions its user owns (the owner recorded on the FS at the session's first commit, see
  `ctxpipe.fs.session_owner`; for older sessions the user of their oldest archive); its own
  ``sessions/{session}`` only while nobody owns it yet (it is empty) — naming another user's
  session id as one's own gives no access to it;
- the shared scopes ``resources`` and ``skills``.

Anything else — another account, another user's memories, another agent's, another user's
sessions — is refused (`OwnerAccessError`) or filtered out of search results.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ctxpipe.core.errors import TenancyError
from ctxpipe.core.session import RequestContext
from ctxpipe.core.uri import CtxURI, parse_uri

SHARED_SCOPES = ("resources", "skills")


class OwnerAccessError(TenancyError):
    """A URI of the right account that belongs to another owner."""

    def __init__(self, uri: str, who: str) -> None:
        PermissionError.__init__(self, f"URI {uri} belongs to another owner than {who}")


def owner_spaces(
    ctx: RequestContext, sessions: Iterable[str] = (), *, current: bool = True
) -> list[str]:
    """Owner spaces visible to `ctx` (exact values of the `owner_space` column).

    `sessions`: further session ids (or ``sessions/{id}`` spaces) known to be the user's;
    `current`: whether `ctx`'s own session is readable (False when another user owns it)."""
    spaces = [ctx.user_space, ctx.agent_space]
    if current:
        spaces.append(f"sessions/{ctx.session_id}")
    for s in sessions:
        space = s if s.startswith("sessions/") else f"sessions/{s}"
        if space not in spaces:
            spaces.append(space)
    return spaces + list(SHARED_SCOPES)


def space_of(uri: CtxURI) -> str:
    return "/".join((uri.scope, *uri.segments[:1]))


def check_readable(
    ctx: RequestContext,
    uri: str | CtxURI,
    session_is_users: Callable[[str], bool] | None = None,
) -> CtxURI:
    """The parsed URI when `ctx` may read it; TenancyError / OwnerAccessError otherwise.

    `session_is_users(id)` decides sessions when given; without it only `ctx`'s own session
    id is readable."""
    u = uri if isinstance(uri, CtxURI) else parse_uri(uri)
    if u.account != ctx.account_id:
        raise TenancyError(str(u), ctx.account_id)
    if u.scope in SHARED_SCOPES or not u.segments:
        if u.scope in SHARED_SCOPES:
            return u
        raise OwnerAccessError(str(u), f"user {ctx.user_id!r} (a scope root lists every owner)")
    owner = u.segments[0]
    if u.scope == "users" and owner == ctx.user_id:
        return u
    if u.scope == "agents" and owner == ctx.agent_id:
        return u
    if u.scope == "sessions" and (
        session_is_users(owner) if session_is_users is not None else owner == ctx.session_id
    ):
        return u
    raise OwnerAccessError(str(u), f"user {ctx.user_id!r} / agent {ctx.agent_id!r}")


def visible(ctx: RequestContext, uri: str, spaces: Iterable[str]) -> bool:
    """Does `uri` lie in `ctx`'s account and one of `spaces`? (a filter for result lists)"""
    try:
        u = parse_uri(uri)
    except ValueError:
        return False
    if u.account != ctx.account_id:
        return False
    allowed = set(spaces)
    return space_of(u) in allowed or u.scope in allowed


__all__ = [
    "SHARED_SCOPES",
    "OwnerAccessError",
    "check_readable",
    "owner_spaces",
    "space_of",
    "visible",
]
