"""Authentication and tenancy at the boundary.

Every /v1 request carries a key (``Authorization: Bearer ctx_…`` or ``X-API-Key``). The key
decides the account; a request may repeat it but never name another. A key bound to a user acts
as that user only (and one bound to an agent as that agent only); an account-wide key names the
user (and agent) it acts for in each request.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from ctxpipe.api.errors import ApiError
from ctxpipe.api.keys import ApiKey, KeyStore, Scope
from ctxpipe.api.ratelimit import KeyRateLimiter, RateLimited
from ctxpipe.core.session import RequestContext

_bearer = HTTPBearer(auto_error=False, description="an API key: `ctxpipe keys create`")
_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="the same key")
DEFAULT_SESSION = "api"


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, message, headers={"WWW-Authenticate": "Bearer"})


def authenticate(
    request: Request,
    bearer: HTTPAuthorizationCredentials | None = Depends(_bearer),
    header_key: str | None = Depends(_header),
) -> ApiKey:
    """The caller's key (401 when missing, malformed, unknown or revoked; 429 over its
    rate limit)."""
    raw = bearer.credentials if bearer is not None else header_key
    if not raw:
        raise _unauthorized("an API key is required (Authorization: Bearer <key>)")
    keys: KeyStore = request.app.state.keys
    key = keys.verify(raw.strip())
    if key is None:
        raise _unauthorized("invalid or revoked API key")
    limiter: KeyRateLimiter = request.app.state.limiter
    try:
        limiter.hit(key.key_id)
    except RateLimited as exc:
        raise ApiError(
            429,
            str(exc),
            details={"limit": exc.limit, "retry_after_s": exc.retry_after_s},
            headers={"Retry-After": str(exc.retry_after_s)},
        ) from None
    request.state.key_id = key.key_id  # the public id only (for logs and metrics)
    return key


def require(scope: Scope) -> Callable[..., ApiKey]:
    """A dependency: the caller's key, which must carry `scope` (403 otherwise)."""

    def dependency(key: ApiKey = Depends(authenticate)) -> ApiKey:
        if not key.allows(scope):
            raise ApiError(
                403,
                f"this key lacks the {scope.value!r} scope",
                details={"required": scope.value, "scopes": [s.value for s in key.scopes]},
            )
        return key

    dependency.__name__ = f"require_{scope.value}"
    return dependency


def acting_context(
    key: ApiKey,
    *,
    account_id: str | None = None,
    user_id: str | None = None,
    agent_id: str | None = None,
    session_id: str | None = None,
) -> RequestContext:
    """The request context a key acts in, from what the request names (403 when it names
    another account, or another user/agent than the key is bound to)."""
    if account_id is not None and account_id != key.account_id:
        raise ApiError(403, "this key acts for another account", details={"field": "account_id"})
    if key.user_id is not None:
        if user_id is not None and user_id != key.user_id:
            raise ApiError(403, "this key acts for another user", details={"field": "user_id"})
        user_id = key.user_id
    if key.agent_id is not None:
        if agent_id is not None and agent_id != key.agent_id:
            raise ApiError(403, "this key acts for another agent", details={"field": "agent_id"})
        agent_id = key.agent_id
    if not user_id:
        raise ApiError(
            400,
            "user_id is required: this key is not bound to a user",
            details={"field": "user_id"},
        )
    return RequestContext(
        account_id=key.account_id,
        user_id=user_id,
        agent_id=agent_id or "default",
        session_id=session_id or DEFAULT_SESSION,
    )


ReadKey = Depends(require(Scope.READ))
CommitKey = Depends(require(Scope.COMMIT))
AdminKey = Depends(require(Scope.ADMIN))

__all__ = ["AdminKey", "CommitKey", "ReadKey", "acting_context", "authenticate", "require"]
