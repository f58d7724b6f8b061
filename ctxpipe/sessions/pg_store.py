"""PgOpenSessionStore: open sessions in PostgreSQL (`sql/009_open_sessions.sql`, queries in
`sql/queries/open_sessions.sql`).

Every append and every cut is one transaction that first locks the session's row
(`SELECT … FOR UPDATE`; an idle sweep uses `SKIP LOCKED` and passes a session an append
holds): appends of one session are serialised, so sequence numbers follow the order in which
appends commit, a message id is appended once, and a message is marked with exactly one
commit id. Sessions never wait on each other."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from ctxpipe.core.session import Message, RequestContext
from ctxpipe.sessions.rules import CutRules, cut_commit_id
from ctxpipe.sessions.store import Appended, Cut, NewMessage, check_owner
from ctxpipe.storage.db import Database
from ctxpipe.storage.queries import Queries


class PgOpenSessionStore:
    def __init__(self, db: Database, schema: str = "ctx") -> None:
        self._db = db
        self._q = Queries(schema)

    @staticmethod
    def _key(ctx: RequestContext) -> dict[str, Any]:
        return {"account": ctx.account_id, "session": ctx.session_id}

    def _mark(
        self,
        conn: psycopg.Connection[Any],
        ctx: RequestContext,
        row: dict[str, Any],
        reason: str,
        upto: int,
        count: int,
    ) -> str:
        """Mark the open messages up to seq `upto` with the session's next cut's commit id."""
        row["cuts"] += 1
        commit_id = cut_commit_id(ctx.account_id, ctx.session_id, row["created_at"], row["cuts"])
        key = self._key(ctx)
        conn.execute(self._q["open_messages_mark"], {**key, "commit_id": commit_id, "upto": upto})
        conn.execute(
            self._q["open_session_cut_insert"],
            {
                **key,
                "commit_id": commit_id,
                "user": row["user_id"],
                "agent": row["agent_id"],
                "reason": reason,
                "messages": count,
            },
        )
        return commit_id

    def append(self, ctx: RequestContext, batch: list[NewMessage], rules: CutRules) -> Appended:
        key = self._key(ctx)
        with self._db.connection() as conn, conn.transaction():
            cur = conn.cursor(row_factory=dict_row)
            row = cur.execute(
                self._q["open_session_open"], {**key, "user": ctx.user_id, "agent": ctx.agent_id}
            ).fetchone()
            assert row is not None  # the row is created or returned, locked
            check_owner(ctx, row["user_id"], row["agent_id"])
            ids = [b.message.id for b in batch]
            known = {
                r[0] for r in conn.execute(self._q["open_session_known_ids"], {**key, "ids": ids})
            }
            new = [b for b in batch if b.message.id not in known]
            seq0 = int(row["next_seq"])
            if new:
                with conn.cursor() as ins:
                    ins.executemany(
                        self._q["open_message_insert"],
                        [_row_params(key, b, seq0 + i) for i, b in enumerate(new)],
                    )
            where, open_n, open_t = rules.cuts(
                row["open_messages"], row["open_tokens"], [b.tokens for b in new]
            )
            out = Appended(appended=len(new), duplicates=len(batch) - len(new))
            before, taken_upto = int(row["open_messages"]), -1
            for index, reason in where:
                count = before + index - taken_upto
                out.cuts.append(self._mark(conn, ctx, row, reason, seq0 + index, count))
                before, taken_upto = 0, index
            conn.execute(
                self._q["open_session_update"],
                {
                    **key,
                    "next_seq": seq0 + len(new),
                    "cuts": row["cuts"],
                    "open_messages": open_n,
                    "open_tokens": open_t,
                    "touched": bool(new),
                },
            )
        out.open_messages, out.open_tokens = open_n, open_t
        return out

    def cut(self, ctx: RequestContext, reason: str, idle_s: float | None = None) -> str | None:
        key = self._key(ctx)
        with self._db.connection() as conn, conn.transaction():
            cur = conn.cursor(row_factory=dict_row)
            if idle_s is None:
                row = cur.execute(self._q["open_session_lock"], key).fetchone()
                if row is not None:
                    check_owner(ctx, row["user_id"], row["agent_id"])
            else:
                row = cur.execute(
                    self._q["open_session_lock_idle"], {**key, "idle_s": idle_s}
                ).fetchone()
            if row is None or row["open_messages"] == 0:
                return None
            upto = int(row["next_seq"]) - 1
            commit_id = self._mark(conn, ctx, row, reason, upto, int(row["open_messages"]))
            conn.execute(
                self._q["open_session_update"],
                {
                    **key,
                    "next_seq": row["next_seq"],
                    "cuts": row["cuts"],
                    "open_messages": 0,
                    "open_tokens": 0,
                    "touched": False,
                },
            )
        return commit_id

    def idle(self, idle_s: float, limit: int) -> list[tuple[str, str]]:
        with self._db.connection() as conn:
            rows = conn.execute(
                self._q["open_sessions_idle"], {"idle_s": idle_s, "limit": limit}
            ).fetchall()
        return [(str(a), str(s)) for a, s in rows]

    def get_cut(self, commit_id: str) -> Cut | None:
        with self._db.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            head = cur.execute(self._q["open_session_cut_get"], {"commit_id": commit_id}).fetchone()
            if head is None:
                return None
            rows = cur.execute(
                self._q["open_session_cut_messages"], {"commit_id": commit_id}
            ).fetchall()
        messages = [
            Message(
                id=r["message_id"],
                role=r["role"],
                name=r["name"],
                content=r["content"],
                injected=r["injected"],
                original_chars=r["original_chars"],
                created_at=r["created_at"],
            )
            for r in rows
        ]
        head.pop("messages", None)
        return Cut(**head, messages=messages)

    def unsubmitted(self, older_than_s: float, limit: int) -> list[str]:
        with self._db.connection() as conn:
            rows = conn.execute(
                self._q["open_session_cuts_unsubmitted"],
                {"older_than_s": older_than_s, "limit": limit},
            ).fetchall()
        return [str(r[0]) for r in rows]

    def mark_submitted(self, commit_id: str) -> None:
        with self._db.connection() as conn:
            conn.execute(self._q["open_session_cut_submitted"], {"commit_id": commit_id})

    def state(self, ctx: RequestContext) -> Appended | None:
        with self._db.connection() as conn:
            row = conn.execute(self._q["open_session_state"], self._key(ctx)).fetchone()
        if row is None:
            return None
        return Appended(open_messages=int(row[3]), open_tokens=int(row[4]))


def _row_params(key: dict[str, Any], b: NewMessage, seq: int) -> dict[str, Any]:
    m = b.message
    return {
        **key,
        "message_id": m.id,
        "seq": seq,
        "role": m.role,
        "name": m.name,
        "content": m.content,
        "injected": m.injected,
        "original_chars": m.original_chars,
        "created_at": m.created_at,
        "tokens": b.tokens,
    }


__all__ = ["PgOpenSessionStore"]
