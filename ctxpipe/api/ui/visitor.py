"""Who is browsing: the signed-in session, its API key (loaded again on every request, so a
revoked key is signed out at once) and the request context the key acts in — the same
tenancy as a /v1 call with that key (`ctxpipe.api.auth.acting_context`)."""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from fastapi import Request

from ctxpipe.api.auth import acting_context
from ctxpipe.api.errors import ApiError
from ctxpipe.api.keys import ApiKey, KeyStore, Scope
from ctxpipe.api.ratelimit import KeyRateLimiter, RateLimited
from ctxpipe.api.ui.sessions import SessionStore, UiSession
from ctxpipe.core.session import RequestContext

COOKIE = "ctxpipe_ui"
LOGIN_COOKIE = "ctxpipe_ui_login"  # the sign-in form's CSRF token (double submit)


class SignInRequired(Exception):
    """No valid session: the browser is sent to the sign-in page."""


@dataclass(frozen=True)
class Visitor:
    session_id: str
    session: UiSession
    key: ApiKey
    ctx: RequestContext

    @property
    def csrf(self) -> str:
        return self.session.csrf

    @property
    def may_delete(self) -> bool:
        return self.key.allows(Scope.COMMIT)


def sessions(request: Request) -> SessionStore:
    store: SessionStore = request.app.state.ui_sessions
    return store


def signed_in_key(request: Request, key: ApiKey) -> None:
    """The checks `ctxpipe.api.auth.authenticate` makes of a key, for a signed-in session:
    the read scope, and the key's rate limit."""
    if not key.allows(Scope.READ):
        raise ApiError(403, "this key lacks the 'read' scope")
    limiter: KeyRateLimiter = request.app.state.limiter
    try:
        limiter.hit(key.key_id)
    except RateLimited as exc:
        raise ApiError(429, str(exc), headers={"Retry-After": str(exc.retry_after_s)}) from None
    request.state.key_id = key.key_id


def visitor(request: Request) -> Visitor:
    """A dependency: the signed-in visitor (`SignInRequired` without a valid session)."""
    session_id = request.cookies.get(COOKIE, "")
    store = sessions(request)
    session = store.get(session_id) if session_id else None
    if session is None:
        raise SignInRequired()
    keys: KeyStore = request.app.state.keys
    key = keys.get(session.key_id)
    if key is None or key.revoked:
        store.delete(session_id)
        raise SignInRequired()
    signed_in_key(request, key)
    ctx = acting_context(key, user_id=session.user_id, agent_id=session.agent_id)
    who = Visitor(session_id=session_id, session=session, key=key, ctx=ctx)
    request.state.ui_visitor = who  # an error page of this request still shows who is in
    return who


def check_csrf(expected: str, given: str) -> None:
    """A form's token against the session's (403 when they differ)."""
    if not expected or not hmac.compare_digest(expected.encode(), given.encode()):
        raise ApiError(403, "the form's token is missing or stale: reload the page and retry")


__all__ = [
    "COOKIE",
    "LOGIN_COOKIE",
    "SignInRequired",
    "Visitor",
    "check_csrf",
    "sessions",
    "signed_in_key",
    "visitor",
]
