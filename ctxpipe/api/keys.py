"""API keys: created once, stored as a hash, verified in constant time, revocable.

A key reads ``ctx_{key_id}_{secret}``: the key id (public, the table's primary key) finds the
row, the secret is checked against the stored SHA-256 with `hmac.compare_digest`. The secret
itself is never stored nor logged. A key acts for its account only; bound to a user (or an
agent) it acts as that user (or agent) only.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time

from psycopg.rows import dict_row
from pydantic import BaseModel, Field, field_validator

from ctxpipe.client.models import ApiKey, CreatedKey, Scope
from ctxpipe.core.session import RequestContext
from ctxpipe.storage.db import Database
from ctxpipe.storage.queries import Queries

PREFIX = "ctx"
_KEY_RE = re.compile(r"^ctx_([0-9a-f]{16})_([A-Za-z0-9_-]{20,128})$")
# compared against when the key id is unknown, so a miss costs what a hit costs
_DUMMY_HASH = hashlib.sha256(b"ctxpipe-no-such-key").digest()


class KeySpec(BaseModel):
    """What a new key may do."""

    account_id: str
    user_id: str | None = None
    agent_id: str | None = None
    scopes: list[Scope] = Field(min_length=1)
    name: str = Field("", max_length=128)

    @field_validator("scopes")
    @classmethod
    def _dedup(cls, v: list[Scope]) -> list[Scope]:
        return sorted(set(v), key=list(Scope).index)

    def model_post_init(self, _ctx: object) -> None:
        if self.user_id and self.agent_id:
            raise ValueError("a key is bound to a user or to an agent, not both")
        # ids follow the rules of a request context (validated once, here)
        RequestContext(
            account_id=self.account_id,
            user_id=self.user_id or "x",
            agent_id=self.agent_id or "default",
            session_id="x",
        )


def _hash(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("ascii")).digest()


def split_key(key: str) -> tuple[str, str] | None:
    """(key_id, secret) of a well-formed key, else None."""
    m = _KEY_RE.fullmatch(key)
    return (m.group(1), m.group(2)) if m else None


def redact_key(key: str) -> str:
    """What logs and messages may show of a key: its public id."""
    parts = split_key(key)
    return f"ctx_{parts[0]}_…" if parts else "<malformed key>"


class KeyStore:
    """The `api_keys` table, with a short per-process cache of the rows it read."""

    def __init__(self, db: Database, schema: str = "ctx", cache_s: float = 5.0) -> None:
        self._db = db
        self._q = Queries(schema)
        self._cache_s = cache_s
        self._cache: dict[str, tuple[float, bytes, ApiKey]] = {}
        self._lock = threading.Lock()

    def create(self, spec: KeySpec) -> CreatedKey:
        key_id = secrets.token_hex(8)
        secret = secrets.token_urlsafe(32)
        with self._db.connection() as conn:
            row = conn.execute(
                self._q["api_key_insert"],
                {
                    "key_id": key_id,
                    "secret_hash": _hash(secret),
                    "account_id": spec.account_id,
                    "user_id": spec.user_id,
                    "agent_id": spec.agent_id,
                    "scopes": [s.value for s in spec.scopes],
                    "name": spec.name,
                },
            ).fetchone()
        assert row is not None
        record = ApiKey(
            key_id=key_id,
            account_id=spec.account_id,
            user_id=spec.user_id,
            agent_id=spec.agent_id,
            scopes=spec.scopes,
            name=spec.name,
            created_at=row[0],
        )
        return CreatedKey(key=f"{PREFIX}_{key_id}_{secret}", record=record)

    def list(self, account_id: str | None = None, include_revoked: bool = False) -> list[ApiKey]:
        with self._db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(
                self._q["api_key_list"], {"account_id": account_id, "all": include_revoked}
            ).fetchall()
        return [ApiKey.model_validate(r) for r in rows]

    def get(self, key_id: str) -> ApiKey | None:
        found = self._load(key_id)
        return found[1] if found else None

    def revoke(self, key_id: str, account_id: str | None = None) -> bool:
        """Revoke a key (of `account_id` when given); False when none was active."""
        if account_id is not None:
            current = self.get(key_id)
            if current is None or current.account_id != account_id:
                return False
        with self._db.connection() as conn:
            row = conn.execute(self._q["api_key_revoke"], {"key_id": key_id}).fetchone()
        with self._lock:
            self._cache.pop(key_id, None)
        return row is not None

    def verify(self, key: str) -> ApiKey | None:
        """The key's record when `key` is a valid, unrevoked key; None otherwise."""
        parts = split_key(key)
        key_id, secret = parts if parts else ("", "")
        found = self._cached(key_id) if parts else None
        stored = found[0] if found else _DUMMY_HASH
        ok = hmac.compare_digest(stored, _hash(secret))
        if not ok or found is None or found[1].revoked:
            return None
        return found[1]

    def touch(self, key_id: str) -> None:
        """Record use (at most once a minute per key)."""
        with self._db.connection() as conn:
            conn.execute(self._q["api_key_touch"], {"key_id": key_id})

    def _cached(self, key_id: str) -> tuple[bytes, ApiKey] | None:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key_id)
            if hit is not None and now - hit[0] < self._cache_s:
                return hit[1], hit[2]
        found = self._load(key_id)
        if found is None:
            return None
        with self._lock:
            self._cache[key_id] = (now, found[0], found[1])
        return found

    def _load(self, key_id: str) -> tuple[bytes, ApiKey] | None:
        with self._db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(self._q["api_key_get"], {"key_id": key_id}).fetchone()
        if row is None:
            return None
        digest = bytes(row.pop("secret_hash"))
        return digest, ApiKey.model_validate(row)


__all__ = [
    "ApiKey",
    "CreatedKey",
    "KeySpec",
    "KeyStore",
    "Scope",
    "redact_key",
    "split_key",
]
