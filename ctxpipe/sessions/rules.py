"""When a commit is cut from an open session, and the id it gets.

Pure functions: the PostgreSQL store and its in-memory twin apply the same rules inside
their per-session lock."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from ctxpipe.core.config import Settings

# why a cut was made (recorded with it)
BY_COUNT = "count"
BY_TOKENS = "tokens"
BY_IDLE = "idle"
BY_CLOSE = "close"


@dataclass(frozen=True)
class CutRules:
    """A commit is cut when the open part reaches `max_messages` messages or `max_tokens`
    tokens, after `idle_s` seconds without a new message, or on a close."""

    max_messages: int
    max_tokens: int
    idle_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> CutRules:
        # a cut is a commit: it never holds more messages than a commit accepts
        return cls(
            max_messages=min(settings.session_max_messages, settings.limits.max_messages),
            max_tokens=settings.session_max_tokens,
            idle_s=settings.session_idle_commit_s,
        )

    def cuts(
        self, open_messages: int, open_tokens: int, tokens: list[int]
    ) -> tuple[list[tuple[int, str]], int, int]:
        """Where new messages of `tokens` each, appended after an open part of
        `open_messages` / `open_tokens`, cut commits: (index of the last message of each cut,
        its reason) in order, then the size of the part left open."""
        out: list[tuple[int, str]] = []
        n, t = open_messages, open_tokens
        for i, k in enumerate(tokens):
            n, t = n + 1, t + k
            if n >= self.max_messages:
                out.append((i, BY_COUNT))
            elif t >= self.max_tokens:
                out.append((i, BY_TOKENS))
            else:
                continue
            n, t = 0, 0
        return out, n, t


def cut_commit_id(account_id: str, session_id: str, opened_at: datetime, number: int) -> str:
    """The commit id of a session's `number`-th cut: derived, so that a cut whose submit was
    lost is submitted again under the same id (the ledger keeps one commit per id). The time
    the session was opened keeps a session id reused after an erasure from meeting its old
    commits."""
    key = f"{account_id}\x00{session_id}\x00{opened_at.isoformat()}\x00{number}"
    return "open-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:40]


__all__ = ["BY_CLOSE", "BY_COUNT", "BY_IDLE", "BY_TOKENS", "CutRules", "cut_commit_id"]
