"""Incremental context builds (DeltaBuilder).

A build leaves a snapshot of its session: the hash of every section, the message ids of the
conversation, the query, budget and profile, and the assembled sections. The next build of the
same session picks a strategy by comparing hashes (SHA-256):

- ``full_rebuild``  — no snapshot, or the system prompt, budget or profile changed;
- ``append_only``   — every other section is unchanged and the conversation only grew: the
  previous text is a prefix of the new one, only the new messages are added;
- ``update_conversation_only`` — only the conversation changed (e.g. the window slid);
- ``compute_delta`` — preferences, memory or retrieval changed: unchanged sections are reused,
  changed ones rebuilt.

Sections are assembled most-stable first (system, preferences, memory, retrieval,
conversation), so everything before the first changed section is a reusable prompt prefix;
`tokens_saved` counts it. When the query did not change the previous retrieval is reused
without querying the index again.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

from pydantic import BaseModel, Field

from ctxpipe.client.results import Delta, UpdateStrategy
from ctxpipe.core.caches import LockedCache
from ctxpipe.storage.db import Database
from ctxpipe.storage.queries import Queries


def sha(value: Any) -> str:
    data = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


class SectionSnapshot(BaseModel):
    name: str
    hash: str
    tokens: int
    text: str
    items: list[dict[str, Any]] = Field(default_factory=list)


class ContextSnapshot(BaseModel):
    account_id: str
    user_id: str
    session_id: str
    query: str
    query_hash: str
    system_hash: str
    scope_hash: str = ""  # agent + retrieval filters the snapshot was built under
    budget: int
    profile: str
    message_ids: list[str] = Field(default_factory=list)
    sections: list[SectionSnapshot] = Field(default_factory=list)
    retrieval_items: list[dict[str, Any]] = Field(default_factory=list)
    total_tokens: int = 0

    def section(self, name: str) -> SectionSnapshot | None:
        return next((s for s in self.sections if s.name == name), None)


class DeltaStats(BaseModel):
    total_builds: int = 0
    delta_hits: int = 0
    full_rebuilds: int = 0
    append_only_hits: int = 0
    conversation_only_hits: int = 0
    saved_tokens: int = 0

    @property
    def hit_rate(self) -> float:
        return self.delta_hits / self.total_builds if self.total_builds else 0.0

    def count(self, delta: Delta) -> None:
        self.total_builds += 1
        self.saved_tokens += delta.tokens_saved
        if delta.strategy == UpdateStrategy.FULL_REBUILD:
            self.full_rebuilds += 1
            return
        self.delta_hits += 1
        if delta.strategy == UpdateStrategy.APPEND_ONLY:
            self.append_only_hits += 1
        elif delta.strategy == UpdateStrategy.UPDATE_CONVERSATION_ONLY:
            self.conversation_only_hits += 1


def select_strategy(
    prev: ContextSnapshot | None,
    *,
    system_hash: str,
    budget: int,
    profile: str,
    section_hashes: dict[str, str],
    message_ids: list[str],
) -> UpdateStrategy:
    if prev is None or prev.system_hash != system_hash:
        return UpdateStrategy.FULL_REBUILD
    if prev.budget != budget or prev.profile != profile:
        return UpdateStrategy.FULL_REBUILD
    for name, digest in section_hashes.items():
        if name in ("conversation", "short_term"):
            continue
        old = prev.section(name)
        if (old.hash if old is not None else "") != digest:
            return UpdateStrategy.COMPUTE_DELTA
    seen = prev.message_ids
    if message_ids[: len(seen)] == seen and len(message_ids) >= len(seen):
        return UpdateStrategy.APPEND_ONLY
    return UpdateStrategy.UPDATE_CONVERSATION_ONLY


class SnapshotStore(Protocol):
    def get(self, account_id: str, user_id: str, session_id: str) -> ContextSnapshot | None: ...

    def put(self, snapshot: ContextSnapshot) -> None: ...


class InMemorySnapshotStore:
    """Per-process snapshots (LRU)."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        # one snapshot per live session of this process; old sessions fall out first
        self._data: LockedCache[ContextSnapshot] = LockedCache.lru(size)

    def get(self, account_id: str, user_id: str, session_id: str) -> ContextSnapshot | None:
        return self._data.get((account_id, user_id, session_id))

    def put(self, snapshot: ContextSnapshot) -> None:
        self._data.put((snapshot.account_id, snapshot.user_id, snapshot.session_id), snapshot)


class PgSnapshotStore:
    """Snapshots in ``context_snapshots`` (shared by every process of the deployment)."""

    def __init__(self, db: Database, schema: str = "ctx") -> None:
        self.db = db
        self.queries = Queries(schema)

    def get(self, account_id: str, user_id: str, session_id: str) -> ContextSnapshot | None:
        with self.db.connection() as conn:
            row = conn.execute(
                self.queries["snapshot_get"],
                {"account": account_id, "user": user_id, "session": session_id},
            ).fetchone()
        return ContextSnapshot.model_validate(row[0]) if row else None

    def put(self, snapshot: ContextSnapshot) -> None:
        from psycopg.types.json import Jsonb

        with self.db.connection() as conn:
            conn.execute(
                self.queries["snapshot_put"],
                {
                    "account": snapshot.account_id,
                    "user": snapshot.user_id,
                    "session": snapshot.session_id,
                    "snapshot": Jsonb(snapshot.model_dump(mode="json")),
                },
            )


__all__ = [
    "ContextSnapshot",
    "Delta",
    "DeltaStats",
    "InMemorySnapshotStore",
    "PgSnapshotStore",
    "SectionSnapshot",
    "SnapshotStore",
    "UpdateStrategy",
    "select_strategy",
    "sha",
]
