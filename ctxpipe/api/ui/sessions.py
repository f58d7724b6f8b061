"""Sign-in sessions of the memory browser, kept server side in Redis.

The browser holds a random session id in an HttpOnly, SameSite=Strict cookie; Redis holds
what it stands for under the id's SHA-256 (never the id itself): the public id of the API key
that signed in, the user and agent it acts as, and the CSRF token of its forms. The key itself
is never stored: each request loads the key's row again, so a revoked key signs its sessions
out at once. A session expires `ttl_s` after sign-in (`CTXPIPE_UI_SESSION_TTL_S`).
"""

from __future__ import annotations

import hashlib
import secrets
import time

import redis
from pydantic import BaseModel

PREFIX = "ctxpipe:ui:session:"
DEFAULT_TTL_S = 8 * 3600


class UiSession(BaseModel):
    key_id: str
    user_id: str | None = None
    agent_id: str | None = None
    csrf: str
    created_at: float


def _slot(session_id: str) -> str:
    return PREFIX + hashlib.sha256(session_id.encode("utf-8")).hexdigest()


class SessionStore:
    """Sessions in Redis (shared by every API process), each with a time to live."""

    def __init__(self, redis_url: str, ttl_s: int = DEFAULT_TTL_S) -> None:
        self._redis = redis.Redis.from_url(redis_url, socket_timeout=5, socket_connect_timeout=5)
        self.ttl_s = ttl_s

    def create(self, key_id: str, user_id: str | None, agent_id: str | None) -> str:
        """A new session; returns its id (the cookie's value)."""
        session_id = secrets.token_urlsafe(32)
        session = UiSession(
            key_id=key_id,
            user_id=user_id,
            agent_id=agent_id,
            csrf=secrets.token_urlsafe(32),
            created_at=time.time(),
        )
        self._redis.set(_slot(session_id), session.model_dump_json(), ex=self.ttl_s)
        return session_id

    def get(self, session_id: str) -> UiSession | None:
        if not session_id or len(session_id) > 128:
            return None
        raw = self._redis.get(_slot(session_id))
        return UiSession.model_validate_json(raw) if raw else None  # type: ignore[arg-type]

    def delete(self, session_id: str) -> None:
        self._redis.delete(_slot(session_id))

    def close(self) -> None:
        self._redis.close()


__all__ = ["DEFAULT_TTL_S", "SessionStore", "UiSession"]
