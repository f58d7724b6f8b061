"""InMemoryOpenSessionStore: the open-session store in dicts under one lock, the twin of
`PgOpenSessionStore` (same rules, same contract; nothing survives the process)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from ctxpipe.core.session import Message, RequestContext
from ctxpipe.sessions.rules import CutRules, cut_commit_id
from ctxpipe.sessions.store import Appended, Cut, NewMessage, check_owner


@dataclass
class _Row:
    message: Message
    seq: int
    tokens: int
    commit_id: str | None = None


@dataclass
class _Session:
    user_id: str
    agent_id: str
    created_at: datetime
    last_append_at: datetime
    cuts: int = 0
    open_messages: int = 0
    open_tokens: int = 0
    rows: dict[str, _Row] = field(default_factory=dict)  # by message id, in append order


@dataclass
class _CutRow:
    account_id: str
    session_id: str
    user_id: str
    agent_id: str
    reason: str
    created_at: datetime
    submitted_at: datetime | None = None


class InMemoryOpenSessionStore:
    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[tuple[str, str], _Session] = {}
        self._cuts: dict[str, _CutRow] = {}
        self.now: Callable[[], datetime] = clock or (lambda: datetime.now(UTC))

    def _cut(self, key: tuple[str, str], s: _Session, reason: str, upto: int | None) -> str:
        """Mark the open messages (up to seq `upto`, all when None) with a new commit id."""
        s.cuts += 1
        commit_id = cut_commit_id(key[0], key[1], s.created_at, s.cuts)
        for row in s.rows.values():
            if row.commit_id is None and (upto is None or row.seq <= upto):
                row.commit_id = commit_id
        self._cuts[commit_id] = _CutRow(key[0], key[1], s.user_id, s.agent_id, reason, self.now())
        return commit_id

    def append(self, ctx: RequestContext, batch: list[NewMessage], rules: CutRules) -> Appended:
        key = (ctx.account_id, ctx.session_id)
        with self._lock:
            now = self.now()
            s = self._sessions.setdefault(
                key, _Session(ctx.user_id, ctx.agent_id, created_at=now, last_append_at=now)
            )
            check_owner(ctx, s.user_id, s.agent_id)
            new = [b for b in batch if b.message.id not in s.rows]
            out = Appended(duplicates=len(batch) - len(new), appended=len(new))
            seq0 = len(s.rows) + 1
            for i, b in enumerate(new):
                s.rows[b.message.id] = _Row(b.message, seq0 + i, b.tokens)
            where, s.open_messages, s.open_tokens = rules.cuts(
                s.open_messages, s.open_tokens, [b.tokens for b in new]
            )
            for index, reason in where:
                out.cuts.append(self._cut(key, s, reason, seq0 + index))
            if new:
                s.last_append_at = now
            out.open_messages, out.open_tokens = s.open_messages, s.open_tokens
            return out

    def cut(self, ctx: RequestContext, reason: str, idle_s: float | None = None) -> str | None:
        key = (ctx.account_id, ctx.session_id)
        with self._lock:
            s = self._sessions.get(key)
            if s is None or s.open_messages == 0:
                return None
            if idle_s is not None:
                if s.last_append_at > self.now() - timedelta(seconds=idle_s):
                    return None
            else:
                check_owner(ctx, s.user_id, s.agent_id)
            commit_id = self._cut(key, s, reason, None)
            s.open_messages, s.open_tokens = 0, 0
            return commit_id

    def idle(self, idle_s: float, limit: int) -> list[tuple[str, str]]:
        with self._lock:
            edge = self.now() - timedelta(seconds=idle_s)
            found = [
                (s.last_append_at, key)
                for key, s in self._sessions.items()
                if s.open_messages > 0 and s.last_append_at <= edge
            ]
        return [key for _, key in sorted(found)[:limit]]

    def get_cut(self, commit_id: str) -> Cut | None:
        with self._lock:
            c = self._cuts.get(commit_id)
            if c is None:
                return None
            s = self._sessions[(c.account_id, c.session_id)]
            rows = sorted(
                (r for r in s.rows.values() if r.commit_id == commit_id), key=lambda r: r.seq
            )
            return Cut(
                commit_id=commit_id,
                account_id=c.account_id,
                session_id=c.session_id,
                user_id=c.user_id,
                agent_id=c.agent_id,
                reason=c.reason,
                messages=[r.message for r in rows],
                submitted_at=c.submitted_at,
            )

    def unsubmitted(self, older_than_s: float, limit: int) -> list[str]:
        with self._lock:
            edge = self.now() - timedelta(seconds=older_than_s)
            found = sorted(
                (c.created_at, cid)
                for cid, c in self._cuts.items()
                if c.submitted_at is None and c.created_at <= edge
            )
        return [cid for _, cid in found[:limit]]

    def mark_submitted(self, commit_id: str) -> None:
        with self._lock:
            c = self._cuts.get(commit_id)
            if c is not None and c.submitted_at is None:
                c.submitted_at = self.now()

    def state(self, ctx: RequestContext) -> Appended | None:
        with self._lock:
            s = self._sessions.get((ctx.account_id, ctx.session_id))
            if s is None:
                return None
            return Appended(open_messages=s.open_messages, open_tokens=s.open_tokens)


__all__ = ["InMemoryOpenSessionStore"]
